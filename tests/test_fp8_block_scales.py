"""Block-FP8 scales counted tensor by tensor, one fp32 scale per 128 x 128 tile of each linear, as the engines
allocate them (kvplan.readers.block_scales), not per 128^2 of a role's pooled parameters.

Sources: DeepSeek's README_WEIGHTS.md (deepseek-ai/DeepSeek-V3-Base@afb92e1f, "FP8 Weight Documentation"): the FP8
weight file stores a float32 `weight_scale_inv` "for each weight block" of 128 x 128, beside each weight; vLLM 0.33.0
wheel `quantization/utils/fp8_utils.py` L1412-1425 (a linear's scale [cdiv(out, 128), cdiv(in, 128)], a merged
linear tiled over its summed output) and `quantization/fp8.py` L620-632 (experts' w13 [E, 2 x cdiv(I, 128),
cdiv(hidden, 128)], w2 [E, cdiv(hidden, 128), cdiv(I, 128)]). The expected counts are hand arithmetic from
DeepSeek-V3's config.json shapes (deepseek-ai/DeepSeek-V3, ../shared/configs/deepseek-ai__DeepSeek-V3.json).
"""

from __future__ import annotations

import json

from kvplan.model.weights import weight_bytes
from kvplan.model.weight_formats import block_linear_bytes, linear_bytes, scale_count
from kvplan.sources.catalog import find_in_catalog, spec_from_dict, spec_to_dict
from kvplan.sources.importer import build_spec

from conftest import shared_config

# DeepSeek-V3's config.json: hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64,
# v_head 128, 61 layers, first_k_dense_replace 3, intermediate 18432, moe_intermediate 2048, 256 routed + 1 shared
# expert, weight_block_size [128, 128]. Tiles (cdiv(rows, 128) x cdiv(cols, 128)) a layer:
#   fused q_a + kv_a_proj_with_mqa [1536 + 512 + 64 = 2112, 7168]: 17 x 56 =    952 (checkpoint: q_a 12 x 56 = 672
#                                                                                  + kv_a [576, 7168] 5 x 56 = 280)
#   q_b_proj  [128 x 192 = 24576, 1536]: 192 x 12 =  2,304
#   kv_b_proj [128 x 256 = 32768, 512]:  256 x 4  =  1,024
#   o_proj    [7168, 128 x 128 = 16384]:  56 x 128 = 7,168      attention: 11,448 a layer x 61 =    698,328
#   dense MLP: gate_up [36864, 7168] 288 x 56 = 16,128, down [7168, 18432] 56 x 144 = 8,064: 24,192 x 3 = 72,576
#   one expert: gate, up [2048, 7168] 16 x 56 = 896 each, down [7168, 2048] 56 x 16 = 896: 2,688;
#   (256 routed + 1 shared) x 2,688 = 690,816 a MoE layer x 58 = 40,067,328
# total 698,328 + 72,576 + 40,067,328 = 40,838,232 scales = 163,352,928 B
V3_SCALES = 40_838_232
# pooled, the replicated fused q_a + kv_a was 61 x 2112 x 7168 / 128^2 = 61 x 924 = 56,364 scales; tiled, 61 x 952 =
# 58,072: 1,708 more (kv_a's 576 rows are 4.5 tiles, 5 allocated), 6,832 B. Every other tensor is whole tiles.
V3_REPLICATED_TILES = 61 * 952


def test_deepseek_v3_scales_are_its_tensors_tiles():
    model = build_spec(shared_config("deepseek-ai__DeepSeek-V3"), "deepseek-ai/DeepSeek-V3", source="test")[0]
    q, p = model.quantization, model.params
    assert scale_count(q.block_shapes, q.group_size) == V3_SCALES
    assert not [n for n in q.notes if "block scales" in n]  # every quantized tensor's shape read
    wb = weight_bytes(model)
    # fp8 linears one byte each plus the scales; embedding, LM head, routers and norms in bf16
    assert wb.total == p.linear + 4 * V3_SCALES + 2 * (p.embedding + p.lm_head + p.router + p.other)
    assert wb.replicated == p.replicated + 4 * V3_REPLICATED_TILES + 2 * (p.router + p.other)
    pooled = linear_bytes(p.replicated, "fp8", 128) + 2 * (p.router + p.other)
    assert wb.replicated - pooled == 4 * (V3_REPLICATED_TILES - 61 * 924) == 6_832
    # the catalog's entry derives the same shapes where it is read (they are not stored in its JSON)
    bundled = find_in_catalog("deepseek-v3")
    assert bundled.quantization.block_shapes == q.block_shapes
    assert "block_shapes" not in spec_to_dict(bundled)["quantization"]
    assert spec_from_dict(spec_to_dict(bundled), "test").quantization.block_shapes == q.block_shapes


def test_parameters_the_shapes_do_not_hold_are_pooled():
    # an MTP module added for speculative decoding (more parameters than the shapes hold): the shapes' tiles plus
    # the rest pooled; fewer parameters than the shapes hold (a spec whose counts were replaced): pooled throughout
    q = find_in_catalog("deepseek-v3").quantization
    shapes = [s for s in q.block_shapes if s.part == "replicated"]
    held = sum(s.rows * s.cols * s.count for s in shapes)  # 61 x 2112 x 7168 = 923,467,776
    assert held == 923_467_776
    extra = 2112 * 7168  # one more fused q_a + kv_a (the MTP layer's): 924 pooled scales
    assert block_linear_bytes(held + extra, "fp8", 128, shapes) == held + extra + 4 * (V3_REPLICATED_TILES + 924)
    assert block_linear_bytes(held - 1, "fp8", 128, shapes) == linear_bytes(held - 1, "fp8", 128)
    cut = find_in_catalog("deepseek-v3").with_layers(4)
    assert weight_bytes(cut).replicated == linear_bytes(cut.params.replicated, "fp8", 128) + 2 * (
        cut.params.router + cut.params.other)


def test_an_engines_own_reading_stores_no_shapes_either():
    # an exclusion list SGLang reads by its own rules (Quantization.readings): each reading's shapes are derived again
    # where the entry is read (with_block_shapes), so the entry stores none of them
    config = shared_config("deepseek-ai__DeepSeek-V3")
    qc = dict(config["quantization_config"], modules_to_not_convert=["self_attn"])
    model = build_spec(dict(config, quantization_config=qc), "deepseek-ai/DeepSeek-V3", source="test")[0]
    assert model.quantization.readings
    stored = spec_to_dict(model)
    assert "block_shapes" not in json.dumps(stored)
    back = spec_from_dict(json.loads(json.dumps(stored)), "test").quantization.readings
    assert [r.block_shapes for _, r in back] == [r.block_shapes for _, r in model.quantization.readings]
