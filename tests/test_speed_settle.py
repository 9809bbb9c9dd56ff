"""An open loop's batch, settled (kvplan.speed.fit.settle): Little's law's fixed point c = r x E2E(c) below the
replica's capacity at its running cap, the overload of kvplan.speed.load at or past it, whatever the pass count."""

import math

from conftest import read_point
from kvplan.speed.fit import Built, predict, rho_cap_of, settle
from kvplan.speed.load import batch_and_mode
from kvplan.speed.model import coefficients


def _built(rate: float) -> Built:
    point = {"engine": "vllm", "gpu": "h100-sxm", "version": "0.19.0", "isl": 1000, "osl": 200, "request_rate": rate,
             "arrival": "poisson", "num_prompts": 2000, "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "dp": 1,
             "tp": 1, "metrics": {"ttft_ms": 100}}
    c = read_point(point)
    return Built(c)


def test_below_the_cap_the_open_loop_settles_on_littles_law_fixed_point():
    coef = coefficients("vllm")
    b = _built(2.0)
    assert rho_cap_of(b, coef) < 1
    out = settle(b, coef)
    again = predict(b, coef, out)  # one more pass from the settled load moves E2E by less than 0.1%
    assert math.isclose(again["e2el"], out["e2el"], rel_tol=2e-3)
    batch, c, _ = batch_and_mode(b.load, out["e2el"])
    assert math.isclose(c, 2.0 * out["e2el"]) and batch == c  # c = r x E2E, under the cap


def test_past_the_cap_the_open_loop_is_overloaded_and_its_queue_grows():
    # rho_cap = r x T(cap) is linear in r: at 10x the capacity rate (1 / T(cap) requests/s) it is 10;
    # the k-th of N = 2,000 then waits max(0, 0.9 (k - 1) + 1 - cap) T (kvplan.speed.queueing.overload_wait), more
    # than the fluid's 0.9 k - cap, a mean 0.9 x (N - k0)^2 / 2N, k0 = cap / 0.9: the first k0 arrivals find a running
    # slot; at the cap of 256 requests or fewer, k0 <= 285, TTFT past 0.9 x 1,715^2 / 4,000 = 661 T
    coef = coefficients("vllm")
    b = _built(1.0)
    capacity = 1.0 / rho_cap_of(b, coef)
    over = _built(10 * capacity)
    assert math.isclose(rho_cap_of(over, coef), 10.0)
    out = settle(over, coef)
    t_cap = 1.0 / out["request_throughput"]
    assert math.isclose(t_cap, 1 / capacity, rel_tol=1e-9)  # the batch runs at the cap
    assert over.load.cap <= 256
    assert out["ttft"] > 0.9 * (2000 - over.load.cap / 0.9) ** 2 / 4000 * t_cap
    assert out["ttft"] < 1999 / 2 * 0.9 * t_cap  # not D/D/1's from the first request (no running slots)
