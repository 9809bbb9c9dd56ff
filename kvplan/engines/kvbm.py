"""Dynamo's KV block manager (KVBM) tiers: host (G2), disk (G3) and object store (G4), from its source.

The KVBM leader (ai-dynamo/dynamo, lib/llm/src/block_manager/distributed/leader.rs) sums the workers'
`bytes_per_block` ("For TP, sum bytes_per_block") and computes each tier's blocks with
`compute_num_blocks`: an override count if given, else `((cache_size_in_gb * 1_000_000_000.0) /
bytes_per_block as f64) as usize` - decimal GB, truncated, for the whole replica. The sizes come from
`DYN_KVBM_CPU_CACHE_GB` and `DYN_KVBM_DISK_CACHE_GB`; the object store takes a count,
`DYN_KVBM_OBJECT_NUM_BLOCKS`. A worker's block is the engine's page (vLLM's block_size, TRT-LLM's
tokens_per_block) of its layers: block tokens x one rank's bytes per token. Python floats are IEEE
doubles, as Rust's f64, so the truncation is the engine's to the block.
"""

from __future__ import annotations

from kvplan.planning.offload import Geometry, TIERS, TierPool, TierRequest, check_kinds

ENV = {"cpu": "DYN_KVBM_CPU_CACHE_GB", "disk": "DYN_KVBM_DISK_CACHE_GB", "remote": "DYN_KVBM_OBJECT_NUM_BLOCKS"}


def _decimal_gb(nbytes: int) -> str:
    """Bytes as the shortest exact decimal GB string (64 GiB -> '68.719476736')."""
    whole, frac = divmod(nbytes, 10**9)
    return f"{whole}.{frac:09d}".rstrip("0").rstrip(".") if frac else str(whole)


def pool(req: TierRequest, g: Geometry) -> TierPool:
    check_kinds(g)
    per_block = g.block_size * g.bytes_per_token * g.ranks  # summed over the TP workers
    asked = g.whole(req)
    if req.tier == "remote":
        blocks = asked // per_block
        flag = f"DYN_KVBM_USE_OBJECT_OFFLOAD=1 {ENV['remote']}={blocks}"
        rule = f"{asked:,} B // {per_block:,} B per block = {blocks:,} object-store blocks (a count kvplan chose)"
    else:
        gb = _decimal_gb(asked)
        blocks = int((float(gb) * 1_000_000_000.0) / per_block)
        flag = f"{ENV[req.tier]}={gb}"
        rule = (f"({gb} x 1e9) / ({g.block_size} x {g.bytes_per_token:,} B x {g.ranks} workers) = {blocks:,} "
                "blocks, truncated (leader.rs compute_num_blocks)")
    tokens = blocks * g.block_size
    total = blocks * per_block
    return TierPool(req.tier, f"Dynamo KVBM {req.tier}", flag, total // g.ranks, g.ranks, total, blocks,
                    g.block_size, tokens, g.contexts(tokens), rule, flag_kind="env")


RULES = {tier: pool for tier in TIERS}  # the engines KVBM runs under (vLLM, TensorRT-LLM) offer every tier
