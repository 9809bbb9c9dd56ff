"""Engine registry: how kvplan, vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers size the KV cache.

Each engine is one module with one `Engine` subclass (kvplan.engines.base); `resolve_engine`
configures one from the user's flags. No engine code is copied, only its arithmetic restated;
the sources (file and version) are in each module and in docs/engines.md. Engine modules are
imported on demand, so `fit` without --engine stays light.
"""

from __future__ import annotations

from importlib import import_module

from kvplan.errors import EXIT_USAGE, KvplanError

ENGINE_MODULES = {
    "vllm": "kvplan.engines.vllm",
    "sglang": "kvplan.engines.sglang",
    "trtllm": "kvplan.engines.trtllm",
    "llama.cpp": "kvplan.engines.llamacpp",
    "transformers": "kvplan.engines.hf_transformers",
}
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "tensorrt-llm": "trtllm", "trt-llm": "trtllm",
            "tensorrt_llm": "trtllm", "hf": "transformers", "huggingface": "transformers"}
ENGINE_NAMES = tuple(ENGINE_MODULES)


def canonical_engine(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ENGINE_MODULES:
        raise KvplanError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINE_NAMES)}", EXIT_USAGE)
    return key


def engine_class(name: str):
    """The Engine subclass for `name` (an alias or any case)."""
    return import_module(ENGINE_MODULES[canonical_engine(name)]).ENGINE


def resolve_engine(name: str | None = None, version: str | None = None, opt_items=(), **explicit):
    """A configured engine: the engine-neutral planner for None, else the named engine with its
    version, `--engine-opt KEY=VALUE` items and the explicit flags (gpu_memory_utilization,
    block_size). Unknown names, versions and options are one-line errors before any work."""
    from kvplan.engines.base import parse_engine_opts

    if name is None:
        from kvplan.engines.neutral import NeutralEngine

        return NeutralEngine(None, {}, explicit)
    return engine_class(name)(version, parse_engine_opts(opt_items), explicit)
