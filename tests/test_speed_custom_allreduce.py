"""vLLM's custom all-reduce on a fully connected fabric: its calls' latency flat in the ranks, below its size limit."""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import load_gpus
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import custom_allreduce_bytes
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, Shape, fabric_latency, features, link

LATENCY = TERMS.index("latency")
# Llama-3.1-70B's shapes at tp 8 (80 layers, hidden 8,192) on an HGX H100 board: the ring's latency at 8 ranks is
# NCCL's baseLat 6.6 us + 2 x 7 x hwLat 0.6 us = 15.0 us; the custom kernel's is the two-rank ring's, 6.6 + 2 x 0.6
# = 7.8 us; vLLM's limit 8,192 x 1,024 = 8,388,608 B (vllm-project/vllm@00d618aa custom_all_reduce.py `max_size`)
BASE = dict(dense_bytes=0, layers=80, hidden=8192, tp=8, bandwidth=3.35e12, link_bandwidth=450e9, link_latency_s=15e-6)
ONESHOT = dict(oneshot_latency_s=7.8e-6, oneshot_max_bytes=8_388_608)


def test_the_fabric_latency_is_the_two_rank_rings_whatever_the_ranks():
    gpus = load_gpus()
    h100 = gpus["h100-sxm"]  # NVSwitch, domain 8
    for n in (2, 4, 8):
        assert fabric_latency(h100, n) == pytest.approx(7.8e-6)
    assert link(h100, 8)[1] == pytest.approx(15.0e-6) and link(h100, 4)[1] == pytest.approx(10.2e-6)
    assert fabric_latency(h100, 1) == 0.0 and fabric_latency(h100, 16) == 0.0  # one GPU; past the NVSwitch domain
    assert fabric_latency(gpus["l4"], 4) == 0.0  # PCIe only: NCCL's ring (vLLM refuses > 2 PCIe-only GPUs)


def test_a_decode_call_below_the_limit_takes_the_custom_kernels_latency():
    # a 64-sequence decode step: each of 2 x 80 calls carries 64 x 8,192 x 2 B = 1,048,576 B < 8,388,608 B:
    # 160 x 7.8 us = 1.248 ms, where the ring priced 160 x 15 us = 2.4 ms; the bandwidth term is the ring's either way
    ring = features(Shape(**BASE), 64, 64, 64 * 1000, 64 * 1000)
    custom = features(Shape(**BASE, **ONESHOT), 64, 64, 64 * 1000, 64 * 1000)
    assert ring[LATENCY] == pytest.approx(2.4e-3) and custom[LATENCY] == pytest.approx(1.248e-3)
    assert custom[TERMS.index("comm")] == ring[TERMS.index("comm")]
    # a prefill step of 1,024 tokens: 1,024 x 8,192 x 2 = 16,777,216 B >= the limit: NCCL, 160 x 15 us = 2.4 ms;
    # 511 tokens (8,372,224 B) stay below it: 1.248 ms
    assert features(Shape(**BASE, **ONESHOT), 1024, 1, 1024, 0)[LATENCY] == pytest.approx(2.4e-3)
    assert features(Shape(**BASE, **ONESHOT), 511, 1, 511, 0)[LATENCY] == pytest.approx(1.248e-3)


def test_only_vllm_at_its_world_sizes_on_a_fully_connected_fabric_runs_it():
    # vLLM's _SUPPORTED_WORLD_SIZES [2, 4, 6, 8]; SGLang and TensorRT-LLM keep their own pricing
    assert custom_allreduce_bytes("vllm", 8) == 8_388_608 and custom_allreduce_bytes("vllm", 3) == 0
    assert custom_allreduce_bytes("sglang", 8) == 0 and custom_allreduce_bytes("trtllm", 8) == 0
    spec, gpus = find_in_catalog("llama-3.1-70b-instruct"), load_gpus()
    v = shape_for(spec, gpus["h100-sxm"], tp=8, engine="vllm")
    assert v.oneshot_latency_s == pytest.approx(7.8e-6) and v.oneshot_max_bytes == 8_388_608
    assert shape_for(spec, gpus["h100-sxm"], tp=8, engine="sglang").oneshot_latency_s == 0.0
    pcie = shape_for(spec, gpus["l40s"], tp=4, engine="vllm")
    assert pcie.oneshot_latency_s == 0.0 and pcie.oneshot_max_bytes == 0


def test_the_simulator_step_model_prices_the_custom_kernel_as_the_terms_do():
    # limit 8,388,608 / (8,192 x 2 B) = 512 tokens: a step of 511 takes the custom kernel, 512 the ring
    from kvplan.speed.model import StepModel, priced
    coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 + 0.1 * i for i, t in enumerate(TERMS))
    s = Shape(**BASE, **ONESHOT)
    m = StepModel(s, coef)
    for tokens, seqs, ctx in ((64, 64, 64_000), (511, 1, 511), (512, 1, 512), (8192, 1, 8192)):
        assert m.step(tokens, seqs, ctx, ctx) == pytest.approx(priced(coef, features(s, tokens, seqs, ctx, ctx)))
    assert m.decode(32)(32_000) == pytest.approx(priced(coef, features(s, 32, 32, 32_000, 32_000 + 32)))
    # 511 -> 512 tokens: the 160 calls' latency steps from 7.8 to 15.0 us each, 1.152 ms x the latency coefficient
    jump = m.step(512, 1, 512, 512) - m.step(511, 1, 511, 511)
    assert jump > coef[LATENCY] * 160 * 7.2e-6
