"""Every config.json in ../shared/configs reads into the right layers, one test per file.

Expected values are worked by hand from each config's own keys (not from kvplan): the layer
layout, and the bf16 KV bytes of one token summed over the layers that keep every token
(2 x H_kv x d_h x 2 B per full-attention layer; MLA 576 x 2 B with no x2). `slot` is the bytes of
one token in every layer that caches tokens at all (sliding layers included), used where a model
has no unbounded layer.
"""

from __future__ import annotations

import pytest

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16, FP8
from kvplan.core.errors import KvplanError
from kvplan.planning.profile import kv_profile

from conftest import shared_config

# file stem: (layer kinds, KV bytes/token of unbounded layers, slot bytes/token of all caching layers)
CASES = {
    # Yi-34B: 60 layers, 8 KV heads, 7168 / 56 heads = 128
    "01-ai__Yi-34B": ({"full": 60}, 60 * 2 * 8 * 128 * 2, None),
    # Command-R: MHA, 64 KV heads x 8192/64 = 128
    "CohereForAI__c4ai-command-r-v01": ({"full": 40}, 40 * 2 * 64 * 128 * 2, None),
    # Qwen2: sliding_window set but use_sliding_window false -> all full
    "Qwen__Qwen2-0.5B-Instruct": ({"full": 24}, 24 * 2 * 2 * 64 * 2, None),
    "Qwen__Qwen2-7B-Instruct": ({"full": 28}, 28 * 2 * 4 * 128 * 2, None),
    "Qwen__Qwen2.5-14B": ({"full": 48}, 48 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen2.5-32B-Instruct": ({"full": 64}, 64 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen2.5-32B": ({"full": 64}, 64 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen2.5-7B-Instruct": ({"full": 28}, 28 * 2 * 4 * 128 * 2, None),
    "Qwen__Qwen2.5-7B": ({"full": 28}, 28 * 2 * 4 * 128 * 2, None),
    # Qwen3: explicit head_dim 128 (0.6B: hidden/heads would be 64; 32B: 80)
    "Qwen__Qwen3-0.6B": ({"full": 28}, 28 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen3-1.7B": ({"full": 28}, 28 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen3-14B": ({"full": 40}, 40 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen3-235B-A22B": ({"full": 94}, 94 * 2 * 4 * 128 * 2, None),
    "Qwen__Qwen3-30B-A3B": ({"full": 48}, 48 * 2 * 4 * 128 * 2, None),
    "Qwen__Qwen3-32B": ({"full": 64}, 64 * 2 * 8 * 128 * 2, None),
    "Qwen__Qwen3-8B": ({"full": 36}, 36 * 2 * 8 * 128 * 2, None),
    # Qwen3-Next: full_attention_interval 4 -> 12 full (2 KV heads x 256), 36 Gated DeltaNet
    "Qwen__Qwen3-Next-80B-A3B-Thinking": ({"full": 12, "state": 36}, 12 * 2 * 2 * 256 * 2, None),
    # StarCoder2-7B: sliding_window 4096 on every layer; 4 KV heads x 4608/36 = 128
    "bigcode__starcoder2-7b": ({"sliding": 32}, 0, 32 * 2 * 4 * 128 * 2),
    # DeepSeek MLA: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values, one latent
    "deepseek-ai__DeepSeek-R1": ({"mla": 61}, 61 * 576 * 2, None),
    "deepseek-ai__DeepSeek-V3": ({"mla": 61}, 61 * 576 * 2, None),
    "deepseek-ai__DeepSeek-V2-Lite": ({"mla": 27}, 27 * 576 * 2, None),
    # Gemma 2: alternating local (4096) / global, head_dim 256
    "google__gemma-2-2b-it": ({"sliding": 13, "full": 13}, 13 * 2 * 4 * 256 * 2, 26 * 2 * 4 * 256 * 2),
    "google__gemma-2-9b": ({"sliding": 21, "full": 21}, 21 * 2 * 8 * 256 * 2, 42 * 2 * 8 * 256 * 2),
    # Gemma 1 2B: MQA, head_dim 256
    "google__gemma-2b": ({"full": 18}, 18 * 2 * 1 * 256 * 2, None),
    # Gemma 3 1B: sliding_window_pattern 6 -> layers 5, 11, 17, 23 global; window 512
    "google__gemma-3-1b-it": ({"sliding": 22, "full": 4}, 4 * 2 * 1 * 256 * 2, 26 * 2 * 1 * 256 * 2),
    "meta-llama__CodeLlama-34b-Instruct-hf": ({"full": 48}, 48 * 2 * 8 * 128 * 2, None),
    "meta-llama__Llama-2-7b-hf": ({"full": 32}, 32 * 2 * 32 * 128 * 2, None),
    "meta-llama__Llama-3.1-70B-Instruct": ({"full": 80}, 80 * 2 * 8 * 128 * 2, None),
    "meta-llama__Llama-3.1-8B-Instruct": ({"full": 32}, 32 * 2 * 8 * 128 * 2, None),
    "meta-llama__Llama-3.2-1B-Instruct": ({"full": 16}, 16 * 2 * 8 * 64 * 2, None),
    "meta-llama__Llama-3.2-3B-Instruct": ({"full": 28}, 28 * 2 * 8 * 128 * 2, None),
    "meta-llama__Llama-3.2-3B": ({"full": 28}, 28 * 2 * 8 * 128 * 2, None),
    "meta-llama__Llama-3.3-70B-Instruct": ({"full": 80}, 80 * 2 * 8 * 128 * 2, None),
    # Llama 4 (text_config): chunked attention (8192) on RoPE layers, every 4th layer global NoPE
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct": ({"chunked": 36, "full": 12}, 12 * 2 * 8 * 128 * 2,
                                                       48 * 2 * 8 * 128 * 2),
    "meta-llama__Llama-4-Scout-17B-16E-Instruct": ({"chunked": 36, "full": 12}, 12 * 2 * 8 * 128 * 2,
                                                   48 * 2 * 8 * 128 * 2),
    "meta-llama__Meta-Llama-3-8B-Instruct": ({"full": 32}, 32 * 2 * 8 * 128 * 2, None),
    "meta-llama__Meta-Llama-3.1-405B": ({"full": 126}, 126 * 2 * 8 * 128 * 2, None),
    "meta-llama__Meta-Llama-3.1-70B": ({"full": 80}, 80 * 2 * 8 * 128 * 2, None),
    "meta-llama__Meta-Llama-3.1-8B": ({"full": 32}, 32 * 2 * 8 * 128 * 2, None),
    # Phi-3 mini 4k: sliding_window 2047 < 4096 positions, MHA 32 x 3072/32 = 96
    "microsoft__Phi-3-mini-4k-instruct": ({"sliding": 32}, 0, 32 * 2 * 32 * 96 * 2),
    # Phi-3.5 mini: window 262144 >= 131072 positions: no window in effect
    "microsoft__Phi-3.5-mini-instruct": ({"full": 32}, 32 * 2 * 32 * 96 * 2, None),
    "microsoft__phi-4": ({"full": 40}, 40 * 2 * 10 * 128 * 2, None),
    # Mistral-Nemo: explicit head_dim 128 (5120/32 would be 160)
    "mistralai__Mistral-Nemo-Instruct-2407": ({"full": 40}, 40 * 2 * 8 * 128 * 2, None),
    "mistralai__Mixtral-8x22B-v0.1": ({"full": 56}, 56 * 2 * 8 * 128 * 2, None),
    "mistralai__Mixtral-8x7B-v0.1": ({"full": 32}, 32 * 2 * 8 * 128 * 2, None),
    # Nemotron-H 56B: hybrid_override_pattern -> 54 Mamba2, 10 attention, 54 MLP-only
    "nvidia__Nemotron-H-56B-Base-8K": ({"state": 54, "full": 10, "none": 54}, 10 * 2 * 8 * 128 * 2, None),
    "openai-community__gpt2-medium": ({"full": 24}, 24 * 2 * 16 * 64 * 2, None),
    "openai-community__gpt2": ({"full": 12}, 12 * 2 * 12 * 64 * 2, None),
    # gpt-oss: layer_types alternate sliding (128) / full; explicit head_dim 64
    "openai__gpt-oss-120b": ({"sliding": 18, "full": 18}, 18 * 2 * 8 * 64 * 2, 36 * 2 * 8 * 64 * 2),
    "openai__gpt-oss-20b": ({"sliding": 12, "full": 12}, 12 * 2 * 8 * 64 * 2, 24 * 2 * 8 * 64 * 2),
    # Falcon-7B: multi_query -> 1 KV head x 4544/71 = 64
    "tiiuae__falcon-7b": ({"full": 32}, 32 * 2 * 1 * 64 * 2, None),
    # GLM-4.5: explicit head_dim 128 (5120/96 is not an integer)
    "zai-org__GLM-4.5": ({"full": 92}, 92 * 2 * 8 * 128 * 2, None),
}


def _kinds(spec) -> dict:
    out: dict[str, int] = {}
    for layer in spec.layers:
        out[layer.kind] = out.get(layer.kind, 0) + 1
    return out


@pytest.mark.parametrize("stem", sorted(CASES))
def test_config_reads(stem):
    kinds, growth, slot = CASES[stem]
    spec, _ = spec_from_config(shared_config(stem), stem)
    assert _kinds(spec) == kinds
    prof = kv_profile(spec.layers, 1, BF16, BF16, 1)
    assert prof.growth_bytes_per_token() == growth
    assert prof.slot_bytes_per_token() == (slot if slot is not None else growth)
    # fp8 halves every cached element
    assert kv_profile(spec.layers, 1, FP8, BF16, 1).slot_bytes_per_token() * 2 == prof.slot_bytes_per_token()


def test_every_shared_config_has_a_case():
    from conftest import CONFIGS

    if not CONFIGS.is_dir():
        pytest.skip("../shared/configs is not here (a user's clone has no ../shared)")
    assert sorted(p.stem for p in CONFIGS.glob("*.json")) == sorted(CASES)


def test_sliding_window_cap_and_states():
    # Gemma 2 9B at 8192 tokens: 21 global layers hold 8192 tokens, 21 local hold 4096.
    spec, _ = spec_from_config(shared_config("google__gemma-2-9b"), "g")
    per_layer = 2 * 8 * 256 * 2
    assert kv_profile(spec.layers, 1, BF16, BF16, 16).sequence_bytes(8192) == 21 * per_layer * (8192 + 4096)
    # Qwen3-Next linear layers: conv (4-1) x (2*16*128 + 32*128) + state 32*128*128 values, bf16
    spec, _ = spec_from_config(shared_config("Qwen__Qwen3-Next-80B-A3B-Thinking"), "q")
    state = (3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128) * 2
    assert kv_profile(spec.layers, 1, BF16, BF16, 16).sequence_bytes(1024) == 36 * state + 12 * 2 * 2 * 256 * 2 * 1024


def test_text_config_nesting_is_read():
    spec, notices = spec_from_config(shared_config("meta-llama__Llama-4-Scout-17B-16E-Instruct"), "scout")
    assert spec.hidden_size == 5120 and any("multimodal" in n for n in notices)


def test_unknown_model_type_with_standard_keys_works_and_says_so():
    cfg = {"model_type": "brand_new", "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
           "num_hidden_layers": 10, "vocab_size": 32000, "intermediate_size": 4096}
    spec, notices = spec_from_config(cfg, "x")
    assert any("no dedicated reader" in n for n in notices)
    assert kv_profile(spec.layers, 1, BF16, BF16, 1).growth_bytes_per_token() == 10 * 2 * 4 * 64 * 2


@pytest.mark.parametrize("cfg, needle", [
    ({"model_type": "llama", "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 10}, "hidden_size"),
    ({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10}, "num_attention_heads"),
    ({"model_type": "llama", "hidden_size": "big", "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 10},
     "must be an integer"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "num_hidden_layers": 10**9, "vocab_size": 10},
     "out of range"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "num_hidden_layers": -1, "vocab_size": 10},
     "out of range"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 16,
      "num_hidden_layers": 2, "vocab_size": 10}, "exceeds"),
    ({"model_type": "gpt_oss", "hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 8,
      "num_hidden_layers": 2, "vocab_size": 10, "layer_types": ["full_attention"]}, "layer_types"),
    ([1, 2, 3], "JSON object"),
])
def test_bad_configs_give_one_line_errors(cfg, needle):
    with pytest.raises(KvplanError) as err:
        spec_from_config(cfg, "bad", source="config.json")
    assert needle in err.value.message and "\n" not in err.value.message
