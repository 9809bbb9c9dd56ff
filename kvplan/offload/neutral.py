"""kvplan's own tier arithmetic (the default engine, and stores no engine sizes): whole GPU pages.

A tier of B bytes for the replica holds B // (page tokens x bytes per token of a rank x ranks) pages:
every rank keeps its shard of every page, as in the GPU pool.
"""

from __future__ import annotations

from kvplan.offload.tiers import Geometry, TierPool, TierRequest


def pool(req: TierRequest, g: Geometry) -> TierPool:
    per_block = g.block_size * g.bytes_per_token * g.ranks
    asked = g.whole(req)
    blocks = asked // per_block
    tokens = blocks * g.block_size
    total = blocks * per_block
    rule = f"{asked:,} B // ({g.block_size} x {g.bytes_per_token:,} B x {g.ranks} ranks) = {blocks:,} pages (kvplan)"
    return TierPool(req.tier, "kvplan", "", total // g.ranks, g.ranks, total, blocks, g.block_size, tokens,
                    g.contexts(tokens), rule)
