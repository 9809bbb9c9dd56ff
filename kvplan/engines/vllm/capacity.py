"""vLLM's printed figures for a KV budget: num_gpu_blocks, the blocks a request takes, "GPU KV cache size", the
maximum concurrency (and what `--max-model-len auto` sets), and the longest context a batch reaches in the pool.

Sources: `vllm/v1/core/kv_cache_utils.py` v0.11.0 L1080 (GPU KV cache size = num_blocks // groups x block through
v0.20.0), L1286 (the minimum of the workers' pools) and v0.20.1 L1706 (int(concurrency x max_model_len)); the block
pool itself is kvplan/engines/vllm/pool.py, the budget kvplan/engines/vllm/engine.py's.
"""

from __future__ import annotations

from kvplan.core.dtypes import DType
from kvplan.core.intmath import cdiv
from kvplan.core.search import largest_fitting
from kvplan.engines.base import Capacity, Figure, parse_version
from kvplan.engines.vllm.autofit import FIRST as AUTO_FIRST, LABEL, auto_fit
from kvplan.engines.vllm.pool import resident_blocks, stage_pools, v0_aligned_bytes
from kvplan.engines.vllm.settings import Settings
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import Kind
from kvplan.planning.deploy import stage_ranges

# What vLLM's lines count over: each worker sizes its budget and num_gpu_blocks; "GPU KV cache size" and the
# concurrency are the engine's (one per data-parallel rank: tests/test_layouts.py)
SCOPE = ("budget and blocks: per GPU; tokens and concurrency: one engine instance (its tp x pp GPUs; each "
         "data-parallel rank is its own)")


def capacity(model, dep, kv_bytes, context: int, batch: int, st: Settings, kv_dtype: DType,
             state_dtype: DType) -> Capacity:
    """vLLM's printed figures for a per-rank KV budget (`kv_bytes`: one int, or one per pipeline stage)."""
    ranges = stage_ranges(model, dep)
    budgets = list(kv_bytes) if isinstance(kv_bytes, (list, tuple)) else [kv_bytes] * len(ranges)
    pools = stage_pools(model, dep, st, kv_dtype, state_dtype)
    # Every worker sizes its own pool; the engine keeps the minimum (kv_cache_utils v0.11.0 L1286).
    blocks = min((max(0, kv) // p.bytes_per_block if p.bytes_per_block else 0) for kv, p in zip(budgets, pools))
    pool, dcp = pools[0], dep.dcp
    # -dcp C: a rank holds cdiv(len, C) of a request's tokens, so one block id (a page on each of the C
    # ranks) covers block x C of them (kv_cache_interface v0.33.0 L643-648; AttentionSpec L610-615)
    per_req = max(p.blocks_per_request(cdiv(context, dcp), st) for p in pools)
    # DeepSeek-V4's pool prints a concurrency of its own (kvplan.engines.vllm.deepseek_v4)
    printed = max(p.printed_blocks_per_request(cdiv(context, dcp), st) for p in pools)
    v = parse_version(st.version)
    if not st.v1:  # V0, also where 0.8-0.10 fall back to it (kvplan.engines.vllm.v0_fallback)
        conc = blocks * pool.block_size / context  # V0: tokens / max_model_len
        tokens = blocks * pool.block_size
    else:
        conc = blocks / printed if printed else 0.0
        # <= 0.20.0 multiplies the printed size by the dcp world size ("Multiplying the GPU KV cache
        # size by the dcp_world_size"); from 0.20.1 it is concurrency x max_model_len
        tokens = ((blocks // pool.num_groups) * pool.report_block * dcp if v <= (0, 20, 0)
                  else int(conc * context))
    bpt = max(sum(v0_aligned_bytes(l, kv_dtype, dep.tp, st) // l.compress_ratio for l in model.layers[a:b])
              for a, b in ranges)
    lines = [
        Figure("KV budget per GPU", min(budgets), "bytes"),
        Figure("block (page) size", pool.block_size, "tokens"),
        Figure("groups x layers per group", (pool.num_groups, pool.group_size), "a x b"),
        Figure("bytes per block id", pool.bytes_per_block, "B"),
        Figure("num_gpu_blocks", blocks, "count"),
        Figure(f"blocks per {context:,}-token request", per_req, "count"),
        *([Figure("tokens per block id over the dcp group", pool.block_size * dcp, "tokens")] if dcp > 1 else []),
        Figure("GPU KV cache size", tokens, "tokens"),
        Figure(f"Maximum concurrency for {context:,} tokens per request", conc, "times"),
    ]
    notes = []
    if printed != per_req:
        notes.append(f"vLLM prints its concurrency from {printed:,} blocks per request; the scheduler gives one "
                     f"request {per_req:,} block ids across the {pool.num_groups} groups: {blocks / per_req:.2f} "
                     "requests of this length fit at once")
    if any(b.kind == Kind.STATE for b in pool.buckets):
        notes.append("hybrid Mamba layout approximated (state page padded to the attention page)")
    if v >= AUTO_FIRST:
        lines, notes = _with_auto_fit(model, dep, budgets, st, kv_dtype, state_dtype, pools, blocks, lines, notes)
    admitted = (blocks // per_req if per_req else 0) if has_compressed(model.layers) else None
    held = resident_blocks(pools, cdiv(context, dcp), st)
    decoding = blocks / held if held else None  # what the running cap divides (bench)
    lines, notes = _with_resident(lines, notes, conc, decoding, context, held)
    return Capacity("vllm", st.version, min(budgets), tokens, conc, context, bpt, blocks, pool.block_size,
                    tuple(lines), tuple(notes), admitted, scope=SCOPE, resident=decoding)


def _with_resident(lines, notes, conc: float, decoding: float | None, context: int, held: int | None):
    """vLLM's printed concurrency beside the requests of `context` tokens the pool holds while they decode (`held`
    block ids each), where they differ (V1's sliding-window groups free the blocks their window no longer reads:
    Pool.blocks_per_request), each said for what it is."""
    if decoding is None or abs(decoding - conc) < 0.005:
        return lines, notes
    at = next(i for i, f in enumerate(lines) if f.label.startswith("Maximum concurrency")) + 1
    lines = [*lines[:at], Figure(f"requests of {context:,} tokens the pool holds decoding", decoding, "times"),
             *lines[at:]]
    return lines, [*notes, f"Maximum concurrency is vLLM's printed worst case: each request charged its sliding "
                           f"window's blocks for a whole prefill chunk; while requests decode, vLLM frees the blocks "
                           f"wholly outside the window, so one holds {held:,} block ids and the pool {decoding:.2f} "
                           "requests of this length at once (0.10.2 v1/core/kv_cache_manager.py L246-253; the speed "
                           "figures' running cap reads this)"]


def _with_auto_fit(model, dep, budgets, st, kv_dtype, state_dtype, pools, blocks, lines, notes):
    """The figures and notes plus what `--max-model-len auto` sets (kvplan.engines.vllm.autofit)."""
    fit = auto_fit(model, dep, budgets, st, kv_dtype, state_dtype)
    if isinstance(fit, str):
        return lines, [*notes, f"--max-model-len auto not predicted: {fit}"]
    lines = [*lines, Figure(LABEL, fit.tokens, "tokens")]
    if fit.tokens == 0:
        return lines, [*notes, f"vLLM {st.version} with --max-model-len auto refuses to start: not one token fits"]
    per_req = max(p.blocks_per_request(cdiv(fit.tokens, dep.dcp), st) for p in pools)
    if per_req > blocks:  # v0.14.0-0.18.0 size a hybrid layout on its first group only
        notes = [*notes, (f"vLLM {st.version} sizes --max-model-len auto on its first kv-cache group "
                          f"({fit.first_group}) only: the pool holds {blocks / per_req:.2f} of one "
                          f"{fit.tokens:,}-token request")]
    return lines, notes


def max_context(model, dep, cap: Capacity, batch: int, st: Settings, kv_dtype, state_dtype) -> int:
    """Longest length whose `batch` requests fit the block pool (monotone: binary search)."""
    pools = stage_pools(model, dep, st, kv_dtype, state_dtype)

    def fits(n: int) -> bool:
        # DeepSeek-V4: vLLM's start-up check charges one request more than the packed pool's blocks
        return all(batch * p.blocks_per_request(cdiv(n, dep.dcp), st) <= cap.blocks
                   and p.blocks_per_request(n, st) * p.startup_bytes_per_block <= cap.kv_memory_bytes
                   for p in pools)

    return max(0, largest_fitting(fits, model.max_context))
