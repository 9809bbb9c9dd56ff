"""Choosing deployments: how a GPU count becomes tp x pp, which splits a model can run, the
smallest one that fits, and every layout of a GPU count (tp x pp x dp x ep, `search_layouts`).

One rule turns a GPU count into a layout (`deployment_for_gpus`): the widest valid tensor
parallelism within a node of NODE_GPUS, pipeline stages for the rest. `fit --gpus`, the
smallest-fit search, `cheapest` and `sweep` all use it.
"""

from __future__ import annotations

from dataclasses import dataclass

NODE_GPUS = 8  # tensor parallelism stays within a node; pipeline stages span nodes
MAX_SEARCH_GPUS = 64  # the smallest-fit search stops here
SEARCH_COUNTS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Deployment:
    """tp x pp GPUs per data-parallel rank, dp of them; ep = tp x dp with expert parallelism, else 1;
    dcp: decode-context-parallel ranks within tp (kvplan.planning.layout says what each rank holds)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dcp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


def split_layers(n: int, pp: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges for pp stages, the remainder spread over the first ones."""
    base, extra = divmod(n, pp)
    out, start = [], 0
    for i in range(pp):
        end = start + base + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return out


def validate_deployment(model, dep: Deployment) -> str | None:
    """Why this deployment cannot run this model, or None when it can."""
    if dep.tp < 1 or dep.pp < 1:
        return "tp and pp must be at least 1"
    if model.num_attention_heads % dep.tp:
        return f"tp={dep.tp} does not divide the {model.num_attention_heads} attention heads"
    # KV heads are split evenly over ranks, or each rank keeps whole replicated heads (vLLM's
    # QKVParallelLinear asserts one or the other; SGLang and TensorRT-LLM split the same way).
    for h in sorted({getattr(layer, "num_kv_heads", 0) for layer in model.layers} - {0}):
        if (h % dep.tp if h >= dep.tp else dep.tp % h):
            return f"tp={dep.tp} neither divides nor is a multiple of the {h} KV heads"
    if dep.pp > model.num_layers:
        return f"pp={dep.pp} exceeds the {model.num_layers} layers"
    from kvplan.planning.layout import layout_problem

    return layout_problem(model, dep.tp, dep.pp, dep.dp, dep.ep, dep.dcp)


def deployment_for_gpus(model, gpus: int) -> Deployment | None:
    """The deployment a person would pick for `gpus` GPUs: the widest valid tp within a node, then
    pipeline stages for the rest (16 GPUs: tp 8 x pp 2). None when no split is valid."""
    for tp in (8, 4, 2, 1):
        if tp <= NODE_GPUS and gpus % tp == 0:
            dep = Deployment(tp, gpus // tp)
            if validate_deployment(model, dep) is None:
                return dep
    return None


def candidate_deployments(model, max_gpus: int = MAX_SEARCH_GPUS) -> list[Deployment]:
    """Valid deployments in the order a person would try them: fewest GPUs, then tp before pp."""
    out = []
    for gpus in SEARCH_COUNTS:
        if gpus > max_gpus:
            break
        dep = deployment_for_gpus(model, gpus)
        if dep is not None:
            out.append(dep)
    return out


def smallest_fitting(model, gpu, req, engine, skip_gpus: int = 0):
    """The first candidate deployment (more than `skip_gpus` GPUs) on which `engine` (a configured
    kvplan.engines.base.Engine) fits `req`: its result, or None when none of up to 64 GPUs fits.
    A deployment the engine cannot run is passed over."""
    from kvplan.core.errors import KvplanError

    for dep in candidate_deployments(model):
        if dep.gpus <= skip_gpus:
            continue
        try:
            res = engine.result(model, gpu, engine.deployment(dep), req)
        except KvplanError:
            continue
        if res.plan.fits:
            return res
    return None


def search_layouts(model, gpu, gpus: int, req, engine, per_node: int = NODE_GPUS) -> list:
    """Every valid layout of `gpus` GPUs (kvplan.planning.layout.candidate_layouts), planned by `engine` (a
    configured Engine) and ranked best first by concurrency at the context (ties: decode tokens/s).
    A layout the engine refuses is left out."""
    from kvplan.core.errors import KvplanError
    from kvplan.planning.layout import candidate_layouts, layout_rank_key

    out = []
    for tp, pp, dp, ep in candidate_layouts(model, gpus, per_node):
        dep = Deployment(tp, pp, dp, ep)
        if validate_deployment(model, dep) is not None:
            continue
        try:
            out.append(engine.plan(model, gpu, dep, req))
        except KvplanError:
            continue
    return sorted(out, key=layout_rank_key)
