"""SGLang's token pool out of a budget ("rest") on one rank: the cell a token takes in it, by pipeline stage
(`cell_bytes`, `pool_cell`), the #tokens, SWA sub-pool and request concurrency `ModelRunner.profile_max_num_token`
gives (`capacity`, with the state slots, request slots and notes the settings add), and the K size it prints
(`k_size_gib`). What the budget is, and the engine around it: kvplan.engines.sglang.engine.

Sources (PyPI wheels; docs/engines.md section 2):
  * cell per token: H_rank x (d_k + d_v) x L x b with H_rank = max(1, H // tp); MLA 576 x L x b, not split
    (0.4.3.post4 `configs/model_config.py` L213-220, model_runner L612-623); tokens rounded down to the
    page (default page 1); buffers get `size + page` rows (`mem_cache/memory_pool.py` L209-212).
  * hybrid SWA (0.5.x): swa_full_tokens_ratio 0.8; cell = full layers + 0.8 x SWA layers; full pool
    = budget // cell, SWA pool = 0.8 x full (0.5.23 `pool_configurator.py` L656-905).
  * hybrids' recurrent-state slots come out of "rest" first, by release: kvplan.engines.sglang.mamba.
"""

from __future__ import annotations

from kvplan.core.dtypes import DType
from kvplan.engines.base import Capacity, Figure
from kvplan.engines.sglang import defaults as sglang_defaults
from kvplan.engines.sglang import dsa as sglang_dsa
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.sglang import prefill_graph as sglang_prefill_graph
from kvplan.engines.sglang import req_pool as sglang_req_pool
from kvplan.engines.sglang import swa as sglang_swa
from kvplan.engines.sglang.settings import Settings
from kvplan.model.layers import LOCAL_KINDS, IndexedMLA, Kind
from kvplan.planning.deploy import Deployment, stage_ranges

GIB = 2**30
MIB = 2**20


def cell_bytes(layers, tp: int, kv_dtype: DType, st: Settings) -> tuple[int, int, int]:
    """(full-pool bytes per token, SWA-pool bytes per token, K-only bytes per token of the pool whose "KV Cache is
    allocated" line SGLang prints first) on one rank: with a hybrid SWA pool the SWA sub-pool's, which SWAKVPool
    builds before the full one, each logging its own line (0.5.8 wheel `mem_cache/swa_memory_pool.py` L63-76,
    `mem_cache/memory_pool.py` L595-605)."""
    full = swa = k_full = k_swa = 0
    hybrid = st.hybrid_swa
    for layer in layers:
        if layer.kind in (Kind.NONE, Kind.STATE):
            continue
        if st.dsa is not None and isinstance(layer, IndexedMLA):  # counted as sized, printed as allocated (dsa.py)
            full, k_full = full + st.dsa.counted(layer, kv_dtype), k_full + st.dsa.allocated(layer, kv_dtype)
            continue
        tok = layer.token_bytes(kv_dtype, tp)
        k = kv_dtype.bytes_for(_k_elements(layer, tp))
        if hybrid and layer.kind in LOCAL_KINDS:
            swa, k_swa = swa + tok, k_swa + k
        else:
            full, k_full = full + tok, k_full + k
    return full, swa, k_swa if swa else k_full


def _k_elements(layer, tp: int) -> int:
    """K values of one token in one layer on one rank: MLA's latent is all "K"; a layer whose V heads are narrower
    than its K heads (MiMo-V2-Flash: 192 / 128) has k_buffer rows of head_dim, v_buffer rows of v_head_dim
    (`MHATokenToKVPool`, `head_dim` and `v_head_dim`, 0.5.8 `mem_cache/memory_pool.py`)."""
    elements = layer.elements_per_token(tp)
    if layer.kind == Kind.MLA:
        return elements
    k, v = getattr(layer, "head_dim", 0), getattr(layer, "v_head_dim", 0) or getattr(layer, "head_dim", 0)
    return elements * k // (k + v) if k else elements // 2


def _backend_notes(page: int, st: Settings, model, kv_dtype: DType) -> list[str]:
    """What the attention backend sets, in words: the page it forces, aiter's cut of the fraction (attention.py),
    a DSA model's pool rows (dsa.py)."""
    return ([f"page_size {page}: {st.page_why}"] if st.page_why else []) + \
        ([f"mem_fraction_static {st.mem_fraction_static:g} in force: {st.aiter_why}"] if st.aiter_why else []) + \
        ([sglang_dsa.note(st.dsa, model, kv_dtype)] if st.dsa is not None else [])


def _chunk_note(st: Settings) -> list[str]:
    """Chunked prefill off (-1), in words: what SGLang then reserves and schedules (defaults.CHUNK_OFF)."""
    if st.chunked_prefill_size > 0:
        return []
    return [f"chunked_prefill_size {st.chunked_prefill_size}: chunked prefill off, each prompt prefilled whole; "
            f"SGLang's default mem_fraction_static (0.5.3 on) reserves activations for max_prefill_tokens "
            f"{sglang_defaults.MAX_PREFILL_TOKENS:,} x 1.5 MiB, not for a chunk, and captures no prefill graph"]


def capacity(model, dep, kv_bytes: int, context: int, batch: int, st: Settings, kv_dtype: DType,
             state_dtype: DType | None = None) -> Capacity:
    """SGLang's pool for `kv_bytes` of budget ("rest") per rank: #tokens, K size, concurrency.

    Under pp each stage sizes its cell from its own layers (`num_effective_layers = end_layer -
    start_layer`, 0.5.23 `model_executor/model_runner_components/layer_setup.py` L154, read by
    `DefaultPoolConfigurator`, `model_executor/pool_configurator.py` L227-237) out of the same "rest"
    (free memory is the minimum over every rank, `get_available_gpu_memory(distributed=True)`,
    `mem_cache/kv_cache_configurator.py` L3000-3004): the stage with the largest cell holds the fewest
    tokens, the count every stage keeps (all-reduced MIN over pp ranks, `_apply_token_constraints` L3107-3116;
    Plan.token_pool_stage), and the state slots are priced on the stage with the most (L3229-3260)."""
    full_cell, swa_cell, k_cell = pool_cell(model, dep, kv_dtype, st)
    page, ratio = st.page_size, st.swa_full_tokens_ratio
    budget = max(0, kv_bytes)
    states = sglang_mamba.state_pool(model, dep, budget, st.state) if st.state else None
    left = max(0, budget - states.reserved) if states else budget  # the token pool's, after the state slots
    if swa_cell:
        full_tokens = int(left // (full_cell + ratio * swa_cell)) // page * page
        swa_tokens = int(ratio * full_tokens) // page * page
    else:
        full_tokens = int(left // full_cell) // page * page if full_cell else 0
        swa_tokens = 0
    windows = [layer.span for layer in model.layers if layer.kind in LOCAL_KINDS]
    conc = full_tokens / context if context else 0.0
    if swa_cell and windows:
        need = min(context, max(windows) + page)
        conc = min(conc, swa_tokens / need)
    rows = (swa_tokens if swa_cell else full_tokens) + page  # buffers carry one padded page (0.4.3: one slot)
    k_size = rows * k_cell  # bytes of the first pool printed; SGLang prints them as "GB" that are GiB
    printed = swa_tokens if swa_cell else full_tokens
    lines = [
        Figure("KV budget per GPU (rest)", budget, "bytes"),
        Figure("mem_fraction_static", st.mem_fraction_static, "number"),
        Figure("cell per token", (full_cell, swa_cell, ratio) if swa_cell else full_cell,
               "B full + B SWA x ratio" if swa_cell else "B"),
        Figure("max_total_num_tokens", full_tokens, "count"),
        Figure("KV Cache is allocated", (printed, k_size), "sglang tokens, K GiB"),
        Figure(f"requests of {context:,} tokens", conc, "ratio"),
    ]
    if swa_cell:
        lines.insert(4, Figure("SWA pool tokens", swa_tokens, "count"))
    running, rows, said = sglang_mamba.scheduler(states, st.state, st.max_running_requests, full_tokens, context,
                                                 st.context_len or context)  # the server's context_len
    lines[2:2], notes = rows, list(said)
    if running is not None:
        conc = min(conc, running)
        lines[-1:] = [Figure("max_running_requests", running, "count"), Figure(f"requests of {context:,} tokens",
                                                                                conc, "ratio")]
    req_line, above = sglang_req_pool.priced(st, full_tokens, context, states and states.requests)  # req_pool.py
    lines += [req_line, *sglang_mm.rows(model, st, above[1])]  # the cache's headroom after the request slots
    if st.prefill_graph:
        lines.append(Figure("prefill CUDA-graph reserve", int(st.prefill_graph[1] * MIB), "MiB"))
        notes.append(sglang_prefill_graph.note(st.version, *st.prefill_graph))
    notes += sglang_mm.notes(model, st, above[1]) + _backend_notes(page, st, model, kv_dtype) + _chunk_note(st)
    if any(layer.kind in LOCAL_KINDS for layer in model.layers) and sglang_swa.note(model, st.version):
        notes.append(sglang_swa.note(model, st.version))
    pooled = sglang_mamba.pooled(model, dep, states, st.state, full_tokens * full_cell + swa_tokens * swa_cell) \
        if states else None
    return Capacity("sglang", st.version, budget, full_tokens, conc, context, full_cell + swa_cell,
                    None, page, tuple(lines), tuple(notes), max_running=running, pooled=pooled, above=above)


def pool_cell(model, dep, kv_dtype: DType, st: Settings) -> tuple[int, int, int]:
    """cell_bytes of the stage that bounds the pool: under pp each stage's cell is its own layers' (capacity),
    and the largest holds the fewest tokens. A DSA pool kvplan does not plan is refused here (dsa.refuse)."""
    sglang_dsa.refuse(st)
    return max((cell_bytes(model.layers[a:b], dep.tp, kv_dtype, st) for a, b in stage_ranges(model, dep)),
               key=lambda c: (c[0] + st.swa_full_tokens_ratio * c[1], c[2]))


def k_size_gib(tokens: int, model, dep: Deployment, kv_dtype: DType, st: Settings) -> float:
    """The "K size" SGLang prints for a pool of `tokens` (GB in the log = GiB): (tokens + one page) x the K
    bytes of a token on one rank of the bounding stage (pool_cell; a stage's own layers under pp, `dep` cut as
    the release cuts them), in the pool it prints first (the SWA sub-pool of a hybrid SWA model, whose line prints
    its own tokens: cell_bytes)."""
    return (tokens + st.page_size) * pool_cell(model, dep, kv_dtype, st)[2] / GIB
