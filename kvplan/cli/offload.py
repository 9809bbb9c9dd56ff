"""The offload flags (`--offload`, `--offload-backend`, `--host`) for fit, sweep, cheapest and simulate.

Parsing and checking happen before any model is read (kvplan.planning.offload, kvplan.hardware.hosts);
the tiers are sized by kvplan.engines.offload, shown by kvplan.report.offload; the trace's curve is
kvplan.simulator.offload's. Everything said about assumptions goes to stderr; the tiers go to stdout
(a table) or into --json.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, NamedTuple, Optional

import typer

from kvplan.cli._common import stderr
from kvplan.compare.offload import check_tiers
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.units import plural
from kvplan.engines.offload import BACKENDS, OffloadPlan, check_backend, offload_pools, with_offload
from kvplan.hardware.hosts import Host, find_host
from kvplan.planning.offload import TierRequest, parse_offload
from kvplan.report.offload import offload_dict, offload_table
from kvplan.report.text import format_warning

OffloadOpt = Annotated[Optional[str], typer.Option(
    "--offload", help="KV tiers below the GPU: TIER:SIZE[,TIER:SIZE], tiers cpu, disk, remote; SIZE for the whole "
    "deployment (64GiB, 2TB) or a ratio of the GPU pool (2x); cpu:auto (simulate --trace) sizes the cpu tier at the "
    "knee of the trace's hit-rate curve.")]
OffloadBackendOpt = Annotated[str, typer.Option(
    "--offload-backend", help=f"Who keeps the tiers: {', '.join(BACKENDS)} (native: the engine's own; kvbm: Dynamo).")]
HostOpt = Annotated[Optional[str], typer.Option(
    "--host", help="Host profile: a bundled server (dgx-h100, dgx-h200, gb200-nvl72-tray) or a YAML file "
    "of the same keys (DRAM, links, NVMe, NIC; hosts/README.md in kvplan's hardware folder).")]


@dataclasses.dataclass(frozen=True)
class OffloadFlags:
    """The three flags as given (an option group: kvplan.cli._common.grouped); `parse()` checks them."""

    offload: OffloadOpt = None
    offload_backend: OffloadBackendOpt = "native"
    host: HostOpt = None

    def parse(self) -> Offload:
        return parse_flags(self.offload, self.offload_backend, self.host)

    def checked(self, engine) -> Offload:
        """parse(), and the tiers asked refused once where `engine` runs none of them (check_tiers), before the work
        of many deployments (sweep, cheapest)."""
        asked = self.parse()
        if asked.tiers:
            check_tiers(engine, asked.tiers, asked.backend)
        return asked


class Offload(NamedTuple):
    """What the three flags asked for, checked."""

    tiers: tuple[TierRequest, ...]
    backend: str
    host: Host | None


def parse_flags(offload: Optional[str], backend: str, host: Optional[str]) -> Offload:
    """The tiers, backend and host profile, checked before any work."""
    tiers = parse_offload(offload)
    check_backend(backend)
    if not tiers and (backend != "native" or host is not None):
        raise KvplanError("--offload-backend and --host describe offload tiers: give --offload too", EXIT_USAGE)
    return Offload(tiers, backend, find_host(host) if host else None)


def plan_offload(engine, plan, spec, offload: Offload, quiet: bool = False) -> OffloadPlan:
    """The OffloadPlan of one plan as `engine` made it, its assumptions said on stderr."""
    op = offload_pools(engine, plan, spec, offload.tiers, offload.backend, offload.host)
    if not quiet:
        say(op)
    return op


def say(op: OffloadPlan) -> None:
    """The tiers' assumptions, rules and warnings on stderr."""
    g, host = op.geometry, op.host
    who = f"{g.engine} {g.version}".strip()
    stderr(f"note: offload tiers as {who} ({op.backend}) sizes them: {g.bytes_per_token:,} B per token per GPU, "
           f"pages of {g.block_size}, {plural(g.ranks, 'GPU')}; SIZE is for the whole deployment")
    if host is not None:
        stderr(f"note: host {host.key}: {host.dram_bytes / 2**30:,.0f} GiB DRAM less a "
               f"{host.ram_reserve_bytes / 2**30:g} GiB reserve, {host.link_type} at {host.link_bytes_per_s / 1e9:g} "
               f"GB/s per GPU (confidence {host.confidence})")
        for field, rule in host.estimates:
            stderr(f"note: host {host.key}: {field} is an estimate: {rule}")
    for p in op.tiers:
        stderr(f"note: {p.tier}: {p.rule}")
        for n in p.notes:
            stderr(f"note: {p.tier}: {n}")
    for w in op.warnings:
        stderr(f"warning: {format_warning(w)}")


def for_result(engine, result, spec, offload: Offload | None) -> OffloadPlan | None:
    """fit: the OffloadPlan of the chosen result, or None without --offload."""
    if offload is None or not offload.tiers:
        return None
    return plan_offload(engine, result.plan, spec, offload)


def into_output(out: dict, op: OffloadPlan | None, command: str | None) -> str | None:
    """fit --json gets the tiers; the --emit command gets their settings."""
    if op is None:
        return command
    out["offload"] = offload_dict(op)
    return with_offload(command, op) if command else command


def render(console, op: OffloadPlan) -> None:
    console.print(offload_table(op))
