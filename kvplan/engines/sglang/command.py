"""The `python -m sglang.launch_server` command line kvplan emits for a plan (`fit --emit sglang`), and the notes
printed beside it.

The flags are srt/server_args.py's; the fraction to pass comes from kvplan.engines.sglang.boot, the flags that load
the plan's weight dtype from kvplan.engines.emit, the state pool's and DeepSeek-V4's from their modules.
"""

from __future__ import annotations

from kvplan.engines.context import engine_length
from kvplan.engines.emit import (checkpoint_weights, kv_dtype_arg, model_arg, quantized_at_load, serve_seqs,
                                 weight_args)
from kvplan.engines.options import opt_bool
from kvplan.engines.lora import sglang_flags as sglang_lora_flags
from kvplan.engines.sglang import cache_dtype as sglang_cache_dtype
from kvplan.engines.sglang import dsv4 as sglang_dsv4
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.engines.sglang.boot import emit_advice
from kvplan.engines.sglang.defaults import dp_attention
from kvplan.engines.sglang.layout import serve_flags


def launch_args(engine, plan, model, settings: dict, gpu=None) -> list[str]:
    """`python -m sglang.launch_server` (srt/server_args.py): --context-length, --mem-fraction-static,
    --tp-size (every rank), --dp-size, --enable-dp-attention, --ep-size, --pp-size
    (parallel_flags), --max-running-requests (the whole server's), --kv-cache-dtype, --attention-backend, --page-size,
    --chunked-prefill-size where one is given,
    and --dtype / --quantization fp8 where the plan's weights are not the checkpoint's
    (kvplan.engines.emit.weight_args), the state pool's --max-mamba-cache-size (kvplan.engines.sglang.mamba);
    SGLANG_VLM_CACHE_SIZE_MB=N before it when vlm_cache_size_mb is set, --enable-multimodal when enable_multimodal is
    (kvplan.engines.sglang.multimodal). `engine`: the configured Sglang."""
    r, dep, opts = plan.request, plan.deployment, engine.opts
    env = [f"SGLANG_VLM_CACHE_SIZE_MB={settings['vlm_cache_mb']}"] if "vlm_cache_size_mb" in opts else []
    args = [*env, "python", "-m", "sglang.launch_server", "--model-path", model_arg(model),
            *weight_args(engine, plan, model, gpu),
            "--context-length", str(engine_length(model, r)),
            "--mem-fraction-static", f"{emit_fraction(plan, settings, model):g}",
            *engine.parallel_flags(dep, model), *serve_flags(opts),
            *(["--enable-multimodal"] if opt_bool(opts, "enable_multimodal", False) else []),
            "--max-running-requests", str(opts.get("max_running_requests") or sglang_dsv4.emitted_running(
                model, serve_seqs(plan))), *sglang_dsv4.emit_flags(model, opts),
            *sglang_mamba.emit_flags(opts, model, plan, settings["version"],
                                     plan.deployment.dp if dp_attention(model, dep, opts) else 1)]
    kv = kv_dtype_arg(r.kv_dtype, model, sglang_cache_dtype.kv_flags(settings["version"]), engine.auto_kv_dtype(model))
    if kv:
        args += ["--kv-cache-dtype", kv]
    if opts.get("attention_backend"):  # the backend whose page the plan priced (kvplan.engines.sglang.attention)
        args += ["--attention-backend", str(opts["attention_backend"])]
    if settings["page_size"] != 1:
        args += ["--page-size", str(settings["page_size"])]
    if "chunked_prefill_size" in opts:  # the chunk the plan priced, -1: chunked prefill off (defaults.CHUNK_OFF)
        args += ["--chunked-prefill-size", str(settings["chunked_prefill_size"])]
    if r.lora is not None:
        args += sglang_lora_flags(r.lora, model)
    return args


def parallel_flags(dep, model) -> list[str]:
    """SGLang counts --tp-size over every rank: dp ranks of a MoE model run as DP attention
    (--tp-size tp x dp --dp-size dp --enable-dp-attention, with --ep-size for expert parallelism);
    a dense model's dp ranks are replicas (--dp-size, each --tp-size tp). docs/engines.md 9.2."""
    tp, dp = dep.tp, dep.dp
    if dp > 1 and model.params.num_experts:
        args = ["--tp-size", str(tp * dp), "--dp-size", str(dp), "--enable-dp-attention"]
    else:
        args = ["--tp-size", str(tp)] + (["--dp-size", str(dp)] if dp > 1 else [])
    if dep.ep > 1:
        args += ["--ep-size", str(dep.ep)]
    if dep.pp > 1:
        args += ["--pp-size", str(dep.pp)]
    if dep.dcp > 1:
        args += ["--dcp-size", str(dep.dcp)]
    return args


def weights_note(engine, result, model) -> str | None:
    """--quantization fp8 or bitsandbytes (kvplan.engines.emit.weight_args): SGLang quantizes the weights as they
    load."""
    at_load = quantized_at_load(engine, result.plan, model)
    if at_load is None:
        return None
    method, have = at_load
    return (f"the checkpoint is {checkpoint_weights(model)}; --quantization {method} quantizes its {have} of weights "
            "as they load")


def emit_fraction(plan, settings: dict, model) -> float:
    """The plan's fraction, raised to the lowest that holds the batch with the stated margin, as the flag's value
    (kvplan.engines.sglang.boot.flag_fraction: before 0.4.9 divided by a vision model's 0.95)."""
    return emit_advice(plan, settings, model)[0]
