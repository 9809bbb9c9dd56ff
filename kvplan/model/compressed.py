"""DeepSeek-V4's attention layer: a sliding window, a compressed latent cache, an indexer, compressor states.

A DeepSeek-V4 layer (vLLM v0.20.0 `model_executor/layers/deepseek_v4_attention.py`,
`DeepseekV4MultiHeadLatentAttentionWrapper`; `model_executor/layers/deepseek_compressor.py`;
`v1/attention/backends/mla/sparse_swa.py`; `v1/kv_cache_interface.py`; the same classes under
`vllm/models/deepseek_v4/` in v0.22.0 and v0.25.0) caches, per sequence, on every tensor-parallel rank
(one KV head, never split):

* a sliding window of the last `window` tokens (`DeepseekV4SWACache`), every layer;
* when `compress_ratio` (the config's `compress_ratios[i]`) is 4 or 128: one compressed latent entry per
  `compress_ratio` tokens (`DeepseekV4MLAAttention`), and the compressor's running state over the tokens
  not yet compressed (`CompressorStateCache`: fp32 kv and score halves of 2 x coff x head_dim values,
  coff = 2 for ratio 4, 1 for ratio 128, over coff x ratio tokens);
* when the ratio is 4: the lightning indexer's keys, one per compressed entry (`DeepseekV4IndexerCache`,
  index_head_dim fp8 values + one fp32 scale per 128 = 132 bytes), and the indexer's own compressor state
  (2 x 2 x index_head_dim fp32 values over 8 tokens).

Bytes of one latent entry (fp8_ds_mla, `MLAAttentionSpec.real_page_size_bytes` for model_version
deepseek_v4): (head_dim - rope) fp8 NoPE values + rope bf16 values + (head_dim - rope) / 64 fp8 scales +
1 pad byte = 448 + 128 + 7 + 1 = 584 for head_dim 512, rope 64. vLLM asserts an fp8 cache for this
model; kvplan's own rules also price a 16-bit cache (head_dim values of 2 bytes).

For kvplan's own arithmetic (kvplan.planning.profile) a layer answers: `tokens_held(n)`, the compressed
entries n // ratio; `token_bytes`, one entry with its indexer keys; `fixed_bytes`, what a sequence holds
whatever its length (the full window and the compressor states); `compress_ratio`, to price one token of
growth as token_bytes / ratio. vLLM's own pool (pages of 256 tokens, five kv-cache groups) is
kvplan.engines.vllm.deepseek_v4.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import INDEXER_QUANT_BLOCK, Kind, LayerSpec

FP32 = 4
NOPE_SCALE_BLOCK = 64  # fp8 NoPE values per scale byte in the fp8_ds_mla entry


@dataclass(frozen=True)
class CompressedMLA(LayerSpec):
    """One DeepSeek-V4 attention layer (see the module docstring)."""

    # 1: the window only; 4: compressed + indexer; 128: heavily compressed. A field of this spec over
    # LayerSpec's class default of 1; `field()` keeps it required (the inherited 1 is no default here).
    compress_ratio: int = field()
    window: int
    head_dim: int = 512
    rope_dim: int = 64
    index_head_dim: int = 0  # ratio-4 layers: the indexer's key width

    kind = Kind.MLA
    allocation = "DeepSeek-V4's compressed caches (sliding window, compressed latents, indexer, compressor states)"

    @property
    def bounded(self) -> bool:  # type: ignore[override]
        return self.compress_ratio <= 1

    @property
    def coff(self) -> int:
        """Overlapping compression windows: 2 for ratio 4, 1 otherwise (deepseek_compressor.py)."""
        return 2 if self.compress_ratio == 4 else 1

    def entry_bytes(self, kv_dtype) -> int:
        """Bytes of one latent (window or compressed) entry in a `kv_dtype` cache."""
        if kv_dtype.one_byte:
            nope = self.head_dim - self.rope_dim
            return nope + 2 * self.rope_dim + nope // NOPE_SCALE_BLOCK + 1
        if kv_dtype.block_elems == 1 and kv_dtype.block_bytes == 2:
            return 2 * self.head_dim
        raise KvplanError(f"DeepSeek-V4 caches its latents in fp8 (fp8_ds_mla) or 16 bits, not {kv_dtype.name}",
                          EXIT_USAGE)

    def indexer_bytes(self) -> int:
        """Bytes of one indexer key: fp8 values and an fp32 scale per 128 (as DeepSeek-V3.2's)."""
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4 if self.index_head_dim else 0

    def state_bytes(self) -> int:
        """The compressor states of one sequence (fp32), the indexer's included."""
        if self.compress_ratio <= 1:
            return 0
        own = self.coff * self.compress_ratio * 2 * self.coff * self.head_dim * FP32
        index = 8 * 2 * 2 * self.index_head_dim * FP32 if self.index_head_dim else 0
        return own + index

    def fixed_bytes(self, kv_dtype) -> int:
        """What one sequence holds whatever its length: the whole window and the compressor states."""
        return self.window * self.entry_bytes(kv_dtype) + self.state_bytes()

    def elements_per_token(self, tp: int = 1) -> int:
        return self.head_dim if self.compress_ratio > 1 else 0

    def token_bytes(self, kv_dtype, tp: int = 1) -> int:
        """One compressed entry and its indexer key (0 for a window-only layer)."""
        if self.compress_ratio <= 1:
            return 0
        return self.entry_bytes(kv_dtype) + self.indexer_bytes()

    def tokens_held(self, seq_len: int) -> int:
        """Compressed entries: one per full group of compress_ratio tokens."""
        return seq_len // self.compress_ratio if self.compress_ratio > 1 else 0

    def describe(self) -> str:
        if self.compress_ratio <= 1:
            return f"DeepSeek-V4 sliding window {self.window} (latent {self.head_dim})"
        index = f" + indexer {self.index_head_dim}" if self.index_head_dim else ""
        return f"DeepSeek-V4 compressed 1:{self.compress_ratio}{index} + window {self.window}"


def has_compressed(layers) -> bool:
    """Whether any of `layers` is DeepSeek-V4's (an engine that lays them out in pools of their own asks)."""
    return any(isinstance(layer, CompressedMLA) for layer in layers)
