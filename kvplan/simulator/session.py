"""One `kvplan simulate` run from start to files: requests, one or more allocators, results.

`RUNS` names the allocator set-ups a run can compare: the paged pool (vLLM's) and the three
contiguous reservations of the PagedAttention paper's baselines.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.simulator.engine import EngineConfig, Engine
from kvplan.simulator.traces import load_trace
from kvplan.simulator.workload import SimRequest, find_workload, generate

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


@dataclass(frozen=True)
class LoadedRequests:
    """The requests a workload or trace made, what they are (for the JSON meta) and one line for stderr;
    `trace_rows`: a trace's requests as read, before --qps/--duration shaped them (simulate --find-rate
    reshapes them at each rate it tries without reading the file again), None for a workload."""

    requests: list
    meta: dict
    said: str
    trace_rows: list | None = None


def load_requests(workload, trace, trace_format, qps, duration, seed) -> LoadedRequests:
    """The requests of a workload (Poisson arrivals at `qps`, default 10/s, over `duration`, default 300 s) or a
    trace (shaped by `qps` and `duration`): the CLI's and the Python API's one reading of them."""
    if trace is not None:
        rows, info = load_trace(str(trace), trace_format)
        reqs = shape_trace(rows, qps, duration)
        desc = {"trace": str(trace), "trace_format": info["format"], "requests": len(reqs),
                "trace_rows_dropped_zero_length": info["dropped_zero_length"]}
        if qps:
            desc["rescaled_to_qps"] = qps
        said = (f"trace {trace} ({info['format']}): {len(reqs):,} requests"
                + (f" ({info['dropped_zero_length']:,} rows with 0 tokens dropped)"
                   if info["dropped_zero_length"] else ""))
        return LoadedRequests(reqs, desc, said, rows)
    w = find_workload(workload or "chat")
    qps, duration = qps or 10.0, duration or 300.0
    reqs = generate(w, qps, duration, seed)
    said = f"workload {w.name}: {len(reqs):,} requests, Poisson {qps:g}/s over {duration:g} s, seed {seed} ({w.source})"
    return LoadedRequests(reqs, {"workload": w.name, "workload_source": w.source, "qps": qps, "duration_s": duration,
                                 "seed": seed, "requests": len(reqs)}, said)


def run_all(model, requests, runs: dict, slo_ttft: float, slo_tpot: float, progress=None, released=None) -> dict:
    """{run name: (summary, time series)} for each engine config, on the same requests (`released`: when the engine
    sees each, where a front end it shares decided it: kvplan.simulator.engine.Engine.run)."""
    out = {}
    for k, (name, cfg) in enumerate(runs.items()):
        tick = None if progress is None else (lambda done, total, k=k: progress(k * total + done, len(runs) * total))
        rec = Engine(model, cfg).run(requests, progress=tick, released=released)
        out[name] = (rec.summary(slo_ttft, slo_tpot), rec.series)
        if progress is not None:
            progress((k + 1) * len(requests), len(runs) * len(requests))
    return out

