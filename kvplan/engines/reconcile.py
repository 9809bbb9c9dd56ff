"""Reconciling a start-up log with kvplan: each printed number next to kvplan's, with the difference.

Rounded figures are handled as intervals: "Available KV cache memory: 28.20 GiB" means a budget in
[28.195, 28.205) GiB, so kvplan reports the range of tokens and concurrency that interval allows and
says whether the engine's printed number lies in it. Where the engine prints an exact count (vLLM's
block count, SGLang's #tokens) the check from it is exact. From the log's budget, kvplan infers the
engine's non-KV overhead and shows what the same deployment holds at other contexts.

This module holds the entry point (`reconcile`), the rows it returns and the helpers every engine's
check shares; each engine's own check is a module beside it: reconcile_vllm.py, reconcile_sglang.py,
reconcile_llamacpp.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.logparse import LogRecord

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
    return f"{e * 100:+.2f}%", e


def cache_dtype(name: str | None, model):
    from kvplan.core.dtypes import canonical_kv_dtype

    return canonical_kv_dtype(name or "auto", model.dtype if model else "bf16")


def reconcile(rec: LogRecord, model=None, gpu=None, version: str | None = None, kv_dtype: str | None = None,
              tp: int | None = None) -> Reconciliation:
    """The log's printed figures next to kvplan's, by the engine that wrote it (one module each:
    kvplan.engines.vllm.reconcile, reconcile_sglang, reconcile_llamacpp)."""
    if rec.engine == "vllm":
        from kvplan.engines.vllm.reconcile import reconcile_vllm as fn
    elif rec.engine == "sglang":
        from kvplan.engines.sglang.reconcile import reconcile_sglang as fn
    elif rec.engine == "llama.cpp":
        from kvplan.engines.llamacpp.reconcile import reconcile_llamacpp as fn
    else:
        raise KvplanError(f"a {rec.engine} log: kvplan reads its figures but does not check them yet", EXIT_USAGE)
    return fn(rec, model, gpu, version, kv_dtype, tp)


def assumed_gpu():
    from kvplan.hardware.gpus import GPU

    return GPU.of_memory("unknown", "an assumed 80 GiB GPU", 80 * GIB, f"assumed: no {arg('gpu')} given")
