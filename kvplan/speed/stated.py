"""The statistic a latency figure states, priced from the load's own schedule: where a source gives only the median
TTFT or E2E (kvplan.speed.figures.medians), the median request's, not the mean kvplan.speed.load.combos prices.

The clients take a median over the requests: np.median of one TTFT a request (vLLM's benchmark_serving and SGLang's
bench_serving, `calculate_metrics`: median_ttft_ms = np.median(ttfts), median_e2e_latency_ms likewise:
vllm-project/vllm@0049e29c41fd383bda519a3f250e3227713081ef:benchmarks/benchmark_serving.py,
sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:python/sglang/bench_serving.py), the middle request or
the mean of the two middle ones. The load's schedule already orders a replica's requests, so the median request's
figure follows from it with no new coefficient:

  burst of n          in turn j = 1..n (first come, first served: the j-th's TTFT the j-th smallest, assumed): the
                      first wave's B prompts end in step ceil(j / q) of K = ceil(B / q), q whole prompts a step
                      (kvplan.speed.wave.prompts_a_step), TTFT ceil(j / q) / K x t_wave (their mean is first_wave's),
                      times first_wave's `shared_wave` ratio where the step budget takes the decodes first (`mixed`);
                      a later one (j > B) waits (j - B) x T for a slot, then its group's prefill (the staggered TTFT),
                      and, every request the same lengths, F1 (1 - r / B) longer, r = 1..B its turn among the slots
                      (kvplan.speed.wave.refill_delay); its E2E that wait, B x T and its waits before its prefill. A
                      median inside the first wave takes the wave's mean E2E (its requests share their decode steps).
                      Drawn output lengths (`drawn`) from a uniform law (0 < cv^2 <= 1/3: a random range, [lo, hi] =
                      osl (1 -/+ sqrt(3 cv^2)), bench_load.drain_steps) on an engine that prefills the whole
                      wave before it decodes (`waves`: kvplan.engines.scheduler.PREFILL_FIRST): no slot frees before
                      t_wave, and the wave's outputs are B independent draws, since SGLang's waiting-queue order is
                      blind to a request's output length (fcfs, or lpm / dfs-weight, which fall back to fcfs with the
                      radix cache off and lpm past 128 waiting; only `lof` sorts by it:
                      sgl-project/sglang@00550cd11b35def9d584bf761a1e32729c20a21d:
                      python/sglang/srt/managers/schedule_policy.py `_validate_and_adjust_policy`,
                      `_determine_active_policy`), so request j's slot, r = j - B <= B, frees when the wave's r-th
                      shortest output ends: (1 + (r - 1) / B) x t_wave (the wave and the r - 1 refills' prefills before
                      it, T's share each) + (lo + r / (B + 1) (hi - lo) - 1) x t_dec (the r-th of B uniform order
                      statistics' expectation, less the prefill's first token), then its own prefill (`drawn_slot`);
                      past the wave's B ends (a refilled request's end, not derived) the staggered refill stays
  closed loop of n    the first wave's B and n - B staggered requests of one TTFT (a SGLang wave's spread as the first
                      wave's), the staggered sorted below the wave's (a group's prefill is about the wave's first
                      step): the staggered TTFT where they are more than half, else the wave request's in the middle;
                      E2E c x T for every request, the staggered ones' waits before their prefill on top
  open loop           the mean: its arrival wait (kvplan.speed.queueing) is a queue's mean, whose median the schedule
                      does not give; p99 and other percentiles are never read (kvplan.speed.figures.targets)
"""

from __future__ import annotations

import math

from kvplan.speed.bench_load import Load, at_rate, busy, drain_steps, in_waves
from kvplan.speed.wave import first_finish, wave_decode


def stated(load: Load, mode: tuple, wave_of: tuple, request: tuple, cm: dict) -> dict:
    """`cm` (combos' {metric: combo}) with its ttft and e2el combos the median request's where the load's figure is a
    median (`Load.medians`), a burst's or a closed loop's (module docstring); as given elsewhere. combos passes what it
    priced them from: `mode` batch_and_mode's (B, c, burst) with its T and first-wave share, `wave_of` first_wave's
    combo and the (q, later) it was priced from (kvplan.speed.wave.wave_pace), `request` later_request's."""
    names = load.medians & {"ttft", "e2el"}
    if not names or at_rate(load):  # combos returns before `median` for llama-bench loads
        return cm
    b, c, burst, t, share = mode
    first, q, later = wave_of
    staggered, before, turn = request
    wb = max(1, round(b))
    waits = (0.0, before, turn[1])  # a staggered request's waits before its prefill, in its E2E

    def wave(j: int) -> tuple:  # the first wave's j-th request's TTFT
        return later * math.ceil(j / q) / max(1.0, math.ceil(wb / q)), 0.0, 0.0

    if burst:
        at = _burst(load, b, c, t, wave, staggered, waits, first)
        n, w = max(1, round(c)), wb
    else:
        n, w, at = _closed(load, share, wb, cm, wave, staggered, waits, first)
    out = dict(cm)
    for name in names:
        out[name] = (*_median(n, lambda i: at(name, i, w)), 0.0)
    return out


def _burst(load: Load, b: float, c: float, t: tuple, wave, staggered: tuple, waits: tuple, first: tuple):
    """at(metric, i, w): the burst's i-th request's TTFT or E2E (module docstring; `t`: combos' T, in a burst
    (1 + recompute, osl, 0) / B, no lockstep)."""
    osl = max(1.0, load.osl)
    f1 = first_finish(b, load.isl, osl, load.chunk) if load.fixed and c > b else (0.0, 0.0, 0.0)
    wave_e2e = _add(first, wave_decode(b, load.isl, osl, load.chunk))

    def at(name: str, i: int, w: int) -> tuple:
        if i <= w:
            return wave(i) if name == "ttft" else wave_e2e
        slot = drawn_slot(load, i - w, w, t[0]) if name == "ttft" else None
        if slot:  # drawn lengths: its slot frees at the first wave's (i - w)-th end
            return _add(staggered, slot)
        r = (i - w - 1) % w + 1
        own = staggered if name == "ttft" else _add(_scale(t, w), waits)
        return _add(_add(own, _scale(t, i - w)), _scale(f1, 1 - r / w))

    return at


def _closed(load: Load, share: float, wb: int, cm: dict, wave, staggered: tuple, waits: tuple, first: tuple):
    """(n, w, at): a closed loop's requests a replica, the first wave's, and at(metric, i, w) (module docstring;
    `share`: combos' share of the requests in the first wave)."""
    n = max(1, round(load.num_prompts / busy(load))) if load.num_prompts else wb
    w = min(n, wb) if share > 0 else 0
    base = {"ttft": _add(cm["ttft"][:3], _scale(_add(_scale(first, share), _scale(staggered, 1 - share)), -1)),
            "e2el": _add(cm["e2el"][:3], _scale(waits, share - 1))}  # the part every request carries (as combos')
    if in_waves(load):  # a later wave's requests spread over its steps as the first's (after `base`, as combos')
        staggered = _add(staggered, _add(_median(wb, wave), _scale(first, -1)))

    def at(name: str, i: int, w: int) -> tuple:
        if name == "ttft":  # the staggered sorted first
            return _add(base[name], staggered if i <= n - w else wave(i - (n - w)))
        return _add(base[name], waits if i > w else (0.0, 0.0, 0.0))  # the staggered sorted last

    return n, w, at


def drawn_slot(load: Load, r: int, w: int, refill: float) -> tuple | None:
    """When the r-th slot of a burst's first wave of w frees, as (a, b, e) of t_wave, t_dec, t_grp, where the engine
    prefills the whole wave before it decodes (`waves`) and output lengths are drawn from a uniform law (`drawn`,
    0 < cv^2 <= 1/3; module docstring): the wave's prefill, the r - 1 refills' prefills before it (`refill` each: T's
    t_wave weight, (1 + recompute) / B, B the running count unrounded), and the r-th shortest of w outputs' decode
    steps after its first token, the expected order statistic lo + r / (w + 1) (hi - lo) - 1 of the law on [lo, hi] =
    osl (1 -/+ sqrt(3 cv^2)). None elsewhere."""
    if not (load.waves and load.drawn and 0 < load.out_cv2 <= 1 / 3) or not 1 <= r <= w:
        return None
    half = drain_steps(load, max(1.0, load.osl))
    return 1.0 + (r - 1) * refill, max(0.0, load.osl - half + r / (w + 1) * 2 * half - 1), 0.0


def _median(n: int, at) -> tuple:
    """np.median over requests 1..n of at(i), ordered: the middle one, or the mean of the two middle ones."""
    if n % 2:
        return at((n + 1) // 2)
    return _scale(_add(at(n // 2), at(n // 2 + 1)), 0.5)


def _add(x: tuple, y: tuple) -> tuple:
    return tuple(a + b for a, b in zip(x, y))


def _scale(x: tuple, k: float) -> tuple:
    return tuple(a * k for a in x)
