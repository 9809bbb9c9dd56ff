"""A validation run across ranks: refuse what it cannot do, start the ranks, gather and check their records.

`validate_distributed(spec, settings, layout)` starts tp x pp x dp processes (dist_launch.py) that
join one process group (gloo on CPU, NCCL with --device cuda; one GPU per rank), or, launched by
torchrun (WORLD_SIZE and RANK in the environment), joins the group torchrun set up. Each rank runs
kvplan.validate.dist_rank: its shard measured against the planner's prediction for that rank.
Rank 0 gathers every rank's record. No figure of one rank stands in for another's.
"""

from __future__ import annotations

import time

import torch

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.spec import ModelSpec
from kvplan.validate.blueprint import blueprint
from kvplan.validate.compare import KV_TOLERANCE, WEIGHTS_TOLERANCE, Check, all_ok
from kvplan.validate.dist_launch import in_torchrun, join_torchrun, launch
from kvplan.validate.run import _version, check_settings, resolve_device
from kvplan.validate.shard import Layout, layout_problem


def rank_checks(records: list[dict]) -> list[Check]:
    """Per rank: KV exact against the planner, weights as built exact, the planner's weights within
    WEIGHTS_TOLERANCE (its stage rule spreads layer-proportional bytes evenly)."""
    checks = []
    for r in records:
        tag = f"rank{r['rank']}"
        checks.append(Check(f"{tag} kv_cache", r["predicted_kv_bytes"], r["measured_kv_bytes"], KV_TOLERANCE))
        checks.append(Check(f"{tag} kv_cache_after_decode", r["predicted_kv_bytes"], r["measured_kv_after_bytes"],
                            KV_TOLERANCE))
        checks.append(Check(f"{tag} weights", r["predicted_weights_bytes"], r["measured_weights_bytes"], 0.0))
        if r.get("planner_weights_bytes") is not None:
            checks.append(Check(f"{tag} weights_planner", r["planner_weights_bytes"], r["measured_weights_bytes"],
                                WEIGHTS_TOLERANCE))
    return checks


def check_distributed(full: ModelSpec, s, layout: Layout):
    """Refuse, before any process starts, what the run cannot do; returns the device."""
    check_settings(full, s)
    dev = resolve_device(s.device)
    n = s.layers or full.num_layers
    why = layout_problem(blueprint(full, n, s.widths), layout, s.batch)
    if why:
        raise KvplanError(f"{full.name}: {why}", EXIT_USAGE)
    if dev.type == "cuda" and torch.cuda.device_count() < layout.world and not in_torchrun():
        raise KvplanError(f"{arg('device')} cuda: {layout.world} ranks need {layout.world} GPUs, "
                          f"{torch.cuda.device_count()} visible", EXIT_USAGE)
    return dev


def validate_distributed(full: ModelSpec, s, layout: Layout) -> tuple[dict, list[Check]] | None:
    """Run `s` across the ranks of `layout`; the combined record and checks (None on torchrun ranks > 0)."""
    dev = check_distributed(full, s, layout)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    records = join_torchrun(full, s, layout, backend) if in_torchrun() else launch(full, s, layout, backend)
    if records is None:
        return None
    checks = rank_checks(records)
    tokens_match = all(r["tokens_match"] and r["matches_single_process"] for r in records)
    return combined_record(full, s, layout, backend, records, checks, tokens_match), checks


def combined_record(full: ModelSpec, s, layout: Layout, backend: str, records: list[dict], checks,
                    tokens_match) -> dict:
    n = s.layers or full.num_layers
    return {
        "backend": "torch.distributed", "kvplan_version": _version(), "torch_version": torch.__version__,
        "dist_backend": backend, "device": s.device, "device_name": f"{layout.world} x {s.device}",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": full.name, "layers": n, "layers_total": full.num_layers,
        "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "ep": layout.ep, "world": layout.world,
        "batch": s.batch, "ctx": s.ctx, "prompt_tokens": s.ctx - s.steps, "decode_steps": s.steps,
        "kv_dtype": s.kv_dtype, "seed": s.seed,
        "predicted_kv_bytes": sum(r["predicted_kv_bytes"] for r in records),
        "measured_kv_bytes": sum(r["measured_kv_bytes"] for r in records),
        "predicted_weights_bytes": sum(r["predicted_weights_bytes"] for r in records),
        "measured_weights_bytes": sum(r["measured_weights_bytes"] for r in records),
        "tokens_match": tokens_match, "ranks": records, "notes": _notes(full, s, n),
        "checks": [c.to_dict() for c in checks], "ok": all_ok(checks, tokens_match),
    }


def _notes(full: ModelSpec, s, n: int) -> list[str]:
    bp = blueprint(full, n, s.widths)
    notes = []
    if n < full.num_layers:
        notes.append(f"reduced model: the first {n} of {full.num_layers} layers; predictions are for the same reduced "
                     "model")
    if bp.shrunk:
        notes.append(f"shrunk for this run: {', '.join(bp.shrunk)}; cache geometry unchanged")
    return notes
