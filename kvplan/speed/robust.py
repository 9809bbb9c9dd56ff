"""The speed fit's robust solve: coefficients at or above their floors minimising a Cauchy loss on log ratios.

One set of rows (each a figure's terms over its measurement, linear in the coefficients) and their weights in, the
coefficients out; `fit.py` builds the rows, its passes re-linearise them, and this finds each pass's minimum.
The Cauchy loss log(1 + (log(ratio) / SCALE)^2) keeps a figure the terms cannot explain (a misread setting, another
kernel) from pulling the fit as squared error would; each Gauss-Newton step is a weighted NNLS (`nnls.py`).
"""

from __future__ import annotations

import math

from kvplan.speed.nnls import nnls

ROBUST = 30  # Gauss-Newton steps of the robust fit, at most
SCALE = 0.5  # the Cauchy loss's scale on log(predicted / measured)


def _loss(rows, ws, coef) -> float:
    """The weighted Cauchy loss of these coefficients: what each step must lower to be taken."""
    total = 0.0
    for row, w in zip(rows, ws):
        r = math.log(max(sum(c * v for c, v in zip(coef, row)), 1e-9))
        total += w * math.log1p((r / SCALE) ** 2)
    return total


def robust(rows: list[list[float]], ws: list[float], floor: list[float], pinned=()) -> list[float]:
    """Coefficients >= `floor` minimising sum w x log(1 + (log(ratio) / SCALE)^2) over the rows (ratio = the
    row's prediction over its measurement): Gauss-Newton in log space, each step a weighted NNLS on
    the coefficients less their floor (Cauchy weights: a figure the terms cannot explain, a misread
    setting or another kernel, loses its pull), halved while it does not lower the loss. The columns `pinned`
    (indices) stay at their floor: in every row's prediction, as a floor is, but no column of the NNLS, so their
    seconds come off the measured figure before the step solves for the others."""
    if not rows:
        return [0.0] * len(floor)
    coef = floor[:]
    loss = _loss(rows, ws, coef)
    for _ in range(ROBUST):
        a, y = [], []
        for row, w in zip(rows, ws):
            p = max(sum(c * v for c, v in zip(coef, row)), 1e-9)
            base = sum(f * v for f, v in zip(floor, row))
            r = math.log(p)
            k = math.sqrt(w / (1.0 + (r / SCALE) ** 2))
            a.append([0.0 if i in pinned else v / p * k for i, v in enumerate(row)])
            y.append((1.0 - r - base / p) * k)
        new = [f + x for f, x in zip(floor, nnls(a, y))]
        for _ in range(6):
            trial = _loss(rows, ws, new)
            if trial <= loss:
                break
            new = [(n + c) / 2 for n, c in zip(new, coef)]
        else:
            break
        converged = abs(loss - trial) <= 1e-9 * max(1.0, loss)
        coef, loss = new, trial
        if converged:
            break
    return coef
