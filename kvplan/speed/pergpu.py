"""A corpus point's per-GPU total throughput read as its deployment's output throughput (kvplan.speed.corpus).

Some sources print only a total (input + output) tokens/s per GPU for a run, no output rate: SGLang's cookbook
speed tables (`tokens_per_sec_per_gpu`, which the page itself defines from the run's output rate, e.g. "output tok/s
/ tp * (isl+osl)/osl"), vLLM's blog "TGS" (vllm bench serve's total token throughput over the GPUs). A point
carries the figure as `metrics: {per_gpu_total_throughput: X}` and, where the source establishes what it is, a
`per_gpu_total: {over: gpus, cite: ...}` (the divisor is the deployment's stated `gpus`; `cite` where the source
defines it). The reader then takes

    output tok/s = X x gpus x osl / (isl + osl)

with the run's stated lengths: fixed lengths exactly (the cookbook's own formula inverted, or the benchmark's token
counts at fixed lengths); lengths drawn at random by their stated means, which is exact in expectation (over a draw
whose two sides share one range ratio the ratio of the means is the nominal osl / (isl + osl), so it is the
cookbook's formula inverted too). Only where the point states no output throughput of its own: one run is never
two figures. A point without `per_gpu_total` keeps the figure unread (its source does not say what it divides by,
or its lengths are not printed beside it). A malformed figure or definition is refused with a ValueError.
"""

from __future__ import annotations

FIGURE = "per_gpu_total_throughput"
OVER = ("gpus",)  # what the per-GPU figure is divided by: the deployment's stated GPU count


def check(p: dict) -> dict | None:
    """A point's `per_gpu_total` definition checked: None where absent; else the dict, or a ValueError naming what is
    wrong (not a mapping, `over` not one of OVER, no `cite`, or no positive figure beside it)."""
    spec = p.get("per_gpu_total")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ValueError(f"per_gpu_total {spec!r} is not a mapping with over and cite")
    if str(spec.get("over") or "").strip().lower() not in OVER:
        raise ValueError(f"per_gpu_total over {spec.get('over')!r} is not one of {', '.join(OVER)}")
    if not str(spec.get("cite") or "").strip():
        raise ValueError("per_gpu_total has no cite (where the source defines the figure)")
    figure((p.get("metrics") or {}).get(FIGURE))
    return spec


def figure(v) -> float:
    """The per-GPU total as a positive number, or a ValueError."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{FIGURE} {v!r} is not a number") from None
    if not x > 0 or x == float("inf"):
        raise ValueError(f"{FIGURE} {v!r} is not a positive number")
    return x


def output_rate(p: dict, targets: dict, gpus: int, isl: float, osl: float) -> float | None:
    """The deployment's output tokens/s from the point's per-GPU total, or None where the point states its own
    output rate, has no defined per-GPU total (check), or no lengths."""
    if "output_throughput" in targets or check(p) is None or not isl or not osl:
        return None
    return figure(p["metrics"][FIGURE]) * gpus * osl / (isl + osl)
