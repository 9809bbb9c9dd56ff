"""Data parallel as the engines run it (issue 21): a MoE model's data-parallel ranks of one engine step together.

vLLM runs a MoE model's --data-parallel-size ranks as DPEngineCoreProc (a dense model's as independent engines): a rank
with nothing scheduled runs a dummy batch, every forward all-reduces the ranks' token counts and pads each to the
largest under CUDA graphs (vllm 0.25.0 wheel `v1/engine/core.py` L1189-1200, L1925-1961; `v1/worker/dp_utils.py`
L77-89, L101-160; kvplan.engines.scheduler.LOCKSTEP_DP). Its prefill chunks ride in decode steps, so one rank's chunk
lengthens every rank's decode step (kvplan.speed.lockstep.lockstep_cycle, `lock_mixed`). And `fit --dp` prices a decode
step at the busiest rank's share of the batch, not the whole batch on every rank (kvplan.speed.plan.step_batch). Step
costs made up as in tests/test_speed_sglang_sched.py (t_wave 4 s, t_dec 0.1 s, t_grp 2 s); expected figures by hand."""

import json
import math
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from kvplan.bench.running import case_lockstep, running
from kvplan.cli import app
from kvplan.engines.scheduler import lockstep_mixed, lockstep_workers
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import one_engine_dp
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, value
from kvplan.speed.model import decode_seconds
from kvplan.speed.shape import shape_for
from conftest import speed_cases

T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0
FIXTURES = Path(__file__).parent / "fixtures" / "speed"
runner = CliRunner()


def _metrics(load: Load) -> dict:
    _, _, cm = combos(load)
    return {m: value(c, T_WAVE, T_DEC, T_GRP) for m, c in cm.items()}


def test_vllm_moe_dp_ranks_step_together_and_mix_their_chunks():
    assert lockstep_workers("vllm", 2, True) == 2  # DPEngineCoreProc: one engine's ranks around a MoE
    assert lockstep_workers("vllm", 2, False) == 1  # independent engines (a dense model's ranks, MLPerf's replicas)
    assert lockstep_mixed("vllm")  # vLLM's step budget holds decode tokens and prefill chunks alike
    assert not lockstep_mixed("sglang") and lockstep_mixed("sglang", mixed=True)  # SGLang prefills apart unless mixed


def test_mixed_lockstep_cycle_by_hand():
    # 2 ranks, c = 8: 4 a rank, B = 4; 4 x 1,000 prompt tokens fill P = 1 chunk of 8,192 a cycle. Every step decodes
    # (the chunk rides in a decode step), so a cycle is S = max(101, 1) = 101 steps, and a step holds some rank's chunk
    # with probability 1 - (100 / 101)^2 = 201 / 10,201: 101 x 201 / 10,201 = 1.990099 steps a cycle carry a chunk
    # (t_wave / P = 4 s more each) and all 101 decode (0.1 s): 7.960396 + 10.1 = 18.060396 s, T = 4.515099 s.
    m = _metrics(Load(1000, 101, concurrency=8, cap=4, dp=2, lockstep=2, lock_mixed=True))
    assert math.isclose(m["output_throughput"], 2 * 101 / 4.515099, rel_tol=1e-6)
    # SGLang's prefill steps replace decode steps instead: 4.490441 s (tests/test_speed_sglang_sched.py)
    apart = _metrics(Load(1000, 101, concurrency=8, cap=4, dp=2, lockstep=2))
    assert math.isclose(apart["output_throughput"], 2 * 101 / 4.490441, rel_tol=1e-6)
    # one rank: u S = P, the cycle t_wave + osl x t_dec = 14.1 s, T = 3.525 s, mixed or not
    one = _metrics(Load(1000, 101, concurrency=4, cap=4, lockstep=1, lock_mixed=True))
    assert math.isclose(one["output_throughput"], 101 / 3.525)


def test_the_corpus_reads_vllms_stated_dp_of_a_moe_as_lockstep_ranks():
    cases, _ = speed_cases()
    blog = next(c for c in cases if c.source == "vllm-blog-2026-02-13-gb300-deepseek")  # --data-parallel-size 2
    r1, dense = find_in_catalog("deepseek-r1"), find_in_catalog("llama-3.1-8b")
    assert one_engine_dp(blog) and case_lockstep(blog, r1) == 2
    assert case_lockstep(blog, dense) == 1  # "Non-MoE DP ranks are completely independent"
    assert case_lockstep(replace(blog, flags={}), r1) == 1  # no size flag: replicas a harness started apart
    got = running(blog, r1, find_gpu("gb300"))
    assert got.lockstep == 2 and got.lock_mixed
    mlperf = [c for c in cases if c.engine == "vllm" and c.dp > 1 and not one_engine_dp(c)]
    assert mlperf and all(case_lockstep(c, find_in_catalog(c.model)) == 1 for c in mlperf)


def test_fit_dp_prices_the_busiest_ranks_step():
    # 65 sequences over dp 2: the busiest rank runs ceil(65 / 2) = 33 (the other 32, padded to 33 under CUDA
    # graphs); its experts serve 2 x 33 tokens (Shape.ep_replicas = 2). Main priced 65 on every rank (130 routed).
    args = ["fit", "deepseek-r1", "--gpu", "gb300", "--tp", "1", "--dp", "2", "--ep", "2", "--batch", "65",
            "--ctx", "4k", "--weight-dtype", "nvfp4", "--engine", "vllm", "--engine-version", "0.14.1"]
    r = runner.invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    shape = shape_for(find_in_catalog("deepseek-r1"), find_gpu("gb300"), tp=1, ep=2, weight_dtype="nvfp4", dp=2,
                      engine="vllm", version="0.14.1")
    step = doc["decode_step_seconds_calibrated"]
    assert math.isclose(step, decode_seconds(shape, "vllm", 33, 4096), rel_tol=1e-9)
    assert step < decode_seconds(shape, "vllm", 65, 4096)
    assert math.isclose(doc["decode_tokens_per_second_calibrated"], 65 / step)  # every rank's tokens, one step
    assert "busiest of --dp 2 ranks, 33 of the 65 sequences" in r.stderr and "2 x 33 tokens" in r.stderr


def test_simulate_says_vllms_moe_dp_ranks_are_not_simulated_in_lockstep():
    from kvplan.engines import resolve_engine
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.request import Request
    from kvplan.simulator.limits import scheduler_limits

    eng, gpu = resolve_engine("vllm"), find_gpu("h100")
    moe = eng.result(find_in_catalog("deepseek-v2-lite"), gpu, Deployment(tp=1, dp=2, ep=2), Request(context=4096))
    held = scheduler_limits(eng, moe)
    assert held.lockstep == 2 and moe.settings["dp_lockstep"] == 2
    assert any("2 data-parallel ranks of a MoE" in line and "not simulated" in line for line in held.notes())
    dense = eng.result(find_in_catalog("llama-3.1-8b"), gpu, Deployment(tp=1, dp=2), Request(context=4096))
    assert scheduler_limits(eng, dense).lockstep == 1  # independent engines: nothing left out
    # SGLang's DP-attention workers keep their name with mixed chunks on (steps mixed, the workers still DP attention's)
    mixed = resolve_engine("sglang", None, ["enable_mixed_chunk=true"])
    adp = scheduler_limits(mixed, mixed.result(find_in_catalog("deepseek-v2-lite"), gpu, Deployment(tp=1, dp=2, ep=2),
                                               Request(context=4096)))
    assert adp.lockstep == 2 and not adp.prefill_first
    assert any("2 attention-DP workers" in line and "not simulated" in line for line in adp.notes())
