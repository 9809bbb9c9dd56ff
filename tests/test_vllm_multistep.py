"""vLLM V0's multi-step scheduling (`--num-scheduler-steps n`, kvplan.engines.scheduler.POLL_INTERVAL_OPTS): the
engine calls its scheduler once every n forward steps, so a request that arrives while it decodes waits for the
block's end, (n - 1) / 2 decode steps more than at the default n = 1 (issue 21, vLLM's optimistic TTFT; AMD's MLPerf
v5.1 Server and Interactive harness configs state 8-10)."""

from __future__ import annotations

from pathlib import Path

from kvplan.bench.running import case_poll_wait
from kvplan.engines.scheduler import poll_wait_steps
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_the_wait_is_half_the_block_less_the_default_half_step():
    # vllm-project/vllm#7000 (merged 2024-08-19): n forward steps per scheduler call; an arrival uniform over a
    # block of 9 decode steps waits 9 / 2 = 4.5 of them, at n = 1 half a step: 4.5 - 0.5 = 4 more
    assert poll_wait_steps("vllm", {"num_scheduler_steps": 9}) == 4.0
    assert poll_wait_steps("vllm", {"num_scheduler_steps": 8}) == 3.5  # 8 / 2 - 1 / 2
    assert poll_wait_steps("vllm", {"num_scheduler_steps": 1}) == 0.0  # the default: a scheduler call every step
    assert poll_wait_steps("vllm", {}) == 0.0
    assert poll_wait_steps("sglang", {"num_scheduler_steps": 9}) == 0.0  # not SGLang's option
    assert poll_wait_steps("trtllm", {"num_scheduler_steps": 9}) == 0.0


def test_the_corpus_runs_that_state_multi_step():
    # AMD's v5.1 harness configs (mlcommons/inference_results_v5.1@965182b0:closed/AMD/code/*/harness_llm/models/):
    # llama2-70b interactive_mi300x 8 (L15), server_mi300x 9 (L21), server_mi325x 9 (L33); mixtral-8x7b server_mi300x
    # 8 and server_mi325x 10 (L18). The same configs set enforce_eager: True (L21, L27, L39, L26, L26), so those runs
    # served without CUDA graphs and the corpus skips them (speed/fields.py GRAPHS_OFF): no priced run waits on a
    # multi-step block today. dstack's 405B runs state 1: no wait
    cases, _ = speed_cases()
    assert not {c.id: case_poll_wait(c) for c in cases if c.engine == "vllm" and case_poll_wait(c)}
    assert not [c for c in cases if c.id.startswith("amd-8xmi3") and c.flags.get("num_scheduler_steps")]
    stated_one = [c for c in cases if c.engine == "vllm" and c.flags.get("num_scheduler_steps") == 1]
    assert stated_one and all(case_poll_wait(c) == 0.0 for c in stated_one)


def test_a_stated_block_reaches_the_running_rules():
    # with no corpus run left that states n > 1, a V0 point stating 9 (as AMD's server_mi300x harness does) still
    # carries its (9 - 1) / 2 = 4 steps' wait from its flags into bench.running's rules; n = 1 carries none
    from kvplan.bench.running import running
    from kvplan.hardware.gpus import find_gpu
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.speed.corpus import case_of

    point = {"engine": "vllm", "gpu": "mi300x", "version": "0.6.6", "isl": 1024, "osl": 128, "concurrency": 4,
             "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1, "metrics": {"tpot_ms": 20}}
    nine, why = case_of({**point, "flags": {"num_scheduler_steps": 9}}, "test", "")
    assert nine is not None, why
    assert case_poll_wait(nine) == 4.0
    spec, gpu = find_in_catalog("llama-3.1-8b-instruct"), find_gpu("mi300x")
    assert running(nine, spec, gpu).poll_wait == 4.0
    one, _ = case_of({**point, "flags": {"num_scheduler_steps": 1}}, "test", "")
    assert case_poll_wait(one) == 0.0
