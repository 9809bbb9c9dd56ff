"""Layer 7 of 13, speed: how long an engine step takes. A calibrated step-time model: the roofline's
terms (weights, KV, GEMM and attention FLOPs, experts, collectives, fixed costs), each with a
non-negative coefficient fitted per engine on a training split of published measurements
(terms.py, model.py, coefficients.json), the analytic steady state a benchmark's load reaches
(load.py), the corpus reader (corpus.py) and the fit (nnls.py, fit.py).

Public entry points: `step_seconds`, `prefill_seconds`, `decode_seconds` (kvplan.speed.model) and
`shape_for` (kvplan.speed.terms).
"""
