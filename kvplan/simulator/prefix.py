"""Prefix caching: shared leading prompt segments kept in the KV pool and reused, LRU-evicted.

As in vLLM's automatic prefix caching, whole blocks of a computed prompt stay in the pool with a
reference count; a later request whose prompt starts with the same tokens maps those blocks
instead of computing them again. When the count drops to zero the blocks are free (they count
as available memory) but keep their contents until the allocator needs them, least recently
used first. kvplan matches at the granularity of a request's prefix segments (a system prompt,
a document, a Mooncake 512-token block id) rather than per block hash; a segment holds the
whole blocks that end inside it.

Offload tiers (`tiers`: CPU, disk, remote, top to bottom) catch what the GPU evicts: a segment
dropped from the pool goes down one tier, and a tier over its capacity pushes its least recently
used segments further down (or out, below the last). A request whose prefix continues in a lower
tier takes those segments back (`promote`): they leave the tier, count as prompt tokens not
computed, and their bytes cross the tier's link, whose time the engine adds to the request's TTFT.
Each tier's bytes are integrated over time (`now`, set by the engine at every step).
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import chain
from operator import itemgetter

from kvplan.simulator.tierq import TierQueue

_first, _second = itemgetter(0), itemgetter(1)


class Segment:
    """A prefix segment in the pool: its bytes, and how many running sequences reference it; `serial` its place
    in the tiers' queue where one keeps it below (kvplan.simulator.tierq), -1 on the GPU."""

    __slots__ = ("key", "nbytes", "refs", "serial")

    def __init__(self, key, nbytes: int, refs: int = 0):  # (one attribute a line: 240 -> 205 ns a segment, 1.4M)
        self.key = key
        self.nbytes = nbytes
        self.refs = refs
        self.serial = -1


class Tier:
    """One offload tier of the pool: an LRU of segment bytes by key, per rank."""

    __slots__ = ("name", "capacity", "bandwidth", "lru", "used", "hits", "rehits", "stored", "dropped", "reloaded",
                 "area", "since", "peak")

    def __init__(self, name: str, capacity: int, bandwidth: float | None):
        self.name, self.capacity, self.bandwidth = name, capacity, bandwidth
        self.lru: OrderedDict = OrderedDict()
        self.used = self.hits = self.rehits = self.stored = self.dropped = self.reloaded = self.peak = 0
        self.area = self.since = 0.0

    def tick(self, now: float) -> None:
        if now != self.since:
            self.area += self.used * (now - self.since)
            self.since = now


class PrefixCache:
    """Segments by key; `active` bytes are referenced by running sequences, `idle` bytes are
    evictable. The caller owns the pool arithmetic and asks for eviction when it is short."""

    def __init__(self, block_size: int, block_bytes: int, tiers: tuple = (), pool: int | None = None):
        self.tiers = [Tier(*t) for t in tiers]  # (name, capacity bytes per rank, link bytes/s or None)
        # Tiers that each hold the whole pool (`pool` bytes: no segment is larger) are kept as one queue
        # (kvplan.simulator.tierq: the same contents, less work per segment); else each tier is an LRU of its own.
        # `segments` holds the GPU's segments by key, and the queue's too (their `serial` set)
        self.segments: dict = {}
        self.queue = TierQueue(self.tiers, self.segments) if (self.tiers and pool is not None and all(
            t.capacity >= pool for t in self.tiers)) else None
        # Per-tier LRUs: the keys some tier holds (a key is in one tier at most). Which tier is asked only of a key
        # found here (`_tier_of`), so a segment moving down a tier touches no set; entering and leaving them does
        self.below: set = set()
        self.now = 0.0
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.lru: OrderedDict = OrderedDict()  # idle segments, least recently used first
        self.active = 0
        self.idle = 0
        # prompt tokens served from the cache: on a request's first admission (`hits`), and on its admissions
        # after a preemption (`rehits`, its own blocks found again), apart as vLLM counts them
        # (vllm-project/vllm@ace980e6 vllm/v1/core/kv_cache_manager.py get_computed_blocks: preempted=...)
        self.hits = self.rehits = 0
        self.evicted = 0
        # Which keys the pool and the tiers hold changes only by publishing, evicting and taking back; `version`
        # counts those changes, so that a lookup asked again before any (the queue's head, blocked, is asked
        # about at every step; four in ten lookups of a Mooncake replay) is answered from `_last`.
        self.version = 0
        self._last: tuple = (None, 0, -1, None)  # (prefix, limit, version, answer)

    def contents(self, i: int) -> OrderedDict:
        """Tier i's segments, least recent first: key -> bytes."""
        return self.queue.contents(i) if self.queue else self.tiers[i].lru

    @property
    def where(self) -> dict:
        """Key -> index of the tier holding it (tests, and a caller that wants them all)."""
        return {key: i for i in range(len(self.tiers)) for key in self.contents(i)}

    def _tier_of(self, key) -> int:
        """The index of the tier holding `key`, a key in `below` (or below in the queue)."""
        if self.queue:
            return self.queue.tier_of(self.segments[key].serial)
        for i, tier in enumerate(self.tiers):
            if key in tier.lru:
                return i
        raise AssertionError(f"segment {key!r} in no tier")  # below and the tiers' LRUs out of step

    def match(self, prefix: tuple, limit: int) -> tuple[list, int]:
        """The cached leading segments of `prefix` that end at or before `limit` tokens, and the
        tokens their whole blocks cover."""
        found, end, covered = [], 0, 0
        for key, n in prefix:
            end += n
            if end > limit:
                break
            seg = self.segments.get(key)
            if seg is None or seg.serial >= 0:
                break
            found.append(seg)
            covered = end
        return found, covered // self.block_size * self.block_size

    def lookup(self, prefix: tuple, limit: int) -> tuple[list, int, list, int]:
        """`match`, continued into the lower tiers: (GPU segments, tokens covered in whole blocks,
        [(key, tokens, tier index)] of the segments that follow in lower tiers, the GPU's share of
        the covered tokens). The GPU segments' list is the caller's own."""
        last = self._last
        if last[0] is prefix and last[1] == limit and last[2] == self.version:
            found, covered, lower, gpu = last[3]
            return found[:], covered, lower, gpu
        answer = self._lookup(prefix, limit)
        self._last = (prefix, limit, self.version, answer)
        found, covered, lower, gpu = answer
        return found[:], covered, lower, gpu

    def peek(self, prefix: tuple, limit: int) -> tuple[list, int]:
        """`lookup`'s GPU segments and tokens covered, for a caller that only reads the list (the fast path's
        question, asked at most steps): no copy."""
        last = self._last
        if last[0] is prefix and last[1] == limit and last[2] == self.version:
            return last[3][:2]
        answer = self._lookup(prefix, limit)
        self._last = (prefix, limit, self.version, answer)
        return answer[:2]

    def _lookup(self, prefix: tuple, limit: int) -> tuple[list, int, list, int]:
        found, end = [], 0
        get = self.segments.get
        it = iter(prefix)
        nxt = None
        for key, n in it:
            if end + n > limit:
                break
            seg = get(key)
            if seg is None or seg.serial >= 0:  # (a segment the tiers' queue holds: below)
                nxt = (key, n)
                break
            found.append(seg)
            end += n
        gpu_end = end
        lower: list = []
        below = self.below
        if nxt is not None and self.queue:  # the tier of each from its serial, inline
            starts = self.queue.start
            for key, n in chain((nxt,), it):  # nxt ends within the limit (the loop above checked)
                seg = get(key)
                if seg is None or end + n > limit:
                    break
                s = seg.serial
                if s < 0:
                    break
                i = 0
                while s < starts[i]:
                    i += 1
                lower.append((key, n, i))
                end += n
        elif nxt is not None and nxt[0] in below:
            key, n = nxt
            lower.append((key, n, self._tier_of(key)))
            end += n
            for key, n in it:  # the segments after it, while each is in a tier and ends within the limit
                if end + n > limit or key not in below:
                    break
                lower.append((key, n, self._tier_of(key)))
                end += n
        b = self.block_size
        return found, end // b * b, lower, gpu_end // b * b

    def promote(self, lower: list, tokens: int, token_bytes: int, again: bool = False) -> float:
        """Take `lower`'s segments out of their tiers for a request (`tokens` of them in whole blocks
        count as hits, or as `rehits` for a request admitted `again` after a preemption); the seconds
        their bytes take over each tier's link."""
        # Making room for the request may have pushed a segment further down (or out) since lookup(): it is taken
        # from where it is now, and read over the link it was found behind.
        if self.queue:
            if self.queue.take_keys(map(_first, lower), self.now):
                self.version += 1
        else:
            for key, _, _ in lower:
                self._take(key)
        seconds, left = 0.0, tokens
        for _, n, i in lower:
            tier = self.tiers[i]
            got = min(n, left)
            left -= got
            if again:
                tier.rehits += got
            else:
                tier.hits += got
            moved = got * token_bytes
            tier.reloaded += moved
            if tier.bandwidth:
                seconds += moved / tier.bandwidth
        return seconds

    def _take(self, key) -> None:
        """`key`'s segment leaves the tier holding it, if any."""
        if self.queue:
            seg = self.segments.get(key)
            if seg is not None and seg.serial >= 0:
                self.version += 1
                self.queue.take(seg, self.now)
                del self.segments[key]
            return
        if key in self.below:
            self.version += 1
            self.below.remove(key)
            tier = self.tiers[self._tier_of(key)]
            tier.tick(self.now)
            tier.used -= tier.lru.pop(key)

    def _demote(self, items: list, i: int = 0) -> None:
        """`items` [(key, bytes)], least recent first, enter tier i as its most recent; what a tier cannot
        hold goes one down, least recent first (out below the last). All at once per tier: inserting
        them one by one and trimming after each leaves the same blocks, as trimming only ever pops the
        least recent (a segment larger than a whole tier skips it)."""
        self.version += 1
        if self.queue:  # (tests: the engine's evictions enter the queue from `evict`)
            q, segments = self.queue, self.segments
            top = len(q.segs)
            for serial, (key, nbytes) in enumerate(items, q.off + top):
                segments[key] = seg = Segment(key, nbytes)
                seg.serial = serial
                q.segs.append(seg)
                q.sizes.append(nbytes)
            q.demoted(top, sum(map(_second, items)), self.now)
            return
        tiers, now = self.tiers, self.now
        if i == 0:
            self.below.update(map(_first, items))
        while items and i < len(tiers):
            tier = tiers[i]
            tier.tick(now)
            lru, cap, down = tier.lru, tier.capacity, []
            used, stored = tier.used, 0
            if max(map(_second, items)) <= cap:  # all enter: the same in C loops
                lru.update(items)
                used += sum(map(_second, items))
                stored = len(items)
            else:
                for key, nbytes in items:
                    if nbytes > cap:
                        down.append((key, nbytes))
                        continue
                    lru[key] = nbytes
                    used += nbytes
                    stored += 1
            if used > cap:
                pop = lru.popitem
                while used > cap:
                    item = pop(False)
                    used -= item[1]
                    down.append(item)
            tier.dropped += len(down) - (len(items) - stored)
            tier.stored += stored
            tier.used = used
            if used > tier.peak:
                tier.peak = used
            items, i = down, i + 1
        if items:  # out below the last tier
            self.below.difference_update(map(_first, items))

    def close(self, now: float) -> None:
        for tier in self.tiers:
            tier.tick(now)

    def acquire(self, segs: list) -> tuple[int, int]:
        """Reference `segs` for one sequence: (bytes they hold, bytes that were idle until now)."""
        total = woken = 0
        for seg in segs:
            if not seg.refs:
                del self.lru[seg.key]  # an unreferenced segment is idle, in the LRU
                woken += seg.nbytes
            seg.refs += 1
            total += seg.nbytes
        self.idle -= woken
        self.active += woken
        return total, woken

    def release(self, segs: list) -> int:
        """Drop one sequence's references; returns the bytes that became idle (evictable)."""
        idled, lru = 0, self.lru
        for seg in reversed(segs):  # the deepest segment becomes least recent, so it goes first
            seg.refs -= 1
            if not seg.refs:
                lru[seg.key] = seg
                idled += seg.nbytes
        self.active -= idled
        self.idle += idled
        return idled

    def publish_run(self, prefix: tuple, i: int, start: int, computed: int) -> tuple[list, int]:
        """Make a sequence's computed prompt segments shared ones (the caller moves their bytes from the
        sequence to the cache): `prefix`'s segments from the i-th (starting at token `start`) while they end within
        `computed` tokens, stopping at one another sequence published first: (the new segments, their bytes)."""
        segments, below, b, bb = self.segments, self.below, self.block_size, self.block_bytes
        out, total = [], 0
        get, keep, new = segments.get, out.append, Segment
        for key, n in prefix[i:]:
            end = start + n
            if end > computed:
                break
            old = get(key)
            if old is not None:  # another sequence published it first, or (the queue's) a copy sits below
                if old.serial < 0:
                    break
                self.version += 1  # computed again while a copy sat below: the GPU's copy is the one kept
                self.queue.take(old, self.now)  # (its object, the GPU's again: a hole in the queue is skipped)
                seg = old
                seg.nbytes = nbytes = (end // b - start // b) * bb
                seg.refs = 1
            else:
                if key in below:  # (per-tier LRUs) likewise
                    self._take(key)
                nbytes = (end // b - start // b) * bb
                segments[key] = seg = new(key, nbytes, 1)
            total += nbytes
            keep(seg)
            start = end
        if out:
            self.version += 1
            self.active += total
        return out, total

    def evict(self, nbytes: int) -> int:
        """Drop idle segments, least recently used first, until `nbytes` are freed or none is left."""
        self.version += 1
        freed = count = 0
        lru, segments = self.lru, self.segments
        if self.queue:  # straight into the queue's lists, keeping their `segments` entries (kvplan.simulator.tierq)
            segs, sizes = self.queue.segs, self.queue.sizes
            top = len(segs)
            serial = self.queue.off + top
            pop, add_seg, add_size = lru.popitem, segs.append, sizes.append
            while freed < nbytes and lru:
                key, seg = pop(False)
                count += 1
                nb = seg.nbytes
                if nb:
                    freed += nb
                    seg.serial = serial
                    serial += 1
                    add_seg(seg)
                    add_size(nb)
                else:  # (a segment within one block holds none: it is not kept below)
                    del segments[key]
            self.idle -= freed
            self.evicted += count
            if freed:
                self.queue.demoted(top, freed, self.now)
            return freed
        down = [] if self.tiers else None
        while freed < nbytes and lru:
            key, seg = lru.popitem(False)
            del segments[key]
            freed += seg.nbytes
            count += 1
            if down is not None and seg.nbytes:
                down.append((key, seg.nbytes))
        self.idle -= freed
        self.evicted += count
        if down:
            self._demote(down)
        return freed
