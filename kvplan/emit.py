"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

vLLM: `vllm serve` flags (vllm/engine/arg_utils.py): --max-model-len, --max-num-seqs,
--gpu-memory-utilization, --kv-cache-dtype, -tp/-pp, --block-size, --kv-cache-memory-bytes (>= 0.11.0).
SGLang: `python -m sglang.launch_server` (srt/server_args.py): --context-length, --mem-fraction-static,
--tp-size, --max-running-requests, --kv-cache-dtype, --page-size.
llama.cpp: `llama-server` (common/arg.cpp): -c is the total context over all slots, -np the slots,
-ctk/-ctv the cache types, -ngl 99 for full offload, -fa on (a quantized V cache needs it).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kvplan.errors import EXIT_USAGE, KvplanError

EMITTERS = ("vllm", "sglang", "llama.cpp")


def _model_arg(model) -> str:
    """What the engine should load: the Hub repo, else the local folder the spec was read from."""
    if model.hf_repo:
        return model.hf_repo
    src = Path(model.source or "")
    if model.source and src.exists():  # a folder or its config.json: engines take the folder
        return str((src.parent if src.is_file() else src).resolve())
    return model.name


def _kv_name(engine: str, kv, model) -> str | None:
    """The engine's spelling of the cache dtype, or None for the engine default (the model's dtype)."""
    if kv is None or kv.name == model.dtype or (kv.name in ("bf16", "fp16") and model.dtype in ("bf16", "fp16")
                                                  and engine != "llama.cpp"):
        return None
    if engine == "llama.cpp":
        return {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}.get(kv.name, kv.name)
    if kv.name == "fp8":
        return "fp8" if engine == "vllm" else "fp8_e4m3"
    return {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(kv.name, kv.name)


def emit_note(engine: str, result, model) -> str | None:
    """The margin the emitted command leaves, in words (vLLM without --kv-cache-memory-bytes, SGLang)."""
    if engine == "sglang":
        from kvplan.engines.sglang_boot import emit_advice as sglang_advice

        return sglang_advice(result.plan, result.settings, model)[1]
    if engine != "vllm" or result.plan.request.kv_cache_memory_bytes is not None:
        return None
    from kvplan.engines.vllm_boot import emit_advice

    return emit_advice(result.plan, result.settings, model)[1]


def _sglang_fraction(result, model) -> float:
    """The plan's fraction, raised to the lowest that holds the batch with the stated margin."""
    from kvplan.engines.sglang_boot import emit_advice

    return emit_advice(result.plan, result.settings, model)[0]


def emit(engine: str, result, model) -> str:
    """One shell command line for `result` (an EngineResult of the same engine)."""
    if engine not in EMITTERS:
        raise KvplanError(f"--emit supports {', '.join(EMITTERS)}, not {engine}", EXIT_USAGE)
    p, st = result.plan, result.settings
    r, dep = p.request, p.deployment
    kv = _kv_name(engine, r.kv_dtype, model)
    seqs = max(r.batch, p.max_concurrency)  # as many full-length requests as the plan holds, at least the asked batch
    if engine == "vllm":
        args = ["vllm", "serve", _model_arg(model), "--max-model-len", str(r.context), "--max-num-seqs", str(seqs)]
        if r.kv_cache_memory_bytes is not None:
            args += ["--kv-cache-memory-bytes", str(r.kv_cache_memory_bytes)]
        else:
            from kvplan.engines.vllm_boot import emit_advice

            # the plan's utilisation, raised to the lowest that holds the batch with the stated margin
            args += ["--gpu-memory-utilization", f"{emit_advice(result.plan, result.settings, model)[0]:g}"]
        if kv:
            args += ["--kv-cache-dtype", kv]
        args += ["-tp", str(dep.tp)]
        if dep.pp > 1:
            args += ["-pp", str(dep.pp)]
        if st["block_size"] != 16:
            args += ["--block-size", str(st["block_size"])]
    elif engine == "sglang":
        args = ["python", "-m", "sglang.launch_server", "--model-path", _model_arg(model),
                "--context-length", str(r.context), "--mem-fraction-static", f"{_sglang_fraction(result, model):g}",
                "--tp-size", str(dep.tp), "--max-running-requests", str(seqs)]
        if dep.pp > 1:
            args += ["--pp-size", str(dep.pp)]
        if kv:
            args += ["--kv-cache-dtype", kv]
        if st["page_size"] != 1:
            args += ["--page-size", str(st["page_size"])]
    else:
        ctk = {"fp16": "f16", "bf16": "f16", "fp32": "f32"}.get(st["type_k"], st["type_k"])
        ctv = {"fp16": "f16", "bf16": "f16", "fp32": "f32"}.get(st["type_v"], st["type_v"])
        args = ["llama-server", "-m", f"{model.name}.gguf", "-c", str(r.context * r.batch), "-np", str(r.batch),
                "-ngl", "99", "-ctk", ctk, "-ctv", ctv]
        if st["flash_attn"] or ctv not in ("f16", "f32"):
            args += ["-fa", "on"]
        if st["kv_unified"]:
            args += ["--kv-unified"]
        if st["swa_full"]:
            args += ["--swa-full"]
        if st["n_ubatch"] != 512:
            args += ["-ub", str(st["n_ubatch"])]
    return shlex.join(args)
