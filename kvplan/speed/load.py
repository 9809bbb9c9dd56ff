"""What a benchmark's load makes of the step times: an analytic steady state, no simulation.

Three step costs carry everything: t_wave, the prefill of the B requests that run together (their
prompts in chunks of steps, each request's fixed cost included); t_dec(B), one decode step of the B
requests at the mean context (isl + osl / 2; where output lengths are drawn, over the length-biased running
set: `decode_context`); and t_grp, the prefill of the G requests that arrive
together once the run is staggered. Every metric is then a x t_wave + b x t_dec + e x t_grp (times),
or the inverse of one (throughputs), so it stays linear in the coefficients and 1,800 points fit in
seconds:

  GPU time per request     T = (t_wave + osl x t_dec) / B; ((1 + r) t_wave + osl x t_dec) / B where equal lengths run
                           together past the pool's edge and a request redoes r prompt prefills (kvplan.speed.cohort)
  output tokens/s          d x osl / T;   requests/s d / T, d = min(dp, the requests a closed loop keeps in flight,
                           the prompts): replicas no request reaches add nothing (`busy`); a finite run of n drawn
                           lengths a busy replica (all at once or a closed loop) over T + D / n x t_dec: its drain
  closed loop, c running   E2E = c x T (Little's law); B = min(c, the batch cap); the c - B requests
                           over the cap queue, waiting (c - B) x T each
  its first wave           the first B requests start at once: each gets its first token at the end of the
                           prefill step its prompt ends in, q = chunk // isl prompts a step over K = ceil(B / q)
                           steps, TTFT = (1 - q (K - 1) / 2B) x t_wave (`first_wave`; (B + 1) / 2B at q = 1);
                           where the step budget takes the running decodes first (`mixed`: vLLM, TensorRT-LLM),
                           the wave's earlier requests' decode tokens leave the later prompts less of each step,
                           so they end later: that times the mean end step's ratio (kvplan.speed.wave.shared_wave)
  then staggered           every later request arrives when one finishes, with the others that
                           finished in the same step: a group of G = min(B, chunk / isl) (at least 1)
                           requests, since a wave's prefills finish a chunk of steps apart and its
                           requests keep that offset; its TTFT is its group's prefill plus the decode
                           steps that share those steps: t_grp + steps(G) x t_dec. Of N requests, B
                           are the first wave's (N not told: the wave is a vanishing share). Output
                           lengths drawn per request (`drawn`: a random range, SGLang's bench_serving
                           default among them, or a dataset's own) keep no such offset: its requests
                           finish, and are replaced, one at a time (G = 1)
  all at once (N <= c)     B start at once (the first wave), the j-th (j > B) when a slot frees, one every T (Little's
                           law: B running, B x T each), after (j - B) T: a mean (N - B)(N - B + 1) / 2N x T; TTFT =
                           that wait + B / N of the wave's TTFT + (1 - B / N) of a group's; E2E = that wait + B / N
                           of a wave request's E2E + (1 - B / N) of B x T
  the wave's decode        the wave's prefill runs K = ceil(B x isl / chunk) steps; a request whose
                           prompt ends in step j decodes its next tokens in the wave's later steps
                           (vLLM's step budget takes running requests' decode tokens first), m_j =
                           min(L, K - j) of its L = osl - 1 at t_wave / K each, the rest at t_dec
                           (`wave_decode`): a short output's TPOT is one wave step, not half the wave
  the wave's finish        every request the same lengths (`fixed`): the wave's slots free as its
                           requests finish, from the first's E2E (F1) on, not one every T from the
                           start; a later request in turn r of B waits F1 (1 - r / B) longer
                           (`refill_delay`); drawn lengths (a dataset) keep the staggered refill
                           (both kvplan.speed.wave's)
  waves (`waves`)          an engine that decodes only when no prefill batch forms (SGLang without mixed
                           chunks: kvplan.engines.scheduler.runs_waves) runs a closed loop of equal lengths
                           (`fixed`) in waves: the next B requests are all prefilled before anyone decodes, and
                           decode together until they finish in the same step, so every later request's TTFT is
                           the first wave's, `first_wave` x t_wave (plus the queue and any wait before its
                           prefill, as in E2E), and its decode carries only the rest of its own wave's prefills,
                           (1 - `first_wave`) x t_wave, not a staggered refill's B - 1 other prefills; T unchanged
  lockstep (`lockstep`)    n attention-DP workers that run every forward together (SGLang's DP attention:
                           kvplan.engines.scheduler.lockstep_workers): a step in which any worker prefills takes
                           a prefill step's time on all of them, so a worker's cycle of S = osl + P steps (P of
                           them its own prefill steps: B / G groups of steps(G)) holds u S prefill-paced ones,
                           u = 1 - (1 - P / S)^n for independent phases: T = (u S / P x t_wave + (1 - u) S x
                           t_dec) / B (lockstep.py; not in a burst, whose workers prefill their first waves
                           together); vLLM's data-parallel ranks of a MoE model likewise, whose chunks ride in
                           decode steps (`lock_mixed`): S = max(osl, P) steps, every one a decode, u S of them
                           lengthened by a chunk, T = (u S / P x t_wave + osl x t_dec) / B
  N not told, all at once  the steady state at the cap (c = B = cap): a throughput run
  poll (`poll_wait`)       an engine told to poll for new requests only every n-th decode step (SGLang's
                           --scheduler-recv-interval, vLLM V0's --num-scheduler-steps: scheduler.poll_wait_steps)
                           keeps a request that arrives while it decodes waiting (n - 1) / 2 decode steps more on
                           average, in TTFT and E2E (not a throughput), and prefills it with those that arrived over
                           the n steps, G = 1 + n x B / osl (balance.polled), wait and group alike: a closed loop's
                           of more than one (the steady state at the cap too), an open loop's, not a burst's (N <= c,
                           batch_and_mode's: queued before the start), a wave's or a lone one (it idles)
  fetch lag (`fetch_lag`)  an executor that fetches new requests and launches step n + 1 before step n ends
                           (TensorRT-LLM's PyTorch backend's overlap scheduler, on by default:
                           scheduler.fetch_lag_steps) takes a request that arrives while it decodes in one step late:
                           one decode step more before its prefill, in TTFT and E2E, under the poll's exclusions
                           (not a burst, a wave or a lone request); no larger group (it still fetches every step)
  open loop at rate r      as a closed loop of c = r x (E2E - W) requests (Little's law over the running set, E2E
                           and W from the previous estimate: kvplan.speed.fit.settle iterates it to its fixed
                           point), W the `waiting` before a request's first scheduled step (the arrival wait, the
                           poll, the front end's crossing), which holds no running slot, nor, where a request joins
                           the running batch after its prefill batch (`joins_late`: SGLang), its prefill: c = r x
                           (E2E - TTFT) there (`outside`); its requests arrive one by one (G = 1), no first wave
  overloaded open loop     where r / dp reaches what a replica serves at its running cap, rho_cap =
                           r / dp x T(cap) >= 1 (T at B = cap, from the caller), no steady state exists:
                           B = cap (a run of N < cap requests per replica: N, never more than it sent), and
                           the queue grows once the cap's slots are full (one frees every T, as in a burst):
                           the n-th of N requests finds (n - 1)(1 - 1 / rho_cap) ahead of it, the first
                           ones start at once (the engine admits them into its running set) and each later
                           one waits max(0, (n - 1)(1 - 1 / rho_cap) + 1 - cap) request times T, exactly
                           (the burst's n - B at rho_cap -> inf), the mean over the N
                           (kvplan.speed.queueing.overload_wait; N untold: the cap, so none), added to TTFT
                           and E2E, with the arrival wait below where its prefill server keeps up; where the
                           slots stay free through the run and that server is past its capacity (rho >= 1),
                           its own growing queue, D/D/1's (N - 1) / 2 x S x (1 - 1 / rho), instead
  arrival wait             an open loop's requests wait for the prefills ahead of them: a queue whose
                           server is the chunk budget's prefill, S = t_wave / B a request (its share of
                           prefills run in full chunks), at utilisation rho = r / dp x S (S from the
                           previous estimate), added to TTFT and E2E, by the load's arrival process
                           (kvplan.speed.queueing: `ARRIVALS`, the corpus's `arrival` field, and
                           `arrival_wait`): Poisson (vllm bench serve's and
                           SGLang's bench_serving's default, MLPerf's Server scenario), M/D/1,
                           W = S x rho / (2 (1 - rho)) (Pollaczek-Khinchine, deterministic service);
                           gamma gaps of shape k (vllm's --burstiness k), G/D/1 by Kingman's
                           approximation with the gaps' squared coefficient of variation c2 = 1 / k,
                           W = S x rho / (1 - rho) x c2 / 2 (exact for c2 = 1); evenly spaced (guidellm's
                           constant profile), D/D/1: no wait below rho 1, and past it the n-th of N
                           requests waits n (S - 1 / r), a mean of (N - 1) / 2 x S x (1 - 1 / rho).
                           Bounded: never more than if the run's N requests (N not told: the running
                           cap) had arrived at once, (N - 1) / 2 x S, which is also Poisson's and
                           gamma's value at rho >= 1
  front end                a served burst's N requests each cross the API server (a process apart from the
                           engine's steps, which interleaves them; kvplan.speed.frontend.ingress_queue and
                           ingress_rate): TTFT and E2E + N x ingress (a fitted term,
                           seconds per request), a throughput's T + d x ingress (the run is N x ingress longer;
                           max(T, d x ingress) where the front end hands each request on as it tokenises it,
                           SGLang's: frontend.PIPELINED, front_share);
                           a request that arrives spread (closed or open loop) its own crossing, + 1 x ingress
  missed step              a closed loop's equal-length replacement waits out the step it missed (queueing.missed_step)
  TPOT (= mean ITL)        (E2E - TTFT) / (osl - 1)
  median ITL               where the figure is the median of every gap between tokens pooled (`median_gap`:
                           sglang.bench_serving's median_itl_ms, kvplan.speed.figures.median_gap) and the engine runs
                           its prefill batches apart from its decode batches (`waves`: PREFILL_FIRST,
                           kvplan.engines.scheduler): a gap is one decode step, t_dec, unless a prefill batch ran
                           inside it, and such long gaps lift the mean, not the median: the median ITL is t_dec
                           (assumed, not checked: fewer than half the gaps hold a prefill batch). An engine that runs
                           prompt chunks inside its decode steps keeps the mean (any step may carry them)
  llama-bench              pp = n_prompt / t_wave (one request, no request cost, ubatch chunks);
                           tg = 1 / t_dec(1)

Queueing is thus Little's law over a saturated server, a burst's wave and refill and an open loop's
arrival wait for the prefill server; not the wait for a running slot under Poisson arrivals near the cap
(M/D/c), which Little's law prices only once the cap is full. A drawn length distribution's spread (`out_cv2`,
kvplan.speed.spread) enters through the running set it leaves: a request runs as many steps as it generates, so
the running requests are biased to long outputs, a mean output of osl (1 + cv^2); that sets the context a decode
step reads (`decode_context`) and the tokens a running request holds against the engine's pool, so its KV-bound
cap (kvplan.engines.scheduler.resident_context). A finite run's drain: its client's duration runs until its last
request ends (`vllm bench serve`'s and sglang.bench_serving's `benchmark` take the time once every request has
returned, and `calculate_metrics` divides the tokens by it:
vllm-project/vllm@009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1:vllm/benchmarks/serve.py,
sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:python/sglang/bench_serving.py), so a run of n requests a
replica with drawn output lengths, all at once or in a closed loop, ends with its longest, D = osl sqrt(3 cv^2) decode
steps past the mean (the top of a uniform law of that mean and spread: exact for a random range, short of a dataset's
longest), priced at t_dec(B) though the batch falls as they end (`drain_steps`). An open loop's drain is not priced: a
request's share of its run is T throughout. The cap B itself is the engine's (kvplan.bench.running), bounded where the
engine's step budget feeds decode and prefill alike (kvplan.engines.scheduler.budget_bound), and, where equal lengths
run together (a closed loop or a burst of `fixed` lengths) on an engine that preempts the newest request as they grow
(vLLM) and the pool holds their prompts but not their whole outputs, the mean running count of their lockstep cycle,
the preempted requests' prompts and outputs prefilled again (`recompute`: kvplan.speed.cohort). The load itself,
`Load`, and its own readings (`decode_context`, `drain_steps`, `busy`, `at_rate`, `in_waves`, `overloaded`) are
kvplan.speed.bench_load's.
"""

from __future__ import annotations

from kvplan.speed.balance import held_steps, polled, released
from kvplan.speed.bench_load import Load, at_rate, busy, drain_steps, in_waves, overloaded
from kvplan.speed.lockstep import lockstep_cycle
from kvplan.speed.queueing import arrival_wait, missed_step, overload_wait
from kvplan.speed.wave import refill_delay, wave_decode, wave_pace

RATE_METRICS = ("output_throughput", "request_throughput", "total_throughput", "pp_tok_s", "tg_tok_s")


def batch_and_mode(load: Load, e2e_estimate: float | None, rho_cap: float | None = None,
                   outside: float | None = None) -> tuple[float, float, bool]:
    """(B running, c in the system, burst?) per replica; `rho_cap`: an open loop's load at the cap (overloaded). An
    open loop's c is rate x (E2E - `outside`), Little's law over the running batch: vLLM's V1 appends a request to
    `running` at its first scheduled step, its first chunk beside the decodes (0.25.0 wheel `schedule` L969;
    vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589:vllm/v1/core/sched/scheduler.py), after the waits
    (`waiting`: the prefill server's queue, the poll, the front end's crossing); SGLang merges a prefill batch into
    `running_batch` once it has run (`joins_late`: kvplan.engines.joining.joins_after_prefill), at its first token."""
    if not load.num_prompts and not load.concurrency and not at_rate(load):
        return load.cap, load.cap, False  # a throughput run of untold length: the steady state at the cap
    n = (load.num_prompts or 1e9) / load.dp
    if load.concurrency:
        c = load.concurrency / load.dp
    elif at_rate(load) and overloaded(rho_cap):  # runs at the cap, or all N of a shorter run: never more than N run
        b = max(1.0, min(load.cap, n))
        return b, b, False  # the queue behind it is combos' overload wait
    elif at_rate(load):
        c = load.rate / load.dp * max(0.0, e2e_estimate - (outside or 0.0)) if e2e_estimate else 1.0
    else:
        c = n
    c = max(1.0, min(c, n))
    return max(1.0, min(c, load.cap)), c, c >= n


def open_wait(load: Load, b: float, t: tuple, burst: bool, service_estimate: float | None,
              rho_cap: float | None) -> tuple[float, float, float]:
    """An open loop's queueing, added to TTFT and E2E as (a, b, e) of t_wave, t_dec, t_grp (module docstring):
    overloaded, the queue behind the running cap's slots in request times T (`t`, its weights); and the arrival wait
    for the prefill server, S = t_wave / B, where that server keeps up or the loop is not overloaded; overloaded with
    its slots free through the run (no slot queue) and the prefill server past its capacity (rho >= 1), that server's
    own growing queue, D/D/1's (N - 1) / 2 x S x (1 - 1 / rho): the running set admits every arrival, and each waits
    for the prompts ahead of it to be prefilled."""
    if not at_rate(load):
        return 0.0, 0.0, 0.0
    n = load.num_prompts / load.dp if load.num_prompts else load.cap
    q = overload_wait(rho_cap, n, load.cap) if overloaded(rho_cap) else 0.0  # the queue once the cap is full
    out = [q * t[0], q * t[1], 0.0]
    rho_p = load.rate / load.dp * service_estimate if service_estimate else 0.0
    if not rho_p or burst or load.arrival_cv2 is None:
        return out[0], out[1], out[2]
    keeps_up = rho_p < 1 or not overloaded(rho_cap)
    if keeps_up or q == 0:  # else the slot queue above; slots free all run long: the server's own D/D/1 queue grows
        out[0] += arrival_wait(rho_p, max(0.0, (n - 1) / 2), load.arrival_cv2 if keeps_up else 0.0) / b
    return out[0], out[1], out[2]


def group(load: Load, b: float, burst: bool) -> float:
    """G: how many requests arrive, or are taken in (balance.released, balance.polled), together once staggered."""
    held = max(released(load, b), polled(load, b, poll_steps(load, burst)))  # `burst`: batch_and_mode's, as the wait
    if (load.concurrency or not at_rate(load)) and not load.drawn:
        return max(1.0, min(b, load.chunk // max(1.0, load.isl)), held)
    return held  # open loops, drawn lengths: requests finish, and are replaced, one at a time


def combos(load: Load, e2e_estimate: float | None = None, service_estimate: float | None = None,
           rho_cap: float | None = None, outside_estimate: float | None = None,
           median=None) -> tuple[float, float, dict]:
    """(B, G, {metric: (a, b, e, inverse scale or 0)}): a metric is a x t_wave + b x t_dec + e x t_grp, or scale / that
    where `inverse` is non-zero (a throughput). `service_estimate`: the previous estimate of the prefill server's S
    (the `service` pseudo-metric), for an open loop's arrival wait; `rho_cap`: an open loop's utilisation at the
    running cap, r / dp x T(cap), where it is >= 1 the overload (module docstring); `outside_estimate`: the previous
    estimate of the `outside` pseudo-metric, E2E's part before the request joins the running batch, which an open
    loop's Little's law leaves out of it (batch_and_mode); `median`: kvplan.speed.stated.stated, given the schedule the
    metrics are priced from, for the figures a source states only as a median."""
    if load.bench == "pp":
        return 1.0, 1.0, {"pp_tok_s": (1.0, 0.0, 0.0, load.isl)}
    if load.bench == "tg":
        return 1.0, 1.0, {"tg_tok_s": (0.0, 1.0, 0.0, 1.0)}
    b, c, burst = batch_and_mode(load, e2e_estimate, rho_cap, outside_estimate)
    g, osl = group(load, b, burst), max(1.0, load.osl)
    t = ((1.0 + load.recompute) / b, osl / b, 0.0)  # T = (t_wave + osl x t_dec) / B, its preempted prompts redone
    if load.lockstep > 1 and not burst:
        t = lockstep_cycle(b, g, load.isl, osl, load.chunk, load.lockstep, load.lock_mixed)
    pace = wave_pace(b, load.isl, load.osl, load.chunk, load.mixed)  # (q, later): first_wave's
    first = first_wave(load, b, pace)  # a wave request's first token: the end of the step its prompt ends in
    staggered, before, turn = request = later_request(load, b, g, burst, first)
    if burst:  # n requests at once: B start, each later one when a slot frees, one every T
        wait = (c - b) * (c - b + 1) / (2 * c)  # the mean over the n of max(0, j - B) x T, exact
        share = b / c
        wave = tuple(f + d for f, d in zip(first, wave_decode(b, load.isl, osl, load.chunk)))  # a wave request's E2E
        # every request the same lengths: the wave's slots free as its requests finish, not from the start
        late = refill_delay(b, c, load.isl, osl, load.chunk) if load.fixed and c > b else (0.0, 0.0, 0.0)
        late = tuple((c - b) / c * x for x in late)  # over all n: the c - B later requests wait that much longer
        e2e = tuple(wait * x + share * w + (1 - share) * b * x + y for x, w, y in zip(t, wave, late))
    else:  # a closed loop (or an open one, as its Little's-law closed loop) in its steady state
        wait = c - b
        e2e = (c * t[0], c * t[1], 0.0)
        if load.concurrency:
            share = min(1.0, b * busy(load) / load.num_prompts) if load.num_prompts else 0.0
        else:  # open loop: no wave; a throughput run of untold length: its first wave stands for it
            share = 0.0 if at_rate(load) else 1.0
    ttft = tuple(share * f + (1 - share) * x for f, x in zip(first, staggered))
    ttft = (ttft[0] + wait * t[0], ttft[1] + wait * t[1], ttft[2])
    ttft = tuple(x + y for x, y in zip(ttft, late)) if burst else ttft
    e2e = (e2e[0], e2e[1] + (1 - share) * before, e2e[2] + (1 - share) * turn[1])  # those waits in E2E too
    q = open_wait(load, b, t, burst, service_estimate, rho_cap)
    pre = (wait * t[0], wait * t[1] + (1 - share) * before, (1 - share) * turn[1])  # not yet running
    pre = tuple(x + y + z for x, y, z in zip(pre, q, late if burst else (0.0, 0.0, 0.0)))
    ttft, e2e = tuple(x + y for x, y in zip(ttft, q)), tuple(x + y for x, y in zip(e2e, q))
    thr = with_drain(load, t, osl, burst)  # what a throughput divides by
    k, d = max(1.0, osl - 1), busy(load)
    cm = {
        "e2el": (*e2e, 0.0),
        "ttft": (*ttft, 0.0),
        "tpot": (*gap(load, e2e, ttft, k), 0.0),
        "output_throughput": (*thr, d * osl),
        "request_throughput": (*thr, d),
        "total_throughput": (*thr, d * (load.isl + osl)),
        "service": (1.0 / b, 0.0, 0.0, 0.0),  # the prefill server's S, t_wave / B: not a measured figure
        "waiting": (*pre, 0.0),  # the wait before a request's first scheduled step: not a measured figure
        "outside": (*(ttft if load.joins_late else pre), 0.0),  # before it joins the running batch: not measured
    }
    return b, g, median(load, (b, c, burst, t, share), (first, *pace), request, cm) if median else cm


def later_request(load: Load, b: float, g: float, burst: bool, first: tuple) -> tuple[tuple, float, tuple]:
    """(a later request's TTFT before any queue as (a, b, e), `before`, `turn`): its waits before its prefill in t_dec
    steps (balancing's, the poll's, the missed step's), the missed step, its prefill (its group's; waves: `first`)."""
    steps, held = max(1.0, -(-g * load.isl // load.chunk)), held_steps(load, b)
    turn = missed_step(b, g, steps) if replaces(load, burst) else (0.0, 0.0)  # the step a replacement missed
    before, own = held + poll_steps(load, burst, True) + turn[0], first if in_waves(load) else (0.0, steps, 1.0)
    return (own[0], own[1] + before, own[2] + turn[1]), before, turn


def first_wave(load: Load, b: float, pace: tuple | None = None) -> tuple[float, float, float]:
    """A first-wave request's mean TTFT as (a, b, e) of t_wave, t_dec, t_grp: its first token comes at the end of the
    prefill step its prompt ends in (a step is one forward; its first tokens leave after it), q = chunk // isl whole
    prompts a step (1 where a prompt fills a chunk; the server's length where the engine packs to it, `packed`), so
    over K = ceil(B / q) steps the mean is 1 - q (K - 1) / 2B: (B + 1) / 2B at q = 1, (K + 1) / 2K where q divides B,
    t_wave itself for a wave of one step; where the engine's step budget takes the running decodes first (`mixed`),
    times `shared_wave`'s ratio of the mean step a prompt ends in, its steps t_wave / K each (`pace`: wave_pace's)."""
    q, later = pace or wave_pace(b, load.isl, load.osl, load.chunk, load.mixed)
    return later * (1.0 - q * (max(1.0, -(-b // q)) - 1) / (2 * b)), 0.0, 0.0


def replaces(load: Load, burst: bool) -> bool:
    """Whether a closed loop's requests of equal output lengths replace each other at a busy engine (missed_step)."""
    return (load.concurrency or 0) > load.dp and not (at_rate(load) or burst or in_waves(load) or load.drawn)


def poll_steps(load: Load, burst: bool = False, lag: bool = False) -> float:
    """Decode steps a spread arrival waits for its engine's scheduler to poll (`poll_wait`; the module's docstring),
    and with `lag` the step more an executor that fetches before the running step ends keeps it (`fetch_lag`): none
    in a burst (every request queued before the run starts), in waves or in a closed loop of one request, whose
    arrivals find the engine idle, polling every pass."""
    alone = load.concurrency is not None and load.concurrency <= 1 and not at_rate(load)
    return 0.0 if burst or alone or in_waves(load) else load.poll_wait + (load.fetch_lag if lag else 0.0)


def gap(load: Load, e2e: tuple, ttft: tuple, k: float) -> tuple:
    """The TPOT figure as (a, b, e) of t_wave, t_dec, t_grp: the mean gap, (E2E - TTFT) / k, k = osl - 1 (at least 1);
    the median gap where the figure is one (`median_gap`) and the engine prefills apart (`waves`): one decode step."""
    if load.median_gap and load.waves:
        return 0.0, 1.0, 0.0
    return tuple((x - y) / k for x, y in zip(e2e, ttft))


def with_drain(load: Load, t: tuple, osl: float, burst: bool) -> tuple:
    """What a throughput divides by, as (a, b, e) of t_wave, t_dec, t_grp: T, and where the run is finite (n requests
    a busy replica (`busy`), all at once or a closed loop) D / n decode steps a request for its drain (`drain_steps`);
    an open loop's T alone."""
    if not load.num_prompts or not (burst or (load.concurrency and not at_rate(load))):
        return t
    return t[0], t[1] + drain_steps(load, osl) * busy(load) / load.num_prompts, t[2]


def seconds(combo: tuple, t_wave: float, t_dec: float, t_grp: float = 0.0) -> float:
    """The engine's time a metric's combo (combos) adds up: a latency itself, a throughput's divisor."""
    a, b, e, _ = combo
    return a * t_wave + b * t_dec + e * t_grp


def value(combo: tuple, t_wave: float, t_dec: float, t_grp: float = 0.0, extra: float = 0.0) -> float:
    """A metric's value from its combo (combos); `extra`: seconds added to its time (a throughput's divisor)."""
    inv = combo[3]
    t = seconds(combo, t_wave, t_dec, t_grp) + extra
    if inv:
        return inv / t if t > 0 else float("inf")
    return t
