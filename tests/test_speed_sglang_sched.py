"""SGLang's scheduler in the load model (issue 21): a closed loop of equal lengths runs in waves where the engine
decodes only when no prefill batch forms, and attention-DP workers that run every forward together pace each
other's decode with their prefills. Rules: kvplan.engines.scheduler (runs_waves, lockstep_workers, read in the
sglang 0.5.15 wheel); the load model: kvplan.speed.load. Step costs made up as in tests/test_speed_load.py
(t_wave 4 s, t_dec 0.1 s, t_grp 2 s); every expected figure is worked from the timeline by hand."""

import math
from pathlib import Path

from kvplan.engines.scheduler import lockstep_workers, runs_waves
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, value
from conftest import speed_cases

T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0


def _metrics(load: Load) -> dict:
    _, _, cm = combos(load)
    return {m: value(c, T_WAVE, T_DEC, T_GRP) for m, c in cm.items()}


def test_only_a_prefill_first_engine_without_mixed_chunks_or_attention_dp_runs_waves():
    # sglang 0.5.15 scheduler.py get_next_batch_to_run: "Run prefill first if possible"; --enable-mixed-chunk
    # (off by default) lets decode ride the prefill batch; DP-attention workers run every forward together
    assert runs_waves("sglang")
    assert not runs_waves("sglang", mixed_chunk=True)
    assert not runs_waves("sglang", attention_dp=True)
    assert not runs_waves("vllm")  # vLLM's step budget takes the running requests' decode tokens first
    assert lockstep_workers("sglang", 4, True) == 4
    assert lockstep_workers("sglang", 4, False) == 1  # independent replicas do not wait for each other
    assert lockstep_workers("trtllm", 4, True) == 1  # tried for TensorRT-LLM, not adopted (docs/speed-history.md)


def test_a_closed_loop_of_equal_lengths_runs_in_waves():
    # c = 6 over a cap of 4, 1,000 in / 101 out: waves of B = 4. Timeline of one wave: the 4 prompts fill one
    # prefill batch (4,000 of the 8,192-token chunk, t_wave = 4 s), one forward that returns all four first tokens
    # at its end, then 101 decode steps of 0.1 s (kvplan's T counts osl decode steps) for all four:
    # the wave lasts 4 + 10.1 = 14.1 s, T = 14.1 / 4 = 3.525 s; E2E = c x T = 21.15 s (Little's law).
    # Every request's first token comes at 4 s, its last at 14.1 s: E2E - TTFT = 10.1 s, so TPOT = 10.1 / 100 =
    # 0.101 s and TTFT = 21.15 - 10.1 = 11.05 s (= the first wave's 4 s + the queue (6 - 4) x 3.525 = 7.05 s).
    m = _metrics(Load(1000, 101, concurrency=6, cap=4, fixed=True, waves=True))
    assert math.isclose(m["e2el"], 21.15)
    assert math.isclose(m["tpot"], 0.101)
    assert math.isclose(m["ttft"], 11.05)
    assert math.isclose(m["output_throughput"], 101 / 3.525)  # the same T as a staggered refill
    # staggered (an engine that mixes, or drawn lengths): a group of min(4, 8192 // 1000) = 4 arrives together,
    # TTFT = t_grp + 1 step = 2.1 s + 7.05 s = 9.15 s, TPOT = (21.15 - 9.15) / 100 = 0.12 s
    assert math.isclose(_metrics(Load(1000, 101, concurrency=6, cap=4, fixed=True))["tpot"], 0.12)
    drawn = _metrics(Load(1000, 101, concurrency=6, cap=4, drawn=True, waves=True))
    assert not math.isclose(drawn["tpot"], 0.101)  # drawn lengths finish apart: no waves
    # an open loop's arrivals come one by one whatever the engine: the same figures with or without the flag
    opened = Load(1000, 101, rate=0.5, cap=4, fixed=True)
    assert _metrics(opened) == _metrics(Load(1000, 101, rate=0.5, cap=4, fixed=True, waves=True))


def test_lockstep_workers_pace_each_other_with_their_prefills():
    # 2 attention-DP workers, c = 8 over the deployment: 4 a worker, B = 4. A worker's prompts fill
    # K = ceil(4 x 1,000 / 8,192) = 1 prefill step a cycle of S = 101 + 1 = 102 steps. With independent phases a
    # step holds neither worker's prefill with probability (101 / 102)^2, so 102 x (1 - (101 / 102)^2) =
    # 102 x 203 / 10,404 = 1.990196 steps a cycle take a prefill step's 4 s and 100.009804 take 0.1 s:
    # a cycle of 7.960784 + 10.000980 = 17.961765 s, T = 4.490441 s, output 2 x 101 / T tok/s.
    m = _metrics(Load(1000, 101, concurrency=8, cap=4, dp=2, lockstep=2))
    assert math.isclose(m["output_throughput"], 2 * 101 / 4.490441, rel_tol=1e-6)
    # c = 4 a worker: Little's law, and the decode step a replacement misses (one group of G = 4 = B, so no other
    # group's prefill step: kvplan.speed.queueing.missed_step), 0.1 s
    assert math.isclose(m["e2el"], 4 * 4.490441 + 0.1, rel_tol=1e-6)
    # drawn lengths: requests finish apart and each is prefilled alone (G = 1), 4 prefill steps of t_wave / 4 = 1 s a
    # cycle of S = 101 + 4 = 105 steps; 105 x (1 - (101 / 105)^2) = 105 x 824 / 11,025 = 7.847619 steps take 1 s and
    # 97.152381 take 0.1 s: 7.847619 + 9.715238 = 17.562857 s, T = 4.390714 s
    drawn = _metrics(Load(1000, 101, concurrency=8, cap=4, dp=2, lockstep=2, drawn=True))
    assert math.isclose(drawn["output_throughput"], 2 * 101 / 4.390714, rel_tol=1e-6)
    # one worker (or independent replicas): the cycle is t_wave + osl x t_dec = 14.1 s, T = 3.525 s
    assert math.isclose(_metrics(Load(1000, 101, concurrency=8, cap=4, dp=2))["output_throughput"], 2 * 101 / 3.525)


def test_the_cookbook_deepseek_v4_runs_read_at_bench_servings_default_draw():
    # bench_serving's --random-range-ratio defaults to 0.0 (0.5.15 wheel, sglang/benchmark/serving.py): lengths
    # drawn uniformly from 1 to the stated 8,192 / 1,024, means 8,192 x (1 + 0) / 2 = 4,096 and 512
    cases, _ = speed_cases()
    v4 = [c for c in cases if c.source in ("sglang-docs-deepseek-v4-benchmarks", "sglang-pr-31363", "sglang-pr-33109")]
    assert len(v4) == 17
    assert all(c.load.drawn and not c.load.fixed for c in v4)
    assert {(c.load.isl, c.load.osl) for c in v4} == {(4096.0, 512.0)}
    qwen = [c for c in cases if c.source == "sglang-docs-qwen3.5-benchmarks-v0.5.16"]  # states a ratio of 1.0
    assert qwen and all(c.load.fixed and not c.load.drawn for c in qwen)
