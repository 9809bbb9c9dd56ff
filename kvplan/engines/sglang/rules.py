"""SGLang's token slots for one request, per layer (what kvplan.planning.profile prices a sequence with).

A request holds its tokens in whole pages; from 0.5 a sliding or chunked layer of the hybrid SWA pool holds at most
its span + one page (as kvplan.engines.sglang.pool.capacity's `need`); DeepSeek-V4's compressed layers hold one
entry per compress_ratio tokens of the whole 256-token pages the request takes of the full pool
(kvplan.engines.sglang.dsv4_pool). A DeepSeek Sparse Attention layer's bytes are SGLang's (kvplan.engines.sglang.dsa).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.intmath import cdiv
from kvplan.model.layers import LOCAL_KINDS


@dataclass(frozen=True)
class SglangRules:
    """Token slots one request takes per layer: its tokens in whole pages; from 0.5, a sliding or
    chunked layer of the hybrid SWA pool holds at most span + one page (as capacity()'s `need`)."""

    page: int
    hybrid: bool
    dsa: object = None  # a DSA model's pool (kvplan.engines.sglang.dsa.DsaPool): its rows as SGLang allocates them
    name = "sglang"

    def token_bytes(self, layer, kv_dtype, tp: int) -> int:
        """Bytes one token takes `layer`: a DSA layer's latent row and indexer keys as SGLang lays them out (a raw
        576-byte fp8 row under trtllm, where vLLM's is 656), any other layer's own."""
        if self.dsa is not None and hasattr(layer, "indexer_bytes"):
            return self.dsa.allocated(layer, kv_dtype)
        return layer.token_bytes(kv_dtype, tp)

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if layer.compress_ratio > 1:  # DeepSeek-V4: compressed entries of whole pages of the full pool (dsv4_pool)
            return cdiv(max(0, seq_len), self.page) * (self.page // layer.compress_ratio)
        if layer.kind in LOCAL_KINDS and self.hybrid:
            return min(seq_len, layer.span + self.page)
        held = seq_len if layer.kind in LOCAL_KINDS else layer.tokens_held(seq_len)  # before 0.5: a full layer
        return cdiv(held, self.page) * self.page if held else 0
