"""SGLang's --scheduler-recv-interval (kvplan.engines.scheduler.poll_wait_steps, kvplan.speed.load `poll_wait`): a
scheduler told to poll for new requests every n-th decode step keeps a request that arrives while it decodes waiting
(n - 1) / 2 steps more on average, in TTFT and end-to-end (issue 21, SGLang before 0.5.14's TTFT)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.bench.running import case_poll_wait
from kvplan.engines.scheduler import poll_wait_steps
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_the_wait_is_half_the_interval_less_the_default_half_step():
    # sgl-project/sglang v0.5.12 wheel srt/managers/scheduler_recv_skipper.py `handle`: the counter grows by 1 after
    # each decode batch (srt/environ.py L229-232: SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE = 1, _DEFAULT = 1000)
    # and receives at the threshold, so with --scheduler-recv-interval 30 it polls once every 30 decode steps: an
    # arrival uniform over that cycle waits 30 / 2 = 15 steps, the default (poll every step) 1 / 2: 14.5 more
    assert poll_wait_steps("sglang", {"scheduler_recv_interval": 30}) == 14.5
    assert poll_wait_steps("sglang", {"scheduler_recv_interval": 10}) == 4.5  # 10 / 2 - 1 / 2
    assert poll_wait_steps("sglang", {"scheduler_recv_interval": 1}) == 0.0  # server_args.py L766: the default 1
    assert poll_wait_steps("sglang", {}) == 0.0
    assert poll_wait_steps("vllm", {"scheduler_recv_interval": 30}) == 0.0  # no such option
    # SchedulerRecvSkipper.__init__: `assert not server_args.enable_dp_attention`
    assert poll_wait_steps("sglang", {"scheduler_recv_interval": 30}, attention_dp=True) == 0.0


def test_a_spread_arrival_waits_the_steps_in_ttft_and_e2e_only():
    base = Load(isl=1000, osl=1000, concurrency=64, num_prompts=640, cap=256, drawn=True, out_cv2=0.01, waves=True)
    polled = replace(base, poll_wait=14.5)
    b0, _, plain = combos(base)
    b1, _, waits = combos(polled)
    assert b0 == b1 == 64
    # drawn lengths: a closed loop's later requests arrive spread, 640 - 64 of the 640 (share 64 / 640 = 0.1 is the
    # first wave's, which arrives to an idle engine): 0.9 x 14.5 = 13.05 more decode steps in TTFT and in E2E
    assert abs((waits["ttft"][1] - plain["ttft"][1]) - 0.9 * 14.5) < 1e-9
    assert abs((waits["e2el"][1] - plain["e2el"][1]) - 0.9 * 14.5) < 1e-9
    assert all(abs(x - y) < 1e-12 for x, y in zip(waits["tpot"], plain["tpot"]))  # (E2E - TTFT) / (osl - 1): in both
    assert waits["output_throughput"] == plain["output_throughput"]
    one = replace(polled, concurrency=1, num_prompts=10)  # a lone request finds the engine idle
    assert combos(one)[2]["ttft"] == combos(replace(one, poll_wait=0.0))[2]["ttft"]
    burst = replace(polled, concurrency=None, num_prompts=640)  # all queued before the run starts
    assert combos(burst)[2]["ttft"] == combos(replace(burst, poll_wait=0.0))[2]["ttft"]


def test_the_corpus_runs_that_state_an_interval():
    # InferenceX's DeepSeek-R1 SGLang scripts pass --scheduler-recv-interval 10, 30 from concurrency 16
    # (SemiAnalysisAI/InferenceX@d4948f9937486c4d2f6b1643c4115a4c09eb976f:benchmarks/single_node/dsr1_fp8_b200.sh)
    cases, _ = speed_cases()
    waits = {(c.source, c.id): case_poll_wait(c) for c in cases if c.engine == "sglang" and case_poll_wait(c)}
    assert {s for s, _ in waits} == {"inferencex-run-26306422380", "inferencex-pr-3183"}
    assert set(waits.values()) == {4.5, 14.5}
