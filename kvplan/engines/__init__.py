"""Engine registry: how kvplan, vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers size the KV cache.

Each engine is one package here (`vllm/`, `sglang/`, ...) whose `engine` module holds one `Engine`
subclass (kvplan.engines.base) named `ENGINE`; beside it live the engine's other rules (start-up
budget, pool, layout) and its log check (`reconcile`). The registry finds the packages, and
`resolve_engine` configures one from the user's flags. No engine code is copied, only its arithmetic
restated; the sources (file and version) are in each module and in docs/engines.md. Engine packages
are imported on demand, so `fit` without --engine stays light.
"""

from __future__ import annotations

from kvplan.engines.base import parse_engine_opts
from kvplan.engines.neutral import NeutralEngine
from kvplan.engines.registry import canonical_engine, emitters, engine_class, engine_names

__all__ = ["canonical_engine", "emitters", "engine_class", "engine_names", "resolve_engine"]


def resolve_engine(name: str | None = None, version: str | None = None, opt_items=(), **explicit):
    """A configured engine: the engine-neutral planner for None, else the named engine with its
    version, `--engine-opt KEY=VALUE` items and the explicit flags (gpu_memory_utilization,
    block_size). Unknown names, versions and options are one-line errors before any work."""
    if name is None:
        return NeutralEngine(None, {}, explicit)
    return engine_class(name)(version, parse_engine_opts(opt_items), explicit)
