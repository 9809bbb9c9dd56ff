"""PyTorch's CUDA caching allocator as a sequence of allocations sees it: the memory cudaMalloc hands it.

An engine that measures its weights as a drop in free memory (SGLang's "Load weight end ... mem usage") sees
the allocator's segments, not the tensors' bytes (`reserved_bytes`); one that reads `max_memory_allocated` (vLLM's
"Model loading took") sees the blocks handed out, each with the tail of its segment that was not split off
(`allocated_bytes`). Restated from c10/cuda/CUDACachingAllocator.cpp: the constants
at pytorch/pytorch@eb42ad6e L47-48 (kLargeBuffer) and L117-124 (kMinBlockSize, kSmallSize, kSmallBuffer,
kMinLargeAlloc, kRoundLarge), the same at @001074d2, where `round_size`, `get_pool`, `get_allocation_size`,
`should_split`, `get_free_block`, `alloc_block` and `release_blocks` were read (two main-branch commits of the 2.x
line; no release tag's copy could be read here, read 2026-12-02):

* every request is rounded up to a multiple of 512 B (`kMinBlockSize`, `round_size`); a request of 1 MiB or
  less (`kSmallSize`) goes to the small pool, anything larger to the large pool (`get_pool`);
* a request no cached free block of its pool can hold gets a new segment (`get_allocation_size`): 2 MiB for a
  small one (`kSmallBuffer`), 20 MiB for a large one under 10 MiB (`kLargeBuffer`, `kMinLargeAlloc`), else its
  size rounded up to 2 MiB (`kRoundLarge`);
* a request is served from the smallest cached free block that holds it (`get_free_block`, best fit); the rest
  of that block is split off as a free block when it is at least 512 B in the small pool and more than 1 MiB in
  the large pool (`should_split`); else the request keeps the whole block;
* `torch.cuda.empty_cache()` frees only whole free segments (`release_blocks`: blocks neither split nor in use),
  so a segment's unused tail stays reserved while one tensor lives in it.

With `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` a pool is one segment mapped in 2 MiB / 20 MiB pages and
split at 512 B (`should_split`: `remaining >= kMinBlockSize`), so the rounding above vanishes but for the last
page: `reserved_bytes(..., expandable=True)`. Neither SGLang 0.4.3.post4 nor 0.5.3 sets it (no
`expandable_segments` or `PYTORCH_CUDA_ALLOC_CONF` in either wheel).

A split limit (`max_split`, PyTorch's `max_split_size_mb`, unlimited by default: c10/core/AllocatorConfig.h @007b9bc0
`max_split_size_`) changes two rules (`should_split`, `get_free_block` at @001074d2): a request of the limit or more is
never split off a block, so it keeps its whole segment (a 52.5 MiB tensor its 54 MiB); a request under the limit takes
no cached block of the limit or more, and one of the limit or more takes no cached block 20 MiB or more past its size
(`max_non_split_rounding_size`, kLargeBuffer by default). vLLM loads its weights under a 20 MiB limit from 0.21.0
(kvplan.engines.vllm.load_split).

Only allocations are replayed (weights load without freeing); the block pools keep sizes only. Primitive: imports
nothing from kvplan.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from functools import lru_cache

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest "small" request, 1 MiB
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment, 2 MiB
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the segment of a large request under kMinLargeAlloc, 20 MiB
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: 10 MiB
ROUND_LARGE = 2 << 20  # kRoundLarge: larger requests' segments round up to 2 MiB


def round_size(size: int) -> int:
    """A request's block size: at least 512 B, a multiple of 512 B (`round_size`, no roundup_power2_divisions)."""
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    """The segment cudaMalloc gets for a request no cached block holds (`get_allocation_size` of its block)."""
    block = round_size(size)
    if block <= SMALL_SIZE:
        return SMALL_BUFFER
    if block < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-block // ROUND_LARGE) * ROUND_LARGE


def _splits(small: bool, block: int, remaining: int, max_split: int | None = None) -> bool:
    """`should_split`: the small pool splits off 512 B or more; the large pool more than 1 MiB, and only a request
    under the split limit."""
    if small:
        return remaining >= MIN_BLOCK
    return remaining > SMALL_SIZE and (max_split is None or block < max_split)


def _fits(block: int, cached: int, max_split: int | None) -> bool:
    """`get_free_block`'s limits on the best-fit cached block: none of the split limit or more for a request under
    it, none 20 MiB or more past a request of the limit or more (`max_non_split_rounding_size`)."""
    if max_split is None:
        return True
    return cached < max_split if block < max_split else cached < block + LARGE_BUFFER


@lru_cache(maxsize=256)
def _replay(sizes: tuple[int, ...], max_split: int | None = None) -> tuple[int, int]:
    """(bytes of the segments taken, bytes of the blocks handed out) after the requests `sizes`, in order, none
    freed. A block handed out keeps the tail of its segment that is not split off (large pool: 1 MiB or less; all
    of it for a request of the split limit `max_split` or more)."""
    free: dict[bool, list[int]] = {True: [], False: []}  # cached free blocks by pool (small?), sorted sizes
    held = handed = 0
    for size in sizes:
        block = round_size(size)
        small = block <= SMALL_SIZE
        pool = free[small]
        i = bisect_left(pool, block)
        if i < len(pool) and _fits(block, pool[i], max_split):  # best fit: the smallest cached block that holds it
            whole = pool.pop(i)
        else:
            whole = segment_size(size)
            held += whole
        if _splits(small, block, whole - block, max_split):
            insort(pool, whole - block)
            handed += block
        else:
            handed += whole
    return held, handed


def reserved_bytes(sizes: tuple[int, ...], expandable: bool = False) -> int:
    """Bytes the allocator holds from the device after the requests `sizes`, in order, none freed: what a
    free-memory drop measures once `empty_cache` has run (nothing is free to release), and
    `torch.cuda.memory_reserved`. `expandable`: the pools as expandable segments (module docstring)."""
    if expandable:
        small = sum(round_size(s) for s in sizes if round_size(s) <= SMALL_SIZE)
        large = sum(round_size(s) for s in sizes if round_size(s) > SMALL_SIZE)
        return -(-small // SMALL_BUFFER) * SMALL_BUFFER + -(-large // LARGE_BUFFER) * LARGE_BUFFER
    return _replay(tuple(sizes))[0]


def allocated_bytes(sizes: tuple[int, ...], max_split: int | None = None) -> int:
    """Bytes of the blocks the requests hold (`torch.cuda.memory_allocated`, the `allocated_bytes` statistic:
    `alloc_found_block` adds the block's size, its unsplit tail included), under the split limit `max_split`."""
    return _replay(tuple(sizes), max_split)[1]


def rounding_bytes(sizes: tuple[int, ...], expandable: bool = False) -> int:
    """What the allocator holds beyond the requests' own bytes (`reserved_bytes` minus their sum)."""
    return reserved_bytes(tuple(sizes), expandable) - sum(sizes)


def allocated_rounding(sizes: tuple[int, ...], max_split: int | None = None) -> int:
    """What the blocks handed out hold beyond the requests' own bytes (`allocated_bytes` minus their sum)."""
    return allocated_bytes(tuple(sizes), max_split) - sum(sizes)
