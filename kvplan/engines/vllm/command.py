"""The `vllm serve` command line kvplan emits for a plan (`fit --emit vllm`), and the notes printed beside it.

The flags are vllm/engine/arg_utils.py's; the utilisation to pass and what `--max-model-len auto` will set come
from kvplan.engines.vllm.boot, the flags that load the plan's weight dtype from kvplan.engines.emit.
"""

from __future__ import annotations

from kvplan.engines.base import parse_version
from kvplan.engines.context import engine_length
from kvplan.engines.emit import (checkpoint_weights, kv_dtype_arg, model_arg, quantized_at_load, serve_seqs,
                                 weight_args)
from kvplan.engines.lora import vllm_flags as lora_flags
from kvplan.engines.vllm import multimodal, uma
from kvplan.engines.vllm.autofit import FIRST as AUTO_FIRST
from kvplan.engines.vllm.boot import auto_note, emit_advice
from kvplan.engines.vllm.speculative import vllm_flag
from kvplan.engines.vllm.v0_chunked import serve_flag as v0_flag
from kvplan.planning.layout import per_rank_batch


def serve_args(engine, plan, model, settings: dict, gpu=None) -> list[str]:
    """`vllm serve` flags (vllm/engine/arg_utils.py): --max-model-len, --max-num-seqs (per data-parallel
    rank), --gpu-memory-utilization or --kv-cache-memory-bytes (>= 0.11.0), --kv-cache-dtype, -tp/-pp,
    --data-parallel-size, --enable-expert-parallel (parallel_flags), --block-size, and --dtype /
    --quantization fp8 where the plan's weights are not the checkpoint's (kvplan.engines.emit.weight_args).
    `engine`: the configured Vllm whose command this is."""
    r, dep = plan.request, plan.deployment
    seqs = per_rank_batch(serve_seqs(plan), dep.dp)  # each DP rank's scheduler: never below its share
    # at most the limit the plan was made at (the sampler's dummy run and the CUDA-graph sizes grow with it),
    # unless the asked batch needs more
    seqs = max(min(seqs, settings["max_num_seqs"]), per_rank_batch(r.batch, dep.dp))
    # no context asked for: vLLM's own fit to the memory it measures (from 0.14.0), not kvplan's estimate
    auto = r.context_from_model and parse_version(settings["version"]) >= AUTO_FIRST
    # VLLM_USE_V1 where the plan sets it (engine option use_v1: kvplan.engines.vllm.v0_fallback), before the command
    env = [f"VLLM_USE_V1={int(settings['use_v1'])}"] if settings.get("use_v1") is not None else []
    args = [*env, "vllm", "serve", model_arg(model), *weight_args(engine, plan, model, gpu),
            "--max-model-len", "auto" if auto else str(engine_length(model, r)), "--max-num-seqs", str(seqs)]
    if r.kv_cache_memory_bytes is not None:
        args += ["--kv-cache-memory-bytes", str(r.kv_cache_memory_bytes)]
    else:
        # the plan's utilisation, raised to the lowest that holds the batch with the stated margin
        args += ["--gpu-memory-utilization", f"{emit_advice(plan, settings, model)[0]:g}"]
    kv = kv_dtype_arg(r.kv_dtype, model, engine.kv_dtype_flags, engine.auto_kv_dtype(model))
    if kv:
        args += ["--kv-cache-dtype", kv]
    args += engine.parallel_flags(dep, model)
    if settings["block_size"] != 16:
        args += ["--block-size", str(settings["block_size"])]
    if model.speculative is not None:
        args += vllm_flag(model.speculative)
    if settings.get("max_capture"):  # the engine option max_cudagraph_capture_size (vllm.capture_list)
        args += ["--max-cudagraph-capture-size", str(settings["max_capture"])]
    if settings.get("awq_forced"):  # the engine option awq_kernel=awq (vllm.awq_dequant)
        args += ["--quantization", "awq"]
    if r.lora is not None:
        args += lora_flags(r.lora, settings["version"], model)
    args += v0_flag(parse_version(settings["version"]), settings.get("chunked_prefill_asked"))  # V0's switch
    return args + multimodal.serve_flag(settings.get("mm_limit", multimodal.UNSET),
                                        settings.get("mm_cache_gb", -1.0))


def parallel_flags(dep) -> list[str]:
    """-tp / -pp per data-parallel rank, --data-parallel-size for dp, --enable-expert-parallel (its
    size is always tp x dp), --decode-context-parallel-size (docs/engines.md 9.1)."""
    args = ["-tp", str(dep.tp)]
    if dep.pp > 1:
        args += ["-pp", str(dep.pp)]
    if dep.dp > 1:
        args += ["--data-parallel-size", str(dep.dp)]
    if dep.ep > 1:
        args += ["--enable-expert-parallel"]
    if dep.dcp > 1:
        args += ["--decode-context-parallel-size", str(dep.dcp)]
    return args


def margin_note(result, model) -> str | None:
    """The margin --gpu-memory-utilization leaves (none with --kv-cache-memory-bytes: exact), and what
    --max-model-len auto is expected to set."""
    auto = auto_note(result, model)
    if result.plan.request.kv_cache_memory_bytes is not None:
        return auto
    g, margin = emit_advice(result.plan, result.settings, model)
    shared = uma.emit_note(result.settings, result.plan.usable_memory_bytes, g)
    note = "; ".join(n for n in (margin, shared) if n)
    return f"{note}; {auto}" if auto else note


HELD_16BIT_LAST = (0, 15, 0)  # the last of kvplan's releases whose online fp8 holds the 16-bit model (weights_note)


def weights_note(engine, result, model) -> str | None:
    """--quantization fp8 or bitsandbytes (kvplan.engines.emit.weight_args): the checkpoint is 16-bit and vLLM quantizes
    it as it loads. fp8 before the streamed loading (vllm-project/vllm#31914, merged in 2026 after 0.14.0, which
    vllm#32773 reports still holding it, and before the docs' update vllm#37851 of 2026-03-23; kvplan takes its 0.15.0
    and earlier as holding it) loads the whole 16-bit model first (docs/features/quantization/fp8.md: "we load the
    model at original precision before quantizing down to 8-bits"); bitsandbytes quantizes each weight on the GPU as it
    is read (vllm 0.8.0 wheel, model_loader/loader.py L1033-1049)."""
    at_load = quantized_at_load(engine, result.plan, model)
    if at_load is None:
        return None
    method, have = at_load
    said = f"the checkpoint is {checkpoint_weights(model)}; --quantization {method} quantizes it as it loads"
    if method == "fp8" and parse_version(result.settings["version"]) <= HELD_16BIT_LAST:
        return (f"{said}; vLLM {result.settings['version']} loads the weights at original precision first, so the "
                f"GPUs need room for their share of the {have} checkpoint while loading")
    return f"{said}, layer by layer: the {have} checkpoint is never whole on the GPUs"
