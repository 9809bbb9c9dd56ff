"""A lockstep cohort at the KV pool's edge: the running cap and the recompute of a closed loop or burst of equal-length
requests, admitted together, on an engine that preempts the newest running request when their growth fills its pool
(kvplan.engines.capacity_policy.preempts_on_growth: vLLM), so that kvplan.speed.load prices its steady state.

n requests of isl prompt tokens and osl output tokens start together on a pool of P tokens, n x isl <= P < n (isl + osl)
(the pool holds their prompts, not their whole outputs). After s decode steps each holds isl + s tokens and the pool
m(s) = min(n, P / (isl + s)) of them: preemption starts at s0 = P / n - isl and the newest are preempted one by one as
m(s) falls, the one that leaves m running when isl + s = P / m, holding P / m tokens (its prompt and its outputs so
far), all of which it prefills again when it resumes. B_L = P / (isl + osl) run to the end (s = osl); the n - B_L
preempted wait at the head of the queue, keeping their outputs (no request is admitted in a step that preempted, and
none fits beside the survivors: the room a preemption leaves is less than one request's P / m) and resume once the
survivors finish, with the closed loop's new requests behind them. Taking every cycle as the first:

  running over a cycle   m = (1 / osl) x integral of m(s) over s in [0, osl]
                           = (n s0 + P ln((isl + osl) / (isl + s0))) / osl          (the cap B the steady state runs at)
  recompute              the preempted hold P / m tokens for m = n .. B_L: P ln(n / B_L) tokens a cycle of n requests,
                         r = P ln(n / B_L) / (n x isl) prompt prefills a request redoes (priced as r more prefills of
                         its prompt: T = ((1 + r) t_wave + osl x t_dec) / B, kvplan.speed.load)

Where n (isl + osl) <= P nothing is preempted (m = n, r = 0); where n x isl > P the engine does not admit the cohort
whole, and this is not modelled (the caller's staggered cap stands). Not modelled either: a resumed request is ahead of
the new ones (its outputs kept), so later cycles are less in step than the first. kvplan's simulator, which steps the
rule request by request (`kvplan check-bench` on dstack's DeepSeek-R1 settings: 500 requests at concurrency 128 on 8 x
H200, at vLLM 0.33's pool of 42.73 GiB a GPU), gives a mean TTFT of 1.8 / 5.6 / 51 s at 800 / 3,200 / 6,400 output
tokens, where this prices 2.0 / 7.2 / 98 s (their training-CV folds, at vLLM 0.7.4's pool): the same order, this one
harsher at the longest output.
"""

from __future__ import annotations

import math


def cohort(pool: float, n: float, isl: float, osl: float) -> tuple[float, float]:
    """(m, r): the mean running count over a lockstep cycle of `n` requests of `isl` + `osl` tokens on a pool of `pool`
    tokens, and the prompt prefills a request redoes after its preemption (the module's docstring); (n, 0) where the
    pool holds their whole outputs, or where it does not hold their prompts (not modelled)."""
    if n <= 0 or osl <= 0 or isl <= 0 or n * (isl + osl) <= pool or n * isl > pool:
        return n, 0.0
    s0 = pool / n - isl
    mean = (n * s0 + pool * math.log((isl + osl) / (isl + s0))) / osl
    survivors = pool / (isl + osl)
    return mean, pool * math.log(n / survivors) / (n * isl)
