"""A trace's prompt blocks in the order an engine's cache sees them: the input of the hit-rate curve.

Each request touches its prompt's whole blocks of `block_tokens` (512, a Mooncake hash id): the
shared prefix segments the trace names (Mooncake's hash_ids, kvplan's prefix_id), then blocks only
it has (never hit again, but they take room in an LRU cache). A request's blocks are touched last
block first, so that its first block is the most recent: vLLM frees a finished request's blocks in
reverse order (its tail is evicted first), which keeps what stays cached a prefix. Output tokens are
not counted (a later turn's prompt names them again as prefix where the trace shares them).
"""

from __future__ import annotations

BLOCK_TOKENS = 512  # Mooncake's hash_ids block; kvplan's own traces are cut into the same units


def block_accesses(requests, block_tokens: int = BLOCK_TOKENS) -> list:
    """Block keys of every request's prompt, requests in arrival order, each last block first."""
    out: list = []
    for r in requests:
        mine: list = []
        covered = 0
        for key, n in r.prefix:
            whole = n // block_tokens
            mine.extend([key] if whole == 1 and n == block_tokens else [(key, i) for i in range(whole)])
            covered += n
        mine.extend(("r", r.rid, i) for i in range((r.prompt - covered) // block_tokens))
        mine.reverse()
        out.extend(mine)
    return out
