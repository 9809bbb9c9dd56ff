"""The times and rates a simulation takes, bounded to what its float clock carries through a run.

Issue 25: `--step-overhead 1e308` made the clock NaN, `--qps 1e-300` overflowed, and a trace rescaled to
`--qps 5e-324` had NaN arrivals and never ended. Bounds: from a request a week apart to a million a second,
runs of up to about 4 months, SLOs from a microsecond to 11 days, at most 1,000 s added to a step.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg

BOUNDS = {"qps": (1e-6, 1e6, "requests per second"), "duration": (1e-3, 1e7, "seconds"),
          "slo_ttft": (1e-6, 1e6, "seconds"), "slo_tpot": (1e-6, 1e6, "seconds"),
          "step_overhead": (0.0, 1e3, "seconds")}


def check_times(**values) -> None:
    """Each value (None: not given) within its BOUNDS; a KvplanError naming the input otherwise (NaN too)."""
    for name, value in values.items():
        low, high, unit = BOUNDS[name]
        if value is not None and not low <= value <= high:
            raise KvplanError(f"{arg(name)} must be between {low:g} and {high:g} {unit}, got {value:g}", EXIT_USAGE,
                              param=name, value=value, allowed=(low, high))
