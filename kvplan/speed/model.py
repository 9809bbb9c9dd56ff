"""The calibrated step time: each term of kvplan.speed.terms times its engine's fitted coefficient.

The coefficients ship in coefficients.json beside this module (one set per engine, the split rule,
the fit date and the held-out error bands; `python -m kvplan.speed.fit` writes it). An engine the
corpus does not cover reads vLLM's set, and says so (`covered`).

Public: `step_seconds`, `prefill_seconds`, `decode_seconds` (seconds of one engine step or one
request's prefill on a Shape), `coefficients(engine)`, `band(engine, metric)` (the held-out error
band a figure is labelled with).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from kvplan.speed.terms import TERMS, Shape, features, roofline

DATA = Path(__file__).with_name("coefficients.json")
FALLBACK_ENGINE = "vllm"
PREFILL_CHUNK = 8192  # tokens a prefill step takes (vLLM's default max_num_batched_tokens)
ENGINE_ALIASES = {"neutral": "vllm", "kvplan": "vllm", "llamacpp": "llama.cpp", "llama-cpp": "llama.cpp",
                  "tensorrt-llm": "trtllm", "hf_transformers": "vllm", "transformers": "vllm"}


@lru_cache(maxsize=1)
def shipped() -> dict:
    """coefficients.json as a dict ({} where it is missing: every step then prices at the roofline)."""
    try:
        return json.loads(DATA.read_text())
    except FileNotFoundError:
        return {}


def engine_key(engine: str | None) -> str:
    name = (engine or FALLBACK_ENGINE).lower()
    return ENGINE_ALIASES.get(name, name)


def covered(engine: str | None) -> bool:
    """Whether the corpus fitted a coefficient set for this engine."""
    return engine_key(engine) in shipped().get("engines", {})


def coefficients(engine: str | None) -> tuple[float, ...]:
    """The engine's coefficients in TERMS order (vLLM's where the engine has none)."""
    sets = shipped().get("engines", {})
    entry = sets.get(engine_key(engine)) or sets.get(FALLBACK_ENGINE)
    if not entry:
        return ()
    return tuple(float(entry["coefficients"][t]) for t in TERMS)


def band(engine: str | None, metric: str) -> dict | None:
    """The held-out error of `metric` for this engine ({median_abs, within_20, optimistic_20, n}) or None."""
    entry = shipped().get("engines", {}).get(engine_key(engine)) or {}
    return (entry.get("held_out") or {}).get(metric)


def priced(coef, f) -> float:
    return sum(c * v for c, v in zip(coef, f))


def step_seconds(shape: Shape, engine: str | None, tokens: float, seqs: float, context: float, pairs: float,
                 *, steps: float = 1.0, request: float = 0.0, speed: str = "calibrated") -> float:
    """One engine step: `tokens` scheduled tokens of `seqs` sequences reading `context` cached tokens and
    forming `pairs` query-key pairs. speed="roofline": the old lower bound."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        return roofline(shape, tokens, seqs, context, pairs, steps)
    return priced(coef, features(shape, tokens, seqs, context, pairs, steps=steps, request=request))


def prefill_features(shape: Shape, isl: float, depth: float = 0.0, chunk: int = PREFILL_CHUNK,
                     request: float = 1.0, batch: float = 1.0) -> list[float]:
    """The prefill of `batch` requests of `isl` tokens each after `depth` cached ones, together in
    steps of `chunk` tokens; `request`: the fixed cost of each request counted (1) or not (0)."""
    steps = max(1, math.ceil(batch * isl / chunk))
    return features(shape, batch * isl, batch, batch * (depth + isl / 2), batch * isl * (depth + (isl + 1) / 2),
                    steps=steps, request=request * batch)


def decode_features(shape: Shape, batch: float, context: float) -> list[float]:
    """One decode step of `batch` sequences, each with `context` cached tokens."""
    return features(shape, batch, batch, batch * context, batch * (context + 1))


def prefill_seconds(shape: Shape, engine: str | None, isl: int, *, depth: int = 0,
                    speed: str = "calibrated") -> float:
    """Seconds one request's prefill of `isl` prompt tokens takes (its fixed cost per request included)."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        steps = max(1, math.ceil(isl / PREFILL_CHUNK))
        return roofline(shape, isl, 1, depth + isl / 2, isl * (depth + (isl + 1) / 2), steps)
    return priced(coef, prefill_features(shape, isl, depth))


def decode_seconds(shape: Shape, engine: str | None, batch: int, context: int, *, speed: str = "calibrated") -> float:
    """Seconds one decode step of `batch` sequences of `context` cached tokens each takes."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        return roofline(shape, batch, batch, batch * context, batch * (context + 1))
    return priced(coef, decode_features(shape, batch, context))
