"""TensorRT-LLM's secondary (host) block pool, restated from its source.

`KvCacheConfig.host_cache_size` (bytes, per rank) becomes `allottedSecondaryMemBytes`
(`BaseKVCacheManager::calculateFreeMemBytes`: `config.getHostCacheSize().value_or(0)`), and
`BaseKVCacheManager::calculateMaxNumBlocks` (NVIDIA/TensorRT-LLM@b35ac1b6,
cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp) per window size: `maxTokensSecondary =
static_cast<SizeType32>(allottedSecondaryMemBytes * windowSizeShare / cacheSizeBytesPerToken)` with
`windowSizeShare` a `float` (1.0f for one window size), so the product and the quotient are single
precision; `blocksInSecondaryPool = max(0, maxTokensSecondary / tokensPerBlock)`; then the minimum
over ranks. It logs `[windowSize=W] {.primaryBlocks=P, .secondayBlocks=S}` (older C++ runtimes:
"Number of blocks in KV cache secondary pool: S", from `hostCacheSize / cacheSizeBytesPerToken` in
integers). `cacheSizeBytesPerToken` is one rank's bytes per token across the window's layers.
"""

from __future__ import annotations

import struct

from kvplan.core.errors import arg
from kvplan.planning.offload import Geometry, TierPool, TierRequest, check_kinds, refuse

INT32_MAX = 2**31 - 1


def f32(x: float) -> float:
    """x rounded to IEEE single precision, as C++ holds a float."""
    return struct.unpack("f", struct.pack("f", x))[0]


def secondary_tokens(host_cache_size: int, bytes_per_token: int, share: float = 1.0) -> float:
    """`allottedSecondaryMemBytes * windowSizeShare / cacheSizeBytesPerToken` in single precision."""
    return f32(f32(f32(host_cache_size) * f32(share)) / f32(bytes_per_token))


def cpu_pool(req: TierRequest, g: Geometry) -> TierPool:
    check_kinds(g, why="a window size each gets a share of the host pool (TRTLLM_WINDOW_SIZE_SHARES); not modelled")
    per_rank = g.whole(req) // g.ranks
    quotient = secondary_tokens(per_rank, g.bytes_per_token)
    if quotient > INT32_MAX:
        raise refuse(f"{arg('offload')} cpu: {quotient:,.0f} host tokens per rank overflow TensorRT-LLM's 32-bit "
                     "token count; give a smaller tier")
    max_tokens = int(quotient)
    blocks = max(0, max_tokens // g.block_size)
    tokens = blocks * g.block_size
    rule = (f"int(float32({per_rank:,} B x 1.0f / {g.bytes_per_token:,} B)) = {max_tokens:,} tokens; // {g.block_size}"
            f" = {blocks:,} secondary blocks per rank (kvCacheManager.cpp calculateMaxNumBlocks)")
    notes = ("the engine logs it as [windowSize=W] {.primaryBlocks=P, .secondayBlocks=S}",)
    return TierPool("cpu", f"trtllm {g.version} host cache", f"kv_cache_config.host_cache_size={per_rank}",
                    per_rank, g.ranks, per_rank * g.ranks, blocks, g.block_size, tokens, g.contexts(tokens),
                    rule, notes, flag_kind="config")
