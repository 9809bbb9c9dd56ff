"""A plan's prefill and decode under the calibrated model: what fit shows beside the roofline's, and
what a caller holding a Plan asks (disaggregated prefill/decode pools).

The plan's deployment (tp, ep), dtypes, batch and context on the model spec and GPU profile it was
made for (kvplan.speed.shape), priced with the engine's coefficients (kvplan.speed.model): one
decode step of `batch` sequences each holding the full context, the plan's own worst case.
"""

from __future__ import annotations

from kvplan.speed.model import decode_seconds, prefill_seconds
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import Shape


def plan_shape(plan, spec, gpu) -> Shape:
    """The Shape (kvplan.speed.terms) of the plan's deployment and dtypes."""
    req, dep = plan.request, plan.deployment
    kv = req.kv_dtype.name if req.kv_dtype is not None else None
    return shape_for(spec, gpu, tp=dep.tp, ep=dep.ep, weight_dtype=req.weight_dtype, kv_dtype=kv)


def plan_decode_seconds(plan, spec, gpu, engine: str | None, speed: str = "calibrated", *,
                        batch: int | None = None, context: int | None = None) -> float:
    """Seconds of one decode step of `batch` sequences of `context` cached tokens each (default: the
    plan's batch at its context)."""
    req = plan.request
    return decode_seconds(plan_shape(plan, spec, gpu), engine, max(1, batch or req.batch), context or req.context,
                          speed=speed)


def plan_prefill_seconds(plan, spec, gpu, engine: str | None, prompt: int, speed: str = "calibrated") -> float:
    """Seconds one request's prefill of `prompt` tokens takes on the plan's deployment (its fixed cost
    per request included)."""
    return prefill_seconds(plan_shape(plan, spec, gpu), engine, prompt, speed=speed)
