"""TensorRT-LLM's secondary (host) block pool, restated from its source.

`KvCacheConfig.host_cache_size` (bytes, per rank) becomes `allottedSecondaryMemBytes`
(`BaseKVCacheManager::calculateFreeMemBytes`: `config.getHostCacheSize().value_or(0)`), and
`BaseKVCacheManager::calculateMaxNumBlocks` (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp) per
window size: `maxTokensSecondary = SizeType32(allottedSecondaryMemBytes * windowSizeShare /
cacheSizeBytesPerToken)`, `blocksInSecondaryPool = max(0, maxTokensSecondary / tokensPerBlock)`,
then the minimum over ranks; it logs `[windowSize=W] {.primaryBlocks=P, .secondayBlocks=S}`.
With one window size the share is 1. `cacheSizeBytesPerToken` is one rank's bytes per token.
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.planning.offload import Geometry, TierPool, TierRequest, refuse

INT32_MAX = 2**31 - 1


def cpu_pool(req: TierRequest, g: Geometry) -> TierPool:
    per_rank = g.whole(req) // g.ranks
    max_tokens = int(per_rank * 1.0 / g.bytes_per_token)  # double arithmetic, truncated to SizeType32
    if max_tokens > INT32_MAX:
        raise refuse(f"{arg('offload')} cpu: {max_tokens:,} host tokens per rank overflow TensorRT-LLM's 32-bit "
                     "token count; give a smaller tier")
    blocks = max(0, max_tokens // g.block_size)
    tokens = blocks * g.block_size
    rule = (f"int({per_rank:,} B / {g.bytes_per_token:,} B) = {max_tokens:,} tokens; // {g.block_size} = "
            f"{blocks:,} secondary blocks per rank (kvCacheManager.cpp calculateMaxNumBlocks)")
    notes = ("the engine logs it as [windowSize=W] {.primaryBlocks=P, .secondayBlocks=S}",)
    return TierPool("cpu", f"trtllm {g.version} host cache", f"kv_cache_config.host_cache_size={per_rank}",
                    per_rank, g.ranks, per_rank * g.ranks, blocks, g.block_size, tokens, g.contexts(tokens),
                    rule, notes, flag_kind="config")
