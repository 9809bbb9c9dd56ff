"""Offload tiers across many deployments (`sweep`, `cheapest`): each plan's tiers, or why kvplan does not size them.

A tier size is for one replica (every GPU of one deployment together, as `fit --offload`); a ratio
(`2x`) follows each plan's GPU pool. What no plan can size (an engine without the tier, a backend it
does not run, `cpu:auto`) is refused once, before any work (`check_tiers`); what only some deployments
cannot (pipeline or data parallelism, a release without the tier) is that row's reason, not an error.
"""

from __future__ import annotations

from typing import Sequence

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.offload import OffloadPlan, check_backend, offload_pools
from kvplan.planning.offload import TierRequest


def check_tiers(engine, tiers: Sequence[TierRequest], backend: str) -> None:
    """Refuse, before any plan, what no deployment could size."""
    check_backend(backend)
    for req in tiers:
        if req.auto:
            raise KvplanError(f"{arg('offload')} cpu:auto sizes a tier from a trace's hit-rate curve: only simulate "
                              f"with {arg('trace')} has one", EXIT_USAGE, param="offload", value="cpu:auto")
        engine.offload_rule(backend, req.tier)


def size_each(engine, plans, model_of, tiers: Sequence[TierRequest], backend: str = "native",
              host=None) -> list[OffloadPlan | str]:
    """For each plan (in order): its OffloadPlan, or the one-line reason its deployment's tiers are not sized.
    `model_of(plan)` is the plan's ModelSpec."""
    out: list[OffloadPlan | str] = []
    for plan in plans:
        try:
            out.append(offload_pools(engine, plan, model_of(plan), tuple(tiers), backend, host))
        except KvplanError as exc:
            out.append(str(exc))
    return out
