"""One `kvplan simulate` run from start to files: requests, one or more allocators, results.

`RUNS` names the allocator set-ups a run can compare: the paged pool (vLLM's) and the three
contiguous reservations of the PagedAttention paper's baselines.
"""

from __future__ import annotations

import math

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.simulator.engine import EngineConfig, Engine
from kvplan.simulator.workload import SimRequest

COMPARE = ("paged", "contiguous-max", "contiguous-pow2", "contiguous-oracle")


def configs(base: EngineConfig, compare: bool) -> dict[str, EngineConfig]:
    """{run name: config}: the one asked for, or the paged pool and every contiguous reservation."""
    if not compare:
        name = "paged" if base.mode == "paged" else f"contiguous-{base.reserve}"
        return {name: base}
    return {"paged": replace(base, mode="paged"),
            **{f"contiguous-{r}": replace(base, mode="contiguous", reserve=r) for r in ("max", "pow2", "oracle")}}


def shape_trace(requests: list[SimRequest], qps: float | None, duration: float | None) -> list[SimRequest]:
    """A trace rescaled in time to a mean arrival rate of `qps` (shapes and bursts kept), then cut at `duration` s."""
    if not requests:
        return requests
    if qps is not None:
        span = requests[-1].arrival
        if span <= 0:
            raise KvplanError(f"{arg('qps')} cannot rescale a trace whose requests all arrive at once", EXIT_USAGE,
                              param="qps", value=qps)
        scaled = qps * span
        factor = (len(requests) - 1) / scaled if scaled > 0 else math.inf  # new span = (n - 1) / qps
        if not math.isfinite(factor):  # a rate and span too small for the float clock
            raise KvplanError(f"{arg('qps')} {qps:g} stretches the trace past what a float clock carries", EXIT_USAGE,
                              param="qps", value=qps)
        requests = [replace(r, arrival=r.arrival * factor) for r in requests]
    if duration is not None:
        requests = [r for r in requests if r.arrival < duration]
        if not requests:
            raise KvplanError(f"no request of the trace arrives within {arg('duration')} {duration:g} s", EXIT_USAGE,
                              param="duration", value=duration)
    return requests


def run_all(model, requests, runs: dict, slo_ttft: float, slo_tpot: float, progress=None) -> dict:
    """{run name: (summary, time series)} for each engine config, on the same requests."""
    out = {}
    for k, (name, cfg) in enumerate(runs.items()):
        tick = None if progress is None else (lambda done, total, k=k: progress(k * total + done, len(runs) * total))
        rec = Engine(model, cfg).run(requests, progress=tick)
        out[name] = (rec.summary(slo_ttft, slo_tpot), rec.series)
        if progress is not None:
            progress((k + 1) * len(requests), len(runs) * len(requests))
    return out

