"""A served burst's throughput under an engine whose front end hands each request on as it tokenises it
(kvplan.speed.frontend: `PIPELINED`, `front_share`, `divisor_row`): SGLang's TokenizerManager sends each request to the
Scheduler at once (sglang 0.5.3 wheel, srt/managers/tokenizer_manager.py L400-402, L815), so the front end's crossings
run beside the engine's steps and a request's time in the run is the longer of the two, not their sum; vLLM keeps the
sum. Hand arithmetic on the divisor; the fit's rows stay the predictions, linear at the previous pass."""

import math

import pytest

from kvplan.bench.running import running
from kvplan.speed.fit import build_all, predict, rows_for
from kvplan.speed.frontend import divisor_row, front_share, ingress_queue, ingress_rate
from kvplan.speed.model import coefficients
from kvplan.speed.terms import TERMS
from conftest import speed_cases

INGRESS = TERMS.index("ingress")


def test_a_pipelined_front_end_adds_only_what_it_takes_beyond_the_engine():
    # one replica, 6 ms of engine time a request: a front end at 2 ms a request runs inside it (adds 0), one at 8 ms
    # sets the pace (adds 8 - 6 = 2 ms: the divisor is 8 ms); vLLM's adds the 2 ms whatever the engine's time
    assert front_share("sglang", 0.002, 0.006) == 0.0
    assert math.isclose(front_share("sglang", 0.008, 0.006), 0.002)
    assert front_share("vllm", 0.002, 0.006) == 0.002
    # the fit's row: the engine's features [1, 2] (and none of ingress, column 2) at coefficients [0.5, 0.25] give
    # 1 s; 3 crossings at 0.25 s give 0.75 s (the engine's row kept), at 0.5 s 1.5 s (the front end's row: 3 crossings,
    # no engine feature)
    assert divisor_row([1.0, 2.0, 0.0], 3.0, "sglang", [0.5, 0.25, 0.25], 2) == [1.0, 2.0, 0.0]
    assert divisor_row([1.0, 2.0, 0.0], 3.0, "sglang", [0.5, 0.25, 0.5], 2) == [0.0, 0.0, 3.0]
    assert divisor_row([1.0, 2.0, 0.0], 3.0, "sglang", None, 2) == [1.0, 2.0, 0.0]  # first pass: the engine's
    assert divisor_row([1.0, 2.0, 0.0], 3.0, "vllm", [0.5, 0.25, 0.5], 2) == [1.0, 2.0, 3.0]


@pytest.fixture(scope="module")
def glm_burst():
    # GPUStack's GLM-4.6 FP8 on 4 x H200 under SGLang 0.5.3: 1,000 random prompts of 128 tokens, 4 out, all sent at
    # once (vllm bench serve, request rate inf), one replica: d = 1, N = 1,000
    cases, _ = speed_cases()
    case = next(c for c in cases if (c.source, c.id) == ("gpustack-perflab-glm-4x-h200", "L514-sglang"))
    (built,), _ = build_all([case], running)
    assert ingress_queue(built.load) == 1000.0 and ingress_rate(built.load) == 1.0
    return built


def _at(ingress: float) -> list:
    coef = list(coefficients("sglang<0.5.14"))
    coef[INGRESS] = ingress
    return coef


def test_sglangs_burst_throughput_is_the_engines_until_the_front_end_is_slower(glm_burst):
    alone = predict(glm_burst, _at(0.0))
    t_engine = glm_burst.load.osl / alone["output_throughput"]  # the engine's seconds a request (osl / rate, d = 1)
    assert t_engine > 0.002
    fast = predict(glm_burst, _at(0.002))
    # 2 ms a request in the front end: TTFT and E2E + 1,000 x 2 ms = 2 s, the output rate the engine's
    assert math.isclose(fast["ttft"] - alone["ttft"], 2.0) and math.isclose(fast["e2el"] - alone["e2el"], 2.0)
    assert math.isclose(fast["output_throughput"], alone["output_throughput"])
    # a front end slower than the engine (t_engine < 1 s < 2 s a request) paces the run: osl / 1 s, then osl / 2 s
    slow, slower = predict(glm_burst, _at(1.0)), predict(glm_burst, _at(2.0))
    assert math.isclose(slow["output_throughput"], glm_burst.load.osl / 1.0)
    assert math.isclose(slower["output_throughput"], glm_burst.load.osl / 2.0)


@pytest.mark.parametrize("ingress", [0.002, 1.0])
def test_the_fit_rows_are_the_predictions_on_either_side(glm_burst, ingress):
    # at the previous pass's coefficients (the same ones here) each row . coef is predicted / measured (a time) or
    # measured / predicted (a rate), whichever side of the engine's time the front end falls
    coef = _at(ingress)
    pred = predict(glm_burst, coef)
    for row, metric in rows_for(glm_burst, coef):
        y = glm_burst.case.targets[metric]
        got = sum(r * c for r, c in zip(row, coef))
        want = pred[metric] / y if metric in ("ttft", "e2el", "tpot") else y / pred[metric]
        assert math.isclose(got, want, rel_tol=1e-9), metric
