"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

Each engine that has a server writes its own flags (`emit_args` in kvplan/engines/<engine>.py);
this module holds what they share: the model argument, the cache dtype's spelling, the slots, and the
flags that make the engine load the weights in the plan's dtype (or a refusal where no flag can).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kvplan.errors import EXIT_USAGE, KvplanError

EMITTERS = ("vllm", "sglang", "llama.cpp")
_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # --dtype's spelling (both engines)
_GGUF_PLAIN = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}  # llama.cpp's file types (llama_ftype names)


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


def checkpoint_weights(model) -> str:
    """The dtype the checkpoint stores its linear weights in: its quantization method, else its torch dtype."""
    method = model.quantization.method
    if method in _TORCH_DTYPE:  # unquantized: the config's torch_dtype
        return model.dtype if model.dtype in _TORCH_DTYPE else "bf16"
    return method


def planned_weights(plan, model) -> str:
    """The weight dtype the plan counted: --weight-dtype, else the checkpoint's own."""
    return plan.request.weight_dtype or checkpoint_weights(model)


def weight_args(engine: str, plan, model) -> list[str]:
    """vLLM / SGLang flags that load the checkpoint as the plan's weight dtype, or a KvplanError where none can.

    * 16-bit to 16-bit: `--dtype` casts at load (both engines' --dtype: auto, float16, bfloat16, float32).
      fp32 only from an fp32 checkpoint: `--dtype auto` would cast it to 16 bits (vLLM, SGLang), and
      `--dtype float32` on a 16-bit one would make the cache fp32 too, which the plan did not count.
    * 16-bit to fp8: `--quantization fp8`, online dynamic quantization: every linear layer but the LM head
      to fp8 e4m3 with a per-tensor scale (vLLM docs/features/quantization/fp8.md "Online Dynamic
      Quantization"; SGLang docs/advanced_features/quantization.md "Online Quantization"), as kvplan counts
      --weight-dtype fp8 (kvplan.model.linear_bytes: one byte a weight, no block scales).
    * A quantized checkpoint as stored: no flag; the engine reads the method from its config.json.
    Any other pair (int4, int8, mxfp4, nvfp4 or a GGUF type from a 16-bit checkpoint; a quantized
    checkpoint as anything else) has no online path that stores what kvplan counted, so it is refused.
    """
    want, have = planned_weights(plan, model), checkpoint_weights(model)
    if want in _TORCH_DTYPE and have in _TORCH_DTYPE and (want != "fp32" or have == "fp32"):
        return [] if want == have != "fp32" else ["--dtype", _TORCH_DTYPE[want]]
    if want == have:
        return []
    if want == "fp8" and have in _TORCH_DTYPE:
        return ["--quantization", "fp8"]
    label = {"vllm": "vLLM", "sglang": "SGLang"}.get(engine, engine)
    if want == "fp32":
        why = f"--dtype float32 on a {have} checkpoint would make {label}'s cache fp32 too"
    elif have in _TORCH_DTYPE:
        why = f"{label} quantizes a 16-bit checkpoint online only to fp8 (--quantization fp8)"
    else:
        why = f"{label} loads {have} weights only as stored"
    example = " (an AWQ or GPTQ repo)" if want == "int4" else ""
    raise KvplanError(f"--emit {engine}: the plan counts {want} weights but {model_arg(model)} stores {have}, and "
                      f"{why}; plan a checkpoint stored as {want}{example} or drop --weight-dtype", EXIT_USAGE)


def gguf_file_type(plan, model) -> str:
    """The GGUF file type (llama-quantize's name) whose weights are the plan's; llama.cpp has no load-time
    conversion: the file's own tensor types are what it loads. A refusal where no GGUF type is the plan's."""
    from kvplan.dtypes import GGUF_MIXES, GGUF_TYPES

    want = planned_weights(plan, model)
    if want in _GGUF_PLAIN:
        return _GGUF_PLAIN[want]
    if want in GGUF_TYPES or want in GGUF_MIXES:
        return want.upper()
    if want == "mxfp4" and checkpoint_weights(model) == "mxfp4" and model.quantization.experts_only:
        return "MXFP4_MOE"  # llama-quantize's MXFP4_MOE: the experts in MXFP4, as gpt-oss ships them
    raise KvplanError(f"--emit llama.cpp: the plan counts {want} weights, and llama.cpp loads a GGUF file's own "
                      "types, none of which is that; plan with a GGUF type (--weight-dtype q8_0, q4_k_m, ...)",
                      EXIT_USAGE)


def weights_note(engine: str, plan, model) -> str | None:
    """What the emitted command assumes about the weights it loads, in words, where it is not plain."""
    if engine == "llama.cpp":
        kind = gguf_file_type(plan, model)
        how = (f"convert_hf_to_gguf.py --outtype {kind.lower()}" if kind in _GGUF_PLAIN.values()
               else "llama-quantize, from a BF16 GGUF")
        return (f"llama.cpp loads the weights as the GGUF file stores them: -m must be a {kind} GGUF of "
                f"{model_arg(model)}, the weights this plan counts ({how})")
    if "--quantization" in weight_args(engine, plan, model):
        from kvplan.model import weight_bytes
        from kvplan.units import gib

        have = gib(model.checkpoint_bytes or weight_bytes(model).total)
        if engine == "vllm":  # docs/features/quantization/fp8.md, the warning under online quantization
            return (f"--quantization fp8 quantizes the {checkpoint_weights(model)} weights as they load; vLLM's "
                    f"docs warn that it loads them at original precision first, so the GPUs need room for "
                    f"their share of the {have} checkpoint while loading")
        return f"--quantization fp8 quantizes the {have} of {checkpoint_weights(model)} weights as they load"
    return None


def serve_seqs(plan) -> int:
    """As many full-length requests as the plan holds, at least the asked batch."""
    return max(plan.request.batch, plan.max_concurrency)


def emit(engine, result, model) -> str:
    """One shell command line for `result` (an EngineResult made by `engine`, a configured Engine)."""
    return shlex.join(engine.emit_args(result.plan, model, result.settings))


def emit_weights_note(engine, result, model) -> str | None:
    """What the emitted command loads as weights, in words, where that needs saying (weights_note)."""
    return weights_note(engine.name, result.plan, model)


def emit_note(engine, result, model) -> str | None:
    """The margin the emitted command leaves, in words (vLLM without --kv-cache-memory-bytes, SGLang)."""
    if engine.name == "sglang":
        from kvplan.engines.sglang_boot import emit_advice as sglang_advice

        return sglang_advice(result.plan, result.settings, model)[1]
    if engine.name != "vllm" or result.plan.request.kv_cache_memory_bytes is not None:
        return None
    from kvplan.engines.vllm_boot import emit_advice

    return emit_advice(result.plan, result.settings, model)[1]
