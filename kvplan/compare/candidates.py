"""Trying candidate deployments with an engine: what it plans on each, and why it refuses the others.

One rule for fit, sweep and cheapest: a deployment the model cannot run (kvplan.planning.deploy.
validate_deployment) or the engine refuses (a KvplanError from its planning call, e.g. llama.cpp
has no tensor parallelism) is passed over with its reason; every other one is planned. On top of
it: the smallest deployment that fits (`smallest_fitting`, fit without --gpus) and every layout of
N GPUs ranked (`search_layouts`, fit --gpus N; when every layout is refused, the refusal's own reason).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, NamedTuple

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.deploy import (MAX_SEARCH_GPUS, Deployment, candidate_deployments, node_of, node_size,
                                    validate_deployment)
from kvplan.planning.layout import candidate_layouts, layout_rank_key


SMALLEST_FIT_COUNTS = tuple(range(1, MAX_SEARCH_GPUS + 1))  # fit's smallest-fit search: every count


class Tried(NamedTuple):
    """One candidate: the deployment, what the engine made of it (None when refused), and why not."""

    deployment: Deployment
    result: object
    why: str | None


def attempt(model, dep, plan: Callable) -> Tried:
    """`plan(dep)` (an engine's plan, result or grid for `dep`), or the reason there is none: the
    model cannot run `dep`, or the engine refuses it."""
    why = validate_deployment(model, dep)
    if why is not None:
        return Tried(dep, None, why)
    try:
        return Tried(dep, plan(dep), None)
    except KvplanError as e:
        return Tried(dep, None, e.message)


def try_deployments(model, deployments: Iterable, plan: Callable) -> Iterator[Tried]:
    """`attempt` on each deployment in turn (lazily: a caller may stop at the first it wants)."""
    for dep in deployments:
        yield attempt(model, dep, plan)


def smallest_fitting(model, gpu, req, engine, skip_gpus: int = 0):
    """The first deployment (more than `skip_gpus` GPUs) on which `engine` (a configured
    kvplan.engines.base.Engine) fits `req`: its result, or None when none fits. Every GPU count from 1 to
    MAX_SEARCH_GPUS that has a valid layout is tried (deployment_for_gpus within the GPU's node: 3 GPUs are tp 1 × pp
    3), not only powers of two. A deployment the engine cannot run is passed over."""
    deps = (engine.deployment(dep) for dep in candidate_deployments(model, counts=SMALLEST_FIT_COUNTS,
                                                                      node=node_size(None, gpu))
            if dep.gpus > skip_gpus)
    for t in try_deployments(model, deps, lambda dep: engine.result(model, gpu, dep, req)):
        if t.result is not None and t.result.plan.fits:
            return t.result
    return None


def search_node(gpu, node_gpus: int | None = None) -> tuple[int, str]:
    """The node the layout search keeps tp within, and where kvplan took its size: the user's `gpus_per_node`, else
    the GPU profile's `node_gpus` (a GB200 NVL72 tray: 4), else 8 assumed (kvplan.planning.deploy.node_of, the size
    the plan's node rules read)."""
    return node_of(Deployment(node_gpus=node_gpus), gpu)


def search_layouts(model, gpu, gpus: int, req, engine, node_gpus: int | None = None) -> list:
    """Every valid layout of `gpus` GPUs (kvplan.planning.layout.candidate_layouts, tp within `search_node`'s node),
    planned by `engine` (a configured Engine) and ranked best first by concurrency at the context (ties: decode
    tokens/s). A layout the engine refuses is left out. `node_gpus`: the node size a user told the engine."""
    per_node = search_node(gpu, node_gpus)[0]
    deps = (Deployment(*t, node_gpus=node_gpus) for t in candidate_layouts(model, gpus, per_node))
    tried = list(try_deployments(model, deps, lambda dep: engine.plan(model, gpu, dep, req)))
    plans = sorted((t.result for t in tried if t.why is None), key=layout_rank_key)
    if not plans:
        raise no_layout(model, gpus, per_node, [t.why for t in tried])
    return plans


def no_layout(model, gpus: int, per_node: int, whys: list) -> KvplanError:
    """Why no layout of `gpus` GPUs can be planned: the engine's or model's own reason where the layouts were
    refused for one (a LoRA or a cache the engine does not size), not a head count that was never the cause."""
    whys = list(dict.fromkeys(w for w in whys if w))
    if not whys:
        return KvplanError(f"{model.name}: no layout of {gpus} GPUs is valid (tp must divide the "
                           f"{model.num_attention_heads} attention heads and stay within {per_node} GPUs per node)",
                           EXIT_USAGE, param="gpus", value=gpus)
    more = (f" (and {len(whys) - 1} other reason(s); {arg('tp')}, {arg('pp')}, {arg('dp')} plan one layout)"
            if len(whys) > 1 else "")
    return KvplanError(f"no layout of {gpus} GPUs can be planned: {whys[0]}{more}", EXIT_USAGE)
