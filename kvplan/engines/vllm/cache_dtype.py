"""vLLM's KV cache dtype where the flag does not decide it alone: models that ignore it, checkpoints that declare one.

A model file that builds its Attention layers without the engine's cache config leaves Attention with
cache_config None, whose kv_cache_dtype is then "auto" (the model dtype). `--engine vllm` sizes such a
cache in the model dtype and says so in a note; kvplan's own rules size the dtype asked for.

A checkpoint's declared KV quantization (kvplan.readers.kv_quant), `--kv-cache-dtype auto` by release, read in the
sdists (`checkpoint_kv_rule`):
* to 0.13.0: the model dtype. EngineArgs.create_engine_config passes the flag as given (0.13.0,
  vllm/engine/arg_utils.py L1364 `cache_dtype=self.kv_cache_dtype`); a declaration's scales apply only with
  `--kv-cache-dtype fp8` (model_executor/layers/quantization/kv_cache.py BaseKVCacheMethod).
* from 0.14.0 (vllm-project/vllm#30785): create_engine_config resolves "auto" first (0.14.0 arg_utils.py L1397-1400,
  `resolve_kv_cache_dtype_string`), which reads only a ModelOpt config (quant_method starting "modelopt"; an
  hf_quant_config.json gets it from ModelArchConfigConvertor._normalize_quantization_config): its kv_cache_scheme
  object (8-bit float with `dynamic: false` -> FP8) or its kv_cache_quant_algo string, mapped by
  MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP, "fp8" -> fp8_e4m3 (0.14.0 vllm/utils/torch_utils.py L57-61, L239-316); any
  other value falls back to "auto" with a warning. compressed-tensors' kv_cache_scheme is not read: the model dtype.
  A ModelOpt kv_cache_scheme written as a string is read first and mapped as the algorithm string is (the same
  `kv_algo` lower-cased through the map: 0.19.0 torch_utils.py L275-297, 0.33.0 L456-491): "FP8" -> fp8_e4m3,
  "FLOAT8" (which SGLang's NVFP4 config takes as FP8) falls back to "auto", the model dtype.
* from 0.20.0 the map adds "nvfp4" (and a 4-bit float scheme): an NVFP4 KV cache, which kvplan has no dtype for
  (refused; 0.19.1 and 0.18.0 map FP8 alone; 0.20.0 and 0.33.0 torch_utils.py L62-65 / L78-81).

What `--kv-cache-dtype` takes (`check_flag`): no release takes a plain int8 or a float32 cache. To 0.8.x the flag's
argparse choices are auto, fp8, fp8_e5m2, fp8_e4m3 (0.7.3 and 0.8.0 wheels, vllm/engine/arg_utils.py L369 in
0.8.0; CacheConfig._verify_cache_dtype raises "Unknown kv cache dtype" past them, vllm/config.py L1169); from the
pydantic configs on, the `CacheDType` Literal (vllm/config/cache.py) has grown by bfloat16, float16, fp8_inc,
fp8_ds_mla, the turboquant, nvfp4 and *_per_token_head kinds but never "int8" nor "float32" (v0.11.0 L25, v0.33.0
L44, docs/engines.md section 1.1; vllm-project/vllm@002f10e0:vllm/config/cache.py L38-57;
vllm-project/vllm#33495, which adds "int8" to it, is not merged). The
int8_per_token_head cache of vllm-project/vllm#38378 (Triton attention only) stores an fp32 scale per token and
KV head beside the int8 values: not kvplan's int8, and not modelled. A float32 cache is the model dtype's, through
auto, on a float32 model alone.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.checkpoint_kv import KvRule
from kvplan.engines.versions import parse_version

# architecture -> why (vllm-project/vllm source)
KV_CACHE_DTYPE_IGNORED = {
    # vllm/model_executor/models/mimo_v2_flash.py at commits 01ed47b4 and 91cf2f13 (the newest stored):
    # MiMoV2FlashDecoderLayer builds MiMoV2Attention without cache_config, so Attention(cache_config=None)
    "MiMoV2FlashForCausalLM": "mimo_v2_flash.py builds its attention without the cache config",
}


def as_cached(req, model):
    """`req` with the KV dtype vLLM caches this model in: None (the model's own) where the flag is ignored."""
    if model.architecture in KV_CACHE_DTYPE_IGNORED:
        return dataclasses.replace(req, kv_dtype=None)
    return req


def notes(model, kv_dtype) -> tuple[str, ...]:
    """The note a plan of this model carries under vLLM (empty where vLLM honours --kv-cache-dtype)."""
    why = KV_CACHE_DTYPE_IGNORED.get(model.architecture)
    return (f"vLLM caches this model's K/V in {kv_dtype.name} whatever --kv-cache-dtype says ({why})",) if why else ()


def check_flag(kv, model, version: str, weight_dtype: str | None = None) -> None:
    """Refuse a cache dtype vLLM `version`'s --kv-cache-dtype does not take (module docstring): a block-quantized
    one (q8_0, ...), int8, or fp32 beside weights that do not run in fp32 (the model's dtype, or `weight_dtype`:
    --dtype float32 makes auto's cache fp32). `kv`: None is auto."""
    fp32 = "fp32" in (model.dtype, weight_dtype)
    if kv is None or not (kv.block_elems > 1 or kv.name == "int8" or (kv.name == "fp32" and not fp32)):
        return
    why = {"int8": " (the int8_per_token_head cache of vllm-project/vllm#38378 keeps a scale per token and head "
                   "beside the values, which kvplan does not model)",
           "fp32": " (a float32 cache only through auto, with weights in float32)"}.get(kv.name, "")
    raise KvplanError(f"vLLM has no {kv.name} KV cache in any release, {version} included{why}; "
                      f"{arg('kv_dtype')} auto, bf16, fp16 or fp8",
                      EXIT_USAGE, param="kv_dtype", value=kv.name, allowed=("auto", "bf16", "fp16", "fp8"))


_SCALES = "its scales apply with --kv-cache-dtype fp8"


def checkpoint_kv_rule(ckv, version: str) -> KvRule:
    """What `--kv-cache-dtype auto` of vLLM `version` does with a checkpoint's declared KV cache (module docstring)."""
    v = parse_version(version)
    if v < (0, 14, 0):
        return KvRule(False, f"vLLM {version}'s --kv-cache-dtype auto is the model dtype (it follows a ModelOpt "
                             f"declaration from 0.14.0: vllm-project/vllm#30785); {_SCALES}")
    if ckv.producer != "modelopt":
        return KvRule(False, f"vLLM {version}'s --kv-cache-dtype auto follows a ModelOpt declaration alone "
                             f"(resolve_kv_cache_dtype_string, vllm/utils/torch_utils.py); {_SCALES}")
    kind = ckv.kind
    if ckv.is_scheme and kind == "FP8" and ckv.scheme_dynamic is not False:
        kind = ""  # get_kv_cache_quant_algo_string asks `dynamic is False` of an 8-bit float scheme
    if kind == "FP8" or (kind == "NVFP4" and v >= (0, 20, 0)):
        return KvRule(True, f"vLLM {version}'s --kv-cache-dtype auto takes it (from 0.14.0, "
                            f"resolve_kv_cache_dtype_string; {kind} from MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP)")
    return KvRule(False, f"vLLM {version}'s --kv-cache-dtype auto maps only "
                         f"{'FP8 and NVFP4' if v >= (0, 20, 0) else 'FP8'} and falls back to the model dtype with a "
                         "warning (get_kv_cache_quant_algo_string)")
