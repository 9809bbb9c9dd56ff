"""The dtype an engine serves a float32 config in with its default `--dtype auto`: the model as it is served.

A config whose `torch_dtype` is float32 (older and small checkpoints: GPT-2, some BERT-like or research ones) is not
served in float32 by vLLM or SGLang: their `--dtype auto` casts it to 16 bits as the weights load, and the KV cache's
'auto' follows that model dtype. Planned at 4 bytes a weight and a float32 cache, such a model would look twice its
served size. The rules, restated from each engine's source:

* vLLM from vllm-project/vllm#18751 ("[Core] Rework dtype resolution", merged 2025-05-30, released in 0.9.1; kvplan's
  0.10.1 on): `_resolve_auto_dtype` (vllm/config/model.py) downcasts a float32 config to the platform's first
  supported dtype (`# Downcast for float32 models`), which CudaPlatformBase.supported_dtypes makes bfloat16 on compute
  capability 8.0 and later and float16 on 6.0-7.5 (vllm/platforms/cuda.py): bf16 here, the same two bytes the plan's
  header then runs as fp16 on a GPU without BF16 math (kvplan.report.text.run_dtype). The model types it keeps off
  float16 (gemma2, gemma3, glm4, plamo2) stay float32 on such a GPU: not modelled.
* vLLM before it (kvplan's 0.5.0-0.8.5): float16 ("Following the common practice, we use float16 for float32
  models"), bfloat16 for Gemma 2 and 3 (vllm 0.8.0 wheel, vllm/config.py L2535-2545, _get_and_verify_dtype): fp16.
* SGLang (`_get_and_verify_dtype`, sglang 0.5.9 wheel sglang/srt/configs/model_config.py L1138-1154; 0.5.23
  L2303-2320, the same rule): float16, bfloat16 for a model_type starting with "gemma": fp16. Read in those two
  releases and applied to kvplan's 0.4.0-0.5.23.
* TensorRT-LLM, llama.cpp, transformers: no rule read; planned at the config's float32, and said so.

The checkpoint's exact bytes (a float32 file's) are scaled to the served width: every floating tensor is cast into a
parameter of the model dtype as it loads. The same cast sizes a checkpoint stored wholly in one float type of another
width than its config's dtype (loaded_as_model_dtype), which the front ends pass to kvplan.sources.resolve as it reads
the safetensors headers: sources/ reads what is stored, how an engine loads it is decided here.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import arg
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.sources.resolve import STORED_FLOATS

FLOAT32_TO_BF16_FIRST = (0, 9, 1)  # vllm-project/vllm#18751: the platform's preferred dtype for a float32 config


def vllm_float32(version: tuple[int, ...]) -> tuple[str, str]:
    """(dtype, why) of vLLM `version`'s --dtype auto for a float32 config."""
    if version >= FLOAT32_TO_BF16_FIRST:
        return "bf16", ("--dtype auto downcasts a float32 config to the GPU's preferred dtype, bfloat16 (float16 "
                        "before compute capability 8.0; vllm/config/model.py _resolve_auto_dtype, from 0.9.1)")
    return "fp16", ("--dtype auto serves a float32 config as float16 (bfloat16 for Gemma 2 and 3; "
                    "vllm/config.py _get_and_verify_dtype, before 0.9.1)")


SGLANG_FLOAT32 = ("fp16", "--dtype auto serves a float32 config as float16 (bfloat16 for Gemma models; "
                          "sglang/srt/configs/model_config.py _get_and_verify_dtype)")


def served(engine, model) -> tuple[object, list[str]]:
    """(`model` in the dtype `engine` serves it in, notes): a float32 config cast to 16 bits where the engine's
    `float32_served` says so (its weights, checkpoint bytes and 'auto' cache then 2 bytes an element), else as it is,
    with a note that it is planned at float32 where the engine is named and has no rule read."""
    if model.dtype != "fp32":
        return model, []
    who = engine.label or "kvplan"
    rule = engine.float32_served()
    if rule is None:
        return model, [f"config.json's torch_dtype is float32: planned at 4 bytes a weight and a float32 cache, as "
                       f"the config says ({who} reads no rule that casts it; vLLM's and SGLang's --dtype auto serve "
                       f"it in 16 bits, which {arg('engine')} vllm or sglang plans)"]
    dtype, why = rule
    ckpt = model.checkpoint_bytes
    served_bytes = ckpt * PLAIN_BYTES[dtype] // PLAIN_BYTES["fp32"] if ckpt else ckpt
    note = (f"config.json's torch_dtype is float32; {who} serves it as {dtype}: {why}. Weights and the 'auto' KV "
            f"cache are planned at 2 bytes an element" + (f" ({served_bytes:,} B of weights, not the {ckpt:,} B "
                                                          "stored)" if ckpt else ""))
    q = model.quantization  # an unquantized checkpoint's method is its dtype (kvplan.readers.quantization)
    q = replace(q, method=dtype) if q.method == "fp32" else q
    return replace(model, dtype=dtype, quantization=q, checkpoint_bytes=served_bytes), [note]


def loaded_as_model_dtype(spec, elements_by_dtype, stored: int) -> int:
    """An unquantized checkpoint stored wholly in one float type of another width than the model dtype (an F32
    file under torch_dtype bfloat16, or under none) as an engine loads it: each tensor cast into a parameter of
    the model dtype, the one the plan and its emitted serve command name ("auto will use FP16 precision for FP32 and
    FP16 models, and BF16 precision for BF16 models": vllm-project/vllm@0052a5b8 vllm/config/model.py,
    ModelConfig.dtype). Otherwise the bytes as stored. `elements_by_dtype`: the checkpoint's elements by stored
    dtype (safetensors names); `stored`: its bytes as stored."""
    if spec.quantization.method not in PLAIN_BYTES or len(elements_by_dtype) != 1:
        return stored
    (kind, elements), = elements_by_dtype.items()
    width = PLAIN_BYTES.get(spec.dtype, 0)
    if STORED_FLOATS.get(kind) in (None, width) or not width:
        return stored
    return elements * width
