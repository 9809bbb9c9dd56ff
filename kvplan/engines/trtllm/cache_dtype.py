"""TensorRT-LLM (PyTorch backend) on a checkpoint that declares its KV quantization: `kv_cache_config.dtype` auto.

* The checkpoint's ModelOpt `kv_cache_quant_algo` (hf_quant_config.json, or config.json's ModelOpt
  quantization_config) becomes QuantConfig.kv_cache_quant_algo (NVIDIA/TensorRT-LLM@008e0af8:
  tensorrt_llm/_torch/model_config.py, ModelConfig._build_modelopt_quant_config), and `kv_cache_config.dtype` "auto"
  leaves it as the cache's ("If we're letting the checkpoint dictate the quant with auto, simply return";
  NVIDIA/TensorRT-LLM@004b733e: tensorrt_llm/_torch/pyexecutor/model_loader.py, validate_and_set_kv_cache_quant;
  logged "Using checkpoint KV quantization."). trtllm-bench passes auto unless an options file names a dtype
  (docs/speed.md, the 70B KV row). Checked on a log: TensorRT-LLM#6294 (0.20.0, nvidia/Llama-3.1-8B-Instruct-FP8 on an
  H100, trtllm-bench) holds 860,320 tokens in 52.51 GiB, 65,536 B a token: 32 layers x 8 KV heads x 128 x 2 x 1 B,
  an FP8 cache (tests/test_checkpoint_kv.py).
* `kv_cache_config.dtype` takes "auto", "fp8" or "nvfp4" (_VALID_KV_CACHE_DTYPES, same file): a 16-bit cache of a
  checkpoint that declares one has no setting (refused with the reason). An explicit dtype that differs from the
  declaration is refused with a RuntimeError at 004b733e and overridden with a warning in a later commit; kvplan
  plans what is asked and says so.
* kvplan sizes the FP8 kind only (NVFP4 and INT8 KV caches are refused).
* a ModelOpt `kv_cache_scheme` written as a string (vLLM and SGLang map one): whether TensorRT-LLM's loader reads it
  is not read here; beside a kv_cache_quant_algo that key is planned as above, alone the model dtype, said.
* compressed-tensors' `kv_cache_scheme` (llm-compressor), by release:
  - from 1.3.0rc19: `update_quant_config_from_compressed_tensors` (NVIDIA/TensorRT-LLM@2a26169d, version.py
    "1.3.0rc19": tensorrt_llm/models/quant_config_utils.py L22-98, the scheme at L78-90), called for a
    quant_method "compressed-tensors" by llmapi/llm_utils.py ModelLoader._update_from_hf_quant_config on the
    CachedModelLoader path LLM and trtllm-serve take (a stored llm_utils.py whose commit the index does not name),
    makes an 8-bit float scheme of any strategy, dynamic or not, kv_cache_quant_algo FP8 (then auto takes it as a
    ModelOpt one, above) and raises ValueError("Unsupported kv_cache_scheme") on any other: refused here with the
    reason. The same function raises on weight schemes other than 8-bit channel (per-token inputs), 8-bit block
    (group 128 inputs) and NVFP4 tensor_group (a per-tensor FP8 W8A8 checkpoint among them); kvplan does not
    check the weights here, said so. kvplan reads no earlier 1.3.0 release candidate: they are planned as rc19.
    kvplan's modelled TensorRT-LLM range ends at 1.2.0 (engine.py VERSIONS): plans reach this branch once 1.3.0
    is modelled; tests/test_checkpoint_kv.py tests the rule itself.
  - before: no release read has it. Of the older trees read, NVIDIA/TensorRT-LLM@7b437aaa (its version.py not
    read) refuses such a checkpoint on that path (llm_utils.py _update_from_hf_quant_config: fp8 block and mxfp4
    only, else NotImplementedError("Unsupported quantization_config")), and @1a0dc5f7's _torch/model_config.py
    load_hf_quant_config gives it the default QuantConfig (kv_cache_quant_algo None, the model dtype). 0.20.0 and
    1.2.0 (kvplan's modelled releases) are planned at the model dtype and said to be unread, with that refusal
    named.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.checkpoint_kv import KvRule
from kvplan.engines.versions import parse_version

_SOURCE = "model_loader.py validate_and_set_kv_cache_quant, NVIDIA/TensorRT-LLM@004b733e"
_CT_SOURCE = "update_quant_config_from_compressed_tensors, NVIDIA/TensorRT-LLM@2a26169d quant_config_utils.py L78-90"
COMPRESSED = (1, 3, 0)  # the first release read whose loader reads a compressed-tensors kv_cache_scheme (1.3.0rc19)


def _no_16bit(auto_is: str) -> str:
    """Why a 16-bit cache asked for by name has no setting, where `auto_is` says what auto gives this checkpoint."""
    return (f"TensorRT-LLM's kv_cache_config.dtype takes auto, fp8 or nvfp4 ({_SOURCE}) and its auto is {auto_is}: a "
            "16-bit cache of this checkpoint has no setting")


def _compressed_tensors_rule(ckv, version: str) -> KvRule:
    """What `version`'s auto does with a compressed-tensors kv_cache_scheme (module docstring)."""
    if parse_version(version) < COMPRESSED:
        return KvRule(False, f"kvplan has not read a TensorRT-LLM release before 1.3.0rc19 that reads a "
                             f"compressed-tensors kv_cache_scheme ({version}'s loader unread; an older tree read, "
                             "NVIDIA/TensorRT-LLM@7b437aaa, refuses such a checkpoint: llm_utils.py "
                             "_update_from_hf_quant_config, 'Unsupported quantization_config'): planned at the "
                             "model dtype")
    if ckv.scheme_type != "float" or ckv.scheme_bits != 8:
        raise KvplanError(f"TensorRT-LLM {version} refuses to load a checkpoint that declares {ckv.describe()}: only "
                          f"an 8-bit float kv_cache_scheme is read, any other raises 'Unsupported kv_cache_scheme' "
                          f"({_CT_SOURCE})", EXIT_USAGE, param="model")
    why = (f"TensorRT-LLM {version}'s loader makes an 8-bit float kv_cache_scheme kv_cache_quant_algo FP8 "
           f"({_CT_SOURCE}; 1.3.0 before rc19 unread, planned as rc19) and kv_cache_config.dtype auto takes it "
           f"({_SOURCE}); it loads only 8-bit channel or block and NVFP4 weight schemes, unchecked here")
    return KvRule(True, why, refuse_16bit=_no_16bit(f"the checkpoint's FP8 cache from 1.3.0rc19 ({_CT_SOURCE})"))


def checkpoint_kv_rule(ckv, version: str) -> KvRule:
    """What TensorRT-LLM `version`'s kv_cache_config.dtype auto does with a checkpoint's declared KV cache."""
    if ckv.scheme_word and not ckv.algo:  # a string kv_cache_scheme alone: its loader's reading not read
        return KvRule(False, f"kvplan has not read whether TensorRT-LLM {version} reads a string kv_cache_scheme (its "
                             f"ModelOpt loader reads kv_cache_quant_algo, {_SOURCE}): planned at the model dtype")
    ckv = replace(ckv, scheme_word="")  # beside a kv_cache_quant_algo, that key (module docstring)
    if ckv.producer == "compressed-tensors" and ckv.is_scheme:
        return _compressed_tensors_rule(ckv, version)
    if ckv.producer != "modelopt":
        return KvRule(False, f"kvplan has not read whether TensorRT-LLM {version} takes a {ckv.producer} "
                             "declaration (it reads ModelOpt's kv_cache_quant_algo): planned at the model dtype")
    why = f"TensorRT-LLM {version}'s kv_cache_config.dtype auto takes it ({_SOURCE})"
    return KvRule(True, why, unsized=ckv.kind != "FP8",
                  refuse_16bit=_no_16bit(f"the checkpoint's {ckv.kind or 'declared'} cache"))
