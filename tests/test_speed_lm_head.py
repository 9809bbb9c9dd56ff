"""The LM head priced only at the positions whose logits an engine computes (kvplan.speed.terms.head_rows), by hand.

Llama-3.1-8B (meta-llama/Meta-Llama-3.1-8B config.json: vocab_size 128,256, hidden_size 4,096, tie_word_embeddings
false): its head is 2 x 128,256 x 4,096 = 1,050,673,152 FLOPs a sampled position; its other 2 x 6,979,588,096
= 13,959,176,192 FLOPs run for every token (tests/test_speed_ggml.py counts them). Llama-3.2-1B
(meta-llama/Llama-3.2-1B-Instruct config.json: vocab_size 128,256, hidden_size 2,048, tie_word_embeddings true): its
head multiplies by the embedding table, 2 x 128,256 x 2,048 = 525,336,576 FLOPs a sampled position, and reads the
table's 128,256 x 2,048 x 2 bytes = 525,336,576 bytes each step. The engines compute logits for one position a
scheduled sequence: vLLM's logits_indices = query_start_loc[1:] - 1 (vllm-project/vllm@4e179065:
vllm/v1/worker/gpu_model_runner.py), not for every prompt token. H100 SXM: bf16 measured 794.5 TFLOP/s (the terms'),
datasheet 989 (the roofline's).
"""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.hardware.gpus import find_gpu
from kvplan.model.weights import weight_bytes
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.model import StepTimer
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.model import StepModel, coefficients, priced
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features, roofline

H100 = find_gpu("h100-sxm")
LLAMA8, LLAMA1 = find_in_catalog("llama-3.1-8b"), find_in_catalog("llama-3.2-1b")
BODY8, HEAD8, HEAD1 = 13_959_176_192, 1_050_673_152, 525_336_576
GEMM = TERMS.index("gemm")
BF16 = 794.5e12


def test_a_prefill_computes_the_head_for_its_last_position_only():
    s = shape_for(LLAMA8, H100)
    assert (s.flops_per_token, s.head_flops) == (BODY8, HEAD8)
    # a 2,048-token prompt in one chunk: 2,048 x 13,959,176,192 + 1 x 1,050,673,152 = 2.8590e13 FLOPs / 794.5e12
    # = 35.985 ms; with the head on every token (2,048 x 15,009,849,344) 38.692 ms: 2,047 heads, 2.707 ms, saved
    gemm = speed.prefill_features(s, 2048)[GEMM]
    assert gemm == pytest.approx((2048 * BODY8 + HEAD8) / BF16)
    assert gemm == pytest.approx(35.985e-3, rel=1e-4)
    assert 2048 * 15_009_849_344 / BF16 - gemm == pytest.approx(2047 * HEAD8 / BF16)
    assert 2047 * HEAD8 / BF16 == pytest.approx(2.707e-3, rel=1e-3)


def test_a_chunked_prefill_computes_the_head_once_a_chunk():
    # 20,000 tokens in chunks of 8,192: 3 steps, each with the request's last position's logits (vLLM samples a
    # partial prefill's token and drops it): 20,000 x 13,959,176,192 + 3 x 1,050,673,152
    s = shape_for(LLAMA8, H100)
    assert speed.prefill_features(s, 20_000, chunk=8192)[GEMM] == pytest.approx((20_000 * BODY8 + 3 * HEAD8) / BF16)


def test_a_tied_head_is_charged_on_every_decode_step():
    s = shape_for(LLAMA1, H100)
    p, wb = LLAMA1.params, weight_bytes(LLAMA1)
    assert p.lm_head == 0 and s.head_flops == HEAD1  # tied, yet its GEMM runs: 2 x 128,256 x 2,048
    assert s.flops_per_token == 2 * (p.active - p.embedding)  # the rest, as before: the table is a lookup there
    # a decode step of 4 sequences: 4 x (body + head) FLOPs; before, 4 x body (the head was never charged)
    gemm = speed.decode_features(s, 4, 1000)[GEMM]
    assert gemm == pytest.approx(4 * (s.flops_per_token + HEAD1) / BF16)
    assert gemm - 4 * s.flops_per_token / BF16 == pytest.approx(4 * 525_336_576 / BF16)
    # and its weights term reads the table's vocabulary rows each step, 525,336,576 bytes in bf16
    assert s.dense_bytes == wb.sharded + wb.replicated + 525_336_576


def test_the_head_splits_its_vocabulary_over_tp():
    # vLLM's ParallelLMHead is a VocabParallelEmbedding: each rank multiplies by vocab / tp rows
    assert shape_for(LLAMA8, H100, tp=2).head_flops == HEAD8 / 2 == 525_336_576


def test_the_step_model_charges_the_head_once_a_sequence():
    for spec in (LLAMA1, LLAMA8):
        s = shape_for(spec, H100)
        sm = StepModel(s, coefficients("vllm"))
        for tokens, seqs, ctx, pairs in ((1, 1, 10, 11), (300, 20, 50_000, 1e6), (8192, 3, 0, 3e7)):
            want = priced(sm.coef, features(s, tokens, seqs, ctx, pairs))
            assert sm.step(tokens, seqs, ctx, pairs) == pytest.approx(want, rel=1e-12)
        assert sm.decode(8)(8_000) == pytest.approx(sm.step(8, 8, 8_000, 8_008))


def test_the_roofline_counts_the_head_per_sampled_position_and_stays_a_lower_bound():
    s = shape_for(LLAMA8, H100)
    # a 2,048-token prefill on the datasheet's 989 TFLOP/s: (2.8590e13 + 2,048 x 2,049 / 2 x 524,288) / 989e12; its
    # 15,009,849,344 weight bytes / 3.35e12 = 4.48 ms are less
    pairs = 2048 * 2049 / 2
    assert roofline(s, 2048, 1, 1024, pairs, prefill_pairs=pairs) == pytest.approx(
        (2048 * BODY8 + HEAD8 + pairs * 524_288) / 989e12)
    for spec in (LLAMA1, LLAMA8):
        s = shape_for(spec, H100)
        for engine in ("vllm", "sglang", "trtllm", "llama.cpp"):
            assert speed.prefill_seconds(s, engine, 4096) >= speed.prefill_seconds(s, engine, 4096, speed="roofline")
            for batch, ctx in ((1, 100), (256, 2000)):
                assert speed.decode_seconds(s, engine, batch, ctx) >= speed.decode_seconds(
                    s, engine, batch, ctx, speed="roofline") > 0


def test_the_simulators_roofline_charges_the_head_once_a_sequence():
    plan = api.plan("llama-3.2-1b", "h100", context=4096)
    model = sim_model(plan, LLAMA1, find_gpu("h100"), speed="roofline")
    (stage,) = model.stages
    p = LLAMA1.params
    assert stage.head_flops == HEAD1 and stage.flops_per_token == 2 * (p.active - p.embedding)
    timer = StepTimer(model)
    assert timer.decode_step(8)(8_000) == pytest.approx(timer.step(8, 8, 8_000, 8_008))
    # a compute-bound prefill of 3 sequences' 8,192 tokens: 8,192 x body + 3 heads over the bf16 datasheet rate
    fl = model.flops_per_s
    t = timer.step(8192, 3, 0, 0)
    assert t == pytest.approx(max(stage.dense_read_bytes / model.bandwidth_bytes_per_s,
                                  (8192 * stage.flops_per_token + 3 * HEAD1) / fl))
