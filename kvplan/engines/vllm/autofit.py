"""What `vllm serve --max-model-len auto` (or -1) sets max_model_len to on a given KV budget, by release.

vLLM's rule, restated from the released wheels (docs/engines.md 1.7 has the walk-through):
  * The flag: `engine/arg_utils.py` `human_readable_int_or_auto` maps "auto" or "-1" to -1 from v0.14.0
    (L2121); v0.11.0-v0.13.0 have neither (only `estimate_max_model_len`, in the "not enough KV cache" error).
  * `vllm/v1/core/kv_cache_utils.py` `get_kv_cache_configs` calls `_auto_fit_max_model_len` when
    original_max_model_len == -1 (v0.14.0 L1389, v0.17.0 L1398; v0.33.0 `kv_cache_planning.py` L1337).
    `_estimate_max_model_len_from_groups` binary-searches [1, the model's derived limit] for the largest
    length whose `_max_memory_usage_bytes_from_groups` is at most the worker's available KV memory; vLLM
    keeps the smallest over workers, raises "Cannot auto-fit max_model_len: not enough GPU memory available
    to serve even a single token" when it is 0, and logs "full model context length N fits" or "reduced
    from N to M".
  * `_max_memory_usage_bytes_from_groups`: one group of UniformTypeKVCacheSpecs (every layer full attention,
    or every layer the same window) is the sum over its layers of `max_memory_usage_bytes`; otherwise
    group_size x page x blocks, where blocks is cdiv(groups[0]'s max_memory_usage_bytes, page) in v0.14.0-
    v0.18.0 (L1329 in 0.18.0) - the first group only, the spec of the first cached layer - and the sum over
    all groups from v0.19.0 (L1332; v0.30.0 and v0.33.0 write group_size x page as bytes_per_block, the
    largest group's page sum).
  * Whose layers and memory: v0.14.0-v0.16.0 size the whole model's groups against the smallest worker's
    memory (with pipeline stages, every stage's layers against one stage's memory); from v0.17.0 each
    worker's share of the global groups (`_project_kv_cache_groups_to_worker`) against its own memory.

Unlike kvplan.engines.vllm.capacity.max_context (the longest context `batch` requests reach in the allocated pool
of num_gpu_blocks), this compares bytes with the budget before any pool exists, follows the rules above
and never looks at concurrency. For one pipeline stage from v0.19.0 the two agree at batch 1 (blocks x
bytes_per_block <= budget exactly when blocks <= budget // bytes_per_block); they differ on hybrid layouts
before v0.19.0, across pipeline stages and in which groups are padded.

Refused (None with a reason) where kvplan cannot follow vLLM exactly: releases without the flag, hybrid
Mamba layouts from v0.30.0 (prefix caching on for hybrid models: mamba_cache_mode "align"/"all", whose
pages kvplan does not model) or with an MLA cache (its block alignment is 64, not 16), decode context
parallel with local attention (vLLM asserts), and pages that vLLM cannot unify by block size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvplan.planning.deploy import stage_ranges
from kvplan.core.intmath import cdiv
from kvplan.engines.vllm.pool import VllmRules, build_pool, cache_specs, group_size, unified_block, unified_page
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import Kind
from kvplan.core.search import largest_fitting

FIRST = (0, 14, 0)  # the first release whose --max-model-len takes "auto"
LABEL = "--max-model-len auto sets"  # its figure among vLLM's (kvplan.engines.vllm.capacity.capacity)


@dataclass(frozen=True)
class AutoFit:
    tokens: int  # what vLLM sets max_model_len to; 0: it refuses to start
    limit: int  # the model's own limit, where vLLM's search starts
    first_group: str  # the kind of groups[0], all that v0.14.0-v0.18.0 size a hybrid layout on

    @property
    def reduced(self) -> bool:
        return 0 < self.tokens < self.limit


@dataclass(frozen=True)
class _Group:
    kind: Kind
    span: int
    block: int  # tokens per page of this group's layers (pages unified by block size)
    layers: tuple[int, ...]  # model layer indices


@dataclass(frozen=True)
class _Layout:
    uniform: bool  # one group: the sum over layers of each layer's worst case
    groups: tuple[_Group, ...]
    page: int  # one layer's page (general case) or per-token bytes by layer (uniform: see tok)
    tok: tuple[tuple[int, int], ...] = ()  # uniform: (layer index, bytes per token)


def refusal(model, dep, st) -> str | None:
    """Why kvplan does not predict --max-model-len auto for this model on this release (None: it does)."""
    if st.v < FIRST:
        return f"vLLM {st.version} has no --max-model-len auto (first in 0.14.0)"
    kinds = {p.kind for spec in model.layers for p in (spec.parts() if hasattr(spec, "parts") else (spec,))}
    if Kind.STATE in kinds and kinds & {Kind.FULL, Kind.SLIDING, Kind.CHUNKED, Kind.MLA}:
        if st.v >= (0, 30, 0):
            return (f"vLLM {st.version} turns prefix caching on for hybrid Mamba models (mamba_cache_mode align or "
                    "all), whose pages kvplan does not model")
        if Kind.MLA in kinds:
            return "vLLM aligns the block of an MLA + Mamba model to 64 tokens; kvplan does not model that page"
    if dep.dcp > 1 and kinds & {Kind.SLIDING, Kind.CHUNKED}:
        return "vLLM has no decode context parallel for sliding-window or chunked layers"
    return None


@lru_cache(maxsize=16)
def _layout(model, tp: int, st, kv_dtype, state_dtype) -> _Layout | str:
    """vLLM's global kv-cache groups for the whole model, in its order (get_kv_cache_groups)."""
    specs = cache_specs(model.layers, tp, kv_dtype, state_dtype, st)
    by_key: dict[tuple, list[int]] = {}
    for key, i in specs:
        by_key.setdefault(key, []).append(i)
    kinds_spans = {(k[0], k[1]) for k in by_key}
    if len(kinds_spans) == 1 and next(iter(kinds_spans))[0] != Kind.STATE:
        kind, span = next(iter(kinds_spans))
        group = _Group(kind, span, st.block_size, tuple(i for _, i in specs))
        return _Layout(True, (group,), 0, tuple((i, k[2]) for k, i in specs))
    block, page = unified_page(by_key, st.block_size)
    size = group_size([len(v) for v in by_key.values()], st.v)
    groups = []
    for key, idx in by_key.items():
        blk = block if key[0] == Kind.STATE else unified_block(key, block, page)
        if not blk:  # unify_kv_cache_spec_page_size raises (pads from 0.25.0 on some backends)
            return "its layers' pages differ by a ratio that is not a whole number of blocks"
        n = cdiv(len(idx), size)  # layers idx[j::n] make group j (kv_cache_utils, "In PP case" comment)
        groups += [_Group(key[0], key[1], blk, tuple(idx[j::n])) for j in range(n)]
    return _Layout(False, tuple(groups), page)


def _blocks(g: _Group, n: int, dep, st) -> int:
    """Pages one request of n tokens may take in one layer of group g (its spec's max_memory_usage_bytes)."""
    if g.kind == Kind.STATE:
        return 1 + st.spec_state_blocks
    if g.kind in (Kind.FULL, Kind.MLA):
        n = cdiv(n, dep.dcp)  # a dcp rank keeps cdiv(len, dcp) tokens
    return VllmRules.of(st).blocks(g.kind, g.span, n, g.block)


def _worker_bytes(lay: _Layout, layers: range, dep, st):
    """n -> _max_memory_usage_bytes_from_groups for the worker holding `layers` (None: it holds none)."""
    if lay.uniform:
        g = lay.groups[0]
        per_token = sum(b for i, b in lay.tok if i in layers)
        return (lambda n: _blocks(g, n, dep, st) * g.block * per_token) if per_token else None
    size = max(sum(1 for i in g.layers if i in layers) for g in lay.groups)
    if not size:
        return None
    counted = lay.groups[:1] if st.v < (0, 19, 0) else lay.groups
    return lambda n: size * lay.page * sum(_blocks(g, n, dep, st) for g in counted)


def auto_fit(model, dep, budgets, st, kv_dtype, state_dtype) -> AutoFit | str:
    """What --max-model-len auto chooses with `budgets` (available KV bytes per pipeline stage, per rank),
    or why kvplan does not say (a refusal). Cached: every context and batch of a sweep shares it."""
    return _auto_fit(model, dep, tuple(budgets), st, kv_dtype, state_dtype)


def _deepseek_v4(model, dep, budgets, st, kv_dtype, state_dtype) -> AutoFit:
    """DeepSeek-V4 (kvplan.engines.vllm.deepseek_v4): each worker's groups against its memory, as the start-up
    check charges them (_max_memory_usage_bytes_from_groups' DeepSeek-V4 case)."""
    best = model.max_context
    for (a, b), avail in zip(stage_ranges(model, dep), budgets):
        pool = build_pool(model.layers[a:b], dep.tp, kv_dtype, state_dtype, st)
        best = min(best, max(0, largest_fitting(
            lambda n, p=pool: p.blocks_per_request(n, st) * p.startup_bytes_per_block <= avail, model.max_context,
            lo=1)))
    return AutoFit(best, model.max_context, "mla")


@lru_cache(maxsize=256)
def _auto_fit(model, dep, budgets: tuple[int, ...], st, kv_dtype, state_dtype) -> AutoFit | str:
    why = refusal(model, dep, st)
    if not why and has_compressed(model.layers):
        return _deepseek_v4(model, dep, budgets, st, kv_dtype, state_dtype)
    lay = why or _layout(model, dep.tp, st, kv_dtype, state_dtype)
    if isinstance(lay, str):
        return lay
    ranges = [range(a, b) for a, b in stage_ranges(model, dep)]
    if st.v < (0, 17, 0):  # the whole model against the smallest stage's memory
        workers = [(range(model.num_layers), min(budgets))]
    else:
        workers = list(zip(ranges, budgets))
    first = lay.groups[0].kind.value if lay.groups else "none"
    best = model.max_context
    for layers, avail in workers:
        need = _worker_bytes(lay, layers, dep, st)
        if need is not None:
            best = min(best, max(0, largest_fitting(lambda n: need(n) <= avail, model.max_context, lo=1)))
    return AutoFit(best, model.max_context, first)
