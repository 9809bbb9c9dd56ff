"""The workload options `simulate`, `sweep` and `cheapest` share, and turning them into requests.

A workload is a built-in length distribution with Poisson arrivals (`--workload`, `--qps`,
`--duration`, `--seed`) or a trace (`--trace`, `--trace-format`; `--qps` rescales it, `--duration`
cuts it), judged against an SLA (`--slo-ttft`, `--slo-tpot`, `--slo-percent`).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.simulator.bounds import check_times
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.simulator.session import shape_trace
from kvplan.simulator.traces import load_trace
from kvplan.simulator.workload import find_workload, generate

WorkloadOpt = Annotated[Optional[str], typer.Option("--workload", "-w", help="Built-in length distribution: chat, rag, code, sharegpt, alpaca (see docs/simulate.md).")]
TraceOpt = Annotated[Optional[Path], typer.Option("--trace", help="Replay a trace: CSV or JSONL (arrival, input_tokens, output_tokens[, prefix_id, prefix_tokens]), or the Azure LLM, BurstGPT or Mooncake layouts.")]
TraceFormatOpt = Annotated[str, typer.Option("--trace-format", help="auto, kvplan, azure, burstgpt, mooncake or bailian.")]
QpsOpt = Annotated[Optional[float], typer.Option("--qps", help="Mean arrivals per second (Poisson; default 10). With --trace: rescale its arrivals to this rate.")]
DurationOpt = Annotated[Optional[float], typer.Option("--duration", help="Seconds of arrivals (default 300). With --trace: keep the first seconds only.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed of the workload.")]
SloTtftOpt = Annotated[float, typer.Option("--slo-ttft", help="SLA: time to first token at most this many seconds.")]
SloTpotOpt = Annotated[float, typer.Option("--slo-tpot", help="SLA: time per output token at most this many seconds.")]
SloPercentOpt = Annotated[float, typer.Option("--slo-percent", help="SLA: percent of requests that must meet both targets.")]


def check_workload_flags(workload, trace, qps, duration, seed, slo_ttft, slo_tpot, slo_percent) -> None:
    """Every workload flag checked before anything runs."""
    if trace is not None and workload is not None:
        raise KvplanError("give --workload or --trace, not both", EXIT_USAGE)
    check_times(qps=qps, duration=duration, slo_ttft=slo_ttft, slo_tpot=slo_tpot)  # kvplan.simulator.bounds
    if not 0 <= seed <= 2**63:
        raise KvplanError(f"--seed must be between 0 and {2**63:,}, got {seed}", EXIT_USAGE)
    if not 0 < slo_percent <= 100:
        raise KvplanError(f"--slo-percent must be in (0, 100], got {slo_percent:g}", EXIT_USAGE)


@dataclass(frozen=True)
class LoadedRequests:
    """The requests a workload or trace made, what they are (for the JSON meta) and one line for stderr;
    `trace_rows`: a trace's requests as read, before --qps/--duration shaped them (simulate --find-rate
    reshapes them at each rate it tries without reading the file again), None for a workload."""

    requests: list
    meta: dict
    said: str
    trace_rows: Optional[list] = None


def load_requests(workload, trace, trace_format, qps, duration, seed) -> LoadedRequests:
    """The requests of --workload (Poisson arrivals) or --trace (shaped by --qps and --duration)."""
    if trace is not None:
        rows, info = load_trace(str(trace), trace_format)
        reqs = shape_trace(rows, qps, duration)
        desc = {"trace": str(trace), "trace_format": info["format"], "requests": len(reqs),
                "trace_rows_dropped_zero_length": info["dropped_zero_length"]}
        if qps:
            desc["rescaled_to_qps"] = qps
        said = (f"trace {trace} ({info['format']}): {len(reqs):,} requests"
                + (f" ({info['dropped_zero_length']:,} rows with 0 tokens dropped)" if info["dropped_zero_length"] else ""))
        return LoadedRequests(reqs, desc, said, rows)
    w = find_workload(workload or "chat")
    qps, duration = qps or 10.0, duration or 300.0
    reqs = generate(w, qps, duration, seed)
    said = f"workload {w.name}: {len(reqs):,} requests, Poisson {qps:g}/s over {duration:g} s, seed {seed} ({w.source})"
    return LoadedRequests(reqs, {"workload": w.name, "workload_source": w.source, "qps": qps, "duration_s": duration,
                                 "seed": seed, "requests": len(reqs)}, said)


def sla_text(slo_ttft: float, slo_tpot: float, slo_percent: float) -> str:
    return f"{slo_percent:g}% of requests within TTFT ≤ {slo_ttft:g} s and TPOT ≤ {slo_tpot * 1e3:g} ms"
