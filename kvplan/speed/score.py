"""How far predictions are from measurements: the summary a held-out error band is made of.

Signed error = (predicted - measured) / measured. "Optimistic by more than 20%" is the dangerous
side: a time (TTFT, TPOT, E2E) predicted more than 20% below the measurement, or a throughput more
than 20% above it.
"""

from __future__ import annotations

from statistics import median

from kvplan.speed.load import RATE_METRICS

REPORTED = ("tpot", "ttft", "e2el", "output_throughput", "pp_tok_s", "tg_tok_s")
# Fitted on and scored on a row of its own, but outside "all figures": input + output tokens/s is mostly the
# prompt's tokens at batch 1 (Qwen's speed page), so counting it there would change what the all-figures line
# has meant since round 21. Decided in round 38 before any held-out total-throughput figure was printed.
SCORED_APART = ("total_throughput",)


def in_all(metric: str) -> bool:
    """Whether a metric counts in the "all figures" summary."""
    return metric in REPORTED


def optimistic(metric: str, pred: float, meas: float, by: float = 0.2) -> bool:
    """Faster than measured by more than `by`: a time predicted lower, a throughput higher."""
    e = (pred - meas) / meas
    return e > by if metric in RATE_METRICS else e < -by


def summary(pairs: list[tuple[str, float, float]]) -> dict:
    """{n, median_abs, median_signed, within_20, optimistic_20} of (metric, predicted, measured) triples
    (shares as fractions), or {"n": 0}."""
    if not pairs:
        return {"n": 0}
    signed = [(p - y) / y for _, p, y in pairs]
    return {
        "n": len(pairs),
        "median_abs": round(median(abs(e) for e in signed), 4),
        "median_signed": round(median(signed), 4),
        "within_20": round(sum(abs(e) <= 0.2 for e in signed) / len(signed), 4),
        "optimistic_20": round(sum(optimistic(m, p, y) for m, p, y in pairs) / len(pairs), 4),
    }


def by_key(rows: list[tuple], key) -> dict:
    """{key(row): summary} of (case, metric, predicted, measured) rows grouped by `key`."""
    groups: dict = {}
    for b, m, p, y in rows:
        groups.setdefault(key(b, m), []).append((m, p, y))
    return {k: summary(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}
