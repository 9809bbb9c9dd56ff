"""One frozen spec per kind of layer, each knowing what one sequence costs it in cache.

This mirrors vLLM's `vllm/v1/kv_cache_interface.py` (FullAttentionSpec, SlidingWindowSpec,
ChunkedLocalAttentionSpec, MLAAttentionSpec, MambaSpec): a model is a list of these, and every
total is a sum over that list, so hybrid models (Gemma 3, gpt-oss, Qwen3-Next, Nemotron-H, Jamba)
need no special cases anywhere else.

Every spec is a `LayerSpec` whose `kind` is one of `Kind` (the one vocabulary of layer kinds:
engines key their rule tables by it). Every spec answers three questions, per tensor-parallel rank:
  * `elements_per_token(tp)` - cache values one held token costs in this layer;
  * `tokens_held(seq_len)`   - how many of a sequence's tokens the layer keeps;
  * `state_elements(tp)`     - a fixed per-sequence state (recurrent layers), independent of length;
and, in bytes, `token_bytes(kv_dtype, tp)` (one held entry), `fixed_bytes(kv_dtype)` (what a sequence holds
whatever its length beyond that state) and `compress_ratio` (tokens one entry stands for: 1 but in
DeepSeek-V4's compressed layers), so every site reads the same fields of every kind;
and says what it is (`describe()`), whether its cache stops growing (`bounded`) and the span of
tokens a local layer looks back over (`span`: window or chunk, 0 otherwise).

The per-token kinds live here; the layers that keep a per-sequence state (RecurrentState, Falcon-H1's
ParallelHybrid) and the rules about those states are kvplan.model.recurrent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from kvplan.core.errors import EXIT_USAGE, KvplanError


class Kind(StrEnum):
    """The kinds of layer, as the catalog spells them (and vLLM's KV-cache spec classes name them)."""

    FULL = "full"
    SLIDING = "sliding"
    CHUNKED = "chunked"
    MLA = "mla"
    STATE = "state"
    NONE = "none"


ATTENTION_KINDS = frozenset({Kind.FULL, Kind.SLIDING, Kind.CHUNKED, Kind.MLA})  # cache per token
LOCAL_KINDS = frozenset({Kind.SLIDING, Kind.CHUNKED})  # hold at most `span` tokens

# What an attention layer (FullAttention, SlidingWindow) computes beyond its cache's shape: nothing here
# changes what it caches, but an engine picks its kernels by them (vLLM's backend selector asks each
# layer for has_sink and use_mm_prefix, `model_executor/layers/attention/attention.py` v0.19.0 L286-302),
# and so what its CUDA graphs hold (kvplan.engines.vllm.overhead). Set by the readers
# (kvplan.readers.attention_features, kvplan.readers.families.mimo_v2); False unless a config says so, and
# then not written to the catalog.
#   sinks: a learned logit per head that takes part of every softmax (gpt-oss; MiMo-V2's local layers).
#   mm_prefix: the tokens of one image attend to each other both ways, a prefix-LM mask (vLLM's
#     ModelConfig.is_mm_prefix_lm: Gemma 3 with its vision tower, PaliGemma).
#   output_gate: q_proj also gives a sigmoid gate per head of the attention's output (Qwen3-Next, Qwen3.5
#     `attn_output_gate`): its q part is 2 x heads x head_dim wide, which the block-FP8 shard rule reads
#     (kvplan.engines.fp8_linear); it picks no kernel.
ATTENTION_FEATURES = ("sinks", "mm_prefix", "output_gate")


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel rank keeps: split when there are enough, else replicated.

    vLLM (`QKVParallelLinear`) and SGLang give each rank max(1, H_kv // tp) heads: with tp = 8 and
    H_kv = 2 every rank holds one head, so the cache across ranks is 4x the model's own.
    """
    return max(1, num_kv_heads // tp)


@dataclass(frozen=True)
class LayerSpec:
    """What every kind of layer answers; the defaults are a layer that caches nothing."""

    kind: ClassVar[Kind]
    bounded: ClassVar[bool] = True  # its cache stops growing with the sequence
    # What an engine must have read beyond its rule for `kind` to size this spec ("" for none): an
    # engine that does not list the spec's type in `Engine.reads_layers` refuses it with these words.
    allocation: ClassVar[str] = ""
    # Tokens one cached entry stands for: 1 but in DeepSeek-V4's compressed layers (kvplan.model.compressed,
    # 4 or 128), so one token of growth costs token_bytes / compress_ratio in every layer alike.
    compress_ratio: ClassVar[int] = 1

    def elements_per_token(self, tp: int = 1) -> int:
        return 0

    def tokens_held(self, seq_len: int) -> int:
        return 0

    def state_elements(self, tp: int = 1) -> int:
        return 0

    def fixed_bytes(self, kv_dtype) -> int:
        """Cache bytes one sequence holds whatever its length beyond a recurrent state (`state_elements`):
        0 but in DeepSeek-V4's layers (their whole window and compressor states, kvplan.model.compressed)."""
        return 0

    def token_bytes(self, kv_dtype, tp: int = 1) -> int:
        """Bytes one held token costs this layer on one rank with a `kv_dtype` cache (kvplan.core.dtypes.DType).
        Every value in `kv_dtype`, except where a layer packs its own format (IndexedMLA)."""
        return kv_dtype.bytes_for(self.elements_per_token(tp))

    @property
    def span(self) -> int:
        """Tokens a local layer looks back over (window or chunk); 0 for every other kind."""
        return 0

    def describe(self) -> str:
        """A short human label, e.g. 'full attention, 8 KV heads x 128' or 'sliding window 4096'."""
        return "no cache"


@dataclass(frozen=True)
class FullAttention(LayerSpec):
    """Global attention (MHA, GQA, MQA): K and V for every token of the sequence."""

    num_kv_heads: int
    head_dim: int
    v_head_dim: int = 0  # 0 means same as head_dim; differs for expanded (non-latent) MLA caches
    sinks: bool = False  # learned per-head attention sinks (ATTENTION_FEATURES)
    mm_prefix: bool = False  # image tokens attend both ways, a prefix-LM mask (ATTENTION_FEATURES)
    output_gate: bool = False  # q_proj gives q and a gate per head (ATTENTION_FEATURES)

    kind = Kind.FULL
    bounded = False

    def elements_per_token(self, tp: int = 1) -> int:
        v = self.v_head_dim or self.head_dim
        return kv_heads_per_rank(self.num_kv_heads, tp) * (self.head_dim + v)

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def describe(self) -> str:
        v = f"/{self.v_head_dim}" if self.v_head_dim and self.v_head_dim != self.head_dim else ""
        return f"full attention, {self.num_kv_heads} KV heads x {self.head_dim}{v}"


@dataclass(frozen=True)
class SlidingWindow(LayerSpec):
    """Local attention over the last `window` tokens (Mistral v0.1, Gemma 2/3 local, gpt-oss).

    `v_head_dim` (0: same as head_dim) is vLLM's SlidingWindowSpec.head_size_v: MiMo-V2-Flash's local
    layers cache 192-wide keys and 128-wide values.
    """

    num_kv_heads: int
    head_dim: int
    window: int
    v_head_dim: int = 0
    sinks: bool = False  # as FullAttention's
    mm_prefix: bool = False

    kind = Kind.SLIDING

    def elements_per_token(self, tp: int = 1) -> int:
        return kv_heads_per_rank(self.num_kv_heads, tp) * (self.head_dim + (self.v_head_dim or self.head_dim))

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.window)

    @property
    def span(self) -> int:
        return self.window

    def describe(self) -> str:
        v = f"/{self.v_head_dim}" if self.v_head_dim and self.v_head_dim != self.head_dim else ""
        return f"sliding window {self.window}, {self.num_kv_heads} KV heads x {self.head_dim}{v}"


def has_mla(layers) -> bool:
    """Whether any of `layers` caches an MLA latent (Kind.MLA: MLALatent, IndexedMLA, DeepSeek-V4's CompressedMLA): the
    one is-MLA test the engines' rules ask of a model."""
    return any(layer.kind == Kind.MLA for layer in layers)


def has_dsa(layers) -> bool:
    """Whether any of `layers` is DeepSeek Sparse Attention's indexed MLA (IndexedMLA: its indexer keys beside the
    latent): the one is-DSA test the engines' rules ask of a model."""
    return any(isinstance(layer, IndexedMLA) for layer in layers)


def attending(layers, tp: int = 1) -> list:
    """The layers of `layers` that cache keys per token on a rank of `tp`: the ones an attention step reads (the speed
    model's attention FLOPs, kvplan.speed.shape.attention_flops, and llama.cpp's materialized scores,
    kvplan.speed.ggml.score_bytes_per_flop, count these)."""
    return [layer for layer in layers if layer.elements_per_token(tp)]


def unwindowed(layer: LayerSpec) -> LayerSpec:
    """`layer` as an engine that applies no sliding window runs it: a SlidingWindow attends to, and caches, the whole
    sequence (FullAttention of its heads and dims); every other layer as it is."""
    if not isinstance(layer, SlidingWindow):
        return layer
    return FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim, layer.sinks, layer.mm_prefix)


@dataclass(frozen=True)
class ChunkedLocal(LayerSpec):
    """Chunked local attention (Llama 4): a token sees only its own chunk, so one chunk is held.

    Worst case is a whole chunk; a sequence shorter than a chunk holds all of its tokens.
    """

    num_kv_heads: int
    head_dim: int
    chunk: int

    kind = Kind.CHUNKED

    def elements_per_token(self, tp: int = 1) -> int:
        return kv_heads_per_rank(self.num_kv_heads, tp) * 2 * self.head_dim

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.chunk)

    @property
    def span(self) -> int:
        return self.chunk

    def describe(self) -> str:
        return f"chunked local {self.chunk}, {self.num_kv_heads} KV heads x {self.head_dim}"


@dataclass(frozen=True)
class MLALatent(LayerSpec):
    """Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2): one compressed latent per token.

    The cache keeps `kv_lora_rank` latent values plus the `qk_rope_head_dim` decoupled rope key:
    512 + 64 = 576 values, with no x2 for K and V and no split by head. Every tensor-parallel rank
    keeps the whole latent (it is shared by all heads), so tp does not divide it.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    # What each head's K and V decompress to (`kv_b_proj`: kv_lora_rank -> heads x (qk_nope + v)): not cached, but
    # the width an engine's prefill attends at where it decompresses (kvplan.speed.shape); 0: not read (keyword-only,
    # so IndexedMLA's own fields keep their places)
    qk_nope_head_dim: int = field(default=0, kw_only=True)
    v_head_dim: int = field(default=0, kw_only=True)
    # The query's compression (`q_a_proj`: hidden -> q_lora_rank, then `q_b_proj`); 0: none (DeepSeek-V2-Lite's
    # `q_proj` reads the hidden state) or not read. vLLM V0's absorbed decode weights are sized by it
    # (kvplan.engines.vllm.v0_mla).
    q_lora_rank: int = field(default=0, kw_only=True)

    kind = Kind.MLA
    bounded = False

    def elements_per_token(self, tp: int = 1) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def describe(self) -> str:
        return f"MLA latent {self.kv_lora_rank} + rope {self.qk_rope_head_dim}"


INDEXER_QUANT_BLOCK = 128  # values per fp32 scale in the DSA indexer's fp8 key cache (vLLM deepseek_v2.py)


@dataclass(frozen=True)
class IndexedMLA(MLALatent):
    """MLA plus DeepSeek Sparse Attention's "lightning indexer" key cache (DeepSeek-V3.2).

    vLLM v0.11.0 (`model_executor/models/deepseek_v2.py`, `Indexer.__init__` and
    `DeepseekV32IndexerCache.get_kv_cache_spec`) gives every such layer a second cache beside the
    latent: an MLAAttentionSpec of one head of `index_head_dim + index_head_dim // 128 * 4` uint8
    values per token (128 fp8 keys + one fp32 scale per 128 = 132 bytes), whatever the KV dtype, not
    split by tp. The latent itself is `kv_dtype` (bf16: 576 x 2 = 1152 bytes), except that an fp8 cache
    becomes vLLM's `fp8_ds_mla` (`model_executor/models/config.py` DeepseekV32ForCausalLM): 512 fp8
    latent values + 4 fp32 scales (one per 128) + 64 bf16 rope values = 656 bytes.
    """

    index_head_dim: int = 128  # 0: the layer reuses an earlier layer's top-k (IndexCache), no indexer keys
    # What a step reads and computes (kvplan.speed.shape), not what it caches: each query attends to at most
    # `index_topk` cached tokens, chosen by the indexer's `index_n_heads` heads scoring every cached token
    # (0 on a layer reusing another's top-k); index_topk 0: not read, priced as dense MLA
    index_topk: int = 0
    index_n_heads: int = 0

    allocation = "DeepSeek Sparse Attention's indexer key cache"

    def indexer_bytes(self) -> int:
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4

    def latent_bytes(self, kv_dtype) -> int:
        if kv_dtype.block_elems != 1 or kv_dtype.block_bytes not in (1, 2):
            raise KvplanError(f"DeepSeek sparse attention caches its latent in bf16/fp16 or fp8, not {kv_dtype.name}",
                              EXIT_USAGE)
        if kv_dtype.block_bytes == 2:
            return 2 * (self.kv_lora_rank + self.qk_rope_head_dim)
        return self.kv_lora_rank + self.kv_lora_rank // INDEXER_QUANT_BLOCK * 4 + 2 * self.qk_rope_head_dim

    def token_bytes(self, kv_dtype, tp: int = 1) -> int:
        return self.latent_bytes(kv_dtype) + self.indexer_bytes()

    def describe(self) -> str:
        if not self.index_head_dim:
            return f"{super().describe()} (DSA, indexer shared with an earlier layer)"
        return f"{super().describe()} + DSA indexer keys {self.index_head_dim} (fp8 + scale)"


def decompressed(layer: LayerSpec, heads: int, pad_v: bool) -> LayerSpec:
    """`layer` as an engine with no MLA kernel caches it: an MLALatent's K and V as kv_b_proj decompresses them, every
    one of its `heads` query heads a KV head of K = qk_nope + rope values and V = v_head_dim values (`pad_v`: V
    zero-padded to K's width, as vLLM before 0.7.1 attends at one head size); every other layer as it is. A layer
    whose decompressed widths the reader did not give, or whose cache holds more than the latent (a DSA indexer,
    DeepSeek-V4's compressed layers), is refused: what such an engine cached for it is not known here."""
    if layer.kind != Kind.MLA:
        return layer
    if type(layer) is not MLALatent:
        raise KvplanError(f"{layer.describe()}: a layer that caches more than the MLA latent was never run by an "
                          "engine release without an MLA kernel; plan it at a later release", EXIT_USAGE)
    if not (layer.qk_nope_head_dim and layer.v_head_dim):
        raise KvplanError(f"{layer.describe()}: the per-head widths it decompresses to are not read, so its cache "
                          "without an MLA kernel cannot be sized", EXIT_USAGE)
    k = layer.qk_nope_head_dim + layer.qk_rope_head_dim
    return FullAttention(heads, k, k if pad_v else layer.v_head_dim)


@dataclass(frozen=True)
class NoCache(LayerSpec):
    """A layer that caches nothing (an MLP-only block of Nemotron-H, an encoder layer)."""

    kind = Kind.NONE
