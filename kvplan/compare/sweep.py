"""The sweep: a plan for every model × GPU × GPU count × context × KV dtype × weight dtype, best first.

Pure: every number comes from an engine (kvplan.engines.base; the engine-neutral planner's grid
shares the work that neither the GPU nor the context changes); this module only forms the cross product, skips
deployments a model cannot run (tp must divide the attention heads), counts them, and ranks.

A GPU count n is a deployment of tp = n and pp = 1 up to one node; above that, tp = the node's GPUs and
pp = n / them (one pipeline stage per node), as candidate_deployments. A node is each GPU's own
(kvplan.planning.deploy.node_of: the profile's node_gpus, a GB200 tray's 4, else 8), so the GPUs of a sweep are
planned in groups of one node size each (`node_groups`), and `--layouts` searches each group's grid with tp
within its node, as fit --gpus N's search does (`node_notes` says so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kvplan.core.collector import collector_paused
from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.compare.candidates import attempt, try_deployments
from kvplan.engines import resolve_engine
from kvplan.planning.lora import parse_lora
from kvplan.planning.deploy import Deployment, deployment_for_gpus, node_of, node_size
from kvplan.planning.layout import candidate_layouts, layout_rank_key
from kvplan.planning.plan import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, Plan, Request
from kvplan.speed.plan import DecodeSteps

MAX_GPU_COUNT = 4096

RANKING = ("fits first; then lowest cost per concurrent user (price x GPUs / max concurrency) where "
           "the GPU has a price; then fewest GPUs; then most concurrent requests at the context")


def parse_counts(text: str) -> list[int]:
    """`1,2,4,8` -> [1, 2, 4, 8]. Each count becomes a layout per model by kvplan.planning.deploy's one rule."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise KvplanError(f"GPU count list {text!r} is empty", EXIT_USAGE)
    out = []
    for t in items:
        if not t.isdigit():
            raise KvplanError(f"GPU count {t!r} is not a whole number (try 1,2,4,8)", EXIT_USAGE)
        if not 1 <= int(t) <= MAX_GPU_COUNT:
            raise KvplanError(f"GPU count must be between 1 and {MAX_GPU_COUNT}, got {t}", EXIT_USAGE)
        if int(t) not in out:
            out.append(int(t))
    return out


@dataclass(frozen=True)
class Skipped:
    """A deployment a model cannot run, and how many plans of the cross product it stood for."""

    model: str
    gpus: int
    tp: int
    pp: int
    reason: str
    plans: int
    profiles: tuple[str, ...] = ()  # the GPU profiles (keys) whose plans it stood for


@dataclass
class SweepResult:
    plans: list[Plan]  # ranked, best first
    models: dict  # model name -> ModelSpec (plan_to_dict needs it)
    skipped: list[Skipped] = field(default_factory=list)
    prices: dict = field(default_factory=dict)  # GPU key -> price per GPU-hour, where known
    engine: str | None = None  # "vllm 0.33.0" when planned the engine's way
    gpus: dict = field(default_factory=dict)  # GPU key -> profile (the calibrated step reads it)
    engine_name: str | None = None  # whose speed coefficients price the calibrated step (kvplan.speed)
    speed: str = "calibrated"  # or "roofline": no calibrated figure, the plans' own roofline only
    engine_version: str | None = None  # the engine's release (None: its current one; kvplan.speed.mxfp4 reads it)
    _steps: DecodeSteps | None = field(default=None, repr=False)

    def calibrated_step(self, plan: Plan) -> float | None:
        """The plan's decode step under kvplan.speed's calibrated model (plan_decode_seconds; one Shape per
        model × GPU × tp × ep × dtypes, made the first time a row asks); None with speed="roofline", for a
        plan that does not fit, or on a GPU this result has no profile of."""
        gpu = self.gpus.get(plan.gpu)
        if self.speed != "calibrated" or not plan.fits or gpu is None:
            return None
        if self._steps is None:
            self._steps = DecodeSteps(self.engine_name, self.speed, self.engine_version)
        return self._steps.seconds(plan, self.models[plan.model], gpu)

    @property
    def skipped_plans(self) -> int:
        return sum(s.plans for s in self.skipped)

    def price(self, plan: Plan) -> float | None:
        return self.prices.get(plan.gpu)


def cost_per_user_hour(plan: Plan, price: float | None) -> float | None:
    """price x GPUs / max concurrency: what one concurrent request of this context costs per hour."""
    if price is None or plan.max_concurrency <= 0:
        return None
    return price * plan.deployment.gpus / plan.max_concurrency


def rank_key(plan: Plan, price: float | None) -> tuple:
    """Sort key of RANKING (ascending = better)."""
    cost = cost_per_user_hour(plan, price)
    return (not plan.fits, math.inf if cost is None else cost, plan.deployment.gpus, -plan.max_concurrency)


def kv_dtypes_for(model, names: Sequence[str]):
    """The distinct (KV DType, left to the engine) pairs `names` mean for this model (`auto` = the model's own dtype,
    or the KV cache a checkpoint declares where the engine's 'auto' follows it: kvplan.engines.checkpoint_kv; for a
    checkpoint that declares none, `auto` and its dtype by name are one plan)."""
    out = []
    for name in names:
        auto = str(name).strip().lower() == "auto"
        dt = canonical_kv_dtype(name, model.dtype)
        if any(d == dt and (a == auto or model.checkpoint_kv is None) for d, a in out):
            continue
        out.append((dt, auto))
    return out


def sweep(models: Sequence, gpus: Sequence, gpu_counts: Sequence[int], contexts: Sequence[int],
          kv_dtypes: Sequence[str] = ("auto",), weight_dtypes: Sequence[str | None] = (None,), *,
          batch: int = 1, block_size: int = DEFAULT_BLOCK_SIZE,
          gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
          prices: dict | None = None, progress: Callable[[int], None] | None = None,
          engine=None, layouts: bool = False, lora=None, speed: str = "calibrated") -> SweepResult:
    """Every plan of the cross product, ranked by RANKING.

    `models` are ModelSpecs, `gpus` kvplan.hardware.gpus.GPU objects, `prices` maps GPU key to price per
    GPU-hour. Deployments a model cannot run are skipped and recorded. `progress(n)` is called
    after every n plans made (or skipped). `engine` (a configured kvplan.engines.base.Engine;
    default the engine-neutral planner, which shares work across GPUs and contexts and is much
    faster) plans each deployment as that engine allocates. `layouts`: for each GPU count, every
    valid tp x pp x dp (x ep) layout is planned and each row is the best of them for its GPU and
    request (kvplan.planning.layout.layout_rank_key), instead of the one default split. `lora`: the LoRA
    adapters every deployment keeps room for (kvplan.planning.lora.LoraRequest or its text). `speed`:
    "calibrated" gives each fitting plan kvplan.speed's decode step (SweepResult.calibrated_step, made when
    a row asks), "roofline" only the plans' own roofline.
    """
    engine = engine or resolve_engine()
    if not 1 <= batch <= 1_000_000:
        raise KvplanError(f"batch must be between 1 and 1,000,000, got {batch}", EXIT_USAGE)
    for name in kv_dtypes:
        canonical_kv_dtype(name)  # an unknown name fails before any work
    names = [m.name for m in models]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise KvplanError(f"two models are named {dup!r}; name each model once", EXIT_USAGE)
    for count in gpu_counts:
        if not 1 <= count <= MAX_GPU_COUNT:
            raise KvplanError(f"GPU count must be between 1 and {MAX_GPU_COUNT}, got {count}", EXIT_USAGE)
    gpus = list(gpus)
    prices = dict(prices or {})
    plans: list[Plan] = []
    skipped: list[Skipped] = []
    with collector_paused():
        _cross(models, gpus, gpu_counts, contexts, kv_dtypes, weight_dtypes, batch, block_size,
               gpu_memory_utilization, plans, skipped, progress, engine, layouts, parse_lora(lora))
        plans.sort(key=lambda p: rank_key(p, prices.get(p.gpu)))
    return SweepResult(plans, {m.name: m for m in models}, skipped, prices, engine.label, {g.key: g for g in gpus},
                       engine.speed_key, speed, engine_version=engine.version)


def node_groups(gpus) -> list[tuple[int, list]]:
    """The GPUs by the node size their plans keep tp within (kvplan.planning.deploy.node_of), in first-seen order."""
    groups: dict[int, list] = {}
    for gpu in gpus:
        groups.setdefault(node_size(None, gpu), []).append(gpu)
    return list(groups.items())


def node_notes(gpus, counts, layouts: bool) -> list[str]:
    """What the sweep assumed of nodes, where it shapes a plan: with `layouts` always (as fit --gpus N's note), else
    where a GPU count is larger than a GPU's node (the default split keeps tp within it)."""
    said = {}
    for gpu in gpus:
        node, whose = node_of(Deployment(), gpu)
        if layouts or any(c > node for c in counts):
            said.setdefault(whose, []).append(gpu.key)
    what = "layouts keep" if layouts else "GPU counts split with"
    return [f"{what} tensor parallelism within one node, {whose} ({', '.join(keys)})" for whose, keys in said.items()]


def _best_layouts(model, gpus, count: int, requests, engine, node: int) -> tuple[list[Plan], str]:
    """For each (gpu, request), the best plan over every valid layout of `count` GPUs with tp within a node of `node`
    ([] if none), and where there is none why: each distinct refusal, so that an engine's (TensorRT-LLM has no rule
    for a hybrid's state layers) is said, not only "no valid layout"."""
    deps = (Deployment(*t) for t in candidate_layouts(model, count, node))
    tried = list(try_deployments(model, deps, lambda dep: engine.grid(model, gpus, dep, requests)))
    grids = [t.result for t in tried if t.why is None]
    whys = "; ".join(dict.fromkeys(t.why for t in tried if t.why is not None))
    return [min(same, key=layout_rank_key) for same in zip(*grids)], "no valid layout" + (f": {whys}" if whys else "")


def _cross(models, gpus, gpu_counts, contexts, kv_dtypes, weight_dtypes, batch, block_size,
           gpu_memory_utilization, plans, skipped, progress, engine, layouts=False, lora=None) -> None:
    for model in models:
        requests = [Request(context=ctx, batch=batch, kv_dtype=dt, kv_auto=auto, weight_dtype=wd,
                            block_size=block_size, gpu_memory_utilization=gpu_memory_utilization, lora=lora)
                    for wd in weight_dtypes for dt, auto in kv_dtypes_for(model, kv_dtypes) for ctx in contexts]
        for count in gpu_counts:
            for node, group in node_groups(gpus):
                _count(model, group, count, node, requests, engine, plans, skipped, layouts)
                if progress is not None:
                    progress(len(group) * len(requests))


def _count(model, gpus, count: int, node: int, requests, engine, plans, skipped, layouts: bool) -> None:
    """The plans of `count` GPUs for `gpus`, GPUs of one node size `node`: the default split (the one rule: a GPU
    count -> tp x pp within the node), or with `layouts` the best of every layout with tp within the node."""
    n = len(gpus) * len(requests)
    default = deployment_for_gpus(model, count, node)
    if default is None:
        tp = min(count, node)
        skipped.append(Skipped(model.name, count, tp, count // tp,
                               f"no tp x pp split of {count} GPUs is valid ({model.num_attention_heads} "
                               f"attention heads, {model.num_layers} layers)", n, _keys(gpus)))
        return
    dep = engine.deployment(default)
    if layouts and not engine.splits_layers_only:
        best, why = _best_layouts(model, gpus, dep.gpus, requests, engine, node)
        plans.extend(best)
        if not best:
            skipped.append(Skipped(model.name, dep.gpus, dep.tp, dep.pp, why, n, _keys(gpus)))
        return
    _grid(model, gpus, dep, requests, engine, plans, skipped)


def _grid(model, gpus, dep, requests, engine, plans, skipped) -> None:
    """`engine`'s plans of every request on `dep` into `plans`; where it refuses the grid, each request alone, so that
    a refusal of one request's (vLLM has no q8_0 KV cache) skips that request's plans and not its neighbours' (a
    sweep of fp8 and q8_0 lost its fp8 plans too). A deployment the model or the engine cannot run at all (llama.cpp:
    no tp) is skipped whole, for each of its reasons the plans it stood for. A refusal of some GPUs only (a
    unified-memory engine option past one profile's whole memory) skips those GPUs' plans, not every GPU's."""
    t = attempt(model, dep, lambda d: engine.grid(model, gpus, d, requests))
    if t.why is None:
        plans.extend(t.result)
        return
    if len(gpus) > 1:  # one request on each GPU alone tells a GPU's refusal from a request's or the deployment's
        first = [attempt(model, dep, lambda d, g=g: engine.grid(model, [g], d, requests[:1])).why for g in gpus]
        if None in first and any(first):
            _grid(model, [g for g, why in zip(gpus, first) if why is None], dep, requests, engine, plans, skipped)
            for g in (g for g, why in zip(gpus, first) if why is not None):
                _grid(model, [g], dep, requests, engine, plans, skipped)
            return
    alone = [t] if len(requests) == 1 else \
        [attempt(model, dep, lambda d, r=r: engine.grid(model, gpus, d, [r])) for r in requests]
    lost: dict[str, int] = {}
    for a in alone:
        if a.why is None:
            plans.extend(a.result)
        else:
            lost[a.why] = lost.get(a.why, 0) + len(gpus) * (len(requests) if a is t else 1)
    skipped.extend(Skipped(model.name, dep.gpus, dep.tp, dep.pp, why, k, _keys(gpus)) for why, k in lost.items())


def _keys(gpus) -> tuple[str, ...]:
    return tuple(g.key for g in gpus)
