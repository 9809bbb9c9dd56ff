"""The wait a request spends held back by attention-DP balancing before its prefill is scheduled: the mean, in
engine iterations, that kvplan.speed.load adds to a staggered request's TTFT (and E2E) where the engine holds
context requests until every attention-DP rank has one (kvplan.engines.scheduler.balance_iters: TensorRT-LLM's
`attention_dp_config.enable_balance`).

The rule restated (kvplan.engines.scheduler's citation): every iteration the ranks exchange their scheduled context
counts; a count of iterations since the last release runs on every iteration in which some rank has no context
request, and the held context requests are released when every rank has one (after `batching_wait_iters` more
iterations) or when the count reaches `timeout_iters`; each release restarts the count. So, with n ranks each
receiving new requests at `rate` per iteration (Poisson, independent), a cycle from one release to the next lasts

  R = M + W   where M < T, else T       M = the last of the n ranks' first arrivals, P(M <= t) = (1 - e^(-rate t))^n,
                                        T = timeout_iters, W = batching_wait_iters

and a request arriving during the cycle waits for its end. Arrivals spread over the cycle, so the mean wait is the
length-biased half cycle E[R^2] / (2 E[R]) (assumed, not derived: M depends on the arrivals themselves). Where every
rank's first arrival is far inside the timeout (rate x T large) this is about (H_n / rate + W) / 2 or more; where the
timeout binds (rate x T small) it is T / 2: the count is a clock that releases once every T iterations. In a steady
state each rank runs b requests of osl output tokens, one token an iteration, so it receives b / osl new ones an
iteration (Little's law): `arrivals`.

Batch waiting (kvplan.engines.scheduler.batch_wait_opts: TensorRT-LLM's batch_wait_timeout_iters and
batch_wait_max_tokens_ratio, one rank without attention DP) holds context requests from the first one's arrival
until k of them are held, k = ceil((ratio x max_num_tokens - the generation requests' tokens) / isl) (the
threshold counts the held prompts' tokens and one token a running request), or the count of held iterations reaches
T = timeout_iters; then it releases them all. With Poisson arrivals at `rate` an iteration, N(u) of them u iterations
after the first, 1 + N(u) requests are held until the release, so a cycle holds for the integral over [0, T] of
E[(1 + N(u)) 1{N(u) < k - 1}] request-iterations in all and serves 1 + E[min(N(T), k - 1)] requests: the mean wait
is their ratio (renewal reward; derived, not assumed). With no token threshold in reach (k large) it is
T (1 + rate T / 2) / (1 + rate T); k <= 1 (one prompt reaches the threshold) holds nothing (`batch_wait`). The
release hands every held request to the same forward (`_waiting_requests` returns the scheduled context requests
whole), so a held request's prompt is prefilled beside the others of its cycle: G = 1 + min(N(T), k - 1) of them, and
a request's group is the length-biased E[G^2] / E[G] (`released`: the group kvplan.speed.load prices its prefill at).
"""

from __future__ import annotations

import math

GRID = 400  # integration steps over [0, T]


def arrivals(running: float, osl: float) -> float:
    """New requests a rank receives an iteration in a steady state of `running` requests of `osl` output tokens each."""
    return max(0.0, running) / max(1.0, osl)


def balance_wait(ranks: int, rate: float, timeout: int, batching: int = 0) -> float:
    """Mean iterations a request waits for the release of its rank's held context requests (the module's
    docstring): E[R^2] / (2 E[R]) over a cycle R = M + batching where M < timeout, else timeout. 0 where fewer than
    two ranks or no timeout (nothing is held)."""
    if ranks < 2 or timeout <= 0:
        return 0.0
    t_max = float(timeout)
    if rate <= 0:
        return t_max / 2
    first, second, below = 0.0, 0.0, 0.0  # E[R], E[R^2] over M < T, and P(M < T)
    h = t_max / GRID
    cdf = lambda t: (1.0 - math.exp(-rate * t)) ** ranks  # noqa: E731 - P(M <= t)
    for i in range(GRID):
        a, b = i * h, (i + 1) * h
        p = cdf(b) - cdf(a)
        r = (a + b) / 2 + batching
        first += p * r
        second += p * r * r
        below += p
    first += (1.0 - below) * t_max
    second += (1.0 - below) * t_max * t_max
    return second / (2 * first) if first > 0 else 0.0


def held_back(ranks: int, balance: tuple | None, running: float, osl: float) -> float:
    """Decode steps a staggered request waits before its prefill on `ranks` attention-DP ranks balanced with
    `balance` = (timeout_iters, batching_wait_iters) (None: no balancing, 0), each rank running `running` requests of
    `osl` output tokens: balance_wait at `arrivals`."""
    return balance_wait(ranks, arrivals(running, osl), *balance) if balance else 0.0


def batch_wait(rate: float, timeout: int, needed: float) -> float:
    """Mean iterations a request is held by batch waiting (the module's docstring): `needed` held prompts release the
    batch (k = ceil(needed)), else `timeout` iterations after the first is held; Poisson arrivals at `rate` an
    iteration. 0 where k <= 1 or no timeout."""
    k = _threshold(timeout, needed)
    if k is None:
        return 0.0
    t_max, lam = float(timeout), max(0.0, rate)
    top = _last(lam * t_max, k)
    total, h = 0.0, t_max / GRID
    for i in range(GRID):  # E[(1 + N(u)) 1{N(u) <= k - 2}] at the midpoint of each step
        mu, inside = lam * (i + 0.5) * h, 0.0
        pmf = math.exp(-mu)
        for n in range(top + 1):
            inside += (1 + n) * pmf
            pmf *= mu / (n + 1)
        total += inside * h
    return total / release_group(lam * t_max, k)[0]


def _threshold(timeout: int, needed: float) -> int | None:
    """The held prompts k = ceil(needed) that release a batch, or None where batch waiting holds nothing (no timeout,
    or k <= 1)."""
    k = math.ceil(needed - 1e-9)
    return k if timeout > 0 and k > 1 else None


def _last(mu: float, k: int) -> int:
    """The last count n worth summing of a Poisson of mean `mu` or less below the threshold k - 1: k - 2, or where
    that is far in its tail, mu + 12 sqrt(mu) + 30 (no mass beyond it)."""
    return min(k - 2, math.ceil(mu + 12 * math.sqrt(mu) + 30))


def release_group(mu: float, k: int) -> tuple[float, float]:
    """(E[G], E[G^2]) of a cycle's release group G = 1 + min(N(T), k - 1) (the module's docstring), N(T) Poisson of
    mean `mu` = the arrivals over the timeout T: the timeout releases 1 + n where N(T) = n < k - 1, the k-th prompt
    k (the tail past `_last` too)."""
    pmf, below, first, second = math.exp(-mu), 0.0, 0.0, 0.0
    for n in range(_last(mu, k) + 1):
        first, second, below = first + (1 + n) * pmf, second + (1 + n) ** 2 * pmf, below + pmf
        pmf *= mu / (n + 1)
    tail = max(0.0, 1.0 - below)
    return first + k * tail, second + k * k * tail


def _batch_waiting(load, running: float) -> tuple[float, int, float] | None:
    """(arrivals an iteration, timeout_iters, prompts needed) of `load`'s batch waiting (Load.batch_wait =
    (timeout_iters, max_tokens_ratio)), its threshold against Load.chunk, the step budget, less the other running
    requests' tokens; None without it or for a lone request, which finds no generation request to wait beside."""
    if not load.batch_wait or running <= 1:
        return None
    needed = (load.batch_wait[1] * load.chunk - (running - 1)) / max(1.0, load.isl)
    return arrivals(running, max(1.0, load.osl)), load.batch_wait[0], needed


def held_steps(load, running: float) -> float:
    """Decode steps a staggered request of `load` (a kvplan.speed.bench_load.Load) waits before its prefill, `running`
    requests on its replica: attention-DP balancing's (`held_back`, Load.balance) and batch waiting's (`batch_wait`)."""
    held = held_back(load.dp, load.balance, running, max(1.0, load.osl))
    waiting = _batch_waiting(load, running)
    return held + batch_wait(*waiting) if waiting else held


def released(load, running: float) -> float:
    """The prompts a staggered request of `load` is prefilled with where batch waiting holds it (the module's
    docstring): E[G^2] / E[G], G = 1 + min(N(T), k - 1) a cycle, N(T) Poisson at the arrivals over the timeout T;
    1 where nothing is held (no batch waiting, a lone request, k <= 1 or no timeout)."""
    waiting = _batch_waiting(load, running)
    k = _threshold(waiting[1], waiting[2]) if waiting else None
    if k is None:
        return 1.0
    first, second = release_group(max(0.0, waiting[0]) * waiting[1], k)
    return second / first


def polled(load, running: float, wait: float) -> float:
    """The prompts a staggered request is prefilled with where its engine takes new requests in only at a poll every
    n-th decode step, `wait` = (n - 1) / 2 the steps it waits for it beyond the default's (kvplan.speed.load's
    poll_steps: 0 where no poll holds it). The poll drains every request that reached the scheduler since the last
    one, and the next prefill batch takes them from the waiting queue together (sgl-project/sglang v0.5.12 wheel
    `srt/managers/scheduler.py` recv_requests L1661-1679: the skipper's gate, then recv_pyobj until the socket is
    empty, max_recv_per_poll -1 by default, no limit, L396 and `srt/environ.py` L255; `_get_new_batch_prefill_raw`
    L2720-2738: one PrefillAdder over the waiting queue, up to the chunk). Over n steps a rank running `running`
    requests of osl output tokens receives n x `arrivals` (Little's law); as Poisson arrivals (assumed) a request
    finds the others of its poll independent of its own arrival, so its group is 1 + n x arrivals (length-biased,
    E[G^2] / E[G] of the polls' groups). 1 where nothing is held or the request runs alone."""
    if wait <= 0 or running <= 1:
        return 1.0
    return 1.0 + (2 * wait + 1) * arrivals(running, max(1.0, load.osl))
