"""vLLM's block pool for DeepSeek-V4 (kvplan.model.compressed.CompressedMLA): five kv-cache groups of padded pages.

Read in the v0.20.0, v0.20.1, v0.22.0 and v0.25.0 wheels (DeepSeek-V4 landed in v0.20.0, vllm-project/vllm#40860;
the functions below are the same in the three but for the allocator, "tuple" up to v0.22.0 and "packed" in
v0.25.0). Releases before v0.20.0 have no DeepSeek-V4; v0.30.0 and later reworked these specs
(tokens_per_state, state_content_bytes) and are not restated: both are refused (`release_problem`).

Per layer (v1/kv_cache_interface.py, the layer classes in kvplan.model.compressed), pages of the pool's
256-token block (DeepseekV4FlashMLASparseBackend.get_supported_kernel_block_sizes: [256]), each padded up
to a multiple of 576 bytes (`_apply_alignment_padding`, alignment=576 on every DeepSeek-V4 spec):
  * MLAAttentionSpec, compressed latents: 256 / ratio entries x 584 B (ratio 4: 64 x 584 = 37,376 -> 37,440;
    ratio 128: 2 x 584 = 1,168 -> 1,728); the indexer's keys (ratio 4): 64 x 132 = 8,448 -> 8,640;
  * SlidingWindowMLASpec: the window cache, block 64, window `sliding_window`: 64 x 584 -> 37,440; the
    compressor states, fp32: ratio 4 block 4, window 8, 4 x 2048 x 4 = 32,768 -> 32,832 (the indexer's
    4 x 512 x 4 = 8,192 -> 8,640); ratio 128 block 8, window 128, 8 x 1024 x 4 -> 32,832.

Groups (kv_cache_utils.py `group_and_unify_kv_cache_specs`, `_get_kv_cache_groups_uniform_groups`): every
MLAAttentionSpec in one group; the SlidingWindowMLASpecs grouped by (block, window). Each group's
"layer tuples" = the most layers sharing one page size; `_approximate_gcd` picks N >= the MLA group's
count minimising the padding sum((d - x % d) % d); every sliding group's pages are padded up to the
smallest MLA page size not below them and the group is split into cdiv(its tuples, N) groups
(tuples i::k). Bytes of one block id: v0.20.0-v0.22.0 `_get_kv_cache_config_deepseek_v4`: (sum of the
MLA group's distinct page sizes) x (the longest page-size bucket of any group); v0.25.0
`_get_kv_cache_config_packed`: sum over page sizes of size x its most slots in one group.

vLLM starts only when one request of max_model_len fits the start-up check, which charges (sum of the MLA
page sizes) x (the most layer tuples of a group) per block id (`_max_memory_usage_bytes_from_groups`): the
tuple allocator's bytes per block id, 1.2% above the packed one for DeepSeek-V4-Flash in v0.25.0.

A request of n tokens takes, in each group, max over its specs of cdiv(max_memory_usage_bytes, page):
cdiv(n, 256) for the MLA group, cdiv(min(window - 1 + T, n), block) + 1 for a sliding group (T =
max_num_batched_tokens); the groups draw from one pool, so its block ids are the sum. vLLM's printed
"Maximum concurrency" (`get_max_concurrency_for_kv_cache_config`) divides by cdiv(sum over groups of
pages x the group's page bytes, the MLA group's page bytes) instead, and "GPU KV cache size" is
num_blocks // groups x the smallest group block (4) in v0.20.0, concurrency x max_model_len after.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv, round_up
from kvplan.engines.versions import dotted
from kvplan.model.compressed import FP32

BLOCK = 256  # tokens per block of the pool (the sparse FlashMLA backend's only kernel block size)
SWA_BLOCK = 64  # DeepseekV4SWACache.block_size
ALIGN = 576  # FlashMLA's alignment of every page
FIRST, AFTER = (0, 20, 0), (0, 30, 0)  # first release with DeepSeek-V4; first release not restated
PACKED = (0, 25, 0)  # the packed allocator


def is_fp8(kv_dtype) -> bool:
    """Whether `kv_dtype` is a one-byte cache, the only one vLLM's DeepSeek-V4 attention takes (fp8_ds_mla)."""
    return kv_dtype is not None and kv_dtype.one_byte


FP8_ONLY = "fp8_ds_mla: DeepseekV4MLAAttention asserts an fp8 cache"


WHEELS = ("0.20.0", "0.20.1", "0.22.0", "0.25.0")  # the releases read here (module docstring), oldest first


def release_problem(version: tuple[int, ...], name: str, kv_dtype=None, defaulted: bool = False) -> str:
    """Why vLLM `name` cannot plan DeepSeek-V4 as kvplan reads it ('' when it can). Both fixes in one error (issue 22):
    the release to choose and, unless `kv_dtype` is already fp8 (None: not known yet), the fp8 cache it needs.
    `defaulted`: no release was asked (`name` is kvplan's default, past the releases read), so the line names one
    release to pass (the newest of WHEELS), as SGLang's refusal does (kvplan.engines.sglang.dsv4.check_release)."""
    also = "" if is_fp8(kv_dtype) else (f" and pass {arg('kv_dtype')} fp8 (those releases cache it in fp8 only, "
                                        f"{FP8_ONLY})")
    span = f"vLLM {WHEELS[0]} to {WHEELS[-1]}"
    if defaulted and version >= AFTER:
        fp8 = "" if is_fp8(kv_dtype) else f" and {arg('kv_dtype')} fp8"
        return (f"DeepSeek-V4 under vLLM needs {arg('engine_version')} {WHEELS[-1]} (or {', '.join(WHEELS[:-2])} or "
                f"{WHEELS[-2]}, the other wheels read){fp8}: with none given kvplan plans vLLM {name}, whose "
                f"DeepSeek-V4 cache specs it does not restate ({dotted(AFTER)} reworked tokens_per_state and the "
                "state content bytes)")
    if version < FIRST:
        return (f"vLLM {name} has no DeepSeek-V4 model: it landed in vLLM {dotted(FIRST)} (vllm-project/vllm#40860); "
                f"choose {span} with {arg('engine_version')}{also}")
    if version >= AFTER:
        return (f"vLLM {name} reworked DeepSeek-V4's cache specs (tokens_per_state, state content bytes), which "
                f"kvplan has not restated; it reads {span}: choose one with "
                f"{arg('engine_version')}{also}")
    return ""


@dataclass(frozen=True)
class V4Group:
    block: int  # tokens per page of this group's specs
    window: int  # 0: the compressed-latent (MLA) group
    pages: tuple[int, ...]  # padded page bytes, one per layer of the group

    def pages_per_request(self, n: int, in_flight: int) -> int:
        if not self.window:
            return cdiv(n, self.block)
        return cdiv(min(self.window - 1 + in_flight, n), self.block) + 1


@dataclass(frozen=True)
class V4Pool:
    """The five-or-so groups of one rank and the bytes of one block id (same interface as pool.Pool)."""

    groups: tuple[V4Group, ...]
    bytes_per_block: int
    # what vLLM's start-up check charges per block id (_max_memory_usage_bytes_from_groups: the latent page sizes
    # x the most layer tuples of a group); equal to bytes_per_block up to 0.22.0, above it once packed (0.25.0)
    startup_bytes_per_block: int = 0
    block_size: int = BLOCK
    buckets: tuple = ()  # no Mamba state buckets
    uniform: bool = False

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def group_size(self) -> int:
        return max(len(g.pages) for g in self.groups)

    @property
    def report_block(self) -> int:
        """The smallest block of any group: v0.20.0's "GPU KV cache size" counts in it."""
        return min(g.block for g in self.groups)

    def blocks_per_request(self, length: int, st) -> int:
        return sum(g.pages_per_request(length, st.in_flight_tokens) for g in self.groups)

    def printed_blocks_per_request(self, length: int, st) -> int:
        """The divisor of vLLM's printed concurrency (get_max_concurrency_for_kv_cache_config)."""
        first = sum(self.groups[0].pages)
        return cdiv(sum(g.pages_per_request(length, st.in_flight_tokens) * sum(g.pages) for g in self.groups), first)


def _layer_pages(layer, kv_dtype) -> tuple[list[int], dict[tuple[int, int], list[int]]]:
    """(MLA pages, sliding pages by (block, window)) of one layer, padded to 576 bytes."""
    if not is_fp8(kv_dtype):
        raise KvplanError(f"vLLM caches DeepSeek-V4 in fp8 only ({FP8_ONLY}); pass {arg('kv_dtype')} fp8", EXIT_USAGE)
    entry = layer.entry_bytes(kv_dtype)
    mla: list[int] = []
    sliding = {(SWA_BLOCK, layer.window): [round_up(SWA_BLOCK * entry, ALIGN)]}
    r = layer.compress_ratio
    if r > 1:
        mla.append(round_up(BLOCK // r * entry, ALIGN))
        state_block = 4 if r == 4 else 8
        key = (state_block, layer.coff * r)
        sliding[key] = [round_up(state_block * 2 * layer.coff * layer.head_dim * FP32, ALIGN)]
        if layer.index_head_dim:
            mla.append(round_up(BLOCK // r * layer.indexer_bytes(), ALIGN))
            sliding[key].append(round_up(state_block * 2 * 2 * layer.index_head_dim * FP32, ALIGN))
    return mla, sliding


def approximate_gcd(values: list[int], lower: int) -> int:
    """kv_cache_utils._approximate_gcd: the d >= lower with the least padding, ties to the larger d."""
    best, best_pad = lower, None
    for d in range(lower, max(max(values), lower) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _split(block: int, window: int, pages: list[int], mla_sizes: set[int], n_tuples: int) -> list[V4Group]:
    """One sliding group padded to the MLA page sizes and split into groups of at most n_tuples tuples."""
    if max(pages) > max(mla_sizes):
        raise KvplanError("vLLM cannot lay out this DeepSeek-V4 config: a sliding page exceeds every compressed "
                          "page (kv_cache_utils asserts it)", EXIT_USAGE)
    padded = [min(x for x in mla_sizes if x >= p) for p in pages]
    per_size = Counter(padded)
    if len(set(per_size.values())) != 1:
        raise KvplanError("vLLM cannot lay out this DeepSeek-V4 config: its state pages do not come in equal "
                          "numbers per page size (kv_cache_utils asserts it)", EXIT_USAGE)
    tuples = next(iter(per_size.values()))
    k = cdiv(tuples, n_tuples)
    sizes = sorted(per_size)
    return [V4Group(block, window, tuple(sizes) * len(range(i, tuples, k))) for i in range(k)]


def build(layers, kv_dtype, version: tuple[int, ...], block: int = BLOCK) -> V4Pool:
    """vLLM's groups and bytes per block id for one rank's DeepSeek-V4 layers."""
    if block != BLOCK:
        raise KvplanError(f"vLLM's DeepSeek-V4 attention backend takes {BLOCK}-token blocks only "
                          f"(DeepseekV4FlashMLASparseBackend), not {arg('block_size')} {block}", EXIT_USAGE)
    mla: list[int] = []
    sliding: dict[tuple[int, int], list[int]] = {}
    for layer in layers:
        own, states = _layer_pages(layer, kv_dtype)
        mla += own
        for key, pages in states.items():
            sliding.setdefault(key, []).extend(pages)
    if not mla:
        raise KvplanError("vLLM's DeepSeek-V4 pool needs a compressed layer on every rank (kv_cache_utils asserts "
                          "an MLA group); this pipeline stage has none", EXIT_USAGE)
    counts = [Counter(mla).most_common(1)[0][1], *(Counter(p).most_common(1)[0][1] for p in sliding.values())]
    n_tuples = approximate_gcd(counts, counts[0])
    sizes = set(mla)
    groups = [V4Group(BLOCK, 0, tuple(mla))]
    for (block, window), pages in sliding.items():
        groups += _split(block, window, pages, sizes, n_tuples)
    by_size = [Counter(g.pages) for g in groups]
    startup = sum(sizes) * max(n for c in by_size for n in c.values())
    per_block = sum(ps * max(c.get(ps, 0) for c in by_size) for ps in sizes) if version >= PACKED else startup
    return V4Pool(tuple(groups), per_block, startup)
