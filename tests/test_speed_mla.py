"""MLA's prefill attention at the decompressed width, its decode at the absorbed one
(kvplan.speed.shape.attention_flops).

The engines run MLA two ways (vllm-project/vllm@00a817ad:vllm/v1/attention/backends/mla/common.py, module docstring):
decode "data-movement friendly", MQA over the cached latent with the queries absorbed through W_UK, QK head dim
Lkv + R = 512 + 64 and V head dim Lkv = 512; prefill "compute friendly", MHA over K and V decompressed by kv_b_proj,
QK head dim P + R = 128 + 64 and V head dim V = 128, the cached context decompressed again (kv_c @ W_UK, kv_c @ W_UV)
for each prefill step that attends to it (_compute_prefill_context). SGLang's extend without speculation runs
MHA_ONE_SHOT / MHA_CHUNKED_KV (sgl-project/sglang@0a8dcfa9:python/sglang/srt/models/deepseek_common/
attention_backend_handler.py) and TensorRT-LLM's context phase MHA (NVIDIA/TensorRT-LLM@00547a25:tensorrt_llm/_torch/
modules/attention.py, MLA.forward_context); llama.cpp's deepseek2 graph absorbs for every batch
(ggml-org/llama.cpp@07bede6a:src/models/deepseek2.cpp, "MLA with the absorption optimization converts into MQA").

DeepSeek-V3's config (deepseek-ai/DeepSeek-V3 config.json, ../shared/configs): 61 layers, 128 heads, kv_lora_rank 512,
qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128. At tp 8 a rank runs 128 / 8 = 16 heads.
"""

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import FullAttention, MLALatent
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import StepModel, coefficients, decode_features, prefill_features, priced
from kvplan.speed.shape import attention_flops, shape_for
from kvplan.speed.terms import TERMS, Shape, features

H200 = find_gpu("h200-sxm")
GEMM, ATTN = TERMS.index("gemm"), TERMS.index("attn")
V3_LAYER = MLALatent(512, 64, qk_nope_head_dim=128, v_head_dim=128)


def test_deepseek_v3_prefill_and_decode_flops_a_pair_at_tp_8():
    # decode, absorbed: QK over 512 + 64 and PV over the latent, priced as 4 x heads x (latent + rope) as before:
    #   4 x 16 x 576 = 36,864 FLOPs a pair a layer, x 61 = 2,248,704
    # prefill, decompressed MHA: 2 x 16 x (128 + 64) for QK^T + 2 x 16 x 128 for PV = 6,144 + 4,096 = 10,240 a layer,
    #   x 61 = 624,640 (3.6 x fewer)
    # kv_b_proj on a cached token a prefill step attends to: 2 x 512 x 16 x (128 + 128) = 4,194,304 a layer,
    #   x 61 = 255,852,544
    decode, prefill, capped, decompress = attention_flops([V3_LAYER] * 61, 128, 8)
    assert decode == 2_248_704 and prefill == 624_640 and decompress == 255_852_544 and capped == ()
    assert decode / prefill == pytest.approx(3.6)


def test_the_catalog_reads_the_decompressed_widths_from_each_config():
    # DeepSeek-V3 / R1, Kimi-K2.5: qk_nope 128, v 128; GLM-5 (zai-org/GLM-5 config.json, scripts/catalog_extra): 192,
    # 256
    for name, nope, v in (("deepseek-v3", 128, 128), ("deepseek-r1", 128, 128), ("kimi-k2.5", 128, 128),
                          ("glm-5", 192, 256), ("deepseek-v3.2", 128, 128)):
        layer = next(x for x in find_in_catalog(name).layers if x.elements_per_token())
        assert (layer.qk_nope_head_dim, layer.v_head_dim) == (nope, v), name
    s = shape_for(find_in_catalog("deepseek-v3"), H200, tp=8)
    assert (s.attn_flops_per_pair, s.attn_prefill_flops_per_pair, s.decompress_flops) \
        == (2_248_704, 624_640, 255_852_544)


def test_what_keeps_one_width():
    # llama.cpp absorbs in prefill too; a DSA layer with top-k keeps the latent's MQA form in prefill (its sparse
    # kernels, DeepSeek-V3.2's report); an MLA layer whose config gives no widths; a non-MLA layer, even with a
    # narrower V (MiMo-V2-Flash's 192 / 128): 4 x 16 x 192 = 12,288 either way
    s = shape_for(find_in_catalog("deepseek-v3"), H200, tp=8, engine="llama.cpp")
    assert s.attn_prefill_flops_per_pair == s.attn_flops_per_pair == 2_248_704 and s.decompress_flops == 0
    v32 = shape_for(find_in_catalog("deepseek-v3.2"), H200, tp=8)
    assert v32.attn_prefill_flops_per_pair == v32.attn_flops_per_pair and v32.decompress_flops == 0
    assert attention_flops([MLALatent(512, 64)], 128, 8)[:2] == (36_864, 36_864)
    assert attention_flops([FullAttention(4, 192, 128)], 128, 8)[:2] == (12_288, 12_288)


def test_a_prefill_prices_its_pairs_at_the_prefill_width_and_decompresses_its_cached_chunks():
    s = Shape(dense_bytes=0, attn_flops_per_pair=2_248_704, attn_prefill_flops_per_pair=624_640,
              decompress_flops=255_852_544, flops_per_token=1.0, gemm_rate=1e15, bf16_rate=1e15)
    # 20,000 tokens in chunks of 8,192: n = 3 steps of 20,000 / 3 tokens; pairs 20,000 x 20,001 / 2 = 200,010,000,
    # all a prefill query's: 200,010,000 x 624,640 / 1e15 s; the chunks attend to 0, 6,666.7 and 13,333.3 cached
    # tokens, 3 x 0 + 20,000 x (3 - 1) / 2 = 20,000 decompressed: (20,000 x 1 + 20,000 x 255,852,544) / 1e15 s
    f = prefill_features(s, 20_000)
    assert f[ATTN] == pytest.approx(200_010_000 * 624_640 / 1e15)
    assert f[GEMM] == pytest.approx((20_000 + 20_000 * 255_852_544) / 1e15)
    # after 1,000 cached tokens, one chunk: 1,000 decompressed once
    assert prefill_features(s, 4_000, depth=1_000)[GEMM] == pytest.approx((4_000 + 1_000 * 255_852_544) / 1e15)
    # a decode step of 4 sequences at 100 cached: 4 x 101 pairs at the decode width, nothing decompressed
    f = decode_features(s, 4, 100)
    assert f[ATTN] == pytest.approx(404 * 2_248_704 / 1e15) and f[GEMM] == pytest.approx(4 / 1e15)


def test_the_simulator_step_model_prices_a_mixed_step_as_the_terms_do():
    s = shape_for(find_in_catalog("deepseek-v3"), H200, tp=8)
    sm = StepModel(s, coefficients("vllm"))
    # 8 decodes at 1,000 cached each and one 1,024-token chunk after 2,048 cached tokens
    pp, pc = 1_024 * (2_048 + 1_025 / 2), 2_048
    args = (1_032, 9, 8_000 + 2_048, 8_008 + pp)
    want = priced(sm.coef, features(s, *args, request=0, prefill_pairs=pp, prefill_context=pc))
    assert sm.step(*args, 0, prefill_pairs=pp, prefill_context=pc) == pytest.approx(want, rel=1e-12)
    # the prefill's share is cheaper than at the decode width, by the attention coefficient's share of 3.6x fewer FLOPs
    assert sm.step(*args, 0, prefill_pairs=pp) < sm.step(*args, 0)


def test_kimi_k25_int4_decode_on_h200_at_tp_8_prices_both_bytes_and_flops():
    # moonshotai/Kimi-K2.5 config.json (its text_config): 61 layers, 64 heads, kv_lora_rank 512, qk_rope_head_dim 64;
    # at tp 8 a rank runs 64 / 8 = 8 heads. Decode, absorbed: 4 x 8 x (512 + 64) = 18,432 FLOPs a pair a layer,
    # x 61 = 1,124,352; the latent each rank caches whole: 61 x (512 + 64) x 2 B = 70,272 B a token.
    # Its compressed-tensors W4A16 experts (int4, group 32) run on Marlin's fused MoE with bf16 activations on CUDA
    # (sglang 0.5.9 wheel, srt/layers/quantization/compressed_tensors/compressed_tensors.py L671-685;
    # schemes/compressed_tensors_wNa16_moe.py L387 fused_marlin_moe), so the GEMM and grouped terms run at the bf16
    # rate (grouped_rate 0: the GEMM rate), not an fp8 one
    s = shape_for(find_in_catalog("kimi-k2.5"), H200, tp=8, weight_dtype="int4", engine="sglang")
    assert s.attn_flops_per_pair == 1_124_352 and s.kv_bytes_per_token == 70_272
    assert s.gemm_rate == s.bf16_rate and s.grouped_rate == 0.0
