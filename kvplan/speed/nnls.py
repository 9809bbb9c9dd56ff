"""Non-negative least squares in plain Python: Lawson and Hanson's active-set algorithm.

min ||A x - b||^2 subject to x >= 0 (C. L. Lawson, R. J. Hanson, Solving Least Squares Problems,
1974, ch. 23). It works on the normal equations (A'A, A'b), built once: the step-time model has a
dozen columns and a few thousand rows, so each passive-set solve is a dozen-by-dozen system.
Columns are scaled to unit norm first (terms differ by many orders of magnitude). No numpy.
"""

from __future__ import annotations

import math


def _solve(m: list[list[float]], v: list[float]) -> list[float]:
    """m x = v by Gaussian elimination with partial pivoting (m square, small); a singular pivot gives 0."""
    n = len(v)
    a = [row[:] + [v[i]] for i, row in enumerate(m)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        if abs(a[c][c]) < 1e-12:
            continue
        for r in range(c + 1, n):
            f = a[r][c] / a[c][c]
            if f:
                for k in range(c, n + 1):
                    a[r][k] -= f * a[c][k]
    x = [0.0] * n
    for c in reversed(range(n)):
        if abs(a[c][c]) < 1e-12:
            continue
        x[c] = (a[c][n] - sum(a[c][k] * x[k] for k in range(c + 1, n))) / a[c][c]
    return x


def normal_equations(rows: list[list[float]], b: list[float]) -> tuple[list[list[float]], list[float]]:
    n = len(rows[0]) if rows else 0
    ata = [[0.0] * n for _ in range(n)]
    atb = [0.0] * n
    for row, y in zip(rows, b):
        nz = [(i, v) for i, v in enumerate(row) if v]
        for i, vi in nz:
            atb[i] += vi * y
            ri = ata[i]
            for j, vj in nz:
                ri[j] += vi * vj
    return ata, atb


def nnls(rows: list[list[float]], b: list[float], max_iter: int = 200) -> list[float]:
    """x >= 0 minimising sum((row . x - y)^2) over `rows` and targets `b`."""
    ata, atb = normal_equations(rows, b)
    n = len(atb)
    scale = [math.sqrt(ata[i][i]) or 1.0 for i in range(n)]
    g = [[ata[i][j] / (scale[i] * scale[j]) for j in range(n)] for i in range(n)]
    h = [atb[i] / scale[i] for i in range(n)]
    x = [0.0] * n
    passive: list[int] = []
    for _ in range(max_iter):
        w = [h[i] - sum(g[i][j] * x[j] for j in range(n)) for i in range(n)]  # minus the gradient
        free = [i for i in range(n) if i not in passive and w[i] > 1e-10]
        if not free:
            break
        passive.append(max(free, key=lambda i: w[i]))
        while True:
            z = [0.0] * n
            sub = _solve([[g[i][j] for j in passive] for i in passive], [h[i] for i in passive])
            for i, v in zip(passive, sub):
                z[i] = v
            if all(z[i] > 0 for i in passive):
                x = z
                break
            alpha = min(x[i] / (x[i] - z[i]) for i in passive if z[i] <= 0 and x[i] - z[i] > 0) \
                if any(z[i] <= 0 and x[i] - z[i] > 0 for i in passive) else 0.0
            x = [x[i] + alpha * (z[i] - x[i]) for i in range(n)]
            passive = [i for i in passive if x[i] > 1e-12]
            if not passive:
                break
    return [x[i] / scale[i] for i in range(n)]
