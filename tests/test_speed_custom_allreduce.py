"""The engines' custom all-reduces on a fully connected fabric: latency flat in the ranks, below a size limit."""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import load_gpus
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import custom_allreduce_bytes
from kvplan.speed.shape import shape_for
from kvplan.speed.allreduce import fabric_latency, link
from kvplan.speed.terms import TERMS, Shape, features, measured_tp
from conftest import speed_cases

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
    # vLLM's _SUPPORTED_WORLD_SIZES [2, 4, 6, 8]
    assert custom_allreduce_bytes("vllm", 8) == 8_388_608 and custom_allreduce_bytes("vllm", 3) == 0
    spec, gpus = find_in_catalog("llama-3.1-70b-instruct"), load_gpus()
    v = shape_for(spec, gpus["h100-sxm"], tp=8, engine="vllm", version="0.10.2")
    assert v.oneshot_latency_s == pytest.approx(7.8e-6) and v.oneshot_max_bytes == 8_388_608
    # from 0.11.0 the symmetric-memory all-reduce follows to 64 MB at 8 H100s (SYMM_MEM_ALL_REDUCE_MAX_SIZES "9.0",
    # vLLM all_reduce_utils.py 0.11.0 L45-58; kvplan.speed.symm_allreduce): 64 x 2^20 = 67,108,864 B
    assert shape_for(spec, gpus["h100-sxm"], tp=8, engine="vllm").oneshot_max_bytes == 67_108_864
    pcie = shape_for(spec, gpus["l40s"], tp=4, engine="vllm")
    assert pcie.oneshot_latency_s == 0.0 and pcie.oneshot_max_bytes == 0
    assert custom_allreduce_bytes("llama.cpp", 8) == 0  # not in CUSTOM_ALLREDUCE


def test_sglang_runs_vllms_kernel_with_twice_the_limit_on_rocm_through_0_5_5():
    # SGLang's CustomAllreduce (0.4.6.post5, 0.5.5 and 0.5.9 wheels): _SUPPORTED_WORLD_SIZES [2, 4, 6, 8], _MAX_CAR_SIZE
    # 8,192 x 1,024 = 8,388,608 B on CUDA, 2 x 8,192 x 1,024 = 16,777,216 B on ROCm, the class a ROCm tp group builds
    # through 0.5.5 (0.5.5 parallel_state.py L374)
    gpus = load_gpus()
    assert custom_allreduce_bytes("sglang", 8) == 8_388_608 and custom_allreduce_bytes("sglang", 6) == 8_388_608
    assert custom_allreduce_bytes("sglang", 3) == 0 and custom_allreduce_bytes("sglang", 16) == 0
    assert custom_allreduce_bytes("sglang", 8, gpus["mi300x"], "0.5.5") == 16_777_216
    assert custom_allreduce_bytes("vllm", 8, gpus["mi300x"]) == 8_388_608  # vLLM's limit is not the ROCm one
    spec = find_in_catalog("llama-3.1-70b-instruct")
    s = shape_for(spec, gpus["h200-sxm"], tp=4, engine="sglang")
    assert s.oneshot_latency_s == pytest.approx(7.8e-6) and s.oneshot_max_bytes == 8_388_608
    # MI300X at tp 8 over xGMI: the two-rank ring's 6.6 + 2 x 0.6 = 7.8 us, where the ring's is 15.0 us
    amd = shape_for(spec, gpus["mi300x"], tp=8, engine="sglang", version="0.5.5")
    assert amd.oneshot_latency_s == pytest.approx(7.8e-6) and amd.link_latency_s == pytest.approx(15.0e-6)
    assert amd.oneshot_max_bytes == 16_777_216
    # a 1,000-token prefill chunk: 1,000 x 8,192 x 2 = 16,384,000 B, under ROCm's limit, past CUDA's
    f = features(amd, 1000, 1, 1000, 0)[LATENCY]
    assert f == pytest.approx(2 * 80 * 7.8e-6)
    assert shape_for(spec, gpus["l40s"], tp=4, engine="sglang").oneshot_latency_s == 0.0  # PCIe: NCCL's ring


def test_sglang_runs_aiters_kernel_up_to_64_mib_on_rocm_from_0_5_6():
    # From 0.5.6 a ROCm tp group builds aiter's CustomAllreduce (dispatch_custom_allreduce, SGLANG_USE_AITER_AR default
    # "true": 0.5.6 custom_all_reduce.py L423-437, 0.5.19 L344-411), which takes a message of at most 64 MiB
    # (ROCm/aiter@c16d44b9 custom_all_reduce.py L118 `_DEFAULT_CAR_MAX_SIZE = 8192 * 8192`, `inp_size <=` L1148):
    # 8,192 x 8,192 = 67,108,864 B still custom, the first to go to RCCL 67,108,865 B
    gpus = load_gpus()
    for version in ("0.5.6", "0.5.12", "0.5.19", None):
        assert custom_allreduce_bytes("sglang", 8, gpus["mi325x"], version) == 67_108_865
    assert custom_allreduce_bytes("sglang", 2, gpus["mi355x"], "0.5.19") == 67_108_865
    assert custom_allreduce_bytes("sglang", 3, gpus["mi355x"], "0.5.19") == 0  # aiter's world sizes: 2, 4, 6, 8
    assert custom_allreduce_bytes("sglang", 8, gpus["h200-sxm"], "0.5.19") == 8_388_608  # CUDA keeps its own
    assert custom_allreduce_bytes("sglang", 8, gpus["mi325x"], "0.5.19", custom=False) == 0  # turned off: RCCL
    spec = find_in_catalog("llama-3.1-70b-instruct")
    amd = shape_for(spec, gpus["mi300x"], tp=8, engine="sglang", version="0.5.12")
    # a 4,000-token prefill chunk: 4,000 x 8,192 x 2 = 65,536,000 B, past SGLang's own 16 MiB, within aiter's 64 MiB:
    # 2 x 80 calls at the kernel's 7.8 us; 4,100 tokens (67,174,400 B) past it: the ring's 15.0 us
    assert features(amd, 4000, 1, 4000, 0)[LATENCY] == pytest.approx(2 * 80 * 7.8e-6)
    assert features(amd, 4100, 1, 4100, 0)[LATENCY] == pytest.approx(2 * 80 * 15.0e-6)
    old = shape_for(spec, gpus["mi300x"], tp=8, engine="sglang", version="0.5.5")
    assert features(old, 4000, 1, 4000, 0)[LATENCY] == pytest.approx(2 * 80 * 15.0e-6)


def test_tensorrt_llm_prices_its_kernel_where_no_table_measured_it():
    # TensorRT-LLM's workspace: 16,000,000 B at <= 2 ranks, 8,000,000 B above; a message of that many bytes still
    # takes the custom kernel (`message_size_bytes > max_workspace_size` goes to NCCL), so the first to leave it is + 1
    gpus = load_gpus()
    assert custom_allreduce_bytes("trtllm", 2) == 16_000_001 and custom_allreduce_bytes("trtllm", 8) == 8_000_001
    assert custom_allreduce_bytes("trtllm", 3) == 0
    spec = find_in_catalog("llama-3.1-70b-instruct")
    a100 = shape_for(spec, gpus["a100-sxm-80"], tp=8, engine="trtllm")  # NVSwitch, no measured table
    assert a100.allreduce == () and a100.oneshot_latency_s == pytest.approx(7.8e-6)
    # a 64-sequence decode on it: 160 calls x 7.8 us = 1.248 ms of latency where the ring's 15.0 us gave 2.4 ms
    assert features(a100, 64, 64, 64_000, 64_000)[LATENCY] == pytest.approx(1.248e-3)
    # 488 tokens x 8,192 x 2 = 7,995,392 B fit the 8,000,000 B workspace; 489 (8,011,776 B) go to NCCL
    assert features(a100, 488, 1, 488, 0)[LATENCY] == pytest.approx(1.248e-3)
    assert features(a100, 489, 1, 489, 0)[LATENCY] == pytest.approx(2.4e-3)
    h100 = shape_for(spec, gpus["h100-sxm"], tp=8, engine="trtllm")  # the profile's measured table prices it
    assert h100.allreduce and measured_tp(h100)


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


def test_an_sglang_decode_step_at_tp_8_on_nvlink_4_from_the_profile():
    # Llama-3.1-70B (80 layers, hidden 8,192, bf16) under SGLang at tp 8 on the HGX H100 profile (NVLink 4 through
    # NVSwitch, 450 GB/s a direction; SGLang reads no measured table). A 64-sequence decode step: 2 x 80 = 160
    # all-reduces of 64 x 8,192 x 2 = 1,048,576 B each, under SGLang's 8,388,608 B limit: one-shot, 160 x
    # the two-rank ring's 6.6 + 2 x 0.6 = 7.8 us = 1.248 ms of latency (the ring's 15.0 us gave 2.4 ms); bandwidth
    # 160 x 2 x 7 / 8 x 1,048,576 B / 450e9 B/s = 293,601,280 / 450e9 = 652.4 us, the ring's formula either way
    spec, gpus = find_in_catalog("llama-3.1-70b-instruct"), load_gpus()
    s = shape_for(spec, gpus["h100-sxm"], tp=8, engine="sglang")
    assert s.allreduce == () and s.link_bandwidth == pytest.approx(450e9)
    f = features(s, 64, 64, 64 * 1000, 64 * 1001)
    assert f[LATENCY] == pytest.approx(1.248e-3)
    assert f[TERMS.index("comm")] == pytest.approx(293_601_280 / 450e9)


def test_a_run_that_turns_the_custom_all_reduce_off_is_priced_at_nccls_ring():
    # vLLM's and SGLang's --disable-custom-all-reduce, TensorRT-LLM's allreduce_strategy NCCL / NCCL_SYMMETRIC: every
    # call NCCL's, so the ring's latency (15.0 us at 8 NVSwitch ranks) and no measured AUTO table
    from dataclasses import replace
    from pathlib import Path

    from kvplan.bench.running import running
    from kvplan.speed.corpus import in_training
    from kvplan.speed.fit import Built
    from kvplan.speed.model import nccl_only
    assert nccl_only({"disable_custom_all_reduce": True}) and nccl_only({"allreduce_strategy": "NCCL"})
    assert nccl_only({"allreduce_strategy": "nccl_symmetric"})
    assert not nccl_only({}) and not nccl_only({"disable_custom_all_reduce": "false"})
    assert not nccl_only({"allreduce_strategy": "AUTO"}) and not nccl_only({"allreduce_strategy": "ONESHOT"})
    cases, _ = speed_cases()
    for engine in ("vllm", "trtllm"):
        c = next(c for c in cases if in_training(c.source) and c.engine == engine and c.gpu == "h100-sxm" and c.tp == 8)
        on = Built(c, running).shape
        assert on.oneshot_latency_s or on.allreduce  # the custom kernel or its measured table
        flags = {"disable_custom_all_reduce": "true"} if engine == "vllm" else {"allreduce_strategy": "NCCL"}
        version = "0.10.2" if engine == "vllm" else c.version  # before vLLM's symmetric memory (test_speed_symm_...)
        off = Built(replace(c, flags={**c.flags, **flags}, version=version), running).shape
        assert off.oneshot_latency_s == 0.0 and off.allreduce == () and off.link_latency_s == pytest.approx(15.0e-6)
