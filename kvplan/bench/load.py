"""A benchmark run's load as simulator requests: fixed lengths, all at once, Poisson at a rate, or closed loop.

The serving benchmarks drive a server in one of two ways (vllm-project/vllm@v0.10.1:vllm/benchmarks/serve.py,
sgl-project/sglang@v0.4.6:python/sglang/bench_serving.py): requests sent at `--request-rate` (Poisson
arrivals when burstiness is 1, gamma gaps of that shape otherwise; every request at once when the rate is inf), and
at most `--max-concurrency` in flight (a client-side semaphore: a new request is sent when one finishes). The
simulator takes arrival times, so the closed loop is found by iteration (`closed_loop`): run with the
engine capped at C, send request i + C when the i-th request finishes, run again uncapped.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from kvplan.simulator.engine import Engine
from kvplan.simulator.workload import SimRequest

MAX_REQUESTS = 4000  # a longer run is cut (steady state is reached well before; said in a note)
MAX_TOKENS = 10_000_000  # prompt + output tokens simulated per run: a hostile file cannot ask for hours
DEFAULT_REQUESTS = 200
PASSES = 2  # closed-loop passes: the first (capped at C) already spaces equal requests; the second checks it
SEED = 0


def request_count(wanted: int, isl: int, osl: int) -> int:
    """Requests to simulate: the run's, at most MAX_REQUESTS and MAX_TOKENS tokens in all (at least one)."""
    return max(1, min(wanted, MAX_REQUESTS, MAX_TOKENS // max(1, isl + osl)))


def requests(isl: int, osl: int, n: int, rate: float | None, seed: int = SEED,
             burstiness: float | None = None) -> list[SimRequest]:
    """`n` requests of `isl` prompt and `osl` output tokens: Poisson at `rate` req/s, or, with a `burstiness`
    k other than 1, gaps of gamma(shape k, scale 1 / (rate k)) as vLLM draws them (mean 1 / rate); all at
    t = 0 where the rate is None or inf."""
    out, t = [], 0.0
    rng = random.Random(seed)
    gamma = burstiness is not None and burstiness > 0 and burstiness != 1
    for i in range(n):
        if rate is not None and math.isfinite(rate):
            t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness)) if gamma else rng.expovariate(rate)
        out.append(SimRequest(i, t, isl, osl))
    return out


def closed_loop(model, config, reqs: list[SimRequest], concurrency: int, passes: int = PASSES) -> list[SimRequest]:
    """`reqs` (sorted by arrival) with arrivals moved so that at most `concurrency` are in flight: the j-th
    request is sent when the (j - C)-th to finish does, and not before its own arrival at the rate, if any.
    The first pass caps the engine at C running (the queue the client keeps), so its finish times already
    space the waves; later passes run uncapped on the moved arrivals (TTFT from when the client sends).
    Arrivals stay sorted (both sequences are), so request ids stay the order of arrival."""
    base = [r.arrival for r in reqs]
    cur = reqs
    for k in range(passes):
        cfg = replace(config, max_num_seqs=min(config.max_num_seqs, concurrency)) if k == 0 else config
        ends = sorted(f for f in Engine(model, cfg).run(cur).finish if f >= 0)
        if not ends:
            return cur
        cur = [SimRequest(j, base[j] if j < concurrency else max(base[j], ends[min(j - concurrency, len(ends) - 1)]),
                          r.prompt, r.output) for j, r in enumerate(reqs)]
    return cur
