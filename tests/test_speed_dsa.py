"""DeepSeek Sparse Attention in the step terms: each query attends to at most index_topk cached tokens.

DeepSeek-V3.2's config (deepseek-ai/DeepSeek-V3.2 config.json, as bundled): 61 layers, kv_lora_rank 512,
qk_rope_head_dim 64, 128 heads, index_head_dim 128, index_n_heads 64, index_topk 2048. DeepSeek's V3.2 report: the
indexer scores every preceding token and the main attention runs over the top-k 2,048 it selects. Under an fp8 cache
vLLM's fp8_ds_mla latent is 512 fp8 values + 4 fp32 scales + 64 bf16 rope values = 656 B and the indexer key 128 fp8 +
one fp32 scale = 132 B (kvplan.model.layers.IndexedMLA cites the source). At tp 8 each rank holds 128 / 8 = 16 heads;
the indexer's heads are replicated on every rank.
"""

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import StepModel, coefficients, priced
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features

H200 = find_gpu("h200-sxm")
KV, ATTN = TERMS.index("kv"), TERMS.index("attn")


@pytest.fixture(scope="module")
def v32():
    return shape_for(find_in_catalog("deepseek-v3.2"), H200, tp=8, weight_dtype="fp8", kv_dtype="fp8")


def test_the_sparse_parts_of_a_dsa_rank(v32):
    # every layer caches 656 + 132 = 788 B a token: 61 x 788 = 48,068; the latent, 61 x 656 = 40,016, is read for at
    # most 2,048 tokens a sequence. Per query-key pair: the heads 4 x 16 x (512 + 64) x 61 = 2,248,704 FLOPs, at most
    # 2,048 pairs a query; the indexer 2 x 64 x 128 x 61 = 999,424 over every pair: 3,248,128 in all.
    assert v32.kv_bytes_per_token == 48_068
    assert v32.kv_topk == ((40_016, 2048),)
    assert v32.attn_topk == ((2_248_704.0, 2048),)
    assert v32.attn_flops_per_pair == 3_248_128


def test_a_long_decode_reads_the_latent_of_top_k_tokens_only(v32):
    # 16 sequences at 32,000 cached tokens each: 512,000 tokens of indexer keys and latents, less the latents of the
    # 512,000 - 16 x 2,048 = 479,232 tokens not selected: 48,068 x 512,000 - 40,016 x 479,232 = 24,610,816,000 -
    # 19,176,947,712 = 5,433,868,288 B. Pairs 16 x 32,001 = 512,016: the indexer's 999,424 x 512,016 + the heads'
    # 2,248,704 x (16 x 2,048 = 32,768) = 585,406,611,456 FLOPs.
    f = features(v32, 16, 16, 16 * 32_000, 16 * 32_001)
    assert f[KV] * v32.bandwidth == pytest.approx(5_433_868_288, rel=1e-12)
    assert f[ATTN] * v32.bf16_rate == pytest.approx(585_406_611_456, rel=1e-12)


def test_below_top_k_a_dsa_step_is_dense_mla(v32):
    # at 1,000 cached tokens a sequence every token is selected: all 48,068 B a token read, every pair at 3,248,128
    f = features(v32, 4, 4, 4_000, 4_004)
    assert f[KV] * v32.bandwidth == pytest.approx(48_068 * 4_000, rel=1e-12)
    assert f[ATTN] * v32.bf16_rate == pytest.approx(3_248_128 * 4_004, rel=1e-12)


def test_index_cache_layers_select_but_run_no_indexer():
    # GLM-5.2 (IndexCache): layers that reuse an earlier layer's top-k hold no indexer keys and run no indexer, yet
    # attend to the same 2,048 tokens; only the indexer layers' 2 x 32 x 128 FLOPs a pair are uncapped
    spec = find_in_catalog("glm-5.2")
    s = shape_for(spec, H200, tp=8, weight_dtype="fp8", kv_dtype="fp8")
    owners = sum(1 for layer in spec.layers if getattr(layer, "index_head_dim", 0))
    assert 0 < owners < spec.num_layers
    heads = sum(f for f, _ in s.attn_topk)
    assert s.attn_flops_per_pair - heads == pytest.approx(owners * 2 * 32 * 128)
    assert [k for _, k in s.kv_topk] == [2048]


def test_the_simulator_step_model_equals_the_terms_on_dsa(v32):
    sm = StepModel(v32, coefficients("vllm"))
    for tokens, seqs, ctx, pairs in ((4096, 2, 8192, 4096 * 6000.0), (16, 16, 512_000, 512_016), (4, 4, 4_000, 4_004)):
        want = priced(sm.coef, features(v32, tokens, seqs, ctx, pairs))
        assert sm.step(tokens, seqs, ctx, pairs) == pytest.approx(want, rel=1e-12)
    assert sm.decode(16)(512_000) == pytest.approx(sm.step(16, 16, 512_000, 512_016), rel=1e-12)


def test_the_roofline_simulator_reads_a_dsa_latent_for_top_k_tokens_too():
    # simulate --speed roofline's stage costs (kvplan.simulator.adapter) carry the same sparse parts: a decode step of
    # 16 sequences at 32,000 tokens reads 5,433,868,288 B of KV (above) on top of the weights, so it is shorter than
    # the dense count of 48,068 x 512,000 = 24,610,816,000 B by 19,176,947,712 B at the stage's bandwidth
    from dataclasses import replace

    from kvplan import api
    from kvplan.simulator.adapter import sim_model
    from kvplan.simulator.model import StepTimer

    spec = find_in_catalog("deepseek-v3.2")
    plan = api.plan("deepseek-v3.2", "h200", gpus=8, tp=8, context=40_000, kv_dtype="fp8")
    model = sim_model(plan, spec, H200, speed="roofline", max_model_len=40_000)
    (stage,) = model.stages
    assert stage.kv_topk == ((40_016, 2048),) and stage.attn_topk == ((2_248_704.0, 2048),)
    dense = replace(model, stages=(replace(stage, kv_topk=(), attn_topk=()),))
    step = StepTimer(model).decode_step(16)(512_000)
    saved = StepTimer(dense).decode_step(16)(512_000) - step
    assert saved == pytest.approx(19_176_947_712 / model.bandwidth_bytes_per_s, rel=1e-9)
