"""Layer 8 of 14, engines: how kvplan, vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers size the KV cache.

Each engine is one package here (`vllm/`, `sglang/`, ...) whose `engine` module holds one `Engine`
subclass (kvplan.engines.base) named `ENGINE`; beside it live the engine's other rules (settings,
start-up budget, pool, layout, drafter) and its log check (`reconcile`). Shared by all: the interface
(base.py), the default engine (neutral.py), the registry that finds the packages (registry.py), the
serve commands' shared pieces (emit.py), start-up log parsing (logparse.py) and checking
(logcheck.py, reconcile.py). `resolve_engine` (here) configures one from the user's flags. No engine
code is copied, only its arithmetic restated; the sources (file and version) are in each module and
in docs/engines.md. Engine packages are imported on demand, so `fit` without --engine stays light.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.core.units import parse_fraction
from kvplan.engines.base import parse_engine_opts
from kvplan.engines.options import check_repeats
from kvplan.engines.neutral import NeutralEngine
from kvplan.engines.registry import canonical_engine, emitters, engine_class, engine_names

__all__ = ["canonical_engine", "configure", "emitters", "engine_class", "engine_names", "resolve_engine"]


def resolve_engine(name: str | None = None, version: str | None = None, opt_items=(), **explicit):
    """A configured engine: the engine-neutral planner for None, else the named engine with its
    version, `--engine-opt KEY=VALUE` items and the explicit flags (gpu_memory_utilization,
    block_size). Unknown names, versions and options are one-line errors before any work."""
    if name is None:
        return NeutralEngine(None, {}, explicit)
    return engine_class(name)(version, parse_engine_opts(opt_items), explicit)


def configure(engine: str | None = None, engine_version: str | None = None, engine_opts=(),
              gpu_memory_utilization: float | str | None = None, block_size: int | None = None, *,
              emit: str | None = None, usage_context: str | None = None):
    """(the engine a person's inputs ask for, the utilisation given or None), each input checked before
    any work: the engine-neutral planner without `engine`. `engine_opts` is {key: value} or
    ['key=value', ...]; `emit` (fit's --emit) names an engine whose serve command is wanted, and implies it.
    The CLI's flags and the Python API's keywords both come here (kvplan.cli._common, kvplan.api). `usage_context`
    (no flag): the client a benchmark ran vLLM under, where its defaults are not `vllm serve`'s (kvplan.bench.running:
    kvplan.engines.vllm.defaults.LLM_CLASS, ENGINE_CONTEXT)."""
    if block_size is not None and not 1 <= block_size <= 4096:
        raise out_of_range("block_size", block_size, 1, 4096)
    gmu = None if gpu_memory_utilization is None else parse_fraction(gpu_memory_utilization,
                                                                     "gpu_memory_utilization")
    items = [f"{k}={v}" for k, v in engine_opts.items()] if isinstance(engine_opts, Mapping) else list(engine_opts)
    check_repeats(items)
    explicit = {"gpu_memory_utilization": gmu, "block_size": block_size}
    if usage_context is not None:
        explicit["usage_context"] = usage_context
    if engine is None and emit is None:
        if engine_version or items:
            raise KvplanError(f"{arg('engine_version')} and {arg('engine_opts')} need {arg('engine')}", EXIT_USAGE,
                              param="engine")
        return _paged(resolve_engine(None, **explicit), block_size), gmu
    name = canonical_engine(engine or emit)
    if emit is not None:
        if not engine_class(emit).emits:  # (the whole registry only to list the emitters)
            raise KvplanError(f"{arg('emit')} supports {', '.join(emitters())}, not {emit}", EXIT_USAGE,
                              param="emit", value=emit, allowed=emitters())
        if canonical_engine(emit) != name:
            raise KvplanError(f"{arg('emit')} {emit} does not match {arg('engine')} {name}", EXIT_USAGE,
                              param="emit", value=emit)
    return _paged(resolve_engine(name, engine_version, items, **explicit), block_size), gmu


def _paged(engine, block_size: int | None):
    """`engine`, once `block_size` is one of the page sizes it takes (Engine.block_sizes)."""
    if block_size is not None and engine.block_sizes is not None and block_size not in engine.block_sizes:
        who = engine.name or "the engine-neutral planner"
        raise KvplanError(f"{arg('block_size')} {block_size}: {who} takes pages of "
                          f"{', '.join(map(str, engine.block_sizes))} tokens", EXIT_USAGE, param="block_size",
                          value=block_size, allowed=engine.block_sizes)
    return engine
