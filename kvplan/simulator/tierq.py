"""The offload tiers below the GPU as one queue, for tiers that each hold any segment (kvplan.simulator.prefix).

Segments leave the GPU least recent first and enter the top tier as its most recent; a tier over its capacity
pushes its least recent down to the next, and the last tier's fall out. Where no segment is larger than a tier
(every tier at least the GPU pool, which holds every segment), no segment skips a tier, so the tiers together
keep the order segments left the GPU in: one queue, cut into a region per tier (top tier newest). Moving a segment
down a tier is then moving a cut past it, with no per-tier dictionary insert and pop (the `OrderedDict` per tier
that PrefixCache keeps otherwise: the same contents, as tests/test_tier_queue.py checks against it). A segment
taken back to the GPU (`take`) leaves a hole, its bytes zeroed, that cuts move past without counting it.

The queue is two lists indexed by serial number (segments, bytes; a serial `off` ahead of the list's head once
the dropped head is cut off), `start[i]` the first serial of tier i's region (tier 0's region runs to the queue's
end, tier i's to `start[i - 1]`). A segment below keeps its Segment object and its place in the cache's `segments`
(by key, as on the GPU), its serial in `Segment.serial` (-1 on the GPU): entering the tiers, moving down them and
leaving them touch no dictionary but `segments`, once, when the last tier's cut passes the segment.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import compress
from operator import attrgetter

_key = attrgetter("key")
_COMPACT = 1 << 16  # dropped slots kept at the lists' head before they are cut off


class TierQueue:
    """The tiers' contents as one queue (see the module docstring); the tiers' figures stay on their Tier objects."""

    __slots__ = ("tiers", "segments", "segs", "sizes", "start", "off")

    def __init__(self, tiers: list, segments: dict):
        self.tiers = tiers  # kvplan.simulator.prefix.Tier, top first: capacity and the counters
        self.segments = segments  # the cache's: key -> Segment, on the GPU or below
        self.segs: list = []  # Segment by serial - off
        self.sizes: list = []  # its bytes; 0 once taken back (a demoted segment has bytes)
        self.start = [0] * len(tiers)
        self.off = 0

    def tier_of(self, serial: int) -> int:
        """The index of the tier whose region holds `serial` (a segment's below)."""
        for i, first in enumerate(self.start):
            if serial >= first:
                return i
        raise AssertionError(f"serial {serial} below the last tier")  # a dropped segment leaves `segments`

    def take(self, seg, now: float) -> None:
        """`seg` leaves its tier (the caller checked that one holds it, and owns its `segments` entry)."""
        s, i, start = seg.serial, 0, self.start
        while s < start[i]:  # (tier_of, inline)
            i += 1
        tier = self.tiers[i]
        j = s - self.off
        tier.tick(now)
        tier.used -= self.sizes[j]
        self.sizes[j] = 0
        seg.serial = -1

    def take_keys(self, keys, now: float) -> int:
        """The segments of `keys` that a tier holds leave it and `segments` (`take` for each, in one loop: a
        request's prefix found below); how many did."""
        segments, sizes, start, tiers, off = self.segments, self.sizes, self.start, self.tiers, self.off
        get, taken = segments.get, 0
        for key in keys:
            seg = get(key)
            if seg is None or seg.serial < 0:
                continue
            s, i = seg.serial, 0
            while s < start[i]:
                i += 1
            tier = tiers[i]
            if now != tier.since:  # (Tier.tick, inline)
                tier.area += tier.used * (now - tier.since)
                tier.since = now
            tier.used -= sizes[s - off]
            sizes[s - off] = 0
            seg.serial = -1
            del segments[key]
            taken += 1
        return taken

    def demoted(self, top: int, nbytes: int, now: float) -> None:
        """The segments the caller appended to `segs` and `sizes` from list index `top` on (`nbytes` in all, each
        some; their serials set), least recent first, enter the top tier; each tier over its capacity moves its
        least recent down, the last tier's fall out (as PrefixCache's per-tier LRUs do)."""
        segs, sizes, off = self.segs, self.sizes, self.off
        n = len(segs) - top
        start = self.start
        for i, tier in enumerate(self.tiers):
            used = tier.used
            if now != tier.since:  # (Tier.tick, inline)
                tier.area += used * (now - tier.since)
                tier.since = now
            used += nbytes
            tier.stored += n
            j0 = j = start[i] - off
            n = nbytes = 0
            cap = tier.capacity
            if used > cap and sizes[j]:  # the k oldest slots all of the first's size (no hole): k moves at once
                b = sizes[j]
                k = -((cap - used) // b)  # the fewest of them that bring the tier within its capacity
                if sizes[j: j + k].count(b) == k:
                    j += k
                    used -= k * b
                    nbytes = k * b
                    n = k
            while used > cap:  # the cut moves past the least recent, holes (taken segments) included
                b = sizes[j]
                j += 1
                if b:
                    used -= b
                    nbytes += b
                    n += 1
            start[i] = j + off
            tier.used = used
            tier.dropped += n
            if used > tier.peak:
                tier.peak = used
            if not n:
                return
        # the last tier's cut passed them: out. A hole's key left `segments` when taken (or names a newer segment
        # since), so only the live slots' keys leave
        deque(map(self.segments.__delitem__, map(_key, compress(segs[j0:j], sizes[j0:j]))), 0)
        if j > _COMPACT and j > len(segs) // 2:
            del segs[:j], sizes[:j]
            self.off = off + j

    def contents(self, i: int) -> OrderedDict:
        """Tier i's segments, least recent first: key -> bytes (tests; the LRU mode's `Tier.lru`)."""
        end = self.off + len(self.segs) if i == 0 else self.start[i - 1]
        a, b = self.start[i] - self.off, end - self.off
        return OrderedDict((seg.key, x) for seg, x in zip(self.segs[a:b], self.sizes[a:b]) if x)

