"""An open loop's running batch is Little's law over the engine's running set, not over the whole system (issue 21,
found by vllmttft33): a request joins the running batch at its first scheduled step (vLLM's Scheduler `running`,
SGLang's `running_batch`), so the time it waits before that (the prefill server's queue, the scheduler's poll, the
front end's crossing) holds no slot: B = rate x (E2E - waiting) (kvplan.speed.load.batch_and_mode, the `waiting`
pseudo-metric, kvplan.speed.fit.settle's fixed point). SGLang merges a request into `running_batch` only after its
prefill batch has run (issue 21, loadfix34: kvplan.engines.joining.joins_after_prefill), so there its prefill holds
no slot either: B = rate x (E2E - TTFT) (the `outside` pseudo-metric)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from kvplan.bench.running import running
from kvplan.engines.joining import joins_after_prefill
from kvplan.speed.corpus import in_training
from kvplan.speed.fit import build_all, predict, settle
from kvplan.speed.bench_load import Load, at_rate, decode_context
from kvplan.speed.load import batch_and_mode, combos, value
from kvplan.speed.model import coefficients, decode_features
from conftest import speed_cases

T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0  # made-up step costs, as tests/test_speed_load.py's
CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_waiting_requests_are_not_in_the_running_batch():
    # 10 requests/s, E2E 5 s of which 1 s before the first scheduled step: Little's law over the running set,
    # 10 x (5 - 1) = 40 running, not 10 x 5 = 50; no waiting told: 50 as before
    load = Load(1000, 101, rate=10.0, num_prompts=1000, cap=256)
    assert batch_and_mode(load, 5.0, None, 1.0) == (40.0, 40.0, False)
    assert batch_and_mode(load, 5.0) == (50.0, 50.0, False)
    # two replicas share the rate: 10 / 2 x (5 - 1) = 20 each
    assert batch_and_mode(replace(load, dp=2), 5.0, None, 1.0)[0] == 20.0
    # a closed loop's c is its concurrency whatever waits: 8
    assert batch_and_mode(Load(1000, 101, concurrency=8, num_prompts=80), 5.0, None, 1.0)[0] == 8.0


def test_the_waiting_figure_is_ttft_before_the_request_runs():
    # 1 request/s, E2E estimated 3 s (B = 3), S estimated 0.5 s: rho 0.5, M/D/1's wait 0.5 / (2 x 0.5) = 0.5 S at
    # S = t_wave / B = 4 / 3 s: 2 / 3 s (tests/test_speed_load.py's open loop). TTFT = t_grp + 1 x t_dec + 2 / 3 =
    # 2.7667 s, of which the request runs from its prefill on: waiting = 2 / 3 s
    load = Load(1000, 101, rate=1.0, num_prompts=1000, cap=256)
    cm = combos(load, 3.0, 0.5)[2]
    assert math.isclose(value(cm["waiting"], T_WAVE, T_DEC, T_GRP), 2 / 3)
    assert math.isclose(value(cm["ttft"], T_WAVE, T_DEC, T_GRP) - 2 / 3, 2.1)
    # a scheduler polling every 10th decode step (poll_wait 4.5 steps): 4.5 x 0.1 = 0.45 s more waiting, in TTFT too
    cm = combos(replace(load, poll_wait=4.5), 3.0, 0.5)[2]
    assert math.isclose(value(cm["waiting"], T_WAVE, T_DEC, T_GRP), 2 / 3 + 0.45)
    assert math.isclose(value(cm["ttft"], T_WAVE, T_DEC, T_GRP), 2.1 + 2 / 3 + 0.45)
    # with E2E 3 s and waiting 1.5 s estimated: B = 1 x (3 - 1.5) = 1.5, S = t_wave / B = 4 / 1.5 s
    assert combos(load, 3.0, 0.5, None, 1.5)[0] == 1.5


def test_the_settled_open_loop_runs_rate_times_its_time_running():
    # every training open-loop point at a rate that settles below its running cap with a wait priced (shipped
    # coefficients): its settled figures are a fixed point (one more pass moves E2E < 1%), and the decode step they
    # price runs B = rate / dp x (E2E - waiting) requests (within one request and the cap), not rate / dp x E2E
    cases, _ = speed_cases()
    cases = [c for c in cases if in_training(c.source) and at_rate(c.load) and c.load.bench == "serve"]
    built, _ = build_all(cases, running)
    checked = 0
    for b in built:
        out = settle(b, coefficients(b.case.era))
        load = b.load
        if out["rho_cap"] >= 1 or out["outside"] < 0.01 * out["e2el"]:
            continue
        again = predict(b, coefficients(b.case.era), out)
        assert math.isclose(again["e2el"], out["e2el"], rel_tol=0.01), (b.case.source, b.case.id)
        n = (load.num_prompts or 1e9) / load.dp
        want = max(1.0, min(load.rate / load.dp * (out["e2el"] - out["outside"]), n, load.cap))
        assert b.parts(out)[1] == decode_features(b.shape, want, decode_context(load)), (b.case.source, b.case.id)
        checked += 1
    assert checked >= 10  # 14 at the shipped coefficients of round 33


def test_sglang_counts_a_request_running_from_its_first_token():
    # 10 requests/s, E2E 5 s; W = 1 s before the first scheduled step (a poll of 21 decode steps, 10 beyond the
    # default's half step, at t_dec 0.1 s, no arrival wait told); the poll hands over the arrivals of its 21 steps,
    # 50 running of 101 output tokens: 1 + 21 x 50 / 101 = 11.4 prompts (kvplan.speed.balance.polled), 11,396 tokens in
    # two 8,192-token chunks, prefilled in t_grp + 2 x t_dec = 0.1 + 0.2 = 0.3 s, so TTFT = 1.3 s. SGLang merges the
    # request into running_batch only after that prefill batch: 10 x (5 - 1 - 0.3) = 37 running; vLLM's V1 counts it
    # in `running` from its first scheduled step: 10 x (5 - 1) = 40
    t_wave, t_dec, t_grp = 1.0, 0.1, 0.1
    load = Load(1000, 101, rate=10.0, num_prompts=1000, cap=256, arrival_cv2=None, poll_wait=10.0)
    for late, want_outside, want_b in ((True, 1.3, 37.0), (False, 1.0, 40.0)):
        cm = combos(replace(load, joins_late=late), 5.0)[2]
        assert math.isclose(value(cm["waiting"], t_wave, t_dec, t_grp), 1.0)
        assert math.isclose(value(cm["ttft"], t_wave, t_dec, t_grp), 1.3)
        outside = value(cm["outside"], t_wave, t_dec, t_grp)
        assert math.isclose(outside, want_outside)
        b = combos(replace(load, joins_late=late), 5.0, None, None, outside)[0]
        assert math.isclose(b, want_b)


def test_which_engines_join_the_running_batch_after_the_prefill():
    # SGLang's get_next_batch_to_run merges the last extend batch into running_batch; vLLM's V1 scheduler appends a
    # request to `running` in the step that schedules its first chunk (kvplan.engines.joining's citations);
    # TensorRT-LLM is in no such rule of kvplan's
    assert joins_after_prefill("sglang")
    assert not joins_after_prefill("vllm") and not joins_after_prefill("trtllm") and not joins_after_prefill(None)
