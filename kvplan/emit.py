"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

Each engine that has a server writes its own flags (`emit_args` in kvplan/engines/<engine>.py);
this module holds what they share: the model argument, the cache dtype's spelling, the slots.
"""

from __future__ import annotations

import shlex
from pathlib import Path

EMITTERS = ("vllm", "sglang", "llama.cpp")


def model_arg(model) -> str:
    """What the engine should load: the Hub repo, else the local folder the spec was read from."""
    if model.hf_repo:
        return model.hf_repo
    src = Path(model.source or "")
    if model.source and src.exists():  # a folder or its config.json: engines take the folder
        return str((src.parent if src.is_file() else src).resolve())
    return model.name


def kv_dtype_arg(engine: str, kv, model) -> str | None:
    """The engine's spelling of the cache dtype, or None for the engine default (the model's dtype)."""
    if kv is None or kv.name == model.dtype or (kv.name in ("bf16", "fp16") and model.dtype in ("bf16", "fp16")
                                                  and engine != "llama.cpp"):
        return None
    if engine == "llama.cpp":
        return {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}.get(kv.name, kv.name)
    if kv.name == "fp8":
        return "fp8" if engine == "vllm" else "fp8_e4m3"
    return {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(kv.name, kv.name)


def serve_seqs(plan) -> int:
    """As many full-length requests as the plan holds, at least the asked batch."""
    return max(plan.request.batch, plan.max_concurrency)


def emit(engine, result, model) -> str:
    """One shell command line for `result` (an EngineResult made by `engine`, a configured Engine)."""
    return shlex.join(engine.emit_args(result.plan, model, result.settings))


def emit_note(engine, result, model) -> str | None:
    """The margin the emitted command leaves, in words (vLLM without --kv-cache-memory-bytes, SGLang)."""
    if engine.name == "sglang":
        from kvplan.engines.sglang_boot import emit_advice as sglang_advice

        return sglang_advice(result.plan, result.settings, model)[1]
    if engine.name != "vllm" or result.plan.request.kv_cache_memory_bytes is not None:
        return None
    from kvplan.engines.vllm_boot import emit_advice

    return emit_advice(result.plan, result.settings, model)[1]
