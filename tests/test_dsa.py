"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the MLA latent plus the indexer's key cache.

Expected bytes are vLLM's allocation written out from its source (v0.11.0 and later):
  * model_executor/models/deepseek_v2.py, Indexer.__init__: the indexer key cache is a
    DeepseekV32IndexerCache of head_dim = index_head_dim + index_head_dim // 128 * 4 = 128 + 4 = 132,
    dtype uint8 (128 fp8 keys + one fp32 scale), num_kv_heads 1: 132 B per token per layer, whatever
    the KV dtype, on every tp rank;
  * the latent: MLAAttentionSpec of 512 + 64 = 576 values, bf16 (auto) = 1152 B; an fp8 cache is
    turned into "fp8_ds_mla" (model_executor/models/config.py, DeepseekV32ForCausalLM) of 656 B:
    512 fp8 + 4 fp32 scales (16 B) + 64 bf16 rope values (128 B);
  * both are MLAAttentionSpec with block 64 (FlashMLA sparse), so vLLM puts a layer's latent and its
    indexer into one UniformTypeKVCacheSpecs group whose page is the sum of their pages
    (v1/kv_cache_interface.py UniformTypeKVCacheSpecs.page_size_bytes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import engine_figures, meta_param_count

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16, FP8, KV_DTYPES
from kvplan.core.errors import KvplanError
from kvplan.planning.profile import kv_profile

FIX = Path(__file__).parent / "fixtures" / "families" / "deepseek-v3.2-exp.json"
LAYERS = 61
PER_LAYER_BF16 = (512 + 64) * 2 + (128 + 128 // 128 * 4)  # 1152 + 132 = 1284
PER_LAYER_FP8 = (512 + 512 // 128 * 4 + 64 * 2) + 132  # 656 + 132 = 788


def config(**changes) -> dict:
    return {**json.loads(FIX.read_text()), **changes}


def growth(spec, tp: int, dtype) -> int:
    return kv_profile(spec.layers, tp, dtype, dtype, 1).growth_bytes_per_token()


def fit_json(tmp_path, cfg: dict, *args: str):
    from typer.testing import CliRunner

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return CliRunner().invoke(app, ["fit", str(path), "--gpu", "h200", "--gpus", "8", "--tp", "8", "--ctx", "32k",
                                    *args])


def test_v32_caches_the_latent_and_the_indexer_keys_on_every_layer_and_rank():
    spec, _ = spec_from_config(config(), "v32")
    assert len(spec.layers) == LAYERS and {layer.kind for layer in spec.layers} == {"mla"}
    assert growth(spec, 1, BF16) == LAYERS * PER_LAYER_BF16 == 78_324
    assert growth(spec, 8, BF16) == 78_324  # latent and indexer are both replicated across tp ranks
    assert growth(spec, 8, FP8) == LAYERS * PER_LAYER_FP8 == 48_068


def test_deepseek_v3_model_type_with_index_topk_is_v32_as_vllm_reads_it():
    # vLLM: is_v32 = hasattr(config, "index_topk"), whatever the model_type says
    spec, _ = spec_from_config(config(model_type="deepseek_v3"), "v3-with-indexer")
    assert growth(spec, 1, BF16) == 78_324


def test_indexer_weights_are_counted_and_replicated():
    v32, _ = spec_from_config(config(), "v32")
    v3, _ = spec_from_config({k: v for k, v in config(model_type="deepseek_v3").items()
                              if not k.startswith("index_")}, "v3")
    # per layer: wq_b 1536 x 64 x 128, wk 7168 x 128 (replicated, quantizable); k_norm LayerNorm 2 x 128 and
    # weights_proj 7168 x 64 (quant_config=None) in 16 bits
    linear = 1536 * 64 * 128 + 7168 * 128
    small = 2 * 128 + 7168 * 64
    assert v32.params.total - v3.params.total == LAYERS * (linear + small) == 851_524_864
    assert v32.params.replicated - v3.params.replicated == LAYERS * linear
    assert v32.params.other - v3.params.other == LAYERS * small


def test_vllm_groups_latent_and_indexer_in_one_page_of_64_tokens(kvplan_home, tmp_path):
    r = fit_json(tmp_path, config(), "--engine", "vllm", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    figures = engine_figures(out)
    assert figures["block (page) size"] == 64
    assert figures["bytes per block id"] == 64 * LAYERS * PER_LAYER_BF16  # one group: every layer's two pages
    assert out["kv_bytes_per_token"] == 8 * LAYERS * PER_LAYER_BF16  # all 8 ranks


def test_vllm_fp8_cache_is_fp8_ds_mla(kvplan_home, tmp_path):
    r = fit_json(tmp_path, config(), "--engine", "vllm", "--kv-dtype", "fp8", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 8 * LAYERS * PER_LAYER_FP8


@pytest.mark.parametrize("engine", ["trtllm", "llama.cpp", "transformers"])  # SGLang's pool: test_sglang_dsa.py
def test_engines_whose_indexer_allocation_is_unread_refuse(kvplan_home, tmp_path, engine):
    r = fit_json(tmp_path, config(), "--engine", engine)
    assert r.exit_code == 2
    assert "indexer key cache" in r.stderr and "Traceback" not in r.output


def test_a_quantized_block_cache_is_refused_for_the_latent():
    spec, _ = spec_from_config(config(), "v32")
    with pytest.raises(KvplanError, match="bf16/fp16 or fp8"):
        growth(spec, 1, KV_DTYPES["q8_0"])


@pytest.mark.parametrize("changes, needle", [
    ({"indexer_types": ["full", "shared"] * 40}, "indexer_types disagrees"),
    ({"index_topk_freq": 4, "indexer_types": ["full"] * 61}, "indexer_types disagrees"),
    ({"indexer_types": ["full", "partial"] * 40}, "full or shared"),
    ({"index_topk_pattern": "FSXS"}, "index_topk_pattern"),
    ({"index_topk_freq": 0}, "index_topk_freq"),
    ({"layer_types": ["full_attention"] * 61}, "indexed_attention"),
    ({"mlp_layer_types": {"a": 1}}, "mlp_layer_types"),  # not a list: was a TypeError (found by test_config_fuzz)
    ({"mlp_layer_types": 3}, "mlp_layer_types"),
    # dsa32: pooled indexer keys (SGLang 0.5.23 model_overrides/deepseek_v2.py L160-173, pages 64 x index_kpool)
    # and learnable sinks (bf16 forced from 0.5.20, overrides.py L491-546) were planned without them
    ({"index_kpool": 4}, "index_kpool = 4 pools"),
    ({"learnable_sink": True}, "learnable_sink changes"),
])
def test_unread_or_contradictory_indexer_layouts_are_refused_not_guessed(changes, needle):
    with pytest.raises(KvplanError, match=needle):
        spec_from_config(config(model_type="glm_moe_dsa", **changes), "glm-5.x")


def test_an_unpooled_or_sinkless_config_still_plans():
    # index_kpool 1 is one key a state (unpooled) and learnable_sink false is no sink: both read as the plain config
    plain = spec_from_config(config(), "v3.2")[0]
    same = spec_from_config(config(index_kpool=1, learnable_sink=False), "v3.2")[0]
    assert growth(same, 1, BF16) == growth(plain, 1, BF16) == LAYERS * PER_LAYER_BF16


def test_index_cache_layers_without_an_indexer_keep_only_the_latent():
    # vLLM deepseek_v2.py (DeepseekV2MLAAttention.__init__): layer i skips its indexer when
    # max(i - offset + 1, 0) % freq != 0. freq 4, offset 3 on 61 layers: 0, 1, 2 own one, then
    # 6, 10, ..., 58 ((58 - 6) / 4 + 1 = 14): 17 owners, 44 sharers.
    spec, _ = spec_from_config(config(index_topk_freq=4, index_skip_topk_offset=3), "index-cache")
    owners = [i for i, layer in enumerate(spec.layers) if layer.index_head_dim]
    assert owners == [0, 1, 2, *range(6, 61, 4)] and len(owners) == 17
    # every layer: latent 1152 B (bf16) or 656 B (fp8_ds_mla); the 17 owners add 132 B of indexer keys
    assert growth(spec, 1, BF16) == 61 * 1152 + 17 * 132 == 72_516
    assert growth(spec, 8, FP8) == 61 * 656 + 17 * 132 == 42_260
    # the default offset is 2 (vLLM's getattr default): owners 0, 1, then 5, 9, ..., 57 -> 2 + 14 = 16
    spec, _ = spec_from_config(config(index_topk_freq=4), "index-cache-2")
    assert sum(1 for layer in spec.layers if layer.index_head_dim) == 16
    # a pattern: "S" skips; layers past its end run their indexer (58 of 61 here)
    spec, _ = spec_from_config(config(index_topk_pattern="FSSFS"), "pattern")
    assert [bool(layer.index_head_dim) for layer in spec.layers[:6]] == [True, False, False, True, False, True]
    assert growth(spec, 1, BF16) == 61 * 1152 + 58 * 132


def test_index_cache_sharers_have_no_indexer_weights():
    full, _ = spec_from_config(config(), "all")
    shared, _ = spec_from_config(config(index_topk_freq=4, index_skip_topk_offset=3), "some")
    # 44 layers without wq_b (1536 x 64 x 128), wk (7168 x 128), k_norm (2 x 128), weights_proj (7168 x 64)
    per_indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert full.params.total - shared.params.total == 44 * per_indexer


def test_index_cache_round_trips_through_the_catalog():
    from kvplan.sources.catalog import spec_from_dict, spec_to_dict

    spec, _ = spec_from_config(config(index_topk_freq=4, index_skip_topk_offset=3), "index-cache")
    again = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))), "index-cache")
    assert again.layers == spec.layers and growth(again, 1, BF16) == 72_516


def test_glm5_defaults_read_as_every_layer_indexed():
    # transformers GlmMoeDsaConfig defaults: 78 layers, kv_lora_rank 512, rope 64, index_head_dim 128
    cfg = {"model_type": "glm_moe_dsa", "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048,
           "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64, "n_shared_experts": 1,
           "n_routed_experts": 256, "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64,
           "v_head_dim": 256, "qk_nope_head_dim": 192, "num_experts_per_tok": 8, "vocab_size": 154880,
           "max_position_embeddings": 202752, "first_k_dense_replace": 3, "head_dim": 64,
           "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32,
           "layer_types": ["indexed_attention"] * 78, "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 75}
    spec, notices = spec_from_config(cfg, "glm5")
    assert growth(spec, 1, BF16) == 78 * PER_LAYER_BF16
    assert not any("head_dim" in note for note in spec.notes)


def test_other_families_with_an_indexer_are_still_refused():
    with pytest.raises(KvplanError, match="Sparse Attention indexer"):
        spec_from_config(config(model_type="kimi_k2"), "kimi-with-indexer")


def test_catalog_round_trip_keeps_the_indexer():
    from kvplan.sources.catalog import spec_from_dict, spec_to_dict

    spec, _ = spec_from_config(config(), "v32")
    again = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))), "v32")
    assert again.layers == spec.layers and growth(again, 1, BF16) == 78_324


def test_parameters_equal_transformers_meta_model():
    cfg = config()
    # the router's e_score_correction_bias is a buffer there, a tensor of the checkpoint (and of vLLM's gate)
    counted = meta_param_count(cfg, buffers=("e_score_correction_bias",))
    spec, _ = spec_from_config(cfg, "v32")
    assert spec.params.total == counted


def test_decode_context_parallel_is_refused_for_the_indexer(kvplan_home, tmp_path):
    r = fit_json(tmp_path, config(), "--dcp", "2")
    assert r.exit_code == 2 and "indexer key cache" in r.stderr
