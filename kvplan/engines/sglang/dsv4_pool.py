"""SGLang's DeepSeek-V4 pools (kvplan.model.compressed.CompressedMLA), sized as `DSV4PoolConfigurator` sizes them.

Read in the 0.5.15 wheel (sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl) and the 0.5.16 wheel (the same
arithmetic, `mr` renamed `kvc`, dp_size read as attn_dp_size), then 0.5.17 and 0.5.18 (the same again); which releases
are claimed: kvplan.engines.sglang.dsv4.
Restated, not copied (0.5.15 line numbers):

* The budget is SGLang's usual "rest" (`model_runner_kv_cache_mixin.py` `_profile_available_bytes` L104-139:
  free after weights - free before x (1 - mem_fraction_static), as bytes), the one kvplan.engines.sglang.engine
  models for every model. `create_memory_pool_configurator` (`model_executor/pool_configurator.py` L774-785) picks
  `DSV4PoolConfigurator` (L513-771) for DeepseekV4ForCausalLM, a hybrid SWA architecture.
* Bytes of one "full" token (`_get_bytes_per_full_token`, L609-649), a float over the stage's L layers, L4 of
  ratio 4 and L128 of ratio 128: kv = qk_nope + 2 qk_rope + 8 (one fp8 latent with its bf16 rope part and scales,
  584 B), idx = index_head_dim + index_head_dim / 128 x 4 (132 B), s = swa_full_tokens_ratio:
      s kv L + kv L4 / 4 + kv L128 / 128 + idx L4 / 4 + s x (8 / window) x (4 head_dim + 4 index_head_dim) x 4 B x L4
  (the c4 compressor and its indexer's fp32 states, a ring of 8 rows per `window` SWA tokens, L631; the c128
  states are not per token: below).
* The c128 compressor states are fixed bytes per request slot, taken out first (L668-689, `calculate_pool_sizes`
  L734-762): slots = max_running_requests per worker + 1 (L663-666), rows = slots x 128 (the ring) + 129, rounded up
  to 128, each 2 x head_dim fp32 values, on every ratio-128 layer. SGLang's DeepSeek-V4 hook always sets
  --max-running-requests (256 when not given: kvplan.engines.sglang.dsv4), so the requested per-worker figure is
  the one used (L742-745), never the estimate.
* full = int((rest - c128 fixed) / bytes per full token), rounded down to the page (256); swa = int(full x s) in
  pages; c4 = full // 4; c128 = full // 128; c4_state = swa // window x 8; c128_state = (running + 1) x 128 once the
  running limit is known (`_compute_dsv4_sizes` L651-661, `finalize_with_max_running_requests` L723-732).
  max_total_num_tokens = full. Under pp each stage sizes its own layers and the smallest full count is kept
  (`_apply_token_constraints`, mixin L1196-1223); the running limit per worker is min(requested, full // 2)
  (`_resolve_max_num_reqs` L1225-1262).
* Logged: "DSV4 memory calculation: bytes_per_full_token=..., available_bytes=... GB, c128_state_fixed=... GB,
  full_token=..." (L755-761), "DSV4 pool sizes: full=..., swa=..., c4=..., c128=..., c4_state=..., c128_state=..."
  (L706-712, printed before the running limit, so c128_state=0 there), then the scheduler's "max_total_num_tokens=...,
  ... max_running_requests=..." (`managers/scheduler.py` L944-951). No "KV Cache is allocated" line: the DSV4 pools
  (`mem_cache/deepseek_v4_memory_pool.py`) do not print one.

A request of n tokens takes cdiv(n, 256) pages of the full pool; its SWA tokens are freed outside max(window,
page) behind the last page boundary (`mem_cache/common.py` `free_swa_out_of_window_slots` L69-114, radix cache:
L97), so it holds at most max(window, page) + page of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.intmath import cdiv, round_up
from kvplan.model.compressed import FP32, CompressedMLA

PAGE = 256  # arg_groups/overrides.py L694: page_size 256 for the dsv4 backend (CUDA)
SWA_RATIO = 0.1  # overrides.py L709-711: where --swa-full-tokens-ratio is left at its default
LATENT_EXTRA = 8  # kv bytes = qk_nope + 2 x qk_rope + 8 (pool_configurator.py L610)
INDEX_BLOCK = 128  # one fp32 scale per 128 indexer values (L612-615)
RING = {4: 8, 128: 128}  # get_compress_state_ring_size, not speculative (deepseek_v4_memory_pool.py L34-48)
STATE_ROWS_ALIGN = 128  # the c128 state rows, rounded up (pool_configurator.py L683)


@dataclass(frozen=True)
class Dims:
    """What the configurator reads of one pipeline stage's layers."""

    layers: int  # every attention layer of the stage (the SWA pool's)
    c4: int  # ratio-4 layers
    c128: int  # ratio-128 layers
    head_dim: int  # qk_nope + qk_rope
    rope: int
    index_head_dim: int
    window: int

    @property
    def kv_bytes(self) -> int:
        return self.head_dim - self.rope + 2 * self.rope + LATENT_EXTRA

    @property
    def index_bytes(self) -> int:
        return self.index_head_dim + self.index_head_dim // INDEX_BLOCK * 4


def dims(layers) -> Dims:
    """The configurator's view of `layers` (CompressedMLA; any other layer is not in its pools)."""
    mine = [x for x in layers if isinstance(x, CompressedMLA)]
    first = mine[0]
    return Dims(len(mine), sum(x.compress_ratio == 4 for x in mine), sum(x.compress_ratio == 128 for x in mine),
                first.head_dim, first.rope_dim, max((x.index_head_dim for x in mine), default=0), first.window)


def bytes_per_full_token(d: Dims, ratio: float) -> float:
    """`_get_bytes_per_full_token`: SGLang's float, as it computes it (module docstring)."""
    c4_state = 2 * 2 * d.head_dim * FP32  # kv and score, two overlapping windows
    c4_index_state = 2 * 2 * d.index_head_dim * FP32
    state_ratio = RING[4] / d.window
    return (ratio * d.kv_bytes * d.layers
            + 1 / 4 * d.kv_bytes * d.c4
            + 1 / 128 * d.kv_bytes * d.c128
            + 1 / 4 * d.index_bytes * d.c4
            + ratio * state_ratio * c4_state * d.c4
            + ratio * state_ratio * c4_index_state * d.c4)


def c128_state_fixed(d: Dims, running: int) -> int:
    """`_get_c128_state_fixed_bytes` for `running` requests per worker (module docstring)."""
    if not d.c128:
        return 0
    rows = round_up((running + 1) * RING[128] + RING[128] + 1, STATE_ROWS_ALIGN)
    return rows * 2 * d.head_dim * FP32 * d.c128


def full_tokens(d: Dims, budget: int, ratio: float, running: int, page: int = PAGE) -> int:
    """Full tokens one stage's `budget` holds (before the pp minimum), in whole pages."""
    left = max(budget - c128_state_fixed(d, running), 0)
    return int(left / bytes_per_full_token(d, ratio)) // page * page


@dataclass(frozen=True)
class Pools:
    """The sizes SGLang logs ("DSV4 pool sizes") and its running limit, for one worker."""

    full: int
    swa: int
    c4: int
    c128: int
    c4_state: int
    c128_state: int
    running: int  # max_running_requests per worker: min(requested, full // 2)

    def printed(self) -> tuple[int, ...]:
        return self.full, self.swa, self.c4, self.c128, self.c4_state, self.c128_state


def pools(d: Dims, full: int, ratio: float, requested: int, page: int = PAGE) -> Pools:
    """`_compute_dsv4_sizes` and `finalize_with_max_running_requests` for `full` tokens."""
    swa = int(full * ratio) // page * page
    running = min(requested, full // 2)
    return Pools(full, swa, full // 4, full // 128, swa // d.window * RING[4], (running + 1) * RING[128], running)


def swa_need(d: Dims, n: int, page: int = PAGE) -> int:
    """SWA tokens one request of n tokens holds at most (module docstring)."""
    return min(round_up(n, page), max(d.window, page) + page)


def requests_held(d: Dims, p: Pools, n: int, page: int = PAGE) -> float:
    """Requests of n tokens the full and SWA pools hold at once (before the running limit)."""
    if n <= 0:
        return 0.0
    return min(p.full / (cdiv(n, page) * page), p.swa / swa_need(d, n, page))
