"""What a log check returns (rows of printed figure against kvplan's) and the helpers every engine's check shares.

Rounded figures are handled as intervals: "Available KV cache memory: 28.20 GiB" means a budget in
[28.195, 28.205) GiB; `rel` is the signed relative error of kvplan's figure against the engine's.
Each engine's own check (kvplan.engines.<engine>.reconcile) builds a `Reconciliation` from these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import arg
from kvplan.core.units import signed
from kvplan.hardware.gpus import GPU


GIB = 2**30
MIB = 2**20
WHATIF_CONTEXTS = (4096, 8192, 32768, 131072)


@dataclass(frozen=True)
class Row:
    quantity: str
    reported: str
    predicted: str
    diff: str
    ok: bool | None = None  # None: shown, not judged
    error: float | None = None  # signed relative error (kvplan - engine) / engine


@dataclass
class Reconciliation:
    engine: str
    version: str
    model: str | None
    gpu: str | None
    rows: list = field(default_factory=list)
    whatif: list = field(default_factory=list)  # (label, value)
    notes: list = field(default_factory=list)


def rel(pred: float, rep: float) -> tuple[str, float | None]:
    if not rep:
        return "-", None
    e = (pred - rep) / rep
    return f"{signed(e * 100, '+.2f')}%", e


def cache_dtype(name: str | None, model):
    return canonical_kv_dtype(name or "auto", model.dtype if model else "bf16")


def assumed_gpu():
    return GPU.of_memory("unknown", "an assumed 80 GiB GPU", 80 * GIB, f"assumed: no {arg('gpu')} given")
