"""Prefix caching: shared leading prompt segments kept in the KV pool and reused, LRU-evicted.

As in vLLM's automatic prefix caching, whole blocks of a computed prompt stay in the pool with a
reference count; a later request whose prompt starts with the same tokens maps those blocks
instead of computing them again. When the count drops to zero the blocks are free (they count
as available memory) but keep their contents until the allocator needs them, least recently
used first. kvplan matches at the granularity of a request's prefix segments (a system prompt,
a document, a Mooncake 512-token block id) rather than per block hash; a segment holds the
whole blocks that end inside it.
"""

from __future__ import annotations

from collections import OrderedDict


class Segment:
    __slots__ = ("key", "nbytes", "refs")

    def __init__(self, key, nbytes: int):
        self.key, self.nbytes, self.refs = key, nbytes, 0


class PrefixCache:
    """Segments by key; `active` bytes are referenced by running sequences, `idle` bytes are
    evictable. The caller owns the pool arithmetic and asks for eviction when it is short."""

    def __init__(self, block_size: int, block_bytes: int):
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.segments: dict = {}
        self.lru: OrderedDict = OrderedDict()  # idle segments, least recently used first
        self.active = 0
        self.idle = 0
        self.hits = 0  # prompt tokens served from the cache
        self.evicted = 0

    def match(self, prefix: tuple, limit: int) -> tuple[list, int]:
        """The cached leading segments of `prefix` that end at or before `limit` tokens, and the
        tokens their whole blocks cover."""
        found, end, covered = [], 0, 0
        for key, n in prefix:
            end += n
            if end > limit:
                break
            seg = self.segments.get(key)
            if seg is None:
                break
            found.append(seg)
            covered = end
        return found, covered // self.block_size * self.block_size

    def acquire(self, segs: list) -> tuple[int, int]:
        """Reference `segs` for one sequence: (bytes they hold, bytes that were idle until now)."""
        total = woken = 0
        for seg in segs:
            if seg.refs == 0:
                self.lru.pop(seg.key, None)
                self.idle -= seg.nbytes
                self.active += seg.nbytes
                woken += seg.nbytes
            seg.refs += 1
            total += seg.nbytes
        return total, woken

    def release(self, segs: list) -> int:
        """Drop one sequence's references; returns the bytes that became idle (evictable)."""
        idled = 0
        for seg in reversed(segs):  # the deepest segment becomes least recent, so it goes first
            seg.refs -= 1
            if seg.refs == 0:
                self.active -= seg.nbytes
                self.idle += seg.nbytes
                self.lru[seg.key] = seg
                idled += seg.nbytes
        return idled

    def publish(self, key, start: int, end: int) -> Segment | None:
        """Make a sequence's computed tokens [start, end) a shared segment (the caller moves the
        bytes from the sequence to the cache); None when another sequence published it first."""
        if key in self.segments:
            return None
        b = self.block_size
        seg = Segment(key, (end // b - start // b) * self.block_bytes)
        self.segments[key] = seg
        seg.refs = 1
        self.active += seg.nbytes
        return seg

    def evict(self, nbytes: int) -> int:
        """Drop idle segments, least recently used first, until `nbytes` are freed or none is left."""
        freed = 0
        while freed < nbytes and self.lru:
            key, seg = self.lru.popitem(last=False)
            del self.segments[key]
            self.idle -= seg.nbytes
            freed += seg.nbytes
            self.evicted += 1
        return freed
