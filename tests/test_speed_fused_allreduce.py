"""TensorRT-LLM's GEMM + AllReduce fusion (gemm_allreduce_plugin): the tensor-parallel all-reduce's bandwidth term."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.speed.fit import Built, fused_allreduce
from kvplan.speed.model import StepModel, priced
from kvplan.speed.terms import TERMS, Shape, features
from conftest import speed_cases

COMM, LATENCY = TERMS.index("comm"), TERMS.index("latency")
BASE = dict(dense_bytes=0, layers=126, hidden=16384, tp=8, bandwidth=4.8e12, link_bandwidth=450e9, link_latency_s=10e-6)


def test_fused_allreduce_drops_the_ring_bandwidth_and_keeps_the_calls():
    # Llama-3.1-405B's shapes at tp 8 (126 layers, hidden 16,384) over NVLink 4 (450 GB/s a direction): one step of
    # 2,560 tokens all-reduces 2 x 126 layers, each ring moving 2 x 7/8 x 2,560 x 16,384 x 2 B = 146,800,640 B a rank,
    # so 252 x 146,800,640 / 450e9 = 0.0822 s (NCCL's ring: 2 (n - 1) / n of the bytes each way); 252 calls at the
    # per-call latency either way. The fused kernel reduces each output tile in the switch under the GEMM: no
    # bandwidth term (NVIDIA/TensorRT-LLM@42169182:cpp/tensorrt_llm/kernels/cutlass_kernels/allreduce_gemm/
    # communication/sm90_allreduce_nvls_warpspecialized.hpp, allreduce_in_switch).
    ring = features(Shape(**BASE), 2560, 1, 2560, 0)
    fused = features(Shape(**BASE, fused_allreduce=True), 2560, 1, 2560, 0)
    assert ring[COMM] == pytest.approx(252 * 146_800_640 / 450e9)
    assert fused[COMM] == 0.0
    assert fused[LATENCY] == ring[LATENCY] == pytest.approx(252 * 10e-6)


def test_mlperf_405b_engine_runs_read_the_fused_allreduce():
    # Every MLPerf v5.1 Llama-3.1-405B engine config in the corpus builds with 'gemm_allreduce_plugin': 'float16'
    # (mlcommons/inference_results_v5.1@965182b0:closed/NVIDIA/configs/B200-SXM-180GBx8/Server/llama3_1-405b.py,
    # Nebius's H200 and GB200 alike); their 70B and 8B configs do not.
    cases, _ = speed_cases()
    mlperf = [c for c in cases if c.source == "mlperf-inference-v5.1" and c.era == "trtllm-engine"]
    fused = {c.id for c in mlperf if fused_allreduce(c.flags)}
    assert len(fused) == 8 and all("405b" in i for i in fused)
    c = next(c for c in mlperf if c.id == "nebius-h200-sxm-141gbx8_trt-llama3_1-405b-server")
    b = Built(c, running)
    assert b.shape.fused_allreduce and not b.roof_shape.fused_allreduce  # the roofline knows no engine's kernels
    assert not fused_allreduce({"gemm_allreduce_plugin": "disable"}) and not fused_allreduce({})


def test_the_simulator_step_model_prices_a_fused_allreduce_as_the_terms_do():
    # the step model folds the ring into its per-token cost: a fused shape must leave it out there too (calls kept)
    coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 for t in TERMS)  # the step model adds those by itself
    for fused in (False, True):
        s = Shape(**BASE, fused_allreduce=fused)
        assert StepModel(s, coef).step(2560, 1, 2560, 0) == pytest.approx(priced(coef, features(s, 2560, 1, 2560, 0)))
