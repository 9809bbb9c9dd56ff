"""vLLM's block pool: the blocks one request takes in each kind of layer, and the layers of one rank
grouped into kv-cache groups that share block ids (what `kvplan.engines.vllm.engine` sizes its budget into).

Sources (read as released wheels; see docs/engines.md section 1 for line numbers):
  * per-layer worst case: `vllm/v1/kv_cache_interface.py` (FullAttentionSpec L83, SlidingWindowSpec
    L196-215: cdiv(min(W-1+T, len), block) + 1 with T = max_num_batched_tokens, 2 x that from v0.30.0
    with async scheduling; ChunkedLocalAttentionSpec L174-191; MLAAttentionSpec 576 values per token,
    not split by tp; MambaSpec one page).
  * grouping and blocks: `vllm/v1/core/kv_cache_utils.py` v0.11.0 L977 (group size = fewest layers of
    one kind; the most when max < 1.25 x min from v0.12.0, < 1.5 x min from v0.18.0: group_size),
    L813-827 (num_blocks = available // page // group_size), L780-795 (blocks per request); hybrid Mamba
    pages: `model_executor/models/config.py` v0.11.0 L314-400; chunked local attention priced as full
    (cache_specs); pages unified by block size (unified_block).

`st` below is `kvplan.engines.vllm.settings.Settings` (block_size, v1, version, in_flight_tokens and the
speculative terms spec_state_blocks, swa_retained).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar
from functools import lru_cache

from kvplan.planning.deploy import stage_ranges
from kvplan.core.dtypes import DType
from kvplan.engines.base import parse_version
from kvplan.core.intmath import cdiv
from kvplan.engines.vllm import deepseek_v4
from kvplan.engines.vllm.settings import Settings
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import Kind
from kvplan.model.recurrent import state_bytes
from kvplan.hardware.facts import vendor_of


@dataclass(frozen=True)
class VllmRules:
    """Slots one request of seq_len tokens is allocated per layer: vLLM's max_memory_usage_bytes / page."""

    max_in_flight_tokens: int  # T in the sliding-window bound
    retained: int = 0  # sliding-window tokens kept below the window for multi-module MTP (Settings.swa_retained)
    mla_align: int = 0  # elements V0 pads an MLA cache entry to (ALIGNED_MLA, below); 0 where it does not
    name = "vllm"

    @classmethod
    def of(cls, st: Settings) -> VllmRules:
        return cls(st.in_flight_tokens, st.swa_retained, mla_align(st))

    def token_bytes(self, layer, kv_dtype: DType, tp: int) -> int:
        """Bytes one token takes `layer` in vLLM's cache (kvplan.planning.profile asks the rules): the padded MLA
        entry where V0 pads it, so a plan's KV per token and per sequence are the pool's."""
        return aligned_bytes(layer, kv_dtype, tp, self.mla_align)

    def blocks(self, kind: Kind, span: int, n: int, block: int) -> int:
        """Blocks one request of `n` tokens takes in one layer of `kind` (BLOCKS_PER_REQUEST, with this
        engine's tokens in flight; a sliding layer also keeps the MTP-retained tokens)."""
        t = self.max_in_flight_tokens + (self.retained if kind == Kind.SLIDING else 0)
        return BLOCKS_PER_REQUEST[kind](n, span, block, t)

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if layer.compress_ratio > 1:  # DeepSeek-V4: compressed entries of whole 256-token pages
            return cdiv(max(0, seq_len), deepseek_v4.BLOCK) * (deepseek_v4.BLOCK // layer.compress_ratio)
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
    block: int = 0  # tokens per page when its page was unified by a larger block (0: the pool's)


@dataclass(frozen=True)
class Pool:
    """vLLM's grouped layout for one rank: buckets of identical specs split into equal-size groups."""

    buckets: tuple[_Bucket, ...]
    group_size: int
    block_size: int
    bytes_per_block: int  # one block id across the group_size layer slots
    uniform: bool  # one group of all layers (plain models)
    # What vLLM's start-up check charges per block id of one request beyond the pool's own count: checked
    # for DeepSeek-V4's packed pool only (deepseek_v4.V4Pool), 0 here (the check always passes).
    startup_bytes_per_block: ClassVar[int] = 0

    @property
    def num_groups(self) -> int:
        return sum(b.groups for b in self.buckets)

    @property
    def report_block(self) -> int:
        """The block "GPU KV cache size" counts in (v0.20.0 and before): the pool's (V4Pool: its smallest)."""
        return self.block_size

    def printed_blocks_per_request(self, length: int, st: Settings) -> int:
        """The divisor of vLLM's printed concurrency: the blocks one request needs (V4Pool: its own)."""
        return self.blocks_per_request(length, st)

    def blocks_per_request(self, length: int, st: Settings, resident: bool = False) -> int:
        """Blocks one request of `length` tokens needs, summed over groups (kv_cache_utils v0.11 L780). `resident`:
        what it holds while it decodes, where a sliding-window group keeps only the blocks its window still reads.
        vLLM V1 frees the rest before each allocation (0.10.2 wheel `v1/core/kv_cache_manager.py` allocate_slots
        L246-253 calls remove_skipped_blocks, `v1/core/single_type_kv_cache_manager.py` SlidingWindowManager
        L375-391: blocks below (computed - W + 1) // block become the null block), so past W tokens a request holds
        at most cdiv(W - 1, block) + 1 of them (gpt-oss's W 128, block 16: 9), not the chunk-wide worst case vLLM
        prints its concurrency from (SlidingWindowSpec.max_memory_usage_bytes: W - 1 + max_num_batched_tokens)."""
        total = 0
        rules = VllmRules.of(st)
        for b in self.buckets:
            blk = b.block or self.block_size
            n = rules.blocks(b.kind, b.span, length, blk)
            if resident and b.kind == Kind.SLIDING:
                n = min(cdiv(length + 1, blk), cdiv(b.span - 1 + rules.retained, blk) + 1)
            if b.kind == Kind.STATE:
                n += st.spec_state_blocks
            total += n * (1 if self.uniform else b.groups)
        return total


def resident_blocks(pools, length: int, st: Settings) -> int | None:
    """Block ids a request of `length` tokens holds while it decodes (Pool.blocks_per_request's `resident`, the largest
    over the stages' pools): fewer than vLLM's printed count where sliding-window groups free what their window no
    longer reads, so the pool holds more such requests; None for V0 and for DeepSeek-V4's pool (its own admission,
    Capacity.admitted)."""
    if not st.v1 or not all(isinstance(p, Pool) for p in pools):
        return None
    return max(p.blocks_per_request(length, st, resident=True) for p in pools)


def cache_specs(layers, tp: int, kv_dtype: DType, state_dtype: DType, st: Settings) -> list[tuple[tuple, int]]:
    """(spec key, layer index) for every cached layer part, in vLLM's order: the model runner's
    get_kv_cache_spec walks the attention modules as they were built (layer 0 first; Falcon-H1 builds a
    layer's attention before its Mamba mixer). A key is (kind, span, bytes per token, or per state).

    V0 had no sliding-window pool, and vLLM (V1, v0.11.0 config/__init__.py L512-529 through v0.33.0
    config/vllm.py L2237-2251) turns the hybrid KV-cache manager off by default for a model with chunked
    local attention (Llama 4; unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1), and then
    unify_hybrid_kv_cache_specs makes its chunked and sliding layers full-attention specs."""
    parts = [(i, part) for i, spec in enumerate(layers)
             for part in (spec.parts() if hasattr(spec, "parts") else (spec,)) if part.kind != Kind.NONE]
    kinds = {part.kind for _, part in parts}
    all_full = not st.v1 or (Kind.CHUNKED in kinds and Kind.FULL in kinds)
    out = []
    for i, layer in parts:
        if layer.kind == Kind.STATE:
            key = (Kind.STATE, 0, state_bytes(layer, tp, state_dtype))
        elif all_full or not layer.span:
            key = (Kind.FULL, 0, v0_aligned_bytes(layer, kv_dtype, tp, st))  # MLA too: the same rule
        else:
            key = (layer.kind, layer.span, layer.token_bytes(kv_dtype, tp))
        out.append((key, i))
    return out


# V0's MLA cache entry padded to 256 bytes on CUDA (vllm-project/vllm#12676, removed by #14842 on 2025-03-15, before
# 0.8.0, whose V1 engine never padded): CacheEngine.get_cache_block_size rounds the key entry up with
# align_to_256bytes(entry, model dtype) where _align_cache holds: use_mla and current_platform.is_cuda() and
# VLLM_CUDA_MEM_ALIGN_KV_CACHE (default "1"): vllm 0.7.2 and 0.7.3 wheels, vllm/worker/cache_engine.py L132-137 and
# L156-158, vllm/utils.py align_to_256bytes (0.7.3 L799-802), vllm/envs.py (0.7.3 L582-583, 0.7.2 L573-574). 0.7.1
# (tagged 2025-02-01) predates the PR (opened 2025-02-03). DeepSeek's 576 latent values in its bf16 model dtype
# (128 elements a 256 bytes) take 640: 1,280 bytes a token-layer, 11% more. ROCm did not pad (is_cuda()).
ALIGNED_MLA = ((0, 7, 2), (0, 8, 0))  # [first release that pads, first that does not)
ALIGN_ELEMENTS = 128  # 256 bytes of a 16-bit model dtype, the only one vLLM loads DeepSeek's MLA models at


def mla_align(st: Settings) -> int:
    """ALIGN_ELEMENTS where this release pads V0's MLA entry on this GPU (CUDA, ALIGNED_MLA), else 0."""
    lo, hi = ALIGNED_MLA
    vendor = vendor_of(st.gpu)
    return ALIGN_ELEMENTS if not st.v1 and vendor == "NVIDIA" and lo <= parse_version(st.version) < hi else 0


def aligned_bytes(layer, kv_dtype: DType, tp: int, align: int) -> int:
    """Bytes one token costs `layer`: an MLA entry rounded up to `align` elements (0: the layer's own bytes)."""
    if layer.kind != Kind.MLA or not align:
        return layer.token_bytes(kv_dtype, tp)
    return kv_dtype.bytes_for(cdiv(layer.elements_per_token(tp), align) * align)


def v0_aligned_bytes(layer, kv_dtype: DType, tp: int, st: Settings) -> int:
    """Bytes one token costs `layer` in vLLM's cache: V0's MLA entry padded to 256 bytes on CUDA in the releases
    that did (ALIGNED_MLA), else the layer's own bytes."""
    return aligned_bytes(layer, kv_dtype, tp, mla_align(st))


def unified_page(keys, block: int) -> tuple[int, int]:
    """(tokens per attention block, bytes of one page of one layer) once vLLM has made every page equal.
    Hybrid Mamba: the attention block grows in steps of 16 until its page covers the Mamba state
    (model_executor/models/config.py v0.11.0 L314-400; v0.19.0 L156-286 with mamba_cache_mode none),
    and the Mamba page is padded to it."""
    mamba = max((k[2] for k in keys if k[0] == Kind.STATE), default=0)
    attn_tok = max((k[2] for k in keys if k[0] != Kind.STATE), default=0)
    if mamba and attn_tok:
        block = max(block, 16 * cdiv(mamba, 16 * attn_tok))
    return block, max(block * attn_tok, mamba)


def unified_block(key, block: int, page: int) -> int:
    """Tokens per page of an attention spec whose smaller page vLLM grew to `page` by a larger block
    (unify_kv_cache_spec_page_size, v0.15.0-v0.33.0: block x page // its page; Gemma 4's full layers, half
    the bytes per token of its sliding ones, get 32-token pages). 0 for a state, or a page that does not
    divide (vLLM refuses that layout before v0.25.0)."""
    own = block * key[2]
    if key[0] == Kind.STATE or not own or page % own:
        return 0
    return block * (page // own)


def group_size(counts, version: tuple[int, ...]) -> int:
    """Layers per kv-cache group (_get_kv_cache_groups_uniform_page_size): the fewest layers of one spec,
    or the most when they are close: most < 1.25 x fewest from v0.12.0, < 1.5 x from v0.18.0 (read in the
    0.11.0-0.19.0, 0.20.0, 0.25.0, 0.30.0 and 0.33.0 wheels); v0.11.0 always the fewest."""
    lo, hi = min(counts), max(counts)
    ratio = 1.5 if version >= (0, 18, 0) else 1.25 if version >= (0, 12, 0) else 1.0
    return hi if hi < ratio * lo else lo


def build_pool(layers, tp: int, kv_dtype: DType, state_dtype: DType, st: Settings) -> Pool:
    if has_compressed(layers):  # DeepSeek-V4: its own groups
        return deepseek_v4.build(layers, kv_dtype, parse_version(st.version), st.block_size)
    specs: dict[tuple, int] = {}
    for key, _ in cache_specs(layers, tp, kv_dtype, state_dtype, st):
        specs[key] = specs.get(key, 0) + 1
    if not specs:
        return Pool((), 1, st.block_size, 0, True)
    block, page = unified_page(specs, st.block_size)
    kinds = {k[0] for k in specs}
    if kinds == {Kind.FULL}:
        # One group (UniformTypeKVCacheSpecs when shapes differ): a block id spans every layer.
        page_sum = sum(block * k[2] * n for k, n in specs.items())
        b = _Bucket(Kind.FULL, 0, page_sum, sum(specs.values()), 1)
        return Pool((b,), sum(specs.values()), block, page_sum, True)
    size = group_size(list(specs.values()), parse_version(st.version))
    buckets = tuple(_Bucket(k[0], k[1], page, n, cdiv(n, size), unified_block(k, block, page))
                    for k, n in specs.items())
    return Pool(buckets, size, block, size * page, False)


GLOBAL_GROUPS = (0, 11, 0)  # the first release that groups the whole model's layers and projects them (below)


@lru_cache(maxsize=16)
def stage_pools(model, dep, st: Settings, kv_dtype: DType, state_dtype: DType) -> tuple[Pool, ...]:
    """Each pipeline stage's pool: built once per plan, read by capacity() and max_context() (and
    by every GPU and context of a sweep that shares them).

    Up to 0.10.x each worker groups its own layers (`get_kv_cache_config` per worker, then
    `unify_kv_cache_configs`: 0.10.1 wheel, v1/core/kv_cache_utils.py L1079-1150, engine/core.py L189-198). From
    0.11.0 `get_kv_cache_configs` groups the merged specs of every worker, the whole model, and gives each worker
    those groups less the layers it does not hold (0.11.0 kv_cache_utils.py L1245-1280): a hybrid's groups keep the
    whole model's size, and a worker's layers per group is the most any of them keeps of its layers (L1054), not what
    grouping its own layers would give (projected)."""
    ranges = stage_ranges(model, dep)
    whole = build_pool(model.layers, dep.tp, kv_dtype, state_dtype, st) if dep.pp > 1 else None
    if whole is None or whole.uniform or not whole.buckets or has_compressed(model.layers) \
            or parse_version(st.version) < GLOBAL_GROUPS:
        return tuple(build_pool(model.layers[a:b], dep.tp, kv_dtype, state_dtype, st) for a, b in ranges)
    specs = cache_specs(model.layers, dep.tp, kv_dtype, state_dtype, st)  # the whole model's, built once
    return tuple(projected(whole, specs, a, b) for a, b in ranges)


def projected(whole: Pool, specs: list[tuple[tuple, int]], start: int, end: int) -> Pool:
    """The whole model's pool (`whole`, its `specs` as cache_specs lists them) as the worker of layers [start, end)
    holds it: every group kept (the scheduler's block ids per request are the whole model's), the layers of each
    counted in this stage, and the most of them the worker's layers per block id (group_size, L1054). Group j of a
    spec's n groups is its layers[j::n], strided so that each stage keeps a share of every group
    (_get_kv_cache_groups_uniform_page_size, 0.11.0 L977-1000, "In PP case"; kvplan.engines.vllm.autofit._layout)."""
    layers: dict[tuple, list[int]] = {}
    for key, i in specs:
        layers.setdefault(key, []).append(i)
    size = whole.group_size
    held = [sum(start <= i < end for i in ids[j::n]) for ids in layers.values()
            for n in (cdiv(len(ids), size),) for j in range(n)]
    most = max(held, default=0) or size  # a stage with no cached layer: the pool as the whole model's (no block)
    return dataclasses.replace(whole, group_size=most, bytes_per_block=whole.bytes_per_block // size * most)
