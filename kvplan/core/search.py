"""One search for every "largest n that still fits": monotone predicates, binary search.

The planner's longest context, vLLM's block pool, llama.cpp's cells and concurrency all ask the
same question of a pure predicate that holds up to some n and fails beyond it.
"""

from __future__ import annotations

from typing import Callable

UNBOUNDED_CAP = 2**40  # an open search stops doubling here (far beyond any memory's token count)


def largest_fitting(fits: Callable[[int], bool], hi: int | None, lo: int = 0) -> int:
    """The largest n in [lo, hi] with fits(n), for fits monotone (true up to some n, false after).

    lo - 1 when fits(lo) fails. hi None: no upper bound, the search doubles until fits fails
    (stopping at UNBOUNDED_CAP).
    """
    if not fits(lo):
        return lo - 1
    if hi is None:
        hi = max(1, lo)
        while fits(hi):
            if hi >= UNBOUNDED_CAP:
                return hi
            lo, hi = hi, hi * 2
    elif fits(hi):
        return hi
    while hi - lo > 1:  # fits(lo) holds, fits(hi) fails
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
