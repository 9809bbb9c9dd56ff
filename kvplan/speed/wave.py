"""A burst's first wave as step counts: its prefill steps, the decode its requests ride inside it, and the refill of
its slots as those requests finish.

The B requests a burst starts at once prefill in K = ceil(B x isl / chunk) steps; each gets its later tokens in the
wave's remaining steps and after it, and, where every request has the same lengths, a later request takes the slot
one of them frees; where the engine's step budget takes the running requests' decode tokens first, the wave's prompts
end later than a budget of prompts alone has them (`shared_wave`). Each answer is (a, b, e) of t_wave, t_dec, t_grp,
the form `load.py`'s `combos` adds up; the module knows lengths and counts only, not the Load they come from.
"""

from __future__ import annotations

import math
from functools import lru_cache


def wave_steps(b: float, isl: float, osl: float, chunk: int) -> tuple[float, float]:
    """(K, L): the first wave's prefill steps, ceil(B x isl / chunk), and a request's tokens after its first."""
    return max(1.0, -(-b * max(1.0, isl) // max(1, chunk))), max(0.0, osl - 1)


def wave_decode(b: float, isl: float, osl: float, chunk: int) -> tuple[float, float, float]:
    """A first-wave request's time from its first token to its last, as (a, b, e) of t_wave, t_dec, t_grp: the
    wave's K = ceil(B x isl / chunk) prefill steps each take t_wave / K, and a request whose prompt finishes in
    step j decodes one token in each later step of the wave (vLLM's scheduler runs the running requests' decode
    tokens first in every step's token budget, the prefill chunk beside them), so it gets m_j = min(L, K - j) of
    its L = osl - 1 later tokens at the wave's pace, the rest at t_dec after the wave. Where prompts fit a chunk
    they end in every step, j = 1..K uniform: mean m = L (2K - 1 - L) / 2K for L < K, else (K - 1) / 2 (each
    request then rides the rest of the wave). A prompt longer than the chunk takes consecutive steps (a partly
    prefilled request is a running one, scheduled before any waiting one: `ends_apart`), so the B prompts end
    d = K / B steps apart, the last in the wave's last step: m_r = min(L, r d), r = 0..B - 1, and a lone request
    rides none of it (its TPOT its own decode steps), as `first_wave`'s (B + 1) / 2B of the wave already has it."""
    k, tokens = wave_steps(b, isl, osl, chunk)
    d = ends_apart(b, k)
    if d <= 1.0:
        m = tokens * (2 * k - 1 - tokens) / (2 * k) if tokens < k else (k - 1) / 2
        return m / k, tokens - m, 0.0
    ends = max(1.0, b)
    inside = min(ends, float(math.ceil(tokens / d)))  # the r whose r d < L: they ride r d steps, the rest L
    m = (d * inside * (inside - 1) / 2 + tokens * (ends - inside)) / ends
    return m / k, tokens - m, 0.0


def ends_apart(b: float, k: float) -> float:
    """Steps between two first-wave prompts' last chunks: 1 where several prompts share a step, K / B where each
    takes more than one. vLLM's schedulers take the running requests first, a partly prefilled one among them, so a
    long prompt's chunks follow one another before the next prompt starts (V1: vllm-project/vllm@00024d31:
    vllm/v1/core/sched/scheduler.py `schedule`, "First, schedule the RUNNING requests", then the WAITING ones; V0:
    vllm-project/vllm@0054e1fa:vllm/core/scheduler.py `_schedule_chunked_prefill`, "2. schedule chunked prefill
    requests that are not finished ... 4. schedule new prefill requests"); the event simulator agrees
    (tests/test_burst_wave.py)."""
    return max(1.0, k / max(1.0, b))


def refill_delay(b: float, n: float, isl: float, osl: float, chunk: int) -> tuple[float, float, float]:
    """The mean extra wait of a burst's later requests when every request has the same lengths: the r-th slot of
    the first wave frees when its request finishes, spread from the first finish F1 to the wave's end W = B x T,
    not from 0, as the staggered refill has it ((j - B) x T); a later request of refill position r (1..B, in
    turn) starts F1 (1 - r / B) later. F1 = the first request's E2E: its prompt's d wave steps (`ends_apart`: 1
    where prompts share a step), m1 = min(L, K - d) tokens in the wave's later steps, the rest at t_dec. Returns
    (a, b, e) of that mean delay."""
    later = n - b
    q = int(later // b)
    s = later - q * b
    mean_r = (q * b * (b + 1) / 2 + s * (s + 1) / 2) / (b * later)
    return tuple(x * (1 - mean_r) for x in first_finish(b, isl, osl, chunk))


def prompts_a_step(isl: float, chunk: int) -> float:
    """q: the whole prompts of `isl` tokens one first-wave prefill step of `chunk` tokens ends (load.first_wave)."""
    return max(1.0, chunk // max(1.0, isl))  # 1 where a prompt fills a chunk or more


def wave_pace(b: float, isl: float, osl: float, chunk: int, mixed: bool) -> tuple[float, float]:
    """(q, later): the whole prompts a first-wave step ends (prompts_a_step) and, where the step budget takes the
    running decodes first (`mixed`), shared_wave's ratio of the mean step a prompt ends in (1 elsewhere): what
    load.first_wave prices a wave request's TTFT from, and stated.stated its median request's."""
    return prompts_a_step(isl, chunk), shared_wave(b, isl, osl, chunk) if mixed else 1.0


def first_finish(b: float, isl: float, osl: float, chunk: int) -> tuple[float, float, float]:
    """F1, the burst's first request's E2E as (a, b, e) of t_wave, t_dec, t_grp (refill_delay)."""
    k, tokens = wave_steps(b, isl, osl, chunk)
    d = ends_apart(b, k)  # the first prompt ends in step d (1 where prompts share steps)
    m1 = min(tokens, k - d)
    return (d + m1) / k, tokens - m1, 0.0


@lru_cache(maxsize=4096)
def shared_wave(b: float, isl: float, osl: float, chunk: int) -> float:
    """How much later a first-wave prompt ends, on average, where each step's budget of `chunk` tokens goes to the
    running requests' decode tokens first and to the waiting prompts with what is left, than where the prompts have
    it all: the ratio of the mean step the B prompts end in. vLLM's schedulers take the RUNNING requests first
    (V1: vllm-project/vllm@00024d31: vllm/v1/core/sched/scheduler.py `schedule`, "First, schedule the RUNNING
    requests", then the WAITING ones with the token budget left; V0's chunked prefill likewise,
    vllm-project/vllm@0054e1fa:vllm/core/scheduler.py `_schedule_chunked_prefill`), TensorRT-LLM's micro-batch
    scheduler its generation requests (kvplan.engines.scheduler.MIXED_BUDGET's citation). Prompts are taken in order
    and split across steps; a request whose prompt ends in step j decodes one token in each of steps j + 1 .. j + L
    (L = osl - 1), so step k leaves chunk - (the prompts that ended in steps k - L .. k - 1) to the prompts. 1 where
    no one decodes inside the wave (L = 0, a wave of one)."""
    tokens = int(max(0.0, osl - 1))
    if tokens == 0 or b <= 1:
        return 1.0
    size, width = max(1.0, isl), float(max(1, chunk))
    return _end_steps(b, size, tokens, width) / _end_steps(b, size, 0, width)


def _end_steps(b: float, size: float, tokens: int, width: float) -> float:
    """The steps B prompts of `size` tokens end in, summed, each step `width` tokens less the decode tokens of the
    prompts that ended in the `tokens` steps before it (shared_wave; `tokens` 0: prompts alone)."""
    need, done, step, total = b * size, 0.0, 0, 0.0
    ended = [0.0]  # ended[i]: prompts ended by the end of step i
    while done < need:
        step += 1
        decoding = ended[-1] - (ended[-1 - tokens] if len(ended) > tokens else 0.0)
        done = min(need, done + max(0.0, width - decoding))
        now = b if done >= need else float(math.floor(done / size + 1e-9))
        total += step * (now - ended[-1])
        ended.append(now)
    return total
