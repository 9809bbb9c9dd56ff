"""vLLM's block pool: the blocks one request takes in each kind of layer, and the layers of one rank
grouped into kv-cache groups that share block ids (what `kvplan.engines.vllm` sizes its budget into).

Sources (read as released wheels; see docs/engines.md section 1 for line numbers):
  * per-layer worst case: `vllm/v1/kv_cache_interface.py` (FullAttentionSpec L83, SlidingWindowSpec
    L196-215: cdiv(min(W-1+T, len), block) + 1 with T = max_num_batched_tokens, 2 x that from v0.30.0
    with async scheduling; ChunkedLocalAttentionSpec L174-191; MLAAttentionSpec 576 values per token,
    not split by tp; MambaSpec one page).
  * grouping and blocks: `vllm/v1/core/kv_cache_utils.py` v0.11.0 L977 (group size = fewest layers of
    one kind; v0.33.0 takes the most when max < 1.5 x min), L813-827 (num_blocks = available // page //
    group_size), L780-795 (blocks per request); hybrid Mamba pages: `model_executor/models/config.py`
    v0.11.0 L314-400.

`st` below is `kvplan.engines.vllm.Settings` (block_size, v1, version, in_flight_tokens and the
speculative terms spec_state_blocks, swa_retained).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.deploy import split_layers
from kvplan.dtypes import DType
from kvplan.engines.base import parse_version
from kvplan.intmath import cdiv
from kvplan.layers import Kind, state_bytes

if TYPE_CHECKING:
    from kvplan.engines.vllm import Settings


@dataclass(frozen=True)
class VllmRules:
    """Slots one request of seq_len tokens is allocated per layer: vLLM's max_memory_usage_bytes / page."""

    max_in_flight_tokens: int  # T in the sliding-window bound
    retained: int = 0  # sliding-window tokens kept below the window for multi-module MTP (Settings.swa_retained)
    name = "vllm"

    @classmethod
    def of(cls, st: Settings) -> VllmRules:
        return cls(st.in_flight_tokens, st.swa_retained)

    def blocks(self, kind: Kind, span: int, n: int, block: int) -> int:
        """Blocks one request of `n` tokens takes in one layer of `kind` (BLOCKS_PER_REQUEST, with this
        engine's tokens in flight; a sliding layer also keeps the MTP-retained tokens)."""
        t = self.max_in_flight_tokens + (self.retained if kind == Kind.SLIDING else 0)
        return BLOCKS_PER_REQUEST[kind](n, span, block, t)

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if seq_len <= 0 or layer.kind not in BLOCKS_PER_REQUEST or layer.kind == Kind.STATE:
            return 0
        return self.blocks(layer.kind, layer.span, seq_len, block) * block


# Blocks one request of `n` tokens takes in one layer of each kind (kv_cache_interface.py, per spec's
# max_memory_usage_bytes): span is the window or chunk, t the tokens in flight. Mamba: one page.
BLOCKS_PER_REQUEST = {
    Kind.FULL: lambda n, span, blk, t: cdiv(n, blk),
    Kind.MLA: lambda n, span, blk, t: cdiv(n, blk),
    Kind.SLIDING: lambda n, span, blk, t: cdiv(min(span - 1 + t, n), blk) + 1,
    Kind.CHUNKED: lambda n, span, blk, t: cdiv(min(span + t, n), blk),
    Kind.STATE: lambda n, span, blk, t: 1,
}


@dataclass(frozen=True)
class _Bucket:
    kind: Kind  # FULL (every layer of a V0 or uniform pool), SLIDING, CHUNKED or STATE
    span: int  # window or chunk; 0 otherwise
    page: int  # bytes of one block of one layer (after page unification)
    layers: int
    groups: int  # kv-cache groups this bucket becomes


@dataclass(frozen=True)
class Pool:
    """vLLM's grouped layout for one rank: buckets of identical specs split into equal-size groups."""

    buckets: tuple[_Bucket, ...]
    group_size: int
    block_size: int
    bytes_per_block: int  # one block id across the group_size layer slots
    uniform: bool  # one group of all layers (plain models)

    @property
    def num_groups(self) -> int:
        return sum(b.groups for b in self.buckets)

    def blocks_per_request(self, length: int, st: Settings) -> int:
        """Blocks one request of `length` tokens needs, summed over groups (kv_cache_utils v0.11 L780)."""
        total = 0
        rules = VllmRules.of(st)
        for b in self.buckets:
            n = rules.blocks(b.kind, b.span, length, self.block_size)
            if b.kind == Kind.STATE:
                n += st.spec_state_blocks
            total += n * (1 if self.uniform else b.groups)
        return total

    def layer_bytes(self, length: int, st: Settings) -> int:
        """Sum over real layers of max_memory_usage_bytes (what estimate_max_model_len compares)."""
        blk = self.block_size
        total = 0
        for b in self.buckets:
            one = _Bucket(b.kind, b.span, b.page, 1, 1)
            n = Pool((one,), 1, blk, b.page, True).blocks_per_request(length, st)
            total += n * b.page * b.layers
        return total


def build_pool(layers, tp: int, kv_dtype: DType, state_dtype: DType, st: Settings) -> Pool:
    block = st.block_size
    specs: dict[tuple, int] = {}
    per_token: dict[tuple, int] = {}
    mamba_bytes = 0
    for layer in (part for spec in layers for part in (spec.parts() if hasattr(spec, "parts") else (spec,))):
        if layer.kind == Kind.NONE:
            continue
        if layer.kind == Kind.STATE:
            nbytes = state_bytes(layer, tp, state_dtype)
            key = (Kind.STATE, 0, nbytes)
            mamba_bytes = max(mamba_bytes, nbytes)
        else:
            tok = layer.token_bytes(kv_dtype, tp)
            if not st.v1 or not layer.span:
                key = (Kind.FULL, 0, tok)  # V0 had no sliding-window pool: every layer is full
            else:
                key = (layer.kind, layer.span, tok)
            per_token[key] = tok
        specs[key] = specs.get(key, 0) + 1
    if not specs:
        return Pool((), 1, block, 0, True)
    attn_tok = max(per_token.values(), default=0)
    if mamba_bytes and attn_tok:
        # Hybrid Mamba: the attention block grows until its page covers the Mamba state
        # (model_executor/models/config.py v0.11.0 L314-400); the Mamba page is padded to it.
        block = max(block, 16 * cdiv(mamba_bytes, 16 * attn_tok))
    kinds = {k[0] for k in specs}
    if kinds == {Kind.FULL}:
        # One group (UniformTypeKVCacheSpecs when shapes differ): a block id spans every layer.
        page_sum = sum(block * k[2] * n for k, n in specs.items())
        b = _Bucket(Kind.FULL, 0, page_sum, sum(specs.values()), 1)
        return Pool((b,), sum(specs.values()), block, page_sum, True)
    counts = list(specs.values())
    lo, hi = min(counts), max(counts)
    group_size = hi if (parse_version(st.version) >= (0, 33, 0) and hi < 1.5 * lo) else lo
    page = max(block * attn_tok, mamba_bytes)
    buckets = tuple(_Bucket(k[0], k[1], page, n, cdiv(n, group_size)) for k, n in specs.items())
    return Pool(buckets, group_size, block, group_size * page, False)


@lru_cache(maxsize=16)
def stage_pools(model, dep, st: Settings, kv_dtype: DType, state_dtype: DType) -> tuple[Pool, ...]:
    """Each pipeline stage's pool: built once per plan, read by capacity() and max_context() (and
    by every GPU and context of a sweep that shares them)."""
    return tuple(build_pool(model.layers[a:b], dep.tp, kv_dtype, state_dtype, st)
                 for a, b in split_layers(model.num_layers, dep.pp))
