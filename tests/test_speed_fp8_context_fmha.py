"""TensorRT-LLM's FP8 context FMHA (use_fp8_context_fmha): a prefill query's attention FLOPs at the GPU's FP8 rate."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.speed.fit import Built, fp8_context_fmha
from kvplan.speed.model import StepModel, priced
from kvplan.speed.terms import TERMS, Shape, features
from conftest import speed_cases

ATTN = TERMS.index("attn")
# Llama-3.1-405B at tp 8 (126 layers, 128 query heads of dim 128: 16 a rank): 4 x 16 x 128 x 126 = 1,032,192 FLOPs a
# query-key pair; H200 SXM's measured bf16 and fp8 matmul rates, 794.5 and 1,453.4 TFLOP/s
# (kvplan/hardware/profiles/h200-sxm.yaml, achieved_dense_flops)
BASE = dict(dense_bytes=0, attn_flops_per_pair=1_032_192.0, layers=126, hidden=16384, tp=8, bandwidth=4.8e12,
            bf16_rate=794.5e12, link_bandwidth=450e9, link_latency_s=10e-6)


def test_prefill_pairs_at_the_fp8_rate_decode_pairs_at_bf16():
    # One step: a fresh 2,048-token prompt chunk (2,048 x 2,049 / 2 = 2,098,176 causal pairs) beside one decode at
    # 5,000 cached tokens (5,000 pairs). bf16 throughout: (2,098,176 + 5,000) x 1,032,192 / 794.5e12
    # = 2.7259e-3 + 6.496e-6 s. With FP8 context FMHA the prompt's pairs run in e4m3
    # (NVIDIA/TensorRT-LLM@00dbe288d2a76e0ad79107e4ef0907d614744c89:cpp/tensorrt_llm/common/attentionOp.cpp,
    # AttentionOp::initialize: mFP8ContextFMHA -> fmhaParams.dataType DATA_TYPE_E4M3): 2,165,720,481,792 FLOPs
    # / 1,453.4e12 = 1.4901e-3 s, the decode pair's 6.496e-6 s unchanged (XQA reads the cache; no FP8 FMHA).
    pairs, prefill = 2_098_176 + 5_000, 2_098_176
    bf16 = features(Shape(**BASE), 2049, 2, 7048, pairs, prefill_pairs=prefill)
    fp8 = features(Shape(**BASE, prefill_attn_rate=1453.4e12), 2049, 2, 7048, pairs, prefill_pairs=prefill)
    assert bf16[ATTN] == pytest.approx(2.7258911e-3 + 6.4958590e-6, rel=1e-6)
    assert fp8[ATTN] == pytest.approx(1.4901063e-3 + 6.4958590e-6, rel=1e-6)
    assert [x for i, x in enumerate(fp8) if i != ATTN] == [x for i, x in enumerate(bf16) if i != ATTN]


def test_mlperf_v51_engine_runs_read_the_flag_as_built():
    # 30 of the corpus's 34 MLPerf v5.1 TensorRT-engine configs set 'use_fp8_context_fmha': 'enable' in their
    # trtllm_build_flags, the 4 Mixtral ones 'disable' (mlcommons/inference_results_v5.1@965182b0:closed/HPE/configs/
    # HPE_Cray_XD670_H200_SXM_141GBx8/Server/mixtral-8x7b.py). TensorRT-LLM's builder drops the flag with paged context
    # FMHA but no FP8 KV cache (NVIDIA/TensorRT-LLM@008b2b8d:tensorrt_llm/builder.py, build()): NVIDIA's B200
    # Llama-2-70B Interactive config sets no kv_cache_dtype checkpoint flag (its Server and Offline ones set fp8), so
    # 29 run it. v4.1's builder passes no such flag (closed/NVIDIA/code/llama2-70b/tensorrt/builder.py at
    # mlcommons/inference_results_v4.1@198fc467): none there.
    cases, _ = speed_cases()
    v51 = [c for c in cases if c.source == "mlperf-inference-v5.1" and c.era == "trtllm-engine"]
    v41 = [c for c in cases if c.source == "mlperf-inference-v4.1" and c.era == "trtllm-engine"]
    stated = [str(c.flags.get("use_fp8_context_fmha")) for c in v51]
    assert len(v51) == 34 and stated.count("enable") == 30 and stated.count("disable") == 4
    assert {c.id for c in v51 if stated[v51.index(c)] == "disable"} == {c.id for c in v51 if "mixtral" in c.id}
    kept = {c.id for c in v51 if fp8_context_fmha(c)}
    assert len(kept) == 29 and "nvidia-b200-sxm-180gbx8_trt-llama2-70b-99-interactive" not in kept
    assert not any(fp8_context_fmha(c) for c in v41)
    c = next(c for c in v51 if c.id == "nebius-h200-sxm-141gbx8_trt-llama3_1-405b-server")
    b = Built(c, running)
    assert b.shape.prefill_attn_rate == pytest.approx(1453.4e12) and not b.roof_shape.prefill_attn_rate
    assert not fp8_context_fmha(replace(c, weight_dtype="fp16")) and not fp8_context_fmha(replace(c, kv_dtype=None))


def test_the_simulator_step_model_prices_fp8_prefill_attention_as_the_terms_do():
    coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 for t in TERMS)  # the step model adds those by itself
    for rate in (0.0, 1453.4e12):
        s = Shape(**BASE, prefill_attn_rate=rate)
        step = StepModel(s, coef).step(2049, 2, 7048, 2_103_176, prefill_pairs=2_098_176)
        assert step == pytest.approx(priced(coef, features(s, 2049, 2, 7048, 2_103_176, prefill_pairs=2_098_176)))


def test_a_window_cap_takes_off_at_the_rate_it_priced_never_below_zero():
    # A sliding-window model (one cap: 1,032,192 FLOPs a pair, at most 128 keys a query, Shape.attn_topk) prefilling
    # 2,048 fresh tokens: 2,098,176 causal pairs, of which 2,048 x 128 = 262,144 within the window, 1,836,032 capped.
    # Priced at bf16: 262,144 x 1,032,192 / 794.5e12 = 3.4057e-4 s. With FP8 context FMHA every pair is a prefill
    # query's, so the pairs and their cap both at 1,453.4e12: 262,144 x 1,032,192 / 1,453.4e12 = 1.8617e-4 s. (Taking
    # the cap off at bf16 while pricing the pairs at fp8 would give 2.098e6 x 1.032e6 / 1.4534e15 - 1.836e6 x 1.032e6
    # / 7.945e14 = -8.95e-4 s.)
    pairs = 2_098_176
    for rate, want in ((0.0, 3.4057e-4), (1453.4e12, 1.8617e-4)):
        s = Shape(**BASE, attn_topk=((1_032_192.0, 128),), prefill_attn_rate=rate)
        got = features(s, 2048, 1, 0, pairs, prefill_pairs=pairs)[ATTN]
        assert got == pytest.approx(want, rel=1e-4)
        coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 for t in TERMS)
        step = StepModel(s, coef).step(2048, 1, 0, pairs, prefill_pairs=pairs)
        assert step == pytest.approx(priced(coef, features(s, 2048, 1, 0, pairs, prefill_pairs=pairs)))
