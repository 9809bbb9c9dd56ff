"""The flags that choose how a plan is made: --engine and its settings as a configured engine, --speculative
as the model served with its drafter. Shared by fit, sweep, cheapest, simulate and check-log."""

from __future__ import annotations

from typing import Optional

from kvplan.cli._common import check_range
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.units import parse_fraction
from kvplan.engines import canonical_engine, emitters, engine_class, resolve_engine
from kvplan.planning.speculative import apply, parse
from kvplan.sources.resolve import resolve_model


def engine_from_flags(engine: Optional[str], version: Optional[str], opt_items, gpu_memory_utilization: Optional[str],
                      block_size: Optional[int], emit_to: Optional[str] = None):
    """(the configured engine, the --gpu-memory-utilization fraction or None) that --engine,
    --engine-version, --engine-opt, --gpu-memory-utilization, --block-size (and fit's --emit) ask
    for: the engine-neutral planner without --engine. Checked before anything is printed."""
    check_range("--block-size", block_size, 1, 4096)
    gmu = parse_fraction(gpu_memory_utilization, "--gpu-memory-utilization") if gpu_memory_utilization else None
    explicit = {"gpu_memory_utilization": gmu, "block_size": block_size}
    if engine is None and emit_to is None:
        if version or opt_items:
            raise KvplanError("--engine-version and --engine-opt need --engine", EXIT_USAGE)
        return resolve_engine(None, **explicit), gmu
    name = canonical_engine(engine or emit_to)
    if emit_to is not None:
        if not engine_class(emit_to).emits:  # (the whole registry only to list the emitters)
            raise KvplanError(f"--emit supports {', '.join(emitters())}, not {emit_to}", EXIT_USAGE)
        if canonical_engine(emit_to) != name:
            raise KvplanError(f"--emit {emit_to} does not match --engine {name}", EXIT_USAGE)
    return resolve_engine(name, version, opt_items or (), **explicit), gmu


def speculative_request(text, engine=None):
    """--speculative parsed (None when not given); a one-line error before any work, also where the
    configured `engine` does not model that drafter (Engine.check_speculative)."""
    request = parse(text)
    if request is not None and engine is not None:
        engine.check_speculative(request.method)
    return request


def with_speculative(spec, request, *, token=None, timeout: float = 10.0):
    """`spec` as served with the drafter --speculative asks for (kvplan.planning.speculative); a draft model
    is found as any model is (catalog, folder or Hub)."""
    if request is None:
        return spec
    return apply(spec, request, lambda name: resolve_model(name, token=token, timeout=timeout).spec)
