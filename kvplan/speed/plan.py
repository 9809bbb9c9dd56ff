"""A plan's decode step under the calibrated model: what fit shows beside the roofline's.

The plan's deployment (tp, ep), dtypes, batch and context on the model spec and GPU profile it was
made for (kvplan.speed.shape), priced with the engine's coefficients (kvplan.speed.model): one
decode step of `batch` sequences each holding the full context, the plan's own worst case.
"""

from __future__ import annotations

from kvplan.speed.model import decode_seconds
from kvplan.speed.shape import shape_for


def plan_decode_seconds(plan, spec, gpu, engine: str | None, speed: str = "calibrated") -> float:
    """Seconds of one decode step of the plan's batch at its context."""
    req, dep = plan.request, plan.deployment
    kv = req.kv_dtype.name if req.kv_dtype is not None else None
    shape = shape_for(spec, gpu, tp=dep.tp, ep=dep.ep, weight_dtype=req.weight_dtype, kv_dtype=kv)
    return decode_seconds(shape, engine, max(1, req.batch), req.context, speed=speed)
