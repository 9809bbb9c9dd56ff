"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

vLLM: `vllm serve` flags (vllm/engine/arg_utils.py): --max-model-len, --max-num-seqs (per data-parallel
rank), --gpu-memory-utilization, --kv-cache-dtype, -tp/-pp, --data-parallel-size, --enable-expert-parallel,
--block-size, --kv-cache-memory-bytes (>= 0.11.0).
SGLang: `python -m sglang.launch_server` (srt/server_args.py): --context-length, --mem-fraction-static,
--tp-size (every rank), --dp-size, --enable-dp-attention, --ep-size, --pp-size, --max-running-requests,
--kv-cache-dtype, --page-size. Layout flags: kvplan.layout.parallel_flags.
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


def emit(engine: str, result, model) -> str:
    """One shell command line for `result` (an EngineResult of the same engine)."""
    if engine not in EMITTERS:
        raise KvplanError(f"--emit supports {', '.join(EMITTERS)}, not {engine}", EXIT_USAGE)
    p, st = result.plan, result.settings
    r, dep = p.request, p.deployment
    kv = _kv_name(engine, r.kv_dtype, model)
    # As many full-length requests as the plan holds, at least the asked batch: never a cap below
    # the plan. vLLM's --max-num-seqs is per data-parallel rank (each DP rank is an engine core with its
    # own scheduler); SGLang's --max-running-requests is given for the whole server.
    from kvplan.layout import parallel_flags, per_rank_batch

    dp = getattr(dep, "dp", 1)
    seqs = max(r.batch, p.max_concurrency)
    seqs_per_rank = max(per_rank_batch(r.batch, dp), -(-p.max_concurrency // dp))
    if engine == "vllm":
        args = ["vllm", "serve", _model_arg(model), "--max-model-len", str(r.context), "--max-num-seqs", str(seqs_per_rank)]
        if r.kv_cache_memory_bytes is not None:
            args += ["--kv-cache-memory-bytes", str(r.kv_cache_memory_bytes)]
        else:
            args += ["--gpu-memory-utilization", f"{st['gpu_memory_utilization']:g}"]
        if kv:
            args += ["--kv-cache-dtype", kv]
        args += parallel_flags("vllm", dep, model)
        if st["block_size"] != 16:
            args += ["--block-size", str(st["block_size"])]
    elif engine == "sglang":
        args = ["python", "-m", "sglang.launch_server", "--model-path", _model_arg(model),
                "--context-length", str(r.context), "--mem-fraction-static", f"{st['mem_fraction_static']:g}",
                *parallel_flags("sglang", dep, model), "--max-running-requests", str(seqs)]
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
