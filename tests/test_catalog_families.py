"""The bundled entries of this year's families (scripts/catalog_extra, sourced in its SOURCES.md), exact.

Every expected number is written out from the entry's config.json and vLLM's allocation, not from kvplan:
  * attention: per token and rank, max(1, KV heads // tp) x (K head size + V head size) x 2 B (bf16)
    (vllm/v1/kv_cache_interface.py FullAttentionSpec / SlidingWindowSpec with head_size_v; QKVParallelLinear
    replicates KV heads when tp exceeds them);
  * MLA + DSA: 512 + 64 latent values (2 B each, or 656 B as fp8_ds_mla) and 128 + 4 B of indexer keys on
    layers that own an indexer (model_executor/models/deepseek_v2.py), the same on every tp rank;
  * Mamba-2 states: mamba_utils.mamba2_state_shape, conv (d_conv - 1) x (intermediate + 2 x groups x state)
    in bf16 and ssm heads x head_dim x state in mamba_ssm_cache_dtype (float32 for Nemotron 3).
"""

from __future__ import annotations

import json

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.model.weights import weight_bytes
from kvplan.core.dtypes import BF16, FP8
from kvplan.planning.profile import kv_profile


def profile(name: str, tp: int = 1, dtype=BF16):
    spec = find_in_catalog(name)
    assert spec is not None, name
    return kv_profile(spec.layers, tp, dtype, dtype, 1)


def kinds(name: str) -> dict:
    out: dict = {}
    for layer in find_in_catalog(name).layers:
        out[layer.kind] = out.get(layer.kind, 0) + 1
    return out


# name: (layer kinds, KV B/token tp 1, KV B/token tp 8, state B/sequence tp 1, state tp 8)
CASES = {
    # MiMo-V2-Flash: hybrid_layer_pattern has 0 (full) at layers 0, 5, 11, 17, 23, 29, 35, 41, 47: 9 full
    # layers of 4 KV heads x (K 192 + V 128); 39 sliding layers of 8 KV heads x (192 + 128), window 128.
    # Growth: 9 x 4 x 320 x 2 = 23,040. tp 8: 4 // 8 -> 1 head: 9 x 1 x 320 x 2 = 5,760.
    "mimo-v2-flash": ({"full": 9, "sliding": 39}, 9 * 4 * 320 * 2, 9 * 1 * 320 * 2, 0, 0),
    # Gemma 4 26B-A4B: layer_types put full attention at 5, 11, 17, 23, 29: 5 full layers of
    # num_global_key_value_heads 2 x global_head_dim 512 (K = V still caches both); 25 sliding of 8 x 256.
    "gemma-4-26b-a4b": ({"full": 5, "sliding": 25}, 5 * 2 * 2 * 512 * 2, 5 * 2 * 1 * 512 * 2, 0, 0),
    # DeepSeek-V3.2: 61 layers, each (512 + 64) x 2 B latent + 132 B indexer keys = 1,284 B, on every rank.
    "deepseek-v3.2": ({"mla": 61}, 61 * 1284, 61 * 1284, 0, 0),
    # GLM-5: 78 layers, every one with its indexer: 78 x 1,284.
    "glm-5": ({"mla": 78}, 78 * 1284, 78 * 1284, 0, 0),
    # GLM-5.1: GLM-5's architecture unchanged (its config.json differs only in transformers_version): 78 x 1,284.
    "glm-5.1": ({"mla": 78}, 78 * 1284, 78 * 1284, 0, 0),
    # GLM-5.2: index_topk_freq 4, index_skip_topk_offset 3 -> indexers on 0, 1, 2 and 6, 10, ..., 74
    # (18 more): 21 layers; all 78 keep the latent. 78 x 1,152 + 21 x 132 = 92,628.
    "glm-5.2": ({"mla": 78}, 78 * 1152 + 21 * 132, 78 * 1152 + 21 * 132, 0, 0),
    # Nemotron 3 Super: hybrid_override_pattern of 88: 8 '*' attention, 40 'M' Mamba-2, 40 'E' MoE (no cache).
    # Attention 8 x 2 x 2 KV heads x 128 x 2 B; tp 8 keeps 1 head. Mamba-2: intermediate 128 x 64 = 8192,
    # conv 3 x (8192 + 2 x 8 x 128) = 30,720 bf16, ssm 128 x 64 x 128 float32: 61,440 + 4,194,304 per layer.
    # tp 8 (8 groups divide): conv 30,720 / 8 x 2 B = 7,680, ssm 16 x 64 x 128 x 4 B = 524,288.
    "nemotron-3-super": ({"full": 8, "state": 40, "none": 40}, 8 * 2 * 2 * 128 * 2, 8 * 2 * 1 * 128 * 2,
                         40 * (3 * 10240 * 2 + 128 * 64 * 128 * 4), 40 * (3 * 10240 // 8 * 2 + 16 * 64 * 128 * 4)),
    # Nemotron 3 Nano: 6 attention layers of 2 x 128; 23 Mamba-2 of conv 3 x (4096 + 2 x 8 x 128) bf16 and
    # ssm 64 x 64 x 128 float32. tp 8: conv / 8, ssm 8 x 64 x 128.
    "nemotron-3-nano": ({"full": 6, "state": 23, "none": 23}, 6 * 2 * 2 * 128 * 2, 6 * 2 * 1 * 128 * 2,
                        23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4), 23 * (3 * 6144 // 8 * 2 + 8 * 64 * 128 * 4)),
    # Nemotron 3 Ultra: layers_block_type lists 108 blocks: 12 'attention', 48 'mamba', 48 'moe' (no cache). Attention
    # 12 x 2 x 2 KV heads x 128 x 2 B; tp 8 keeps 1 head. Mamba-2: 256 heads x 64 = 16,384 wide, 8 groups, state 128:
    # conv 3 x (16,384 + 2 x 8 x 128) = 55,296 bf16, ssm 256 x 64 x 128 float32 (mamba_ssm_cache_dtype). tp 8 (8
    # groups divide): conv 55,296 / 8 x 2 B, ssm 32 x 64 x 128 x 4 B.
    "nemotron-3-ultra": ({"full": 12, "state": 48, "none": 48}, 12 * 2 * 2 * 128 * 2, 12 * 2 * 1 * 128 * 2,
                         48 * (3 * 18432 * 2 + 256 * 64 * 128 * 4), 48 * (3 * 18432 // 8 * 2 + 32 * 64 * 128 * 4)),
    # Qwen3-Coder-480B-A35B: 62 layers of 8 KV heads x 128; tp 8: one head each.
    "qwen3-coder-480b-a35b-instruct": ({"full": 62}, 62 * 2 * 8 * 128 * 2, 62 * 2 * 1 * 128 * 2, 0, 0),
    # Falcon-H1 0.5B: 36 layers, each attention (2 KV heads x 64) beside a Mamba-2 mixer of 24 heads x 64
    # (intermediate 1536), 1 group, state 128, d_conv 4: conv 3 x (1536 + 2 x 128) = 5,376, ssm 24 x 64 x 128.
    # tp 8: attention 1 head; mixer 3 heads, and the single group replicated to every rank
    # (extra_groups_for_head_shards): conv 3 x (1536 / 8 + 2 x 128) = 1,344, ssm 3 x 64 x 128 = 24,576.
    "falcon-h1-0.5b": ({"full": 36}, 36 * 2 * 2 * 64 * 2, 36 * 2 * 1 * 64 * 2,
                       36 * (5376 + 24 * 64 * 128) * 2, 36 * (1344 + 3 * 64 * 128) * 2),
    # Qwen3.5-27B (dense): layer_types put full_attention on every 4th of 64 layers: 16 full layers of 4 KV heads
    # x head_dim 256, 48 Gated DeltaNet layers (vLLM gated_delta_net_state_shape): conv (4 - 1) x (2 x 16 key
    # heads x 128 + 48 value heads x 128 = 10,240) in bf16, ssm 48 value heads x 128 x 128 in float32 (the text
    # config's mamba_ssm_dtype, which vLLM 0.17+'s Qwen3_5ForConditionalGenerationConfig hook copies into
    # mamba_ssm_cache_dtype): 61,440 + 3,145,728 = 3,207,168 B per layer. tp 8: 4 // 8 -> 1 KV head; conv
    # 30,720 / 8 x 2 B, ssm 6 heads x 128 x 128 x 4 B.
    "qwen3.5-27b": ({"full": 16, "state": 48}, 16 * 2 * 4 * 256 * 2, 16 * 2 * 1 * 256 * 2,
                    48 * (3 * 10240 * 2 + 48 * 128 * 128 * 4), 48 * (3 * 10240 // 8 * 2 + 6 * 128 * 128 * 4)),
    # MiniMax-M2.5: 62 full-attention layers of 8 KV heads x head_dim 128 (no linear attention in M2); tp 8: 1 head.
    "minimax-m2.5": ({"full": 62}, 62 * 2 * 8 * 128 * 2, 62 * 2 * 1 * 128 * 2, 0, 0),
    # MiniMax-M2.7: the M2.5 geometry again (attn_type_list all 1 = softmax): 62 full-attention layers of 8 KV heads
    # x head_dim 128; tp 8: 1 head.
    "minimax-m2.7": ({"full": 62}, 62 * 2 * 8 * 128 * 2, 62 * 2 * 1 * 128 * 2, 0, 0),
    # Qwen3.5-122B-A10B: layer_types put full_attention on every 4th of 48 layers: 12 full layers of 2 KV heads x
    # head_dim 256; 36 Gated DeltaNet layers (gated_delta_net_state_shape): conv (4 - 1) x (2 x 16 key heads x 128 +
    # 64 value heads x 128 = 12,288) in bf16, ssm 64 value heads x 128 x 128 in float32 (mamba_ssm_dtype, as for the
    # 27B above). tp 8: 2 // 8 -> 1 KV head; conv 36,864 / 8 x 2 B, ssm 8 heads x 128 x 128 x 4 B.
    "qwen3.5-122b-a10b": ({"full": 12, "state": 36}, 12 * 2 * 2 * 256 * 2, 12 * 2 * 1 * 256 * 2,
                          36 * (3 * 12288 * 2 + 64 * 128 * 128 * 4), 36 * (3 * 12288 // 8 * 2 + 8 * 128 * 128 * 4)),
    # Qwen3.5-35B-A3B: 40 layers, 10 full (2 KV heads x 256) and 30 Gated DeltaNet of 16 key heads and 32 value
    # heads: conv 3 x (2 x 16 x 128 + 32 x 128 = 8,192) bf16, ssm 32 x 128 x 128 float32. tp 8: conv / 8, ssm 4 heads.
    "qwen3.5-35b-a3b": ({"full": 10, "state": 30}, 10 * 2 * 2 * 256 * 2, 10 * 2 * 1 * 256 * 2,
                        30 * (3 * 8192 * 2 + 32 * 128 * 128 * 4), 30 * (3 * 8192 // 8 * 2 + 4 * 128 * 128 * 4)),
    # AI21-Jamba-1.5-Mini: 32 layers, attn_layer_period 8 / offset 4 -> attention on 4, 12, 20, 28: 4 layers of
    # 8 KV heads x 128 (4096 / 32 heads). 28 Mamba-1 layers (mamba1_state_shape), intermediate mamba_expand 2 x
    # 4096 = 8192: conv 8192 x (4 - 1), ssm 8192 x d_state 16, bf16. tp 8: 1 KV head; intermediate 8192 / 8.
    "ai21-jamba-1.5-mini": ({"full": 4, "state": 28}, 4 * 2 * 8 * 128 * 2, 4 * 2 * 1 * 128 * 2,
                            28 * (8192 * 3 + 8192 * 16) * 2, 28 * (1024 * 3 + 1024 * 16) * 2),
    # falcon-mamba-7b: pure Mamba-1, 64 layers, no attention; intermediate_size 8192, state_size 16, conv_kernel 4:
    # conv 8192 x 3 + ssm 8192 x 16 per layer, bf16. tp 8: 1024 channels per rank.
    "falcon-mamba-7b": ({"state": 64}, 0, 0, 64 * (8192 * 3 + 8192 * 16) * 2, 64 * (1024 * 3 + 1024 * 16) * 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bundled_entry_caches_exactly(name):
    kind_counts, kv1, kv8, state1, state8 = CASES[name]
    assert kinds(name) == kind_counts
    assert profile(name, 1).growth_bytes_per_token() == kv1
    assert profile(name, 8).growth_bytes_per_token() == kv8
    assert profile(name, 1).sequence_bytes(0, paged=False) == state1
    assert profile(name, 8).sequence_bytes(0, paged=False) == state8


def test_jamba_mini_parameters_match_its_model_card():
    # huggingface.co/ai21labs/AI21-Jamba-1.5-Mini model card: "12B active / 52B total" parameters
    params = find_in_catalog("ai21-jamba-1.5-mini").params
    assert (round(params.total / 1e9), round(params.active / 1e9)) == (52, 12)


def test_falcon_mamba_parameters_match_its_model_card():
    # huggingface.co/tiiuae/falcon-mamba-7b model card: "Model size 7.27B params"
    assert round(find_in_catalog("falcon-mamba-7b").params.total / 1e7) == 727


@pytest.mark.parametrize("name, total, active", [
    # the model cards' names: 122B total / A10B active, 35B total / A3B active, read as the language model's;
    # the vision tower (kvplan.readers.towers.vision, tests/test_towers.py) is counted apart and is under half a billion
    ("qwen3.5-122b-a10b", 122, 10),
    ("qwen3.5-35b-a3b", 35, 3),
])
def test_qwen35_moe_parameters_match_their_names(name, total, active):
    params = find_in_catalog(name).params
    assert 0.4e9 < params.vision < 0.5e9
    assert (round((params.total - params.vision) / 1e9), round(params.active / 1e9)) == (total, active)


def test_glm51_with_its_mtp_layer_matches_nvidias_model_card():
    # docs.api.nvidia.com/nim/reference/z-ai-glm5.1: "Number of model parameters: 754B", which counts the checkpoint's
    # multi-token-prediction layer (model.layers.78) beside the 78 main layers
    spec = find_in_catalog("glm-5.1")
    assert round((spec.params.total + spec.mtp_params.total) / 1e9) == 754


def test_nemotron_3_ultra_parameters_match_transformers_and_its_name():
    # transformers 5.24.0's NemotronHForCausalLM built on the meta device from this config.json (latent MoE,
    # moe_latent_size 2048): 549,308,968,960 parameters, "550B" in its name
    assert find_in_catalog("nemotron-3-ultra").params.total == 549_308_968_960


def _nemotron_ultra_config(**changes) -> dict:
    from pathlib import Path

    path = (Path(__file__).resolve().parents[1] / "scripts" / "catalog_extra"
            / "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json")
    out = {**json.loads(path.read_text()), **changes}
    return {k: v for k, v in out.items() if v is not None}


def test_nemotron_block_list_reads_as_the_pattern_it_stands_for():
    from kvplan.readers.configs import spec_from_config

    types = _nemotron_ultra_config()["layers_block_type"]
    # transformers' _list_to_pattern: mamba M, attention *, moe E, mlp -; the newer names read the same
    symbols = "".join({"mamba": "M", "attention": "*", "moe": "E", "mlp": "-"}[t] for t in types)
    newer = [{"mamba": "linear_attention", "attention": "full_attention"}.get(t, t) for t in types]
    listed, _ = spec_from_config(_nemotron_ultra_config(), "ultra")
    as_pattern, _ = spec_from_config(_nemotron_ultra_config(layers_block_type=None, hybrid_override_pattern=symbols,
                                                            num_hidden_layers=len(symbols)), "ultra")
    renamed, _ = spec_from_config(_nemotron_ultra_config(layers_block_type=None, layer_types=newer), "ultra")
    # Nemotron 3.5 Lightning's form: the list and a num_hidden_layers that agrees (read as all-attention before)
    counted, _ = spec_from_config(_nemotron_ultra_config(num_hidden_layers=108), "ultra")
    assert listed.layers == as_pattern.layers == renamed.layers == counted.layers
    assert listed.params == as_pattern.params == renamed.params == counted.params
    assert [i for i, la in enumerate(listed.layers) if la.kind == "full"] == [7, 14, 23, 32, 39, 48, 57, 64, 73, 82,
                                                                             89, 98]


def test_validate_cuts_a_nemotron_block_list_to_the_layers_it_builds():
    from kvplan.validate.transformers_backend import reduced_config

    # transformers 5 takes the list's length as the layer count, so a reduced build must cut the list itself
    full = _nemotron_ultra_config()
    cut = reduced_config(full, 8, shrink=False)
    assert cut["layers_block_type"] == full["layers_block_type"][:8] and cut["num_hidden_layers"] == 8


@pytest.mark.parametrize("changes, needle", [
    ({"layers_block_type": None}, "needs hybrid_override_pattern or layers_block_type"),
    ({"num_hidden_layers": 52}, "num_hidden_layers is 52 but layers_block_type lists 108"),
    ({"hybrid_override_pattern": "M" * 108}, "describe different layers"),
    ({"layers_block_type": ["mamba", "attention", "sliding"]}, "unknown entry 'sliding'"),
    ({"layers_block_type": "MEM*"}, "must be a list"),
])
def test_nemotron_block_lists_kvplan_cannot_read_are_refused(changes, needle):
    from kvplan.readers.configs import spec_from_config
    from kvplan.core.errors import KvplanError

    with pytest.raises(KvplanError, match=needle):
        spec_from_config(_nemotron_ultra_config(**changes), "ultra")


def test_local_layers_hold_only_their_window():
    # MiMo at 1,024 tokens: 9 full layers x 2,560 B x 1,024 + 39 sliding x 5,120 B x 128 (window)
    assert profile("mimo-v2-flash").sequence_bytes(1024, paged=False) == 9 * 2560 * 1024 + 39 * 5120 * 128
    # Gemma 4 26B-A4B at 8,192: 5 full x 4,096 B x 8,192 + 25 sliding x (2 x 8 x 256 x 2 = 8,192 B) x 1,024
    assert profile("gemma-4-26b-a4b").sequence_bytes(8192, paged=False) == 5 * 4096 * 8192 + 25 * 8192 * 1024


def test_dsa_fp8_cache_is_fp8_ds_mla_and_index_cache_sharers_hold_no_keys():
    # fp8: 656 B latent (512 fp8 + 4 fp32 scales + 64 bf16 rope) per layer, + 132 B on indexer owners
    assert profile("deepseek-v3.2", 8, FP8).growth_bytes_per_token() == 61 * (656 + 132)
    assert profile("glm-5.2", 8, FP8).growth_bytes_per_token() == 78 * 656 + 21 * 132


@pytest.mark.parametrize("name, published", [
    ("mimo-v2-flash", 309e9),  # model card: 309B total parameters
    ("glm-5", 744e9),  # model card: 744B parameters
    ("glm-5.1", 744e9),  # docs.clore.ai's GLM-5.1 guide: 744B total (the main layers, as GLM-5's card counts)
    ("qwen3-coder-480b-a35b-instruct", 480e9),  # 480B-A35B
    ("minimax-m2.7", 229e9),  # the MiniMax-M2 architecture's "229 billion" total (apxml.com/zh/models/minimax-m2)
])
def test_parameter_counts_match_the_model_cards(name, published):
    assert float(f"{find_in_catalog(name).params.total:.3g}") == published


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_on_h200s_works_offline(name, kvplan_home, monkeypatch):
    from typer.testing import CliRunner

    from kvplan.cli import app

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # GLM-5's 744B and Nemotron 3 Ultra's 549B bf16 weights (1.49 and 1.10 TB) need two nodes of 8 H200s
    pp = "2" if name.startswith(("glm-5", "nemotron-3-ultra")) else "1"
    # falcon-mamba-7b's config has no max_position_embeddings: vLLM's default max_model_len 2048 is its limit
    ctx = "2k" if name == "falcon-mamba-7b" else "8k"
    r = CliRunner().invoke(app, ["fit", name, "--gpu", "h200", "--gpus", str(8 * int(pp)), "--tp", "8", "--pp", pp,
                                 "--ctx", ctx, "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    # over all GPUs: the 8 tensor-parallel ranks each hold their share of every layer (pipeline stages split layers)
    assert plan["fits"] and plan["kv_bytes_per_token"] == 8 * CASES[name][2]


def test_vllm_sizes_mimo_sliding_values_at_their_own_width(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "mimo-v2-flash", "--gpu", "h200", "--gpus", "8", "--tp", "8", "--ctx", "32k",
                                 "--engine", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    kinds_ = {k["kind"]: k for k in json.loads(r.stdout)["layer_kinds"]}
    # full layers grow 9 x 8 ranks x 1 head (4 // 8 -> 1, replicated) x (192 + 128) x 2 B per token
    assert kinds_["full"]["kv_bytes_per_token"] == 9 * 8 * 320 * 2
    assert kinds_["full"]["bytes_per_sequence"] == 9 * 8 * 320 * 2 * 32768
    # sliding layers hold what vLLM's SlidingWindowSpec.max_memory_usage_bytes admits a request with:
    # (cdiv(window 128 - 1 + max_num_batched_tokens 16384, block 16) + 1) x 16 = 16,528 tokens, each
    # 39 x 8 ranks x 1 head (8 // 8) x (K 192 + V 128) x 2 B: values at 128, not 192
    assert kinds_["sliding"]["bytes_per_sequence"] == 39 * 8 * 320 * 2 * 16528


def test_mimo_sliding_k_and_v_widths_match_an_sglang_log():
    # tests/fixtures/logs/corpus/sglang-18039-mimo-v2-flash-tp4.log (sgl-project/sglang#18039, tp 4):
    # "KV Cache is allocated. #tokens: 300288, K size: 8.38 GB, V size: 5.59 GB" (GB = 2^30 B there).
    # 39 sliding layers x 8 // 4 = 2 heads on a rank: K 192 and V 128 values of 2 B per head and token, over
    # the pool's 300,288 tokens + one page of 64 (SGLang's MHATokenToKVPool buffers hold size + page_size).
    layer = next(la for la in find_in_catalog("mimo-v2-flash").layers if la.kind == "sliding")
    assert layer.elements_per_token(4) == 2 * (192 + 128)
    k = 39 * (300288 + 64) * 2 * layer.head_dim * 2
    v = 39 * (300288 + 64) * 2 * layer.v_head_dim * 2
    assert (round(k / 2**30, 2), round(v / 2**30, 2)) == (8.38, 5.59)


def _mimo_config(**changes) -> dict:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "catalog_extra" / "XiaomiMiMo__MiMo-V2-Flash.json"
    return {**json.loads(path.read_text()), **changes}


@pytest.mark.parametrize("changes, needle", [
    ({"hybrid_layer_pattern": [0, 1] * 10}, "hybrid_layer_pattern"),
    ({"hybrid_layer_pattern": "01" * 24}, "hybrid_layer_pattern"),
    ({"moe_layer_freq": [0, 2] * 24}, "moe_layer_freq"),
    ({"swa_num_key_value_heads": 7}, "swa_num_key_value_heads"),
    ({"n_shared_experts": 1}, "shared experts"),
])
def test_mimo_layouts_vllm_does_not_build_are_refused(changes, needle):
    from kvplan.readers.configs import spec_from_config
    from kvplan.core.errors import KvplanError

    with pytest.raises(KvplanError, match=needle):
        spec_from_config(_mimo_config(**changes), "mimo")


def test_mimo_integer_moe_layer_freq_is_dense_as_vllm_reads_it():
    from kvplan.readers.configs import spec_from_config

    # vLLM's MiMoV2FlashDecoderLayer.is_moe_layer is False for an int moe_layer_freq: 48 dense MLPs of
    # 3 x 4096 x 16384, no experts
    spec, _ = spec_from_config(_mimo_config(moe_layer_freq=1), "mimo-dense")
    assert spec.params.experts == 0 and spec.params.mlp == 48 * 3 * 4096 * 16384


def test_kimi_k25_is_planned_as_its_int4_checkpoint_not_bf16():
    # Kimi-K2.5's config.json: compressed-tensors, int4 symmetric group 32, ignore lm_head, self_attn, shared_experts
    # and the dense MLP (scripts/catalog_extra/SOURCES.md). By hand, bytes:
    #   routed experts 60 x 384 x 3 x 7168 x 2048 = 1,014,686,023,680 weights: x 0.5 B packed + a bf16 scale per 32
    #     (x 2 / 32) = 507,343,011,840 + 63,417,876,480                                         = 570,760,888,320
    #   kept in bf16: attention 61 x (q_a 7168 x 1536 + q_b 1536 x 64 x 192 + kv_a 7168 x 576 + kv_b 512 x 64 x 256
    #     + o 64 x 128 x 7168 = 101,122,048) = 6,168,444,928; layer 0's MLP 3 x 7168 x 18432 = 396,361,728; shared
    #     experts 60 x 3 x 7168 x 2048 = 2,642,411,520
    #     + embedding and LM head 2 x 163,840 x 7,168 + router 60 x 384 x 7,168 (+ its bias) + norms
    #     + the MoonViT tower and projector 471,143,920, all x 2 B
    # The checkpoint's tensor listing sums to 554.27 GiB (the public report SOURCES.md cites; VentureBeat: 595 GB).
    spec = find_in_catalog("kimi-k2.5")
    q = spec.quantization
    assert (q.method, q.group_size, q.symmetric) == ("int4", 32, True)
    assert dict(q.kept) == {"attention": 6_168_444_928, "mlp": 396_361_728, "shared_experts": 2_642_411_520}
    wb = weight_bytes(spec)
    assert wb.experts == 570_760_888_320
    assert round(wb.total / 2**30, 2) == 554.27 and round(wb.total / 1e9) == 595
