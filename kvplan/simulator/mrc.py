"""The LRU miss-ratio curve of a block access sequence at every cache size, in one pass (Mattson).

Mattson et al. (1970): LRU has the inclusion property, so one pass that records each access's stack
distance (how many distinct blocks were touched since the last access to this one, itself included)
gives the hits at every size at once: an access hits a cache of C blocks exactly when its distance
is at most C. The distance is counted with a Fenwick tree over access times holding a 1 at each
block's latest access: O(n log n) for n accesses, linear memory.

The knee (documented in docs/offload.md): with x = C / C_all and y = hit(C) / hit(C_all), where
C_all is the largest finite distance (the size that keeps every reuse), the knee is the smallest C
that maximises y - x (the Kneedle point of a concave curve: past it, each extra block buys less
hit ratio than its share of C_all). A tier below a GPU pool of G blocks only pays past G (engines
write every computed block to the host tier, so it holds what the GPU holds and more): `knee(G)`
takes the same point over sizes G..C_all.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, NamedTuple


class Curve(NamedTuple):
    """Stack distances of a sequence: `hist[d]` accesses at distance d (1-based), `cold` first touches."""

    accesses: int
    cold: int
    hist: tuple[int, ...]  # index d, 0 unused

    @property
    def max_distance(self) -> int:
        return len(self.hist) - 1

    def hits(self, size: int) -> int:
        """Hits of an LRU cache of `size` blocks (accesses at distance <= size)."""
        return sum(self.hist[1:size + 1]) if size > 0 else 0

    def cumulative(self) -> list[int]:
        """hits(C) for C = 0 .. max_distance, in one list."""
        out, total = [0], 0
        for d in range(1, len(self.hist)):
            total += self.hist[d]
            out.append(total)
        return out

    def hit_ratio(self, size: int) -> float:
        return self.hits(size) / self.accesses if self.accesses else 0.0

    def knee(self, start: int = 0) -> int:
        """The knee's size in blocks over sizes start..C_all (module docstring); 0 when no size past
        `start` adds a hit (nothing is reused at a larger distance)."""
        cum = self.cumulative()
        c_all = self.max_distance
        start = min(max(0, start), c_all)
        base, top = cum[start], cum[-1] - cum[start]
        if top <= 0:
            return 0
        best, at = -1.0, 0
        for c in range(start + 1, c_all + 1):
            gain = (cum[c] - base) / top - (c - start) / (c_all - start)
            if gain > best + 1e-12:
                best, at = gain, c
        return at

    def size_for(self, fraction: float) -> int:
        """The smallest size whose hits reach `fraction` of the reusable hits (0 if none)."""
        cum = self.cumulative()
        goal = fraction * cum[-1]
        for c, h in enumerate(cum):
            if h >= goal and h > 0:
                return c
        return 0


def stack_distances(keys: Iterable) -> Curve:
    """One pass over `keys` (any hashables): the stack-distance histogram (Mattson, Fenwick tree)."""
    seq = list(keys)
    n = len(seq)
    tree = [0] * (n + 1)  # Fenwick tree over positions 1..n
    last: dict = {}
    hist = [0] * 2
    cold = 0
    live = 0  # ones in the tree: distinct blocks seen so far
    for t, key in enumerate(seq, 1):
        p = last.get(key)
        if p is None:
            cold += 1
            live += 1
        else:
            # distinct blocks whose latest access is after p: live - prefix(p) (p's own 1 included in prefix)
            s, i = 0, p
            while i:
                s += tree[i]
                i &= i - 1
            d = live - s + 1
            if d >= len(hist):
                hist.extend([0] * (d + 1 - len(hist)))
            hist[d] += 1
            i = p
            while i <= n:
                tree[i] -= 1
                i += i & -i
        i = t
        while i <= n:
            tree[i] += 1
            i += i & -i
        last[key] = t
    while len(hist) > 1 and hist[-1] == 0:
        hist.pop()
    return Curve(n, cold, tuple(hist))


def lru_hits(keys: Iterable, size: int) -> int:
    """Hits of an LRU cache of `size` blocks, simulated directly (the reference the curve is tested on)."""
    cache: OrderedDict = OrderedDict()
    hits = 0
    for key in keys:
        if key in cache:
            hits += 1
            cache.move_to_end(key)
        else:
            cache[key] = None
            if len(cache) > size:
                cache.popitem(last=False)
    return hits
