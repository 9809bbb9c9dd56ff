"""SGLang's request-slot pool (`ReqToTokenPool`): its bytes per GPU, by release, and where they sit.

What it is: one int32 row per request slot, `context_len + 4` entries wide (the token indices of a running request;
`max_context_len=self.model_config.context_len + 4`, the 4 a decode over-allocation margin, more under speculative
decoding, which kvplan's SGLang does not plan): `req_to_token = torch.zeros((rows, max_context_len), dtype=torch.int32)`
(0.4.3.post4 wheel `mem_cache/memory_pool.py` L64-65; 0.5.23 L375-406).

Rows, by release (PyPI wheels read):
  * through 0.4.6.post5 ModelRunner passes `size=max_num_reqs + 1` (0.4.3.post4 `model_executor/model_runner.py`
    L710-712, 0.4.6.post5 L904); 0.4.7 to 0.5.10 `size=max_num_reqs` and the pool allocates `size` rows (0.4.9
    L1100-1102, 0.5.3 L1545-1547, 0.5.10 `model_runner_kv_cache_mixin.py` L465); from 0.5.11 the pool itself adds a
    padding row at index 0 for CUDA-graph padded batches (0.5.11 `memory_pool.py` L149-150, 0.5.23 L402
    `self._alloc_size = size + 1`).
  * max_num_reqs, per worker: before 0.5.10, --max-running-requests as given (whole, 0.5.8
    `model_runner_kv_cache_mixin.py` L253), else the estimate clamp(max_total_num_tokens / context_len x 512, 2048,
    4096) (0.4.3.post4 L658-667, 0.5.3 L1431-1440); 0.5.10-0.5.13 min(flag // dp, estimate), else
    min(estimate, tokens // 2) (0.5.10 `_resolve_max_num_reqs` L840-851); from 0.5.14 min(flag // dp, tokens // 2),
    else min(estimate, tokens // 2) (0.5.14 L984-994; 0.5.23 `mem_cache/kv_cache_configurator.py` L3119-3133). dp is
    DP attention's (`self.dp_size = server_args.dp_size if server_args.enable_dp_attention else 1`, 0.5.10
    `model_runner.py` L319). A hybrid's state pool caps it further (kvplan.engines.sglang.mamba.max_running's
    slots // per request).

Where it sits: after the KV budget is read. `profile_max_num_token` reads the free memory and sizes the token pool
from `rest = free_after_weights - free_before_weights x (1 - mem_fraction_static)`; only then is max_num_reqs
resolved and the request-slot pool allocated (0.4.3.post4 L656 then L710; 0.5.3 L1427 then L1545; 0.5.23
`configure` L3182-3184 sizes the config from `_profile_available_bytes` before `_init_pools` L480 builds it). So it
does not lower the token pool: it comes out of the memory SGLang leaves above mem_fraction_static,
free_before_weights x (1 - mem_fraction_static), which SGLang's default fraction reserves for activations and CUDA
graphs and not for this pool (0.5.23 `arg_groups/memory_hook.py` L281-320). Where it is larger than that memory the
server cannot start: sgl-project/sglang#5755 (Llama-4-Scout, tp 8, its 10,485,760-token default context) failed with
"Tried to allocate 80.04 GiB": 2,049 rows x 10,485,764 x 4 B = 85,941,321,744 B = 80.04 GiB.
Not priced: DeepSeek-V4's pools (kvplan.engines.sglang.dsv4, whose slot tables are their own), a disaggregated decode
server's pre-allocated rows.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.search import largest_fitting
from kvplan.engines.capacity import Figure
from kvplan.engines.versions import parse_version
from kvplan.planning.plan_warnings import PlanWarning

ROW_EXTRA = 4  # max_context_len = context_len + 4
ENTRY = 4  # int32
PADDED_UNTIL = (0, 4, 7)  # size=max_num_reqs + 1 passed by ModelRunner before this release
PADDED_FROM = (0, 5, 11)  # the pool's own padding row from this release
PER_WORKER_FROM = (0, 5, 10)  # the flag divided over DP-attention workers, tokens // 2 on the estimate
TOKENS_CAP_FROM = (0, 5, 14)  # tokens // 2 on the flag too
LABEL = "request slots (req_to_token)"


def max_num_reqs(version: str, flag: int | None, attn_dp: int, tokens: int, context_len: int) -> int:
    """The request slots one worker's pool is sized for (module docstring), before a state pool's cap."""
    v = parse_version(version)
    estimate = max(min(int(tokens / context_len * 512) if context_len else 4096, 4096), 2048)
    if v < PER_WORKER_FROM:
        return flag or estimate
    if not flag:
        return min(estimate, tokens // 2)
    asked = max(1, flag // max(1, attn_dp))
    return min(asked, estimate) if v < TOKENS_CAP_FROM else min(asked, tokens // 2)


def rows(version: str, slots: int) -> int:
    """Rows of req_to_token for `slots` request slots: one padding row before 0.4.7 and from 0.5.11."""
    v = parse_version(version)
    return slots + 1 if v < PADDED_UNTIL or v >= PADDED_FROM else slots


def pool_bytes(version: str, slots: int, context_len: int) -> int:
    """Bytes of the pool: rows x (context_len + 4) int32 entries."""
    return rows(version, slots) * (context_len + ROW_EXTRA) * ENTRY


def room(st) -> int:
    """The memory SGLang leaves above mem_fraction_static on a GPU: the free memory before the weights (usable
    less what init and, on unified memory, the OS hold) x (1 - the fraction in force)."""
    return room_above(st.usable_bytes - st.init_bytes - st.os_held, st.mem_fraction_static)


def room_above(free_before_weights: int, fraction: float) -> int:
    """The memory SGLang leaves above mem_fraction_static `fraction`: `free_before_weights` x (1 - fraction)."""
    return int(free_before_weights * (1 - fraction))


# the plan's warning where the pool does not fit above the fraction (its two figures: size, room)
OVERRUN = ("SGLang's request-slot pool (req_to_token, {}) is larger than the memory it leaves above "
           "mem_fraction_static ({}), where it is allocated after the KV pool is sized: the server runs out of "
           "memory at start-up (sgl-project/sglang#5755); a shorter context length, fewer max_running_requests "
           "or a lower mem_fraction_static make room")


def priced(st, tokens: int, context: int, state_requests: int | None = None) -> tuple[Figure, tuple[str, int, int]]:
    """(the engine table's row, (what, bytes, room) for the plan's memory rows) of the pool one worker allocates
    beside a token pool of `tokens`, at the server's context_len (`st.context_len`, else the plan's `context`);
    `state_requests`: the requests a hybrid's state pool holds (kvplan.engines.sglang.mamba.StatePool.requests), which
    cap the request slots."""
    context_len = st.context_len or context
    slots, size = _sized(st, tokens, context_len, state_requests)
    return (Figure(LABEL, (rows(st.version, slots), context_len + ROW_EXTRA, size), "rows x entries int32"),
            ("request slots", size, room(st)))


def _sized(st, tokens: int, context_len: int, state_requests: int | None) -> tuple[int, int]:
    """(request slots, pool bytes) of one worker's pool at the server's `context_len` beside `tokens`."""
    slots = max_num_reqs(st.version, st.running_given, st.attention_dp, tokens, context_len)
    if state_requests is not None:
        slots = min(slots, state_requests)
    return slots, pool_bytes(st.version, slots, context_len)


def longest(st, tokens: int, hi: int, fixed_len: int = 0, state_requests: int | None = None) -> int:
    """The longest context up to `hi` whose server's pool fits in the room above the fraction: a server started at
    --context-length n (as kvplan emits the plan's context), or at `fixed_len` where one is asked (--max-model-len:
    the pool is then the same for every n, so all fit or none). The pool is not exactly monotone in n (where the
    estimate is between its clamps, rows x (n + 4) falls by a few KiB as n grows), so the search can stop that much
    short of the largest n; the n it answers was itself checked to fit (kvplan.core.search.largest_fitting)."""
    space = room(st)
    return max(0, largest_fitting(lambda n: n == 0 or _sized(st, tokens, fixed_len or n, state_requests)[1] <= space,
                                  hi))


def checked(res):
    """The engine result with the pool in its plan's memory rows (Plan.above_budget), and where the pool is larger
    than the room above the fraction, a plan that does not fit (the server cannot start) and says why."""
    above = res.capacity.above
    if not above:
        return res
    plan = dataclasses.replace(res.plan, above_budget=above)
    if above[1] > above[2]:
        said = PlanWarning(OVERRUN, (above[1], above[2]), ("GiB", "GiB"))
        plan = dataclasses.replace(plan, fits=False, max_concurrency=0, warnings=(*plan.warnings, said))
    return res._replace(plan=plan)
