"""Layer 7 of 14, speed: how long an engine step takes. A calibrated step-time model: the roofline's
terms (weights, KV, GEMM and attention FLOPs, experts, collectives, fixed costs), each with a
non-negative coefficient fitted per engine on a training split of published measurements
(terms.py, model.py, coefficients.json), the analytic steady state a benchmark's load reaches
(load.py), the corpus reader (corpus.py) and the fit (nnls.py, fit.py).

Public entry points: `step_seconds`, `prefill_seconds`, `decode_seconds` (kvplan.speed.model, on a
Shape), `shape_for` (kvplan.speed.shape: a model spec on a GPU at tp / ep in given dtypes), and for a
caller holding a Plan `plan_prefill_seconds` / `plan_decode_seconds` (kvplan.speed.plan).
"""

from kvplan.speed.model import decode_seconds, prefill_seconds, step_seconds
from kvplan.speed.plan import plan_decode_seconds, plan_prefill_seconds
from kvplan.speed.shape import shape_for

__all__ = ["decode_seconds", "plan_decode_seconds", "plan_prefill_seconds", "prefill_seconds", "shape_for",
           "step_seconds"]
