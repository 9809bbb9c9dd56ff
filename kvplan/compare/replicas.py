"""Reaching a concurrency target with layouts and replicas (`cheapest --layouts --replicas N`).

A replica is an independent copy of a deployment (its own GPUs, its own requests, a router in
front): R replicas of a deployment that holds C requests of the context hold R x C, on R x its
GPUs, at R x its cost. For a deployment that falls short of the target, the fewest replicas that
reach it are R = ceil(target / C); each then serves ceil(target / R) requests, and its plan at that
batch says whether it fits and how fast it decodes. Layouts: for each GPU count, every valid
tp x pp x dp (x ep) layout (kvplan.planning.layout.candidate_layouts), not only the default split.
With a workload (`cheapest --workload --replicas N`) memory seldom binds but the served rate does: each
deployment that holds the concurrency target is also tried as 2 .. N copies (`workload_copies`), each serving
every R-th request (kvplan.simulator.capacity.simulate_plan). Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.intmath import cdiv
from kvplan.planning.deploy import Deployment, validate_deployment
from kvplan.planning.layout import candidate_layouts


def layout_deployments(model, deployments, per_node: int = 8) -> list:
    """`deployments` plus every other valid layout of each of their GPU counts, in order, once each."""
    out, seen = [], set()
    for dep in deployments:
        for d in [dep] + [Deployment(*t) for t in candidate_layouts(model, dep.gpus, per_node)]:
            if d not in seen and validate_deployment(model, d) is None:
                seen.add(d)
                out.append(d)
    return out


def replicas_needed(target: int, per_replica: int) -> int | None:
    """Fewest copies of a deployment holding `per_replica` requests that hold `target` (None: it holds none)."""
    if per_replica <= 0:
        return None
    return cdiv(target, per_replica)


def replicated(candidate, model, gpu, req, concurrency: int, plan_fn, why_fn, *, max_replicas: int,
               max_gpus: int | None):
    """The candidate reached by replicas, or None: R copies, each planned at ceil(target / R); R at most
    `max_replicas`, and R x the deployment's GPUs at most `max_gpus` (None: any), as `workload_copies` caps them (an
    answer of 5 x tp 4 asked for 4 GPUs at most was 20)."""
    p = candidate.plan
    if p is None or max_replicas < 2 or p.request.context > model.max_context:
        return None
    n = replicas_needed(concurrency, p.max_concurrency)
    if n is None or n < 2 or n > max_replicas or (max_gpus is not None and n * candidate.deployment.gpus > max_gpus):
        return None
    each = cdiv(concurrency, n)
    q = plan_fn(model, gpu, candidate.deployment, replace(req, batch=each))
    why = why_fn(q, each)
    return replace(candidate, plan=q, replicas=n, meets=why is None, step_seconds=None,  # the caller prices q
                   why=None if why is None else f"{n} replicas: {why}")


def workload_copies(candidates: list, *, max_replicas: int, max_gpus: int) -> list:
    """`candidates` and 2 .. `max_replicas` copies of each one-copy deployment that holds the concurrency target, on
    at most `max_gpus` GPUs in all, for a workload to judge: a copy serves a share of the requests, so copies of a
    deployment whose memory holds the target can meet a rate one misses (8 B on an L40S at 10 requests/s). Its plan
    is the one copy's: each copy holds at least the target too."""
    return candidates + [replace(c, replicas=r) for c in candidates if c.meets and c.replicas == 1
                         and c.plan is not None for r in range(2, max_replicas + 1)
                         if r * c.deployment.gpus <= max_gpus]
