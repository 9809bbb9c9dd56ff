"""The cheapest deployment for a target: a model, a context, N concurrent requests, a speed floor.

Pure: each candidate (GPU type x deployment) is one engine's plan at batch = N. It meets
the target when the plan fits (N sequences of the context fit in every GPU's KV cache) and, if
a floor is given, decode tokens/s per request (1 / the calibrated decode step of kvplan.speed, the
JSON's decode_tokens_per_second_per_request_calibrated; the roofline's is its upper bound) reaches it. Those that
meet it are ranked by cost per hour (price per GPU-hour x GPUs) where priced, unpriced ones
after them by GPU count; every other candidate carries the reason it fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Sequence

from kvplan.compare.candidates import try_deployments
from kvplan.compare.replicas import layout_deployments, replicated
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.engines import resolve_engine
from kvplan.planning.deploy import Deployment, count_splits, node_size
from kvplan.planning.lora import parse_lora
from kvplan.planning.layout import layout_text
from kvplan.planning.plan import Plan, Request
from kvplan.core.units import human_bytes, human_tokens
from kvplan.speed.plan import plan_decode_seconds

RANKING = ("cost per hour (price per GPU-hour x GPUs) where the GPU has a price; GPUs without a "
           "price after, by GPU count; ties: fewer GPUs, then more spare concurrency, then faster decode")


def count_deployments(spec, counts, max_gpus):
    """--gpu-counts as kvplan.planning.deploy's one rule splits each for this model (count_splits, a function of
    each GPU's node size), refused in one line where no count has a valid split."""
    if counts and not count_splits(spec, counts, max_gpus):
        raise KvplanError(f"{spec.name}: no tp x pp split of {', '.join(map(str, counts))} GPUs is valid "
                          f"({spec.num_attention_heads} attention heads, {spec.num_layers} layers)", EXIT_USAGE,
                          param="gpu_counts", value=counts)
    return partial(count_splits, spec, counts, max_gpus)


@dataclass(frozen=True)
class Candidate:
    gpu: str  # GPU key
    deployment: Deployment
    plan: Plan | None  # None when the deployment is invalid for the model
    price_per_gpu_hour: float | None
    meets: bool
    why: str | None  # one line when it does not meet the target
    replicas: int = 1  # independent copies of the deployment (kvplan.compare.replicas), each its share of requests
    step_seconds: float | None = None  # the calibrated decode step at batch N (kvplan.speed); None: not priced

    @property
    def gpus(self) -> int:
        return self.deployment.gpus * self.replicas

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.price_per_gpu_hour is None else self.price_per_gpu_hour * self.gpus

    @property
    def tokens_per_second_per_request(self) -> float | None:
        """Calibrated where priced (kvplan.speed), else the roofline's."""
        if self.plan is None:
            return None
        return 1 / self.step_seconds if self.step_seconds else per_request_tps(self.plan)


def per_request_tps(p: Plan) -> float:
    """Decode tokens/s each request sees: the batch's tokens/s / batch = 1 / step (as plan_to_dict's
    decode_tokens_per_second_per_request)."""
    return 1 / p.decode_step_seconds if p.decode_step_seconds else 0.0


def calibrated_step(p: Plan, model, gpu, engine) -> float:
    """The plan's decode step under kvplan.speed's calibrated model for this engine."""
    return plan_decode_seconds(p, model, gpu, getattr(engine, "speed_key", None),
                               version=getattr(engine, "version", None))


def _why(p: Plan, concurrency: int, min_tps: float | None, model_limit: int, step: float | None = None) -> str | None:
    ctx = human_tokens(p.request.context)
    if p.request.context > model_limit:
        return (f"doesn't fit: {ctx} exceeds {p.context_limit_name} ({human_tokens(model_limit)} tokens; the limit "
                "binds, not memory)")
    if p.kv_memory_bytes_per_gpu <= 0:
        return (f"doesn't fit: weights and overhead leave no KV memory "
                f"(short by {human_bytes(-p.kv_memory_bytes_per_gpu)} per GPU)")
    if p.max_concurrency < concurrency:
        short = concurrency - p.max_concurrency
        return (f"doesn't fit: short by {short:,} request{'s' if short > 1 else ''} "
                f"(holds {p.max_concurrency:,} at {ctx})")
    if min_tps is not None:
        tps = 1 / step if step else per_request_tps(p)
        if tps < min_tps:
            return f"too slow: {tps:,.1f} tokens/s per request < {min_tps:g}"
    return None


def _key(c: Candidate) -> tuple:
    cost = c.cost_per_hour
    spare = c.plan.max_concurrency if c.plan else 0
    tps = c.tokens_per_second_per_request or 0.0
    return (cost is None, math.inf if cost is None else cost, c.gpus, -spare * c.replicas, -tps, c.gpu)


def cheapest(model, gpus: Sequence, context: int, concurrency: int, *,
             deployments: Sequence[Deployment] | Callable[[int], Sequence[Deployment]],
             min_tokens_per_second: float | None = None, prices=None, kv_dtype=None, weight_dtype=None, kv_auto=False,
             gpu_memory_utilization: float | None = None, block_size: int | None = None,
             engine=None, max_replicas: int = 1, layouts: bool = False, lora=None,
             max_gpus: int | None = None) -> list[Candidate]:
    """Every candidate, those meeting the target first (ranked by RANKING), then the rest.

    `deployments`: the same for every GPU, or a function of a GPU's node size (kvplan.planning.deploy.node_size)
    giving its own (count_splits: the default split of each count within that node). `prices` is a
    kvplan.hardware.prices.Prices (or None: no prices, rank by GPU count). `engine` (a
    configured kvplan.engines.base.Engine; default the engine-neutral planner) plans each deployment.
    `layouts`: every valid layout of each GPU count, not only the given split; `max_replicas` > 1: a
    deployment short of the target is also tried as that many independent copies at most, on at most `max_gpus` GPUs
    in all (None: any number; kvplan.compare.replicas).
    """
    engine = engine or resolve_engine()
    if not 1 <= concurrency <= 1_000_000:
        raise out_of_range("concurrency", concurrency, 1, 1_000_000)
    if min_tokens_per_second is not None and not 0 < min_tokens_per_second < math.inf:
        raise KvplanError(f"{arg('min_tokens_per_second')} must be a positive number, got {min_tokens_per_second}",
                          EXIT_USAGE, param="min_tokens_per_second", value=min_tokens_per_second)
    extra = {}
    if gpu_memory_utilization is not None:
        extra["gpu_memory_utilization"] = gpu_memory_utilization
    if block_size is not None:
        extra["block_size"] = block_size
    req = Request(context=context, batch=concurrency, kv_dtype=kv_dtype, kv_auto=kv_auto, weight_dtype=weight_dtype,
                  lora=parse_lora(lora), **extra)
    meets, fails = [], []
    for gpu in gpus:
        price = prices.price(gpu) if prices is not None else gpu.price_per_hour
        # the default split and the other layouts keep tp within the GPU's node (its profile's node_gpus, else 8), as
        # fit --gpus N's search
        node = node_size(None, gpu)
        split = deployments(node) if callable(deployments) else deployments
        deps = layout_deployments(model, split, node) if layouts else split
        tried = try_deployments(model, [engine.deployment(dep) for dep in deps],
                                lambda dep: engine.plan(model, gpu, dep, req))
        for dep, p, invalid in tried:  # invalid: the model cannot run dep, or the engine (llama.cpp: no tp)
            if invalid is not None:
                fails.append(Candidate(gpu.key, dep, None, price, False, f"invalid: {invalid}"))
                continue
            step = calibrated_step(p, model, gpu, engine) if p.kv_memory_bytes_per_gpu > 0 else None
            why = _why(p, concurrency, min_tokens_per_second, model.max_context, step)
            c = Candidate(gpu.key, dep, p, price, why is None, why, step_seconds=step)
            (fails if why else meets).append(c)
            if why and p.max_concurrency < concurrency:
                r = replicated(c, model, gpu, req, concurrency, engine.plan,
                               lambda q, each: _why(q, each, min_tokens_per_second, model.max_context,
                                                    calibrated_step(q, model, gpu, engine)),
                               max_replicas=max_replicas, max_gpus=max_gpus)
                if r is not None:  # its figures are one replica's at its own batch, as the verdict was made
                    r = replace(r, step_seconds=calibrated_step(r.plan, model, gpu, engine))
                    (meets if r.meets else fails).append(r)
    meets.sort(key=_key)
    return meets + fails


# Why a candidate the workload was never run on is not among those meeting it (kvplan.simulator.capacity):
# fewer GPUs of its type already serve the workload. Not a failure: said apart (issue 25).
NOT_SIMULATED = "not simulated: fewer GPUs of this type already serve the workload"


def _counts(counts) -> str:
    counts = sorted(set(counts))
    return ", ".join(map(str, counts)) + (" GPU" if counts == [1] else " GPUs")


def not_simulated(candidates: Sequence[Candidate]) -> list[tuple[str, str]]:
    """Per GPU type, (gpu, the GPU counts never simulated because fewer GPUs of it already serve the workload)."""
    by_gpu: dict[str, list[int]] = {}
    for c in candidates:
        if not c.meets and c.why == NOT_SIMULATED:
            by_gpu.setdefault(c.gpu, []).append(c.gpus)
    return [(gpu, _counts(counts)) for gpu, counts in by_gpu.items()]


def failure_summary(candidates: Sequence[Candidate]) -> list[tuple[str, str, str]]:
    """Per GPU type that has failing candidates: (gpu, GPU counts tried, the telling reason).

    The telling reason is the largest failing deployment below the first one that meets the
    target (or the largest failing one when none meets): it says how far off the target is.
    """
    by_gpu: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_gpu.setdefault(c.gpu, []).append(c)
    out = []
    for gpu, cands in by_gpu.items():
        failing = [c for c in cands if not c.meets and c.why != NOT_SIMULATED]
        if not failing:
            continue
        first_ok = min((c.gpus for c in cands if c.meets), default=None)
        below = [c for c in failing if first_ok is None or c.gpus < first_ok]
        telling = max(below or failing, key=lambda c: (c.plan is not None, c.gpus))
        tried = _counts(c.gpus for c in failing)
        d = telling.deployment

        copies = f"{telling.replicas} × " if telling.replicas > 1 else ""
        out.append((gpu, tried, f"{telling.gpus} GPU{'s' if telling.gpus > 1 else ''} ({copies}{layout_text(d)}): "
                                f"{telling.why}"))
    return out
