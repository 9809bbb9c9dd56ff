"""The lowest SGLang `--mem-fraction-static` that boots a requested context x concurrency, for `--emit`.

SGLang sizes its token pool as `free_before_weights x mem_fraction_static - weights` (kvplan/engines/
sglang.py, `ModelRunner.profile_max_num_token`) and each running request holds all of its tokens
(page 1). The lowest fraction (two decimals) whose pool holds `concurrency x context` tokens plus
MARGIN_FRACTION is found by bisection over kvplan's own plan. Unlike vLLM's budget (benchmarks/
budget_corpus.py), kvplan's SGLang pool is not yet checked against a held-out split of logs: on the
one log it is checked with from the GPU alone (QwQ-32B on 4x L4) it promises 10% more tokens than
SGLang allocated, so the margin stated is kvplan's, not a measured bound.
"""

from __future__ import annotations

import dataclasses

GIB = 2**30
MARGIN_FRACTION = 0.10  # of the tokens the load needs: the one checked log was 10% optimistic


def _tokens(model, gpu, dep, req, st, fraction: float) -> int:
    from kvplan.engines import sglang

    s = dataclasses.replace(st, mem_fraction_static=fraction)
    return sglang.ENGINE.plan(model, gpu, dep, dataclasses.replace(req, overhead_bytes=None), s).capacity.tokens


def lowest_fraction(model, gpu, dep, req, st, concurrency: int) -> float | None:
    """Smallest two-decimal mem_fraction_static whose pool holds the load plus the margin; None if 0.99 does not."""
    need = int(concurrency * req.context * (1 + MARGIN_FRACTION))
    if _tokens(model, gpu, dep, req, st, 0.99) < need:
        return None
    lo, hi = 1, 99  # hundredths; tokens grow with the fraction
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _tokens(model, gpu, dep, req, st, mid / 100) >= need else (mid + 1, hi)
    return lo / 100


def emit_advice(result, model) -> tuple[float, str]:
    """The --mem-fraction-static `fit --emit sglang` should print and the margin it leaves, in words."""
    from kvplan.engines import sglang
    from kvplan.hardware import find_gpu

    p = result.plan
    names = {f.name for f in dataclasses.fields(sglang.Settings)}
    st = sglang.Settings(**{k: v for k, v in result.settings.items() if k in names})
    gpu, batch, ctx = find_gpu(p.gpu), max(1, p.request.batch), p.request.context
    low = lowest_fraction(model, gpu, p.deployment, p.request, st, batch)
    f = st.mem_fraction_static
    if low is None:
        return f, (f"margin: none; {batch} x {ctx:,} tokens do not fit even at --mem-fraction-static 0.99 "
                   "by kvplan's estimate")
    use = max(f, low)
    have = p.kv_cache_tokens if use == f else _tokens(model, gpu, p.deployment, p.request, st, use)
    raised = "" if use == f else f" (raised from {f:g}: the lowest that holds them with the margin)"
    return use, (f"margin: at --mem-fraction-static {use:g}{raised} kvplan expects {have:,} tokens in the pool; "
                 f"{batch} x {ctx:,} need {batch * ctx:,}; the lowest value that keeps {MARGIN_FRACTION:.0%} "
                 f"is {low:g} (kvplan's SGLang pool is not checked against held-out logs yet)")
