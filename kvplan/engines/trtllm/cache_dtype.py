"""TensorRT-LLM (PyTorch backend) on a checkpoint that declares its KV quantization: `kv_cache_config.dtype` auto.

* The checkpoint's ModelOpt `kv_cache_quant_algo` (hf_quant_config.json, or config.json's ModelOpt
  quantization_config) becomes QuantConfig.kv_cache_quant_algo (NVIDIA/TensorRT-LLM@008e0af8:
  tensorrt_llm/_torch/model_config.py, ModelConfig._build_modelopt_quant_config), and `kv_cache_config.dtype` "auto"
  leaves it as the cache's ("If we're letting the checkpoint dictate the quant with auto, simply return";
  NVIDIA/TensorRT-LLM@004b733e: tensorrt_llm/_torch/pyexecutor/model_loader.py, validate_and_set_kv_cache_quant;
  logged "Using checkpoint KV quantization."). trtllm-bench passes auto unless an options file names a dtype
  (README, the 70B KV row). Checked on a log: TensorRT-LLM#6294 (0.20.0, nvidia/Llama-3.1-8B-Instruct-FP8 on an
  H100, trtllm-bench) holds 860,320 tokens in 52.51 GiB, 65,536 B a token: 32 layers x 8 KV heads x 128 x 2 x 1 B,
  an FP8 cache (tests/test_checkpoint_kv.py).
* `kv_cache_config.dtype` takes "auto", "fp8" or "nvfp4" (_VALID_KV_CACHE_DTYPES, same file): a 16-bit cache of a
  checkpoint that declares one has no setting (refused with the reason). An explicit dtype that differs from the
  declaration is refused with a RuntimeError at 004b733e and overridden with a warning in a later commit; kvplan
  plans what is asked and says so.
* kvplan sizes the FP8 kind only (NVFP4 and INT8 KV caches are refused); whether TensorRT-LLM reads a
  compressed-tensors or other declaration has not been read: planned at the model dtype, said so.
"""

from __future__ import annotations

from kvplan.engines.checkpoint_kv import KvRule

_SOURCE = "model_loader.py validate_and_set_kv_cache_quant, NVIDIA/TensorRT-LLM@004b733e"


def checkpoint_kv_rule(ckv, version: str) -> KvRule:
    """What TensorRT-LLM `version`'s kv_cache_config.dtype auto does with a checkpoint's declared KV cache."""
    if ckv.producer != "modelopt":
        return KvRule(False, f"kvplan has not read whether TensorRT-LLM {version} takes a {ckv.producer} "
                             "declaration (it reads ModelOpt's kv_cache_quant_algo): planned at the model dtype")
    why = f"TensorRT-LLM {version}'s kv_cache_config.dtype auto takes it ({_SOURCE})"
    return KvRule(True, why, unsized=ckv.kind != "FP8",
                  refuse_16bit=f"TensorRT-LLM's kv_cache_config.dtype takes auto, fp8 or nvfp4 ({_SOURCE}) and its "
                               f"auto is the checkpoint's {ckv.kind or 'declared'} cache: a 16-bit cache of this "
                               "checkpoint has no setting")
