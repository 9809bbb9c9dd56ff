"""SGLang 0.5.5-0.5.10 load a BF16 DeepSeek-V3 checkpoint as FP8 weights on compute capability 10.x.

Read in the wheels (sglang/srt/server_args.py `_handle_model_specific_adjustments`): on `is_sm100_supported()`
(compute capability major 10, CUDA >= 12.8), for architecture DeepseekV3ForCausalLM, where `--quantization` is not
given and the config declares no `quantization_config`, SGLang sets `quantization = "fp8"` ("Quantization not
specified, default to fp8 for DeepSeek on sm100"; 0.5.5 L915-929, 0.5.8 L1209-1222, 0.5.10 L1613-1637), for the
flashinfer_trtllm MoE runner's assertion. With no FP8 checkpoint to read that is online quantization: Fp8Config with
`is_checkpoint_fp8_serialized` false quantizes every linear layer (the experts too) to fp8 e4m3 with a per-tensor
scale as it loads, the LM head and embeddings staying 16-bit: what kvplan plans for `weight_dtype` fp8
(kvplan.engines.emit `_weight_flags`). It is the weights, not the KV cache: `--kv-cache-dtype auto` stays the model
dtype (Fp8Config carries no `kv_cache_quant_algo` before 0.5.18: kvplan.engines.sglang.cache_dtype).
0.5.4 has the sm100 branch (trtllm_mla) without this default (L879-930); 0.5.11 reads the safetensors headers
first and keeps a checkpoint without FP8 weights in BF16 ("No FP8 expert weights found in checkpoint, keeping bf16",
0.5.11 L1800-1818; 0.5.12 and 0.5.13 the same).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.base import parse_version
from kvplan.engines.sglang.attention import sm100
from kvplan.planning.plan_warnings import PlanWarning

FIRST, UNTIL = (0, 5, 5), (0, 5, 11)
ARCHITECTURE = "DeepseekV3ForCausalLM"
_UNQUANTIZED = ("bf16", "fp16", "fp32")  # an unquantized checkpoint's method is its dtype (readers.quantization)


def reads_capability(model, version: str) -> bool:
    """Whether the rule's answer for this checkpoint and release turns on the GPU's compute capability."""
    return (FIRST <= parse_version(version) < UNTIL and getattr(model, "architecture", None) == ARCHITECTURE
            and model.quantization.method in _UNQUANTIZED)


def applies(model, gpu, version: str) -> bool:
    """Whether SGLang `version` defaults this checkpoint to --quantization fp8 on `gpu` (module docstring)."""
    return reads_capability(model, version) and sm100(gpu)


def served(model, gpu, version: str, req):
    """(`req` with the FP8 weights SGLang serves where it picks them, the plan warning that says so); `req` as given
    where the user names a weight dtype or the rule does not apply."""
    if req.weight_dtype is not None or not applies(model, gpu, version):
        return req, ()
    why = (f"weights fp8: SGLang {version} on compute capability 10.x loads a DeepseekV3ForCausalLM checkpoint that "
           "declares no quantization with --quantization fp8 (server_args.py: \"Quantization not specified, default "
           "to fp8 for DeepSeek on sm100\"; 0.5.5-0.5.10), every linear layer quantized to fp8 as it loads; the KV "
           "cache stays 16-bit")
    return replace(req, weight_dtype="fp8"), (PlanWarning(why),)
