"""Families kvplan knows about but cannot size yet: refused with what their cache holds that kvplan lacks.

Without this module these configs would meet only the generic refusals (a DeepSeek Sparse Attention
indexer in a family kvplan.readers.families.dsa does not read; keys a standard decoder does not have), which name
a symptom, not the reason. Each reason says which config keys lay out a cache kvplan has no layer spec
for; none is sized from a guess. The layout is described by the configs ai-dynamo/aiconfigurator
vendors (commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce). (DeepSeek-V4, once refused here, has its
reader: kvplan.readers.families.deepseek_v4.) MiniMax-M3 is served by SGLang 0.5.16
and TensorRT-LLM 1.3.0rc23 (aiconfigurator commit dbb322e6f3d36aa6b4af3650b11811d6a8ca1a49), releases
kvplan's engine modules do not cover.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.spec import ParamCounts

# its refusal names the indexer keys itself (kvplan.readers.configs' generic DSA refusal steps aside)
OWNS_INDEXER = True

REASONS = {
    "minimax_m3": (
        "MiniMax-M3's sparse attention (sparse_attention_config: block-sparse attention over sparse_block_size "
        "blocks chosen by sparse_num_index_heads x sparse_index_dim index keys on the layers sparse_attention_freq "
        "marks) caches index keys beside the attention cache; kvplan has no layer spec for them yet"),
}
FAMILIES = set(REASONS)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """Never returns: the family's cache is not one kvplan sizes."""
    raise KvplanError(f"{cfg.where}: model_type {model_type!r} is refused: {REASONS[model_type]}", EXIT_USAGE)
