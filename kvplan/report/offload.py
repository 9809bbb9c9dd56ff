"""Offload tiers for people and files: a replica's tiers as JSON (`offload_dict`), as a table that fits
80 columns (`offload_table`), and as flat columns of a sweep row or a cheapest candidate (`offload_columns`)."""

from __future__ import annotations

from kvplan.core.units import human_bytes
from kvplan.report.text import format_warning
from kvplan.report.fitted import fitted_table


def offload_dict(op) -> dict:
    """An OffloadPlan (kvplan.engines.offload) as --json gives it: every tier's bytes, blocks, tokens, contexts."""
    return {"backend": op.backend, "host": op.host.key if op.host is not None else None,
            "bytes_per_token_per_gpu": op.geometry.bytes_per_token, "gpu_pool_tokens": op.geometry.device_tokens,
            "tiers": [{"tier": p.tier, "sized_by": p.engine, "flag": p.flag, "bytes_per_gpu": p.bytes_per_rank,
                       "gpus": p.ranks, "bytes_total": p.bytes_total, "blocks": p.blocks,
                       "block_tokens": p.block_tokens,
                       "tokens": p.tokens, "contexts": p.contexts, "holds": p.holds, "rule": p.rule,
                       "notes": list(p.notes)} for p in op.tiers],
            "warnings": [format_warning(w) for w in op.warnings]}


def offload_table(op):
    """The tiers in a rich table (flags and rules go to stderr and into --emit/--json)."""
    t = fitted_table(title=f"Offload tiers ({op.backend}; context {op.geometry.context:,})", title_justify="left",
              show_edge=False, pad_edge=False)
    for c in ("tier", "per GPU", "total", "blocks", "tokens", "contexts"):
        t.add_column(c, justify="left" if c == "tier" else "right", no_wrap=True)
    for p in op.tiers:
        t.add_row(p.tier, human_bytes(p.bytes_per_rank), human_bytes(p.bytes_total),
                  "-" if p.blocks is None else f"{p.blocks:,}", f"{p.tokens:,}", f"{p.contexts:,}")
    return t


def offload_columns(tiers, sized) -> dict:
    """Flat columns for one row: per tier asked, its tokens, full-length contexts and bytes per GPU (None
    where the row's deployment was refused), and why not. `sized`: an OffloadPlan or the refusal's words."""
    out: dict = {}
    pools = {} if isinstance(sized, str) else {p.tier: p for p in sized.tiers}
    for req in tiers:
        p = pools.get(req.tier)
        out[f"offload_{req.tier}_tokens"] = p.tokens if p else None
        out[f"offload_{req.tier}_contexts"] = p.contexts if p else None
        out[f"offload_{req.tier}_bytes_per_gpu"] = p.bytes_per_rank if p else None
    out["offload_refused"] = sized if isinstance(sized, str) else None
    out["offload_warnings"] = "" if isinstance(sized, str) else "; ".join(format_warning(w) for w in sized.warnings)
    return out
