"""The offload flags (`--offload`, `--offload-backend`, `--host`) for fit and simulate, and their output.

Parsing and checking happen before any model is read; the pools come from kvplan.offload.pools, the
curve from kvplan.offload.mrc. Everything said about assumptions goes to stderr; the tiers go to
stdout (a table) or into --json.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli._common import stderr

OffloadOpt = Annotated[Optional[str], typer.Option(
    "--offload", help="KV tiers below the GPU: TIER:SIZE[,TIER:SIZE], tiers cpu, disk, remote; SIZE for the whole "
                      "deployment (64GiB, 2TB) or a ratio of the GPU pool (2x); cpu:auto (simulate --trace) sizes "
                      "the cpu tier at the knee of the trace's hit-rate curve.")]
OffloadBackendOpt = Annotated[str, typer.Option(
    "--offload-backend", help="Who keeps the tiers: native (the engine's own), lmcache or kvbm (Dynamo).")]
HostOpt = Annotated[Optional[str], typer.Option(
    "--host", help="Host profile: a bundled server (dgx-h100, dgx-h200, gb200-nvl72-tray, aws-p5-48xlarge, "
                   "gcp-a2-highgpu-1g) or a YAML file: DRAM, links, NVMe, NIC.")]


def parse_flags(offload: Optional[str], backend: str, host: Optional[str]):
    """(tier requests, backend, Host or None), checked before any work."""
    from kvplan.core.errors import EXIT_USAGE, KvplanError
    from kvplan.hardware.hosts import find_host
    from kvplan.offload.pools import BACKENDS
    from kvplan.offload.tiers import parse_offload

    tiers = parse_offload(offload)
    if backend not in BACKENDS:
        raise KvplanError(f"--offload-backend must be one of {', '.join(BACKENDS)}, got {backend!r}", EXIT_USAGE)
    if not tiers and (backend != "native" or host is not None):
        raise KvplanError("--offload-backend and --host describe offload tiers: give --offload too", EXIT_USAGE)
    return tiers, backend, (find_host(host) if host else None)


def plan_offload(result, spec, dep, tiers, backend, host, quiet: bool = False):
    """The OffloadPlan of one engine result, its assumptions said on stderr."""
    from kvplan.offload.pools import offload_pools
    from kvplan.report.text import format_warning

    op = offload_pools(result, spec, dep, tiers, backend, host)
    g = op.geometry
    if not quiet:
        who = f"{g.engine} {g.version}".strip()
        stderr(f"note: offload tiers as {who} ({backend}) sizes them: {g.bytes_per_token:,} B per token per GPU, "
               f"pages of {g.block_size}, {g.ranks} GPU(s); SIZE is for the whole deployment")
        if host is not None:
            stderr(f"note: host {host.key}: {host.dram_bytes / 2**30:,.0f} GiB DRAM less a {host.ram_reserve_bytes / 2**30:g}"
                   f" GiB reserve, {host.link_type} at {host.link_bytes_per_s / 1e9:g} GB/s per GPU")
        for p in op.tiers:
            stderr(f"note: {p.tier}: {p.rule}")
            for n in p.notes:
                stderr(f"note: {p.tier}: {n}")
        for w in op.warnings:
            stderr(f"warning: {format_warning(w)}")
    return op


def for_result(result, spec, offload):
    """fit: the OffloadPlan of the chosen result, or None without --offload (`offload`: parse_flags())."""
    if not offload or not offload[0]:
        return None
    return plan_offload(result, spec, result.plan.deployment, *offload)


def into_output(out: dict, op, command: str | None) -> str | None:
    """fit --json gets the tiers; the --emit command gets their flags."""
    if op is None:
        return command
    out["offload"] = offload_dict(op)
    return emit_with_offload(command, op) if command else command


def offload_dict(op) -> dict:
    from kvplan.report.text import format_warning

    return {"backend": op.backend, "host": op.host.key if op.host is not None else None,
            "bytes_per_token_per_gpu": op.geometry.bytes_per_token, "gpu_pool_tokens": op.geometry.device_tokens,
            "tiers": [{"tier": p.tier, "sized_by": p.engine, "flag": p.flag, "bytes_per_gpu": p.bytes_per_rank,
                       "gpus": p.ranks, "bytes_total": p.bytes_total, "blocks": p.blocks, "block_tokens": p.block_tokens,
                       "tokens": p.tokens, "contexts": p.contexts, "rule": p.rule, "notes": list(p.notes)}
                      for p in op.tiers],
            "warnings": [format_warning(w) for w in op.warnings]}


def render_offload(console, op) -> None:
    """The tiers in a table that fits 80 columns (flags and rules are on stderr and in --emit/--json)."""
    from rich.table import Table

    from kvplan.core.units import human_bytes

    t = Table(title=f"Offload tiers ({op.backend}; context {op.geometry.context:,})", title_justify="left",
              show_edge=False, pad_edge=False)
    for c in ("tier", "per GPU", "total", "blocks", "tokens", "contexts"):
        t.add_column(c, justify="left" if c == "tier" else "right", no_wrap=True)
    for p in op.tiers:
        t.add_row(p.tier, human_bytes(p.bytes_per_rank), human_bytes(p.bytes_total),
                  "-" if p.blocks is None else f"{p.blocks:,}", f"{p.tokens:,}", f"{p.contexts:,}")
    console.print(t)


def emit_with_offload(command: str | None, op) -> str:
    """The serve command with the tiers' settings: environment first, flags after, config lines below."""
    env = [p.flag for p in op.tiers if p.flag and not p.flag.startswith("-") and "=" in p.flag.split()[0]
           and not p.flag.startswith("kv_cache_config")]
    args = [p.flag for p in op.tiers if p.flag.startswith("-")]
    config = [p.flag for p in op.tiers if p.flag.startswith("kv_cache_config")]
    line = " ".join([*env, command or "", *args]).strip()
    for c in config:  # TensorRT-LLM: an LLM API option, not a flag
        key, value = c.split("=", 1)
        line += f"\n# extra LLM API options (YAML): kv_cache_config: {{{key.split('.', 1)[1]}: {value}}}"
    return line


def trace_curve(requests, bytes_per_token_all_gpus: int, gpu_pool_tokens: int) -> tuple[dict, object]:
    """The trace's LRU hit-rate curve (kvplan.offload.mrc) as --json and the page show it, and the Curve."""
    from kvplan.offload.blocks import BLOCK_TOKENS, block_accesses
    from kvplan.offload.mrc import stack_distances

    curve = stack_distances(block_accesses(requests))  # the knee past the GPU pool: docs/offload.md
    cum = curve.cumulative()
    n = max(1, curve.accesses)
    sizes, c = [], 1
    while c < curve.max_distance:
        sizes.append(c)
        c = max(c + 1, int(c * 1.08))
    sizes.append(curve.max_distance)
    unit = BLOCK_TOKENS * bytes_per_token_all_gpus

    def point(blocks: int) -> dict:
        b = min(blocks, curve.max_distance)
        return {"blocks": blocks, "tokens": blocks * BLOCK_TOKENS, "bytes": blocks * unit,
                "hit_pct": 100.0 * cum[b] / n if b >= 0 else 0.0}

    gpu_blocks = gpu_pool_tokens // BLOCK_TOKENS
    knee = curve.knee(gpu_blocks)
    return {"block_tokens": BLOCK_TOKENS, "accesses": curve.accesses, "cold_misses": curve.cold,
            "max_hit_pct": 100.0 * cum[-1] / n, "gpu_pool_tokens": gpu_pool_tokens,
            "knee": point(knee), "for_pct_of_max": {str(f): point(curve.size_for(f / 100)) for f in (90, 95, 99)},
            "points": [[p["tokens"], p["bytes"], round(p["hit_pct"], 4)] for p in map(point, sizes)]}, curve


def auto_tier(curve_doc: dict, tiers):
    """cpu:auto -> the knee's size, rounded up to a whole GiB (the tier's bytes for the whole deployment)."""
    from kvplan.core.errors import EXIT_USAGE, KvplanError
    from kvplan.offload.tiers import TierRequest

    knee = curve_doc["knee"]["bytes"]
    if knee <= 0:
        raise KvplanError("--offload cpu:auto: the GPU pool already keeps every block this trace reuses; no host "
                          "tier pays", EXIT_USAGE)
    size = -(-knee // 2**30) * 2**30
    stderr(f"note: cpu:auto: the trace's knee is {curve_doc['knee']['tokens']:,} tokens "
           f"({curve_doc['knee']['hit_pct']:.1f}% of prompt blocks hit); cpu tier of {size / 2**30:,.0f} GiB")
    return tuple(TierRequest("cpu", size_bytes=size) if t.auto else t for t in tiers)


def sim_tiers(op, sim, host, gpus: int) -> tuple:
    """The simulator's tiers: (name, bytes per GPU the tier's tokens take, the link one GPU reloads over)."""
    from kvplan.offload.pools import link_bytes_per_s

    out = []
    for p in op.tiers:
        bw = link_bytes_per_s(p.tier, host, gpus)
        out.append((p.tier, p.tokens * sim.token_bytes(), bw))
    if host is None:
        stderr("note: no --host: reloads from offload tiers are not priced (TTFT as if they were free)")
    return tuple(out)
