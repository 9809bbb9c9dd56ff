"""TensorRT-LLM's overlap scheduler takes a new request in one step late (kvplan.engines.scheduler.fetch_lag_steps,
kvplan.bench.running.case_fetch_lag, kvplan.speed.load `fetch_lag`): the PyTorch backend's executor fetches new
requests and launches step n + 1 before step n ends, so a request that arrives while it decodes waits one decode step
more before its prefill, in TTFT and end-to-end (issue 21, TensorRT-LLM's TTFT)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.bench.running import case_fetch_lag
from kvplan.engines.scheduler import fetch_lag_steps
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos
from kvplan.speed.overlap import run_overlaps
from conftest import speed_cases


def test_the_overlap_loop_takes_an_arrival_in_one_step_later():
    # docs/source/features/overlap-scheduler.md (NVIDIA/TensorRT-LLM@081661b76c54f3516a894b682f1f15ceb7d3a03c): "At
    # step n, the system launches GPU computation for step n+1 without waiting for CPU tasks ... from step n", enabled
    # by default, `disable_overlap_scheduler=True` turns it off. Timeline of py_executor.py `_executor_loop_overlap`:
    # loop k fetches and schedules batch k, launches it, then waits for batch k - 1 and answers it; so loop k + 1's
    # fetch comes as batch k starts on the GPU. An arrival uniform over batch k's step is fetched at batch k + 1's
    # start and runs in batch k + 2: it waits 1/2 + 1 = 3/2 steps, against 1/2 in a loop that fetches after each
    # step (the C++ executor's executionLoop, vLLM's EngineCore): 3/2 - 1/2 = 1 step more
    assert fetch_lag_steps("trtllm", {}) == 1.5 - 0.5
    assert fetch_lag_steps("trtllm", {"disable_overlap_scheduler": True}) == 0.0
    assert fetch_lag_steps("trtllm", {"disable_overlap_scheduler": "false"}) == 1.0
    assert fetch_lag_steps("trtllm", {}, pp=2) == 0.0  # PyExecutor.__init__: pp_size > 1 runs _executor_loop_pp
    assert fetch_lag_steps("vllm", {}, version="0.13.0") == 0.0  # vLLM without async scheduling: no such loop
    assert fetch_lag_steps("sglang", {"disable_overlap_scheduler": False}) == 0.0  # not read for SGLang


def test_a_spread_arrival_waits_the_step_in_ttft_and_e2e_only():
    base = Load(isl=1000, osl=1000, concurrency=64, num_prompts=640, cap=256, drawn=True, out_cv2=0.01)
    lagged = replace(base, fetch_lag=1.0)
    b0, g0, plain = combos(base)
    b1, g1, waits = combos(lagged)
    assert b0 == b1 == 64 and g0 == g1  # the fetch still drains every arrival each step: no larger group
    # 640 requests at concurrency 64: the first 64 (share 64 / 640 = 0.1) find the engine idle and are fetched at
    # once; the other 0.9 arrive while it decodes: 0.9 x 1 = 0.9 decode steps more in TTFT and in E2E
    assert abs((waits["ttft"][1] - plain["ttft"][1]) - 0.9) < 1e-9
    assert abs((waits["e2el"][1] - plain["e2el"][1]) - 0.9) < 1e-9
    assert all(abs(x - y) < 1e-12 for x, y in zip(waits["tpot"], plain["tpot"]))  # (E2E - TTFT) / (osl - 1)
    assert waits["output_throughput"] == plain["output_throughput"]  # the replica serves others meanwhile
    one = replace(lagged, concurrency=1, num_prompts=10)  # a lone request: the idle loop blocks on its fetch
    assert combos(one)[2]["ttft"] == combos(replace(one, fetch_lag=0.0))[2]["ttft"]
    burst = replace(lagged, concurrency=None, num_prompts=640)  # all fetched before the run's first step
    assert combos(burst)[2]["ttft"] == combos(replace(burst, fetch_lag=0.0))[2]["ttft"]


def test_only_the_pytorch_backend_runs_lag():
    # the corpus's TensorRT-LLM sets (kvplan.speed.eras): the current era is the PyTorch backend; `trtllm-engine`
    # (MLPerf's TensorRT engines under the C++ executor) and `trtllm<1.0` (TensorRT engines) fetch after each step
    cases, _ = speed_cases()
    lag = {c.era: {case_fetch_lag(x) for x in cases if x.era == c.era and x.pp == 1} for c in cases
           if c.engine == "trtllm"}
    assert lag == {"trtllm": {1.0}, "trtllm-engine": {0.0}, "trtllm<1.0": {0.0}}
    assert {case_fetch_lag(c) for c in cases if c.engine == "trtllm" and c.pp > 1} == {0.0}  # the perf pages' pp runs
    assert not any(case_fetch_lag(c) for c in cases if c.engine != "trtllm")  # vLLM's async lag: found, not priced


def test_vllm_async_scheduling_takes_an_arrival_in_one_step_later():
    # vllm 0.28.0 sdist vllm/v1/engine/core.py: `step_with_batch_queue` (L624-738), with two batches in its queue
    # (async scheduling's max_concurrent_batches 2), schedules and launches batch k + 1, then blocks on batch k and
    # updates from it; `run_busy_loop` (L1375-1386) reads the input queue only between two such calls. An arrival
    # during batch k is read when the call ends (batch k done, k + 1 already launched) and scheduled into batch k + 2:
    # it waits 1/2 + 1 = 3/2 steps, against 1/2 under `step` (schedule, execute, update: the arrival read after batch
    # k, in batch k + 1): 3/2 - 1/2 = 1 step more, as TensorRT-LLM's overlap loop
    assert fetch_lag_steps("vllm", {}, version="0.14.0") == 1.5 - 0.5  # on by default from 0.14.0
    assert fetch_lag_steps("vllm", {"async_scheduling": "yes"}, version="0.11.0") == 1.0  # stated
    assert fetch_lag_steps("vllm", {"async_scheduling": "0"}, version="0.25.1") == 0.0  # turned off
    assert fetch_lag_steps("vllm", {}, version="0.7.3") == 0.0  # V0
    assert fetch_lag_steps("vllm", {}, pp=2, version="0.25.1") == 0.0  # pipeline parallelism: not read
    assert fetch_lag_steps("vllm", {}, date="2025-11-06") == 0.0  # no release: the one of its date, 0.11.x
    cases, _ = speed_cases()
    vllm = [c for c in cases if c.engine == "vllm"]
    # found, but not priced: charging it failed the training-CV rule (kvplan.bench.running.case_fetch_lag)
    assert any(c.pp == 1 and run_overlaps(c) for c in vllm)
    assert {case_fetch_lag(c) for c in vllm} == {0.0}
