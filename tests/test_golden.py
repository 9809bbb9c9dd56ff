"""Golden KV numbers from independent sources, one per family, with the arithmetic beside each.

Sources: the seed articles (Llama-3-70B, GPT-3), the papers (GPT-3 Table 2.1, DeepSeek-V2 sec.
2.1.2, Mistral 7B, Nemotron-H), and a vLLM 0.11 startup log (shared/engine_logs.yaml).
Model geometries come from the papers or from the real configs in ../shared/configs.
"""

from __future__ import annotations

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16, FP16
from kvplan.model.recurrent import RecurrentState
from kvplan.planning.profile import kv_profile

from conftest import shared_config


def _seq(spec, tokens: int, dtype=BF16) -> int:
    return kv_profile(spec.layers, 1, dtype, dtype, 16).sequence_bytes(tokens)


def test_llama3_70b_seed_article_numbers():
    # 80 layers x 2 (K,V) x 8 KV heads x 128 x 2 B = 327,680 B/token
    spec, _ = spec_from_config(shared_config("meta-llama__Meta-Llama-3.1-70B"), "llama")
    assert _seq(spec, 4096) == 1_342_177_280  # 327,680 x 4,096
    assert _seq(spec, 131_072) == 42_949_672_960  # 327,680 x 131,072 = 40 GiB
    assert 8 * _seq(spec, 4096) == 10_737_418_240  # x 8 sequences


def test_gpt3_175b_per_token():
    # GPT-3 paper Table 2.1: 96 layers, d_model 12288, 96 heads of 128; fp16:
    # 2 x 96 x 12288 x 2 B = 4,718,592 B/token
    cfg = {"model_type": "gpt2", "n_embd": 12288, "n_head": 96, "n_layer": 96, "vocab_size": 50257, "n_positions": 2048}
    spec, _ = spec_from_config(cfg, "gpt3")
    assert kv_profile(spec.layers, 1, FP16, FP16, 1).growth_bytes_per_token() == 4_718_592


def test_deepseek_v3_mla_latent():
    # DeepSeek-V2 paper: MLA caches (d_c + d_h^R) x l = (512 + 64) x 61 values per token, one copy.
    spec, _ = spec_from_config(shared_config("deepseek-ai__DeepSeek-V3"), "dsv3")
    assert kv_profile(spec.layers, 1, BF16, BF16, 1).growth_bytes_per_token() == 61 * 576 * 2  # 70,272 B
    # and not the expanded 2 x 128 heads x 192 that a naive reader would bill (~1,000x less... per layer
    # 576 vs 128 x (192 + 128) = 40,960 values)
    assert 61 * 576 * 2 < 61 * 128 * (192 + 128) * 2


def test_mistral_7b_sliding_window():
    # Mistral 7B paper: 32 layers, 8 KV heads x 128, window 4096. At 16k tokens only 4096 are kept:
    # 32 x 2 x 8 x 128 x 2 B x 4096 = 536,870,912 B, the same as at 4096 tokens.
    cfg = {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 14336, "sliding_window": 4096,
           "max_position_embeddings": 32768}
    spec, _ = spec_from_config(cfg, "mistral-7b-v0.1")
    assert _seq(spec, 16384) == _seq(spec, 4096) == 536_870_912


def test_qwen3_next_linear_attention_hybrid():
    # Qwen3-Next-80B: 12 of 48 layers full attention (2 KV heads x 256), 36 Gated DeltaNet layers with a
    # fixed state (vLLM mamba_utils gated_delta_net_state_shape: conv (kernel-1) x conv_dim, temporal
    # v_heads x k_dim x v_dim): 3 x 8192 + 32 x 128 x 128 = 548,864 values x 2 B per layer.
    spec, _ = spec_from_config(shared_config("Qwen__Qwen3-Next-80B-A3B-Thinking"), "qn")
    assert _seq(spec, 32768) == 12 * 2 * 2 * 256 * 2 * 32768 + 36 * 548_864 * 2  # 805,306,368 + 39,518,208


def test_nemotron_h_mamba_hybrid():
    # Nemotron-H paper: the 56B model has 118 layers: 54 Mamba-2, 10 self-attention, 54 FFN.
    # Attention: 10 x 2 x 8 x 128 x 2 B = 40,960 B/token. Mamba-2 state per layer: conv (4-1) x
    # (256 x 64 + 2 x 8 x 256) = 61,440 values in bf16, and ssm 256 heads x 64 x 256 = 4,194,304
    # values in float32: vLLM's NemotronHForCausalLMConfig (model_executor/models/config.py) sets
    # mamba_ssm_cache_dtype to float32 when the config does not say (DEFAULT_MAMBA_SSM_CACHE_DTYPE).
    spec, _ = spec_from_config(shared_config("nvidia__Nemotron-H-56B-Base-8K"), "nh")
    assert _seq(spec, 8192) == 40_960 * 8192 + 54 * (61_440 * 2 + 4_194_304 * 4)


def test_nemotron_h_state_per_rank_as_vllm_shapes_it():
    # vLLM mamba_utils.py mamba2_state_shape: groups not divisible by tp are replicated up to tp
    # (extra_groups_for_head_shards), then conv_dim = 16,384 + 2 x groups x 256 is split over tp ranks:
    #   tp 8:  3 x (16,384 + 2 x 8 x 256) / 8 + 256/8 x 64 x 256  = 7,680 + 524,288 = 531,968
    #   tp 16: 3 x (16,384 + 2 x 16 x 256) / 16 + 256/16 x 64 x 256 = 4,608 + 262,144 = 266,752
    spec, _ = spec_from_config(shared_config("nvidia__Nemotron-H-56B-Base-8K"), "nh")
    mamba = next(layer for layer in spec.layers if isinstance(layer, RecurrentState))
    assert mamba.state_elements(8) == 531_968
    assert mamba.state_elements(16) == 266_752


def test_vllm_log_mistral_small_bytes_per_token():
    # vLLM 0.11, Mistral-Small-3.2-24B on an H100: "28.20 GiB / 184,832 tokens = 163,840 bytes/token"
    # = 40 layers x 2 x 8 KV heads x 128 x 2 B (shared/engine_logs.yaml, llm-d empirical results).
    cfg = {"model_type": "mistral", "hidden_size": 5120, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "num_hidden_layers": 40, "vocab_size": 131072, "intermediate_size": 32768,
           "max_position_embeddings": 131072}
    spec, _ = spec_from_config(cfg, "mistral-small-24b")
    assert kv_profile(spec.layers, 1, BF16, BF16, 128).growth_bytes_per_token() == 163_840
