"""LMCache's local CPU backend under an engine (vLLM's LMCacheConnectorV1), restated from its source.

Each engine worker (one per GPU) builds its own LMCache engine: `LMCacheEngineBuilder.
_Create_memory_allocator` allocates `MixedMemoryAllocator(int(max_local_cpu_size * 1024**3))`
(LMCache/LMCache, lmcache/v1/cache_engine.py), `max_local_cpu_size` in GiB (float, per worker;
`LMCACHE_MAX_LOCAL_CPU_SIZE`). KV is stored in chunks of `chunk_size` tokens (default 256), one
memory object per chunk of `chunk_size x bytes per token` of that rank (the KV_2LTD format: K and V of
every layer), each rounded up by the allocator to its alignment (`_Compute_aligned_size`: 512 B in
the first v1 allocator, 4 KiB in later ones; kvplan uses 4 KiB, which changes nothing when a chunk
is a multiple of it). Whole chunks the buffer holds = int(size x 2^30) // aligned chunk bytes.
"""

from __future__ import annotations

from kvplan.planning.offload import Geometry, TierPool, TierRequest, check_kinds

DEFAULT_CHUNK = 256
# vLLM's serve flag that loads LMCache's connector (as vLLM's docs and
# tests/fixtures/logs/vllm_qwen3_235b_fp8_tp4_h100.log give it)
CONNECTOR_ARGS = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
ALIGN = 4096


def cpu_pool(req: TierRequest, g: Geometry, chunk_size: int = DEFAULT_CHUNK) -> TierPool:
    check_kinds(g)
    per_rank = g.whole(req) // g.ranks
    gib = per_rank / 2**30
    buffer = int(gib * 1024**3)
    chunk = chunk_size * g.bytes_per_token
    aligned = -(-chunk // ALIGN) * ALIGN
    chunks = buffer // aligned
    tokens = chunks * chunk_size
    flag = f"LMCACHE_LOCAL_CPU=True LMCACHE_MAX_LOCAL_CPU_SIZE={gib!r} LMCACHE_CHUNK_SIZE={chunk_size}"
    rule = (f"int({gib!r} x 2^30) // {aligned:,} B per {chunk_size}-token chunk = {chunks:,} chunks per rank "
            "(lmcache/v1/cache_engine.py MixedMemoryAllocator)")
    return TierPool("cpu", "LMCache local CPU backend", flag, buffer, g.ranks, buffer * g.ranks, chunks,
                    chunk_size, tokens, g.contexts(tokens), rule,
                    ("per worker: each GPU's process holds its own buffer of this size",), flag_kind="env",
                    extra_args=CONNECTOR_ARGS)
