"""The simulator's invariants: Little's law, exact pool accounting, paged waste below one page per
sequence per layer group, contiguous waste equal to the length distribution's closed form,
preemption by recompute, prefix caching, determinism."""

import math

import pytest

from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.model import Group, SimModel, StageCost
from kvplan.simulator.workload import WORKLOADS, LogNormal, SimRequest, Workload, generate


def _model(budget=8 * 2**30, groups=(Group(160 * 1024),), state=0, block=16, max_len=65536, fixed=None):
    return SimModel("t", kv_budget_bytes=budget, block_size=block, groups=groups, state_bytes=state,
                    max_model_len=max_len,
                    stages=(StageCost(dense_read_bytes=16 * 10**9,
                                      kv_bytes_per_token=sum(g.bytes_per_token for g in groups),
                                      flops_per_token=2 * 8e9, attn_flops_per_pair=4 * 32 * 128),),
                    bandwidth_bytes_per_s=3.35e12, flops_per_s=989e12, fixed_step_s=fixed)


def _run(model, requests, **cfg):
    return Engine(model, EngineConfig(**cfg)).run(requests)


def test_littles_law_and_arrival_rate():
    reqs = generate(WORKLOADS["chat"], qps=8, duration=300, seed=3)
    # Poisson arrivals: the count is within a few standard deviations (sqrt(2400) ~ 49) of qps x duration.
    assert abs(len(reqs) - 2400) < 5 * math.sqrt(2400)
    s = _run(_model(), reqs).summary(2.0, 0.1)
    assert s["requests"]["completed"] == s["requests"]["arrived"] == len(reqs)
    # L = lambda W: the time-integral of requests in the system against completions x mean latency,
    # two independent bookkeepings (step integrals vs per-request timestamps).
    ll = s["littles_law"]
    assert ll["mean_in_system"] == pytest.approx(ll["throughput_x_mean_latency"], rel=1e-9)
    assert ll["mean_in_system"] > 1


@pytest.mark.parametrize("name,model,cfg", [
    ("paged", _model(), {}),
    ("paged, tiny pool: preemptions", _model(budget=300 * 160 * 1024 * 16), {}),
    ("paged, no prefix cache", _model(budget=300 * 160 * 1024 * 16), {"prefix_caching": False}),
    ("windows", _model(groups=(Group(64 * 1024), Group(96 * 1024, 512)), budget=200 * 160 * 1024 * 16), {}),
    ("states", _model(groups=(Group(32 * 1024),), state=3 * 2**20, budget=2**30), {}),
    ("contiguous max", _model(max_len=4096), {"mode": "contiguous"}),
    ("contiguous pow2", _model(max_len=4096), {"mode": "contiguous", "reserve": "pow2"}),
])
def test_pool_accounting_is_exact(name, model, cfg):
    """check=True recounts the pool from every running request after each step (AssertionError on drift)."""
    reqs = generate(WORKLOADS["chat"], qps=6, duration=60, seed=1)
    rec = _run(model, reqs, check=True, **cfg)
    s = rec.summary(2.0, 0.1)
    assert s["requests"]["completed"] + sum(s["requests"]["rejected"].values()) == len(reqs)
    if "preemptions" in name:
        assert s["requests"]["preemptions"] > 0
    # Every request produced exactly its output tokens: latency and TPOT are defined for all.
    assert all(f >= 0 for f in rec.finish[: len(reqs)] if f != -1.0)


def test_paged_waste_is_below_one_page_per_sequence_per_group():
    groups = (Group(64 * 1024), Group(96 * 1024, 1024))
    model = _model(groups=groups, budget=400 * 160 * 1024 * 16)
    rec = _run(model, generate(WORKLOADS["chat"], qps=6, duration=120, seed=2), prefix_caching=False)
    page = sum((model.block_size - 1) * g.bytes_per_token for g in groups)  # a page less one token, per group
    assert rec.series
    for t, running, waiting, reserved, written, idle, pre, rate in rec.series:
        assert 0 <= reserved - written <= running * page
    s = rec.summary(2.0, 0.1)
    assert 0 < s["kv"]["mean_reserved_bytes"] - s["kv"]["mean_written_bytes"] <= s["concurrency"]["mean_running"] * page


def test_contiguous_waste_matches_the_closed_form():
    """A max-length reservation M held for a request's O steps while it writes P, P+1, ..., P+O-1
    tokens: written/reserved over time = E[O (P + (O-1)/2)] / (M E[O]); for independent
    log-normal P and O, E[OP] = E[O]E[P] and E[O^2] = exp(2 mu + 2 sigma^2)."""
    P, O, M = LogNormal(300, 0.5, 1, 10**6), LogNormal(200, 0.5, 1, 10**6), 8192
    reqs = generate(Workload("t", P, O, "test"), qps=20, duration=600, seed=7)
    model = _model(budget=2**50, max_len=M, fixed=0.01)  # no memory pressure; every step 10 ms
    s = _run(model, reqs, mode="contiguous", max_num_seqs=10**6, max_num_batched_tokens=10**9).summary(2.0, 0.1)
    mu_o = math.log(O.median)
    e_o, e_p = O.mean, P.mean
    e_o2 = math.exp(2 * mu_o + 2 * O.sigma**2)
    expected_waste = 100 * (1 - (e_o * e_p + (e_o2 - e_o) / 2) / (M * e_o))
    # The written share (about 6%) within 3% of itself: the sampling noise of ~12k requests.
    assert 100 - s["kv"]["waste_pct"] == pytest.approx(100 - expected_waste, rel=0.03)
    # The oracle reservation (P + O) wastes only the last token's slot plus the unwritten future.
    s2 = _run(model, reqs, mode="contiguous", reserve="oracle", max_num_seqs=10**6,
              max_num_batched_tokens=10**9).summary(2.0, 0.1)
    assert s2["kv"]["waste_pct"] < s["kv"]["waste_pct"]


def test_preemption_recomputes_and_still_delivers_every_token():
    model = _model(budget=64 * 160 * 1024 * 16, fixed=0.02)  # 1,024 token slots
    reqs = [SimRequest(i, 0.01 * i, 200, 300) for i in range(20)]
    rec = _run(model, reqs, check=True, prefix_caching=False)
    s = rec.summary(10.0, 1.0)
    assert s["requests"]["completed"] == 20
    assert s["requests"]["preemptions"] > 0
    # A recomputed request re-prefills prompt + generated tokens: more prefill tokens than prompts alone.
    assert rec.tokens > sum(r.prompt + r.output - 1 for r in reqs)


def test_prefix_cache_hits_and_saves_memory():
    reqs = generate(WORKLOADS["rag"], qps=2, duration=120, seed=5)
    model = _model(budget=40 * 2**30, max_len=65536)
    on = _run(model, reqs).summary(2.0, 0.1)
    off = _run(model, reqs, prefix_caching=False).summary(2.0, 0.1)
    assert on["prefix_cache"]["hit_rate_pct"] > 10
    assert off["prefix_cache"]["hit_rate_pct"] == 0
    assert on["kv"]["mean_reserved_bytes"] < off["kv"]["mean_reserved_bytes"]
    assert on["latency_s"]["ttft"]["mean"] < off["latency_s"]["ttft"]["mean"]


def test_same_seed_same_answer():
    a = _run(_model(), generate(WORKLOADS["code"], 5, 60, seed=11)).summary(2.0, 0.1)
    b = _run(_model(), generate(WORKLOADS["code"], 5, 60, seed=11)).summary(2.0, 0.1)
    assert a == b


def test_requests_too_long_are_rejected_not_looped():
    model = _model(budget=100 * 160 * 1024, max_len=4096)  # 100 token slots
    reqs = [SimRequest(0, 0.0, 5000, 10), SimRequest(1, 0.1, 500, 10), SimRequest(2, 0.2, 50, 10)]
    s = _run(model, reqs).summary(2.0, 0.1)
    assert s["requests"]["completed"] == 1
    assert s["requests"]["rejected"] == {"longer than the model's length limit": 1, "never fits in the KV pool": 1}


def test_a_reservation_larger_than_the_pool_is_rejected_on_arrival():
    model = _model(budget=1000 * 160 * 1024, max_len=4096)  # 1,000 token slots; a max reservation is 4,096
    reqs = [SimRequest(i, 0.1 * i, 100, 10) for i in range(5)]
    s = _run(model, reqs, mode="contiguous").summary(2.0, 0.1)
    assert s["requests"]["rejected"] == {"never fits in the KV pool": 5} and s["requests"]["dropped"] == 0
    assert _run(model, reqs, mode="contiguous", reserve="oracle").summary(2.0, 0.1)["requests"]["completed"] == 5


def test_hand_computed_timeline():
    """Fixed 10 ms steps, requests far apart: the prompt is one step (its first token at the end
    of it), then one step per further token. P = 100, O = 50: TTFT 10 ms, TPOT 10 ms, latency
    50 steps = 500 ms; KV written at the end: 100 + 49 tokens, in ceil(149 / 16) = 10 pages."""
    model = _model(budget=2**40, fixed=0.01)
    reqs = [SimRequest(i, 10.0 * i, 100, 50) for i in range(3)]
    rec = _run(model, reqs, prefix_caching=False)
    s = rec.summary(2.0, 0.1)
    assert s["latency_s"]["ttft"]["max"] == pytest.approx(0.01)
    assert s["latency_s"]["tpot"]["max"] == pytest.approx(0.01)
    assert s["latency_s"]["e2e"]["max"] == pytest.approx(0.5)
    assert s["time"]["steps"] == 3 * 50
    # Mean written while busy: sum over the 50 steps of (100, 101, ..., 149) tokens x 160 KiB / 50.
    busy_written = s["kv"]["mean_written_bytes"] * s["time"]["makespan_s"] / s["time"]["busy_s"]
    assert busy_written == pytest.approx((100 + 149) / 2 * 160 * 1024, rel=1e-6)  # (the summary rounds to bytes)
    assert rec.peak_reserved == 10 * 16 * 160 * 1024
