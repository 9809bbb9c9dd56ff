"""Predicted against measured: the checks a validation run passes or fails, and their tolerances.

Pure (no torch), so the comparison is tested on its own with hand-made figures.

Tolerances (the README states the same):
  * KV cache bytes: exact. The cache is the planner's whole subject; one byte off is a bug.
  * weights: 0.5 % of the prediction for the built model (its parameter counts in closed form,
    priced by the planner's weight_bytes); when the full, unshrunk model is built, the planner's
    own spec is checked too, at 2 % (the decoder omits biases, q/k norms and attention sinks).
  * peak: weights + cache + the planner's activation estimate, within 50 %, because
    the activation estimate models an engine's fused kernels and this decoder's eager ops differ.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kvplan.core.units import signed

KV_TOLERANCE = 0.0
WEIGHTS_TOLERANCE = 0.005
PLANNER_WEIGHTS_TOLERANCE = 0.02
PEAK_TOLERANCE = 0.5


@dataclass(frozen=True)
class Check:
    name: str
    predicted: int
    measured: int
    tolerance: float  # relative; 0 means exact
    enforced: bool = True  # False: shown for information, never fails the run

    @property
    def error(self) -> float:
        """(measured - predicted) / predicted; 0 when both are 0."""
        if self.predicted == 0:
            return 0.0 if self.measured == 0 else float("inf")
        return (self.measured - self.predicted) / self.predicted

    @property
    def ok(self) -> bool:
        if not self.enforced:
            return True
        if self.tolerance == 0:
            return self.measured == self.predicted
        return abs(self.error) <= self.tolerance

    def to_dict(self) -> dict:
        return {**asdict(self), "error": self.error if self.error != float("inf") else None, "ok": self.ok}


def all_ok(checks, tokens_match: bool) -> bool:
    return tokens_match and all(c.ok for c in checks)


def failures(checks, tokens_match: bool) -> list[str]:
    out = [f"{c.name}: measured {c.measured:,} B, predicted {c.predicted:,} B"
           + (" (must be equal)" if c.tolerance == 0
              else f" (error {signed(c.error, '+.2%')}, tolerance ±{c.tolerance:.1%})")
           for c in checks if not c.ok]
    if not tokens_match:
        out.append("cached decode and uncached recomputation gave different tokens")
    return out
