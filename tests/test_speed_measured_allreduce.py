"""A profile's measured all-reduce times (interconnect.allreduce_us) price the tensor-parallel all-reduces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.core.errors import KvplanError
from kvplan.hardware.gpu_profile import parse_profile
from kvplan.hardware.gpus import load_gpus
from kvplan.speed.fit import Built
from kvplan.speed.model import StepModel, priced
from kvplan.speed.allreduce import allreduce_table, measured_allreduce
from kvplan.speed.terms import TERMS, Shape, features
from conftest import speed_cases

COMM, LATENCY = TERMS.index("comm"), TERMS.index("latency")
KERNELS = Path(__file__).parent / "fixtures" / "speed" / "kernels"
# Llama-3.1-70B's shapes at tp 8 (80 layers, hidden 8,192) on an H100 board, the link as the profile gives it
BASE = dict(dense_bytes=0, layers=80, hidden=8192, tp=8, bandwidth=3.35e12, link_bandwidth=450e9, link_latency_s=15e-6)


@pytest.fixture(scope="module")
def h100():
    return load_gpus()["h100-sxm"]


@pytest.mark.parametrize("profile, device",
                         [("h100-sxm", "h100_sxm"), ("h200-sxm", "h200_sxm"), ("b200", "b200_sxm")])
def test_the_profiles_tables_are_aiconfigurators_rows_in_bytes(profile, device):
    # aiconfigurator's collector all-reduces a bf16 tensor of `message_size` elements
    # (ai-dynamo/aiconfigurator@0a3146b1: collector/collect_all_reduce.py,
    # torch.ones(get_input_shape_and_comm_size(size), dtype)), its latency in ms: the
    # profile's bytes are 2 x message_size, its microseconds 1,000 x latency (rounded to 0.01 us)
    doc = yaml.safe_load((KERNELS / f"aiconfigurator-{device}-trtllm-1.3.0rc20.yaml").read_text())
    rows = [r for r in doc["rows"] if r["op"] == "all_reduce" and r["dtype"] == "bfloat16"]
    gpu = load_gpus()[profile]
    for n in (2, 4, 8):
        want = sorted((2 * r["message_size"], r["latency_ms"] * 1e-3) for r in rows if r["num_gpus"] == n)
        got = allreduce_table(gpu, n)
        assert [b for b, _ in got] == [b for b, _ in want] and len(got) == 20
        assert all(t == pytest.approx(w, abs=0.006e-6) for (_, t), (_, w) in zip(got, want))
    assert allreduce_table(gpu, 1) == () and allreduce_table(gpu, 3) == ()
    assert allreduce_table(load_gpus()["a100-sxm-80"], 8) == ()  # no measurement: the ring prices it


def test_measured_allreduce_interpolates_between_the_measured_sizes(h100):
    t = allreduce_table(h100, 8)
    # the parquet's 8-GPU rows: 524,288 elements (1 MiB) 0.02596 ms, 1,048,576 (2 MiB) 0.03549 ms; 1.5 MiB halfway:
    # 25.96 + (35.49 - 25.96) / 2 = 30.725 us
    assert measured_allreduce(t, 1.5 * 2**20) == pytest.approx(30.725e-6)
    assert measured_allreduce(t, 2**20) == pytest.approx(25.96e-6)
    assert measured_allreduce(t, 1024) == pytest.approx(3.41e-6)  # below the smallest (1,024 elements): its time
    # past the largest (512 Mi elements, 1 GiB, 4,007.81 us) the last segment's slope (512 MiB -> 1 GiB: 2,109.20 ->
    # 4,007.81 us): 2 GiB is two such segments on, 4,007.81 + 2 x 1,898.61 = 7,805.03 us
    assert measured_allreduce(t, 2**31) == pytest.approx(7805.03e-6)


def test_a_measured_table_replaces_the_rings_bandwidth_and_latency(h100):
    # a 64-sequence decode step of Llama-3.1-70B at tp 8: each of 2 x 80 all-reduces carries 64 x 8,192 x 2 B =
    # 1,048,576 B, 25.96 us measured, 160 x 25.96 us = 4.1536 ms, no per-call latency beside it; the ring priced
    # 160 x 2 x 7/8 x 1,048,576 / 450e9 = 0.6524 ms and 160 x 15 us = 2.4 ms of latency
    ring = features(Shape(**BASE), 64, 64, 64 * 1000, 64 * 1000)
    measured = features(Shape(**BASE, allreduce=allreduce_table(h100, 8)), 64, 64, 64 * 1000, 64 * 1000)
    assert ring[COMM] == pytest.approx(160 * 1.75 * 1_048_576 / 450e9) and ring[LATENCY] == pytest.approx(2.4e-3)
    assert measured[COMM] == pytest.approx(4.1536e-3) and measured[LATENCY] == 0.0
    # a prefill of 16,384 tokens in 2 steps of 8,192: each call 8,192 x 8,192 x 2 = 134,217,728 B, 575.47 us
    chunked = features(Shape(**BASE, allreduce=allreduce_table(h100, 8)), 16384, 1, 16384, 0, steps=2)
    assert chunked[COMM] == pytest.approx(2 * 160 * 575.47e-6)
    # a fused GEMM + all-reduce keeps its calls' latency and no bandwidth, measured table or not
    fused = features(Shape(**BASE, allreduce=allreduce_table(h100, 8), fused_allreduce=True), 64, 64, 0, 0)
    assert fused[COMM] == 0.0 and fused[LATENCY] == pytest.approx(2.4e-3)


def test_only_the_engine_whose_kernel_was_timed_reads_the_table():
    # the tables are TensorRT-LLM's AllReduce (aiconfigurator's collector, --backend trtllm); vLLM's and SGLang's
    # custom all-reduce and NCCL keep the ring
    cases, _ = speed_cases()
    tp8 = {c.engine: c for c in cases if c.gpu in ("h100-sxm", "h200-sxm") and c.tp == 8 and c.ep == 1}
    assert {"trtllm", "vllm", "sglang"} <= set(tp8)
    for engine, c in tp8.items():
        assert bool(Built(c).shape.allreduce) == (engine == "trtllm"), engine


def test_the_simulator_step_model_prices_the_measured_allreduce_as_the_terms_do(h100):
    coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 + 0.1 * i for i, t in enumerate(TERMS))
    s = Shape(**BASE, allreduce=allreduce_table(h100, 8))
    m = StepModel(s, coef)
    for tokens, seqs, ctx in ((64, 64, 64_000), (8192, 1, 8192), (1, 1, 10)):
        assert m.step(tokens, seqs, ctx, ctx) == pytest.approx(priced(coef, features(s, tokens, seqs, ctx, ctx)))
    assert m.decode(32)(32_000) == pytest.approx(priced(coef, features(s, 32, 32, 32_000, 32_000 + 32)))


BASE_PROFILE = dict(key="x", name="X", vendor="NVIDIA", memory_marketed="80GB", memory_marketed_bytes=80 * 2**30,
                    memory_usable_bytes=79 * 2**30, memory_usable_source="estimate: x", bandwidth_bytes_per_s=10**12,
                    dense_flops={"bf16": 10**15}, source="x", confidence="low")


@pytest.mark.parametrize("ic, message", [
    ({"allreduce_us": {2: [[1024, 3.0]]}}, "go together"),
    ({"allreduce_source": "a"}, "go together"),
    ({"allreduce_us": {16: [[1024, 3.0]]}, "allreduce_source": "a"}, "allreduce_us.16"),  # past the domain
    ({"allreduce_us": {2: [[2048, 3.0], [1024, 4.0]]}, "allreduce_source": "a"}, "allreduce_us.2"),  # not ascending
    ({"allreduce_us": {2: [[1024, 0]]}, "allreduce_source": "a"}, "allreduce_us.2"),
    ({"allreduce_us": [[1024, 3.0]], "allreduce_source": "a"}, "allreduce_us"),
])
def test_a_bad_measured_table_is_a_one_line_error(ic, message):
    text = yaml.safe_dump({**BASE_PROFILE, "interconnect": {"type": "x", "kind": "nvswitch", "domain": 8, **ic}})
    with pytest.raises(KvplanError, match=message.replace(".", r"\.")):
        parse_profile(text, "x.yaml")
