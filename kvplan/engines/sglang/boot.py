"""The lowest SGLang `--mem-fraction-static` that boots a requested context x concurrency, for `--emit`.

SGLang sizes its token pool as `free_before_weights x mem_fraction_static - weights` (kvplan/engines/
sglang.py, `ModelRunner.profile_max_num_token`) and each running request holds all of its tokens
(page 1). The lowest fraction (two decimals) whose pool holds `concurrency x context` tokens plus
MARGIN_FRACTION follows from the budget being linear in the fraction, less a hybrid's recurrent-state slots,
which SGLang takes out of the budget before the token pool. kvplan's SGLang pool is checked end to end against
only a few held-out logs (README, "SGLang's pool against its logs"); when this margin was chosen the one log
checked from the GPU alone (QwQ-32B on 4x L4) had 10% fewer tokens than kvplan promised, so the margin stated
is kvplan's, not a measured bound.
"""

from __future__ import annotations

from kvplan.core.intmath import cdiv
from kvplan.engines.sglang import dsv4
from kvplan.engines.sglang.mamba import StateSettings, state_pool
from kvplan.engines.sglang.multimodal import scales_any_fraction
from kvplan.engines.sglang.req_pool import room_above
from kvplan.planning.layout import per_rank_batch

GIB = 2**30
MARGIN_FRACTION = 0.10  # of the tokens the load needs: the one checked log was 10% optimistic


def token_cost(plan, settings: dict, model) -> tuple[int, int]:
    """(bytes a pool token costs on a rank, bytes taken before the tokens): the plan's per-token bytes and none;
    DeepSeek-V4's bytes per full token (rounded up) and its c128 states (kvplan.engines.sglang.dsv4)."""
    own = dsv4.pool_cost(model, settings, plan.deployment)
    return own if own is not None else (max(1, plan.kv_bytes_per_token_per_gpu), 0)


def pool_tokens(plan, settings: dict, model, kv: int) -> int:
    """Tokens the pool holds out of `kv` bytes of budget ("rest") per rank: (kv - fixed - state slots) // bytes a
    token. A hybrid's recurrent-state slots come out of the budget first (kvplan.engines.sglang.mamba.state_pool, by
    mamba_full_memory_ratio or the slots given), so the token pool is what they leave, as the plan's own table."""
    per_token, fixed = token_cost(plan, settings, model)
    states = settings.get("state")
    reserved = state_pool(model, plan.deployment, max(0, kv), StateSettings(**states)).reserved \
        if states and model is not None and plan.state_pool_bytes_per_gpu else 0
    return max(0, kv - fixed - reserved) // per_token


def lowest_fraction(plan, settings: dict, concurrency: int, model=None) -> float | None:
    """Smallest two-decimal mem_fraction_static whose pool holds `concurrency` x the plan's context plus
    the margin; None if the flag's 0.99 does not (in force: 0.99 x _scale). The budget is linear in the fraction
    (kvplan/engines/sglang/engine.py): kv(f) = kv(f0) + (total - init - OS share) x (f - f0) (_slope); the pool
    holds pool_tokens of it. The linear guess leaves out a hybrid's state slots, so it is a lower bound and the
    search steps up from it."""
    f0, kv0 = settings["mem_fraction_static"], plan.kv_memory_bytes_per_gpu
    slope = _slope(plan, settings)
    per_token, fixed = token_cost(plan, settings, model)
    tokens = int(concurrency * plan.request.context * (1 + MARGIN_FRACTION))
    need = tokens * per_token + fixed

    def short(f: float) -> bool:
        return pool_tokens(plan, settings, model, kv0 + int(round(slope * (f - f0)))) < tokens

    top = round(0.99 * _scale(settings), 5)  # the fraction in force at the flag's 0.99 (flag_fraction)
    if short(top):
        return None
    f = max(0.01, min(top, cdiv(round((f0 + (need - kv0) / slope) * 10000), 100) / 100))
    while f < top and short(f):
        f = min(top, round(f + 0.01, 2))
    return f


def _slope(plan, settings: dict) -> int:
    """Bytes of pool a unit of fraction buys: B, the free memory SGLang measures before the weights, which is the
    usable memory less what init holds and less what the OS holds then (`os_held`: the stated os_memory on a
    unified-memory GPU, 0 on a discrete one, kvplan.engines.options.os_share). A cold load's page cache is in
    the weights' drop, not in B, so it moves the pool but not the slope."""
    return plan.usable_memory_bytes - int(settings.get("init_bytes", 0)) - int(settings.get("os_held", 0))


def _scale(settings: dict) -> float:
    """What SGLang multiplies the --mem-fraction-static flag by: a vision model's factor before 0.4.9
    (kvplan.engines.sglang.multimodal), aiter's 0.85 past 8,192 tokens (kvplan.engines.sglang.attention)."""
    factor = settings.get("vlm_factor", 1.0) if scales_any_fraction(settings["version"]) else 1.0
    return factor * settings.get("aiter_factor", 1.0)


def flag_fraction(f: float, settings: dict) -> float:
    """The --mem-fraction-static value that gives a plan's fraction `f` in force: before SGLang 0.4.9 a vision
    model's flag is multiplied by 0.95 whatever its value (kvplan.engines.sglang.multimodal), so the flag is
    f / 0.95 (at most 0.99, five decimals); otherwise f itself. The one conversion the emitted command and its
    margin note share."""
    factor = _scale(settings)
    if factor != 1.0:
        return min(0.99, round(f / factor, 5))
    return f


def emit_advice(plan, settings: dict, model) -> tuple[float, str]:
    """The --mem-fraction-static `fit --emit sglang` should print (the flag's value, flag_fraction) and the margin
    it leaves, in words, with the same values."""
    f = settings["mem_fraction_static"]
    # per data-parallel rank: each holds its own share of the requests in its own pool

    batch, ctx = per_rank_batch(plan.request.batch, plan.deployment.dp), plan.request.context
    low = lowest_fraction(plan, settings, batch, model)
    if low is None:
        return flag_fraction(f, settings), (f"margin: none; {batch} x {ctx:,} tokens do not fit even at "
                                            "--mem-fraction-static 0.99 by kvplan's estimate")
    use = max(f, low)
    kv = plan.kv_memory_bytes_per_gpu + int(round(_slope(plan, settings) * (use - f)))
    have = pool_tokens(plan, settings, model, kv)
    flag, flag_f, flag_low = flag_fraction(use, settings), flag_fraction(f, settings), flag_fraction(low, settings)
    raised = "" if use == f else f" (raised from {flag_f:g}: the lowest that holds them with the margin)"
    vlm = "" if flag == use else f" (SGLang x {round(use / flag, 5):g}{_scaled_by(settings)}: {use:g} in force)"
    return flag, (f"margin: at --mem-fraction-static {flag:g}{raised}{vlm} kvplan expects about {have:,} tokens in "
                  f"the pool; {batch} x {ctx:,} need {batch * ctx:,}; the lowest value that keeps "
                  f"{MARGIN_FRACTION:.0%} is {flag_low:g} (kvplan's SGLang pool is checked end to end against only a "
                  "few held-out logs)" + _slots_overrun(plan, settings, use))


def _slots_overrun(plan, settings: dict, use: float) -> str:
    """Where the request-slot pool (kvplan.engines.sglang.req_pool) does not fit the memory left above fraction `use`
    (the free memory before the weights x (1 - use)): that the server would not start, in words."""
    size = plan.above_budget[1] if plan.above_budget else 0
    room = room_above(_slope(plan, settings), use)
    if size <= room:
        return ""
    return (f"; at that fraction the request-slot pool (req_to_token, {size:,} B) exceeds the {room:,} B left above "
            "it: SGLang would run out of memory at start-up (a shorter context length or fewer "
            "max_running_requests make room)")


def _scaled_by(settings: dict) -> str:
    """What scales the flag SGLang is given (flag_fraction), in words."""
    said = [" for a vision model"] if settings.get("vlm_factor", 1.0) != 1.0 and \
        scales_any_fraction(settings["version"]) else []
    said += [" under aiter past 8,192 tokens"] if settings.get("aiter_factor", 1.0) != 1.0 else []
    return " and".join(said)
