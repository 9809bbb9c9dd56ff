"""A ModelOpt `kv_cache_scheme` written as a string ("FP8", "NVFP4"), read as each engine release reads it (issue 22).

Before, kvplan refused any string kv_cache_scheme. Read in the wheels:
* SGLang's NVFP4 config (ModelOptFp4Config.from_config, config.json's flat form): from 0.5.9 the string first,
  "FP8"/"FLOAT8" -> kv_cache_quant_algo "FP8", "FP4"/"FLOAT4"/"NVFP4" -> "NVFP4", else "auto" (0.5.23 wheel
  sglang/srt/layers/quantization/modelopt_quant.py L1629-1636); auto then follows "FP8" alone
  (mem_cache/kv_cache_dtype.py L49-59). 0.5.3 calls kv_cache_scheme.get(...) on it (L601-604): AttributeError.
  SGLang's FP8 config skips the string from 0.5.9 and reads kv_cache_quant_algo from 0.5.15 (0.5.23 L482-491).
* vLLM (0.19.0 wheel vllm/utils/torch_utils.py L275-297, 0.33.0 L456-491): the scheme before the algorithm, a string
  lower-cased through MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"} (0.33.0 L78-81),
  anything else "auto" (the model dtype, a warning).
Hand arithmetic (Llama-3.3-70B geometry, tests/test_checkpoint_kv.py): 2 x 80 layers x 8 KV heads x 128 = 163,840
elements a token, 163,840 B in fp8, 327,680 B in bf16.
"""

from __future__ import annotations

import json

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError

FP8_TOKEN, BF16_TOKEN = 163_840, 327_680
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
             "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def _model(tmp_path, algo: str, scheme, name: str, **extra):
    d = tmp_path / name
    d.mkdir()
    qc = {"quant_method": "modelopt", "quant_algo": algo, "kv_cache_scheme": scheme, "ignore": ["lm_head"], **extra}
    if algo == "NVFP4":
        qc["group_size"] = 16
    (d / "config.json").write_text(json.dumps({**LLAMA_70B, "quantization_config": qc}))
    return str(d)


def _token(model, engine, version, gpu="b200"):
    plan = api.plan(model, gpu, context=8192, engine=engine, engine_version=version)
    said = " ".join(w.message for w in plan.warnings if "KV cache" in w.message)
    return plan.kv_bytes_per_token, said


def test_the_string_is_read_not_refused(tmp_path, kvplan_home):
    ckv = api.load_model(_model(tmp_path, "NVFP4", "FP8", "a")).checkpoint_kv
    assert (ckv.scheme_word, ckv.flat_algo, ckv.kind, ckv.dtype) == ("FP8", "NVFP4", "FP8", "fp8")
    assert ckv.describe() == 'kv_cache_scheme "FP8" in config.json quantization_config'
    with pytest.raises(KvplanError, match="kv_cache_scheme must be a short name such as FP8 or an object"):
        api.load_model(_model(tmp_path, "NVFP4", "FP 8", "b"))


@pytest.mark.parametrize("word,token", [("FP8", FP8_TOKEN), ("FLOAT8", FP8_TOKEN), ("NVFP4", BF16_TOKEN),
                                        ("INT8", BF16_TOKEN)])
def test_sglang_0_5_23_nvfp4_config_maps_the_string(word, token, tmp_path, kvplan_home):
    got, said = _token(_model(tmp_path, "NVFP4", word, "m"), "sglang", "0.5.23")
    assert got == token, said
    as_algo = {"FP8": "FP8", "FLOAT8": "FP8", "NVFP4": "NVFP4"}.get(word, "AUTO")
    assert f'SGLang reads its kv_cache_scheme "{word}" as kv_cache_quant_algo {as_algo}' in said


@pytest.mark.parametrize("word,token", [("FP8", FP8_TOKEN), ("FLOAT8", BF16_TOKEN)])
def test_vllm_maps_the_string_through_its_table(word, token, tmp_path, kvplan_home):
    # "FLOAT8" is not in MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP: "auto", the model dtype; before 0.14.0 auto is the model's
    assert _token(_model(tmp_path, "NVFP4", word, "m"), "vllm", "0.33.0")[0] == token
    assert _token(_model(tmp_path, "NVFP4", word, "n"), "vllm", "0.13.0")[0] == BF16_TOKEN


def test_vllm_follows_an_nvfp4_string_kvplan_cannot_size(tmp_path, kvplan_home):
    with pytest.raises(KvplanError, match="kvplan has no NVFP4 cache dtype"):
        _token(_model(tmp_path, "NVFP4", "NVFP4", "m"), "vllm", "0.33.0")


def test_sglang_releases_that_fail_on_it_or_skip_it(tmp_path, kvplan_home):
    with pytest.raises(KvplanError, match=r"calls kv_cache_scheme.get\(...\) on the string \"FP8\""):
        _token(_model(tmp_path, "NVFP4", "FP8", "a"), "sglang", "0.5.3")
    # 0.5.8.post1 maps it (no kv_cache_quant_algo key beside it)
    assert _token(_model(tmp_path, "NVFP4", "FP8", "b"), "sglang", "0.5.8.post1")[0] == FP8_TOKEN
    fp8 = _model(tmp_path, "FP8", "FP8", "c")
    with pytest.raises(KvplanError, match="AttributeError at start-up"):
        _token(fp8, "sglang", "0.5.8.post1", gpu="h200")
    got, said = _token(fp8, "sglang", "0.5.10", gpu="h200")  # the FP8 config skips the string: no KV quantization
    assert got == BF16_TOKEN and 'reads its kv_cache_scheme "FP8" as no KV quantization' in said
    beside = _model(tmp_path, "FP8", "FP8", "d", kv_cache_quant_algo="FP8")  # from 0.5.15 that key
    assert _token(beside, "sglang", "0.5.23", gpu="h200")[0] == FP8_TOKEN
    assert _token(beside, "sglang", "0.5.14", gpu="h200")[0] == BF16_TOKEN


def test_another_producers_string_is_still_refused(tmp_path, kvplan_home):
    d = tmp_path / "ct"
    d.mkdir()
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "kv_cache_scheme": "FP8",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}}}}
    (d / "config.json").write_text(json.dumps({**LLAMA_70B, "quantization_config": qc}))
    with pytest.raises(KvplanError, match="kv_cache_scheme must be an object"):
        api.load_model(str(d))
