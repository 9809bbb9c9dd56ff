"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

Each engine that has a server writes its own flags (`emit_args` in kvplan/engines/<engine>.py), the
margin they leave (`emit_note`) and what its command assumes about the weights it loads
(`emit_weights_note`); this module holds what they share: the model argument, the choice of a cache
dtype flag, the slots, and the flags that make the engine load the weights in the plan's dtype (or a
refusal where no flag can).
"""

from __future__ import annotations

import shlex

from kvplan.core.dtypes import GGUF_MIXES, GGUF_TYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.units import gib
from kvplan.hardware.facts import runs_bf16
from kvplan.model.weights import weight_bytes
from kvplan.sources.origin import model_arg

_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # --dtype's spelling (vLLM, SGLang)
GGUF_PLAIN = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}  # llama.cpp's file types (llama_ftype names)


def kv_dtype_arg(kv, model, spelling: dict[str, str], auto: str | None = None) -> str | None:
    """The engine's spelling of the cache dtype (`spelling`: its Engine.kv_dtype_flags), or None for the
    engine default: the model's dtype (a 16-bit cache of a 16-bit model is the default too), or `auto`, the cache
    its 'auto' takes from a checkpoint's declared KV quantization (Engine.auto_kv_dtype), which the model's dtype
    then has to be asked for by name to override."""
    if auto is not None:
        own = kv.name if kv is not None else model.dtype
        return None if own == auto else spelling.get(own, own)
    if kv is None or kv.name == model.dtype or (kv.name in ("bf16", "fp16") and model.dtype in ("bf16", "fp16")):
        return None
    return spelling.get(kv.name, kv.name)


def checkpoint_weights(model) -> str:
    """The dtype the checkpoint stores its linear weights in: its quantization method, else its torch dtype."""
    method = model.quantization.method
    if method in _TORCH_DTYPE:  # unquantized: the config's torch_dtype
        return model.dtype if model.dtype in _TORCH_DTYPE else "bf16"
    return method


def planned_weights(plan, model) -> str:
    """The weight dtype the plan counted: --weight-dtype, else the checkpoint's own."""
    return plan.request.weight_dtype or checkpoint_weights(model)


def weight_args(engine, plan, model, gpu=None) -> list[str]:
    """vLLM / SGLang flags that load the checkpoint as the plan's weight dtype (`_weight_flags`) on `gpu` (its
    profile), or a KvplanError where none can (`engine`: the configured Engine whose command this is).

    On a GPU without BF16 math (the profile's `bf16: false`: Volta, Turing) a bf16 model runs in fp16, as the
    plan's header says (kvplan.report.text.run_dtype; the same 2 bytes): `--dtype float16`, which neither engine
    picks by itself from a bf16 config. vLLM refuses bfloat16 there ("Bfloat16 is only supported on GPUs with
    compute capability of at least 8.0 ... --dtype=half", vllm 0.8.0 wheel, vllm/v1/worker/gpu_worker.py
    L302-306); SGLang's `--dtype auto` keeps a bf16 config's dtype whatever the GPU (sglang 0.5.23 wheel,
    sglang/srt/configs/model_config.py L2303-2320, _get_and_verify_dtype). A profile without the fact: its compute
    capability's (hardware.facts.bf16_fact).
    """
    want, have = planned_weights(plan, model), checkpoint_weights(model)
    if runs_bf16(gpu):
        return _weight_flags(engine, model, want, have)
    args = _weight_flags(engine, model, "fp16" if want == "bf16" else want, have)
    if "--dtype" not in args and model.dtype == "bf16":  # a quantized or fp8-at-load checkpoint's activations
        args = ["--dtype", "float16", *args]
    return args


def _weight_flags(engine, model, want: str, have: str) -> list[str]:
    """The flags that load a `have` checkpoint as `want` weights (`engine`'s `display_name` words a refusal).

    * 16-bit to 16-bit: `--dtype` casts at load (both engines' --dtype: auto, float16, bfloat16, float32).
      fp32 only from an fp32 checkpoint: `--dtype auto` would cast it to 16 bits (vLLM, SGLang), and
      `--dtype float32` on a 16-bit one would make the cache fp32 too, which the plan did not count.
    * 16-bit to fp8: `--quantization fp8`, online dynamic quantization: every linear layer but the LM head
      to fp8 e4m3 with a per-tensor scale (vLLM docs/features/quantization/fp8.md "Online Dynamic
      Quantization"; SGLang docs/advanced_features/quantization.md "Online Quantization"), as kvplan counts
      --weight-dtype fp8 (kvplan.model.weight_formats.linear_bytes: one byte a weight, no block scales).
    * 16-bit to nf4: `--quantization bitsandbytes --load-format bitsandbytes`, bitsandbytes' NF4 with double
      quantization on every linear layer as it loads (kvplan.model.weights.BNB_NF4), both engines.
    * A quantized checkpoint as stored: no flag; the engine reads the method from its config.json.
    Any other pair (int4, int8, mxfp4, nvfp4 or a GGUF type from a 16-bit checkpoint; a quantized
    checkpoint as anything else) has no online path that stores what kvplan counted, so it is refused.
    """
    if want in _TORCH_DTYPE and have in _TORCH_DTYPE and (want != "fp32" or have == "fp32"):
        return [] if want == have != "fp32" else ["--dtype", _TORCH_DTYPE[want]]
    if want == have:
        return []
    if want == "fp8" and have in _TORCH_DTYPE:
        return ["--quantization", "fp8"]
    if want == "nf4" and have in _TORCH_DTYPE:  # vLLM 0.8.0 refuses the one flag without the other (arg_utils.py
        return ["--quantization", "bitsandbytes", "--load-format", "bitsandbytes"]  # L1163-1175); SGLang takes both
    label = engine.display_name or engine.name
    if want == "fp32":
        why = f"--dtype float32 on a {have} checkpoint would make {label}'s cache fp32 too"
    elif have in _TORCH_DTYPE:
        why = (f"{label} quantizes a 16-bit checkpoint online only to fp8 (--quantization fp8) or to bitsandbytes' "
               "nf4 (--quantization bitsandbytes)")
    else:
        why = f"{label} loads {have} weights only as stored"
    example = " (an AWQ or GPTQ repo)" if want == "int4" else ""
    raise KvplanError(f"{arg('emit')} {engine.name}: the plan counts {want} weights but {model_arg(model)} stores "
                      f"{have}, and {why}; plan a checkpoint stored as {want}{example} or drop {arg('weight_dtype')}",
                      EXIT_USAGE, param="weight_dtype", value=want)


def gguf_file_type(plan, model, gpu=None) -> str:
    """The GGUF file type (llama-quantize's name) whose weights are the plan's; llama.cpp has no load-time
    conversion: the file's own tensor types are what it loads. A refusal where no GGUF type is the plan's.
    bf16 weights on a `gpu` without BF16 math (hardware.facts.bf16_fact: Volta, Turing) are an F16 file, the same
    2 bytes a weight, as the plan's header runs them (report.text.run_dtype) and vLLM and SGLang load them there
    (weight_args: --dtype float16)."""
    want = planned_weights(plan, model)
    if want == "bf16" and not runs_bf16(gpu):
        want = "fp16"
    if want in GGUF_PLAIN:
        return GGUF_PLAIN[want]
    if want in GGUF_TYPES or want in GGUF_MIXES:
        return want.upper()
    if want == "mxfp4" and checkpoint_weights(model) == "mxfp4" and model.quantization.experts_only:
        return "MXFP4_MOE"  # llama-quantize's MXFP4_MOE: the experts in MXFP4, as gpt-oss ships them
    raise KvplanError(f"{arg('emit')} llama.cpp: the plan counts {want} weights, and llama.cpp loads a GGUF file's "
                      f"own types, none of which is that; plan with a GGUF type ({arg('weight_dtype')} q8_0, q4_k_m, "
                      "...)", EXIT_USAGE, param="weight_dtype", value=want)


def own_gguf(plan, model) -> str | None:
    """The GGUF file the spec was read from (kvplan.sources.gguf) where the plan counts its own weights: llama.cpp's
    -m is then that file; None otherwise."""
    if model.gguf_file and planned_weights(plan, model) == checkpoint_weights(model):
        return model.gguf_file
    return None


def quantized_at_load(engine, plan, model) -> tuple[str, str] | None:
    """(the --quantization method, the checkpoint's size in words) where `engine`'s command quantizes the weights as
    they load (weight_args: --quantization fp8 or bitsandbytes), else None (what emit_weights_note words)."""
    args = weight_args(engine, plan, model)
    if "--quantization" not in args:
        return None
    return args[args.index("--quantization") + 1], gib(model.checkpoint_bytes or weight_bytes(model).total)


def serve_seqs(plan) -> int:
    """As many full-length requests as the plan holds, at least the asked batch."""
    return max(plan.request.batch, plan.max_concurrency)


def emit(engine, result, model) -> str:
    """One shell command line for `result` (an EngineResult made by `engine`, a configured Engine)."""
    return shlex.join(engine.emit_args(result.plan, model, result.settings, result.gpu))
