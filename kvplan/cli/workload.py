"""The workload options `simulate`, `sweep`, `cheapest` and `disagg` share (`WorkloadFlags`), and turning them
into requests.

A workload is a built-in length distribution with Poisson arrivals (`--workload`, `--qps`,
`--duration`, `--seed`) or a trace (`--trace`, `--trace-format`; `--qps` rescales it, `--duration`
cuts it), judged against an SLA (`--slo-ttft`, `--slo-tpot`, `--slo-percent`).
"""

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.simulator.inputs import check_workload_inputs
from kvplan.simulator.session import LoadedRequests, load_requests

WorkloadOpt = Annotated[Optional[str], typer.Option(
    "--workload", "-w", help="Built-in length distribution: chat, rag, code, sharegpt, alpaca (see docs/simulate.md).")]
TraceOpt = Annotated[Optional[Path], typer.Option(
    "--trace", help="Replay a trace: CSV or JSONL (arrival, input_tokens, output_tokens[, prefix_id, prefix_tokens]), "
    "or the Azure LLM, BurstGPT or Mooncake layouts.")]
TraceFormatOpt = Annotated[str, typer.Option("--trace-format",
                                             help="auto, kvplan, azure, burstgpt, mooncake or bailian.")]
QpsOpt = Annotated[Optional[float], typer.Option(
    "--qps", help="Mean arrivals per second (Poisson; default 10). With --trace: rescale its arrivals to this rate.")]
DurationOpt = Annotated[Optional[float], typer.Option(
    "--duration", help="Seconds of arrivals (default 300). With --trace: keep the first seconds only.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed of the workload.")]
SloTtftOpt = Annotated[float, typer.Option("--slo-ttft", help="SLA: time to first token at most this many seconds.")]
SloTpotOpt = Annotated[float, typer.Option("--slo-tpot", help="SLA: time per output token at most this many seconds.")]
SloPercentOpt = Annotated[float, typer.Option("--slo-percent",
                                              help="SLA: percent of requests that must meet both targets.")]


def sla_text(slo_ttft: float, slo_tpot: float, slo_percent: float) -> str:
    return f"{slo_percent:g}% of requests within TTFT ≤ {slo_ttft:g} s and TPOT ≤ {slo_tpot * 1e3:g} ms"


@dataclasses.dataclass(frozen=True)
class WorkloadFlags:
    """The requests to serve: a built-in workload or a trace, at a rate, for a time, from a seed (an option group:
    kvplan.cli._common.grouped)."""

    workload: WorkloadOpt = None
    trace: TraceOpt = None
    trace_format: TraceFormatOpt = "auto"
    qps: QpsOpt = None
    duration: DurationOpt = None
    seed: SeedOpt = 0

    @property
    def served(self) -> bool:
        """Whether any requests are asked for."""
        return self.workload is not None or self.trace is not None

    def check(self, **more) -> None:
        """check_workload_inputs on these flags and `more` of a command's (its SLOs, ...)."""
        check_workload_inputs(workload=self.workload, trace=self.trace, qps=self.qps, duration=self.duration,
                              seed=self.seed, **more)

    def load(self) -> LoadedRequests:
        return load_requests(self.workload, self.trace, self.trace_format, self.qps, self.duration, self.seed)
