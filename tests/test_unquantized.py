"""Exclusion lists of quantization_config (modules_to_not_convert, ignore, ignored_layers): the modules they
name stay in the model dtype, as vLLM loads them (quantization/*.py get_quant_method -> is_layer_skipped ->
UnquantizedLinearMethod); a list kvplan cannot map is refused. Expected bytes are hand arithmetic from
the configs' shapes; the 405B figure is checked against vLLM's own log (vllm-project/vllm#6746)."""

from __future__ import annotations

import copy

import pytest
from conftest import shared_config

from kvplan.sources.catalog import find_in_catalog
from kvplan.core.errors import KvplanError
from kvplan.sources.importer import build_spec
from kvplan.model.weights import weight_bytes

GIB = 2**30

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, untied head.
# attention per layer = q 64x64 + k,v 2 x 64x32 + o 64x64 = 4096 + 4096 + 4096 = 12,288
# MLP per layer = gate, up, down 3 x 64x128 = 24,576; embedding = lm_head = 100 x 64 = 6,400
# norms = 2 layers x 2 x 64 + final 64 = 320
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _spec(qc: dict | None, base: dict = SMALL):
    config = copy.deepcopy(base)
    if qc is not None:
        config["quantization_config"] = qc
    return build_spec(config, "test/small", source="test")[0]


def test_llama_405b_fp8_keeps_attention_and_edge_mlps_in_bf16():
    # Meta's Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8): modules_to_not_convert lists lm_head, q/k/v/o_proj of
    # all 126 layers and gate/up/down_proj of layers 0 and 125 (scripts/catalog_extra/SOURCES.md).
    # hidden 16384, 128 heads x 128, 8 KV heads, MLP 53248, vocab 128256:
    #   attention per layer = 16384x16384 x 2 + 16384x1024 x 2 = 570,425,344 -> 126 x 2 B = 143,747,186,688
    #   MLP per layer = 3 x 16384x53248 = 2,617,245,696 -> 124 x 1 B + 2 x 2 B = 128 x 2,617,245,696
    #                 = 335,007,449,088
    #   embedding + lm_head = 2 x 128256x16384 x 2 B = 8,405,385,216; norms (126 x 2 + 1) x 16384 x 2 B = 8,290,304
    #   fbgemm_fp8's fp32 weight_scale per output channel of the 124 quantized MLPs (vLLM FBGEMMFp8LinearMethod,
    #   tests/test_fp8_channel_scales.py): 124 x (2 x 53,248 + 16,384) x 4 B = 60,948,480
    #   total = 487,229,259,776 B; per rank at tp 8 about 487,229,259,776 / 8 / 2^30 = 56.72 GiB
    model = find_in_catalog("llama-3.1-405b-instruct-fp8")
    w = weight_bytes(model)
    assert w.total == 143_747_186_688 + 335_007_449_088 + 8_405_385_216 + 8_290_304 + 60_948_480
    # vllm#6746 (vLLM 0.5.3, 8x H100, tp 8): "Loading model weights took 57.7520 GB" (GiB): within 2%
    # (the list ignored, kvplan said 47.8 GiB: -17%)
    assert abs(w.total / 8 / GIB - 57.752) / 57.752 < 0.02


def test_gpt_oss_list_is_the_same_rule_and_mxfp4_never_quantizes_linear_layers():
    # gpt-oss: modules_to_not_convert = self_attn (every layer), mlp.router, embed_tokens, lm_head. vLLM's
    # Mxfp4Config gives every linear layer UnquantizedLinearMethod, listed or not; only experts are MXFP4.
    listed = {"quant_method": "mxfp4",
              "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                  "model.embed_tokens", "lm_head"]}
    q = _spec(listed).quantization
    assert q.experts_only and q.kept == (("attention", 2 * 12_288),)
    bare = _spec({"quant_method": "mxfp4"}).quantization
    assert bare.experts_only and bare.kept == ()
    # both: attention + MLP in bf16 = (2 x 12,288 + 2 x 24,576) x 2 B; no experts to quantize
    assert weight_bytes(_spec(listed)).sharded == weight_bytes(_spec({"quant_method": "mxfp4"})).sharded == 147_456


def test_indexed_layer_and_projection_sets():
    # bitsandbytes int8 keeping the whole of layer 0: attention 12,288 + MLP 24,576 parameters in bf16
    q = _spec({"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["model.layers.0"]})
    assert dict(q.quantization.kept) == {"attention": 12_288, "mlp": 24_576}
    # sharded linear bytes: kept (12,288 + 24,576) x 2 B + the rest (12,288 + 24,576) x 1 B = 110,592
    assert weight_bytes(q).sharded == 110_592
    # fp8 ignored_layers naming q, k, v, o of layer 1 (a complete set): that layer's attention
    q = _spec({"quant_method": "fp8", "ignored_layers": [f"model.layers.1.self_attn.{p}_proj" for p in "qkvo"]})
    assert q.quantization.kept == (("attention", 12_288),)


def test_names_already_in_16_bits_change_nothing():
    # compressed-tensors ignore lists: lm_head, routers, vision towers are kept in 16 bits by kvplan already
    ct = {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$", "re:vision_tower.*",
                                                         "model.norm"],
          "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}
    assert _spec(ct).quantization.kept == ()


@pytest.mark.parametrize("entries, why", [
    (["model.layers.0.self_attn.q_proj"], "only q_proj"),  # a fused qkv_proj listed in part
    (["model.layers.0.foo_mixer_thing"], "cannot map"),
    (["model.layers.7.mlp"], "past the model's 2 layers"),
])
def test_lists_kvplan_cannot_map_are_refused(entries, why):
    with pytest.raises(KvplanError, match=why):
        _spec({"quant_method": "fp8", "ignored_layers": entries})


def test_indexed_attention_of_unlike_layers_is_refused():
    # Gemma 2 alternates sliding and full layers: one layer's attention is not a uniform share
    gemma = dict(SMALL, model_type="gemma2", architectures=["Gemma2ForCausalLM"], head_dim=16,
                 sliding_window=32, query_pre_attn_scalar=16, layer_types=["sliding_attention", "full_attention"])
    with pytest.raises(KvplanError, match="do not all hold the same attention"):
        _spec({"quant_method": "bitsandbytes", "load_in_8bit": True,
               "llm_int8_skip_modules": ["model.layers.0.self_attn"]}, gemma)
    # fp8 keeps a layer only where an entry is its full name (vLLM 0.33.0 is_layer_skipped, exact): the attention
    # module's own name keeps none of its projections, so nothing is kept and nothing refused
    assert _spec({"quant_method": "fp8", "ignored_layers": ["model.layers.0.self_attn"]}, gemma).quantization.kept == ()


def test_mla_attention_of_one_layer_with_its_replicated_down_projection():
    # DeepSeek-V2-Lite (hidden 2048, 16 heads, q_lora_rank null, kv_lora_rank 512, rope 64, nope 128, v 128) as an
    # fp8 checkpoint keeping layer 3's MLA projections in bf16. Per layer: q_proj 2048 x 16x192 = 6,291,456;
    # kv_a_proj_with_mqa 2048 x (512 + 64) = 1,179,648; kv_b_proj 512 x 16x256 = 2,097,152; o_proj 16x128 x 2048
    # = 4,194,304: 13,762,560 parameters, each 2 B instead of 1 B (the replicated down-projection among them)
    base = shared_config("deepseek-ai__DeepSeek-V2-Lite")
    plain = _spec({"quant_method": "fp8"}, base)
    names = [f"model.layers.3.self_attn.{p}" for p in ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")]
    kept = _spec({"quant_method": "fp8", "ignored_layers": names}, base)
    assert kept.quantization.kept == (("attention", 13_762_560),)
    assert weight_bytes(kept).total - weight_bytes(plain).total == 13_762_560
    assert weight_bytes(kept).replicated - weight_bytes(plain).replicated == 1_179_648
