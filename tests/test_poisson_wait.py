"""The analytic load model's Poisson wait (kvplan.speed.queueing.arrival_wait at Poisson arrivals, M/D/1) against
simulate's event simulator (kvplan.simulator.engine), which runs Poisson arrivals step by step: prompts of one full
prefill chunk each (8,192 tokens, max_num_batched_tokens 8,192) and one output token, so every request's prefill is one
step of S seconds served in turn. The wait Poisson arrivals add is the mean TTFT under Poisson arrivals less the mean
TTFT under evenly spaced ones at the same rate (which never queue below rho 1)."""

import random

from kvplan import api
from kvplan.hardware.gpus import find_gpu
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.workload import SimRequest
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.queueing import arrival_wait

ISL, N = 8192, 20000


def _mean_ttft(model, cfg, requests) -> float:
    return Engine(model, cfg).run(requests).summary(100.0, 100.0)["latency_s"]["ttft"]["mean"]


def test_simulated_poisson_wait_matches_md1():
    model = sim_model(api.plan("llama-3.1-8b", "h100", context=ISL + 64), find_in_catalog("llama-3.1-8b"),
                      find_gpu("h100"))
    cfg = EngineConfig(max_num_seqs=256, max_num_batched_tokens=ISL, prefix_caching=False)
    s = _mean_ttft(model, cfg, [SimRequest(0, 0.0, ISL, 1)])  # one request alone: its prefill step
    for rho, tol in ((0.3, 0.05), (0.5, 0.05), (0.7, 0.1)):
        rate, rng, t, arrivals = rho / s, random.Random(1), 0.0, []
        for _ in range(N):
            t += rng.expovariate(rate)
            arrivals.append(t)
        poisson = _mean_ttft(model, cfg, [SimRequest(i, a, ISL, 1) for i, a in enumerate(arrivals)])
        even = _mean_ttft(model, cfg, [SimRequest(i, (i + 1) / rate, ISL, 1) for i in range(N)])
        assert abs(even - s) / s < 1e-6  # evenly spaced below rho 1: no request waits
        # seed 1, 20,000 requests: simulated 0.222 / 0.508 / 1.168 S; M/D/1: 0.214 / 0.500 / 1.167 S
        assert abs((poisson - even) / s - arrival_wait(rho, 1e9)) < tol
