"""`kvplan disagg`'s core: both pools planned, the KV each request moves, the prefill:decode ratio.

Speeds come from the simulator's step-time model (kvplan.simulator.model.StepTimer on each pool's
plan through kvplan.simulator.adapter.sim_model), the one every `simulate` run uses, under the pools'
engine's calibrated coefficients (`Setup.speed_engine`), so a calibrated model behind that interface
reaches this command unchanged. Without a request rate, the ratio is the
one that balances the pools' rates (prefill requests/s per replica against decode requests/s per
replica at its batch); with one, every xPyD split within the GPU limit is simulated end to end
(kvplan.simulator.pd), the fewest GPUs (both pools are one GPU type, so also the lowest price) that meets the SLOs is
chosen, and the aggregated deployment of the same GPUs (each pool's layout, replicated, on simulate's engine; the
better) is run on the same requests, with the fewest aggregated GPUs that meets the SLOs, so a user sees when
disaggregation does not pay.
Requests cross the serving front end first, as in `simulate` (`front_end`: each prefill server's, and each
aggregated replica's). Each pool's replicas run at its engine's own scheduler limits (kvplan.simulator.limits: the
prefill pool's tokens per step, the decode pool's running limit) unless `max_num_seqs` / `max_num_batched_tokens` are
given.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from kvplan.compare.disagg import Pool, plan_pool
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.planning.transfer import Moved, kv_moved, transfer_seconds
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine as SimEngine
from kvplan.simulator.frontend import FrontEnd, of_set, spread
from kvplan.simulator.limits import scheduler_limits
from kvplan.simulator.model import StepTimer
from kvplan.simulator.pd import simulate_pd, summarise
from kvplan.simulator.workload import MAX_REQUESTS, SimRequest

MAX_SIMULATIONS = 24  # xPyD splits simulated per search at most (the cheapest first)
MAX_REPLICAS = 64  # replicas per pool a search considers
FRONT_ENDS = ("one per prefill server, its share of the requests round robin, and one per aggregated replica; the "
              "router forwards requests unparsed; the decode server's crossing is not simulated")
MAX_DISAGG_REQUESTS = 100_000  # requests one search simulates at most (each split runs them all)


@dataclass(frozen=True)
class Speeds:
    """One pool's replica as the step-time model runs it."""

    timer: StepTimer

    def prefill_s(self, prompts) -> float:
        """One step computing `prompts` (token counts) from scratch."""
        t, pairs = sum(prompts), sum(p * (p + 1) / 2 for p in prompts)
        return self.timer.step(t, len(prompts), t, pairs, prefill_pairs=pairs)

    def decode_s(self, n: int, context: int) -> float:
        """One decode step of n requests over `context` cached tokens in all."""
        return self.timer.step(n, n, context, float(context + n))


@dataclass(frozen=True)
class Setup:
    """What both pools share: the workload's lengths, limits and SLOs."""

    isl: int
    osl: int
    prefill_max_model_len: int
    decode_max_model_len: int
    max_num_seqs: int | None = None  # given; None: each pool's engine's own (kvplan.simulator.limits)
    max_num_batched_tokens: int | None = None
    slo_ttft: float = 2.0
    slo_tpot: float = 0.1
    slo_percent: float = 90.0
    step_overhead_s: float = 0.0
    means: bool = False  # isl and osl are a workload's means
    speed: str = "calibrated"  # kvplan.speed's calibrated step times, or "roofline"
    speed_engine: str | None = None  # whose coefficients the steps take (the pools' engine; None: vLLM's)
    speed_version: str | None = None  # that engine's release (None: its current one; kvplan.speed.mxfp4 reads it)


@dataclass
class Result:
    prefill: Pool
    decode: Pool
    moved: Moved
    link: object
    setup: Setup
    prefill_s: float  # one isl prompt alone
    transfer_s: float
    decode_batch: int
    decode_batch_binds: str
    tpot_s: float  # at decode_batch
    prefill_rps: float  # requests/s one prefill replica computes (prompts batched to the token budget)
    decode_rps: float  # requests/s one decode replica finishes at decode_batch
    ratio: tuple  # (x, y): prefill and decode replicas that balance the rates
    search: dict = field(default_factory=dict)  # with a rate: chosen split, tried splits, aggregated
    decode_serve: object = None  # the decode plan at its batch: the EngineResult its serve command comes from
    # the prefill plan at the prompts it holds at once (in flight + staged): its serve command's and margin's
    prefill_serve: object = None
    limits: dict = field(default_factory=dict)  # role -> kvplan.simulator.limits.Limits each pool's replicas run at


def _speeds(pool: Pool, spec, hw, setup: Setup) -> Speeds:
    return Speeds(StepTimer(sim_model(pool.plan, spec, hw, step_overhead_s=setup.step_overhead_s, speed=setup.speed,
                                      engine=setup.speed_engine, version=setup.speed_version)))


def _decode_batch(pool: Pool, sp: Speeds, setup: Setup, most: int) -> tuple[int, str]:
    """The decode replica's batch at isl + osl: the least of its KV memory, max_num_seqs (`most`) and the largest
    batch whose step meets the TPOT SLO (mean context isl + osl / 2), with what binds."""
    mean_ctx = setup.isl + setup.osl // 2
    hi = max(1, min(pool.holds, most))
    if sp.decode_s(1, mean_ctx) > setup.slo_tpot:
        return 1, "TPOT SLO (missed even at batch 1)"
    lo = 1
    while lo < hi:  # the largest batch meeting the TPOT SLO
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sp.decode_s(mid, mid * mean_ctx) <= setup.slo_tpot else (lo, mid - 1)
    if lo < min(pool.holds, most):
        return lo, "TPOT SLO"
    return lo, "KV memory" if pool.holds <= most else "max_num_seqs"


def plan_disagg(spec, hw, engine, req, prefill_dep, decode_dep, link, setup: Setup) -> Result:
    """Both pools, the KV moved per request, single-request timings and the rate-balancing ratio."""
    kv, state = req.kv_dtype, req.state_dtype
    probe = plan_pool("decode", engine, spec, hw, decode_dep, req, setup.decode_max_model_len,
                      setup.isl + setup.osl, 1)
    kv, state = kv or probe.plan.stages[0].profile.kv_dtype, state or probe.plan.stages[0].profile.state_dtype
    moved = kv_moved(spec, setup.isl, kv, state, prefill_dep, decode_dep)
    xfer = transfer_seconds(moved, link)
    pre = plan_pool("prefill", engine, spec, hw, prefill_dep, req, setup.prefill_max_model_len, setup.isl, 1)
    held = {p.role: scheduler_limits(engine, p.result, setup.max_num_seqs, setup.max_num_batched_tokens)
            for p in (pre, probe)}
    ps = _speeds(pre, spec, hw, setup)
    per_step = max(1, held["prefill"].max_num_batched_tokens // max(1, setup.isl))
    step_s = ps.prefill_s([setup.isl] * per_step)
    staged = per_step * cdiv(max(1, math.ceil(xfer * 1e6)), max(1, math.ceil(step_s * 1e6)))
    pre = Pool("prefill", pre.result, pre.max_model_len, setup.isl, pre.holds, per_step + staged)
    ds = _speeds(probe, spec, hw, setup)
    batch, binds = _decode_batch(probe, ds, setup, held["decode"].max_num_seqs)
    dec = Pool("decode", probe.result, probe.max_model_len, setup.isl + setup.osl, probe.holds, batch)
    tpot = ds.decode_s(batch, batch * (setup.isl + setup.osl // 2))
    prefill_rps, decode_rps = per_step / step_s, batch / (max(1, setup.osl - 1) * tpot)
    serve = engine.result(spec, hw, decode_dep, replace(req, context=setup.decode_max_model_len, batch=batch))
    held_at_once = max(1, min(pre.holds, pre.needs))  # what the prefill replica's KV holds at once
    pre_serve = engine.result(spec, hw, prefill_dep, replace(req, context=setup.prefill_max_model_len,
                                                            batch=held_at_once))
    return Result(pre, dec, moved, link, setup, ps.prefill_s([setup.isl]), xfer, batch, binds, tpot,
                  prefill_rps, decode_rps, balance(prefill_rps, decode_rps), decode_serve=serve, limits=held,
                  prefill_serve=pre_serve)


def balance(prefill_rps: float, decode_rps: float, most: int = 16) -> tuple[int, int]:
    """The fewest replicas xPyD (x, y <= most) whose rates x * prefill and y * decode are within 10% of
    each other; where none is, the closest."""
    pairs = sorted(((x, y) for x in range(1, most + 1) for y in range(1, most + 1)), key=lambda xy: (sum(xy), xy))
    gap = {xy: abs(math.log(xy[0] * prefill_rps / (xy[1] * decode_rps))) for xy in pairs}
    return next((xy for xy in pairs if gap[xy] <= math.log(1.1)), min(pairs, key=gap.get))


def _run_split(res: Result, spec, hw, requests, x: int, y: int) -> dict:
    s = res.setup
    ps, ds = _speeds(res.prefill, spec, hw, s), _speeds(res.decode, spec, hw, s)
    dm = ds.timer.model
    link, kv, pre, dec = res.link, spec, res.prefill, res.decode
    run = simulate_pd(requests, x, y, prefill_step_s=ps.prefill_s, decode_step_s=ds.decode_s,
                      held_bytes=dm.paged, kv_bytes=dm.kv_budget_bytes,
                      transfer_s=lambda p: transfer_seconds(kv_moved(kv, p, *_dtypes(dec), pre.plan.deployment,
                                                                     dec.plan.deployment), link),
                      budget=res.limits["prefill"].max_num_batched_tokens,
                      max_num_seqs=res.limits["decode"].max_num_seqs, seen=_through_prefill_servers(res, requests, x))
    return summarise(run, requests, s.slo_ttft, s.slo_tpot)


def front_end(setup: Setup) -> FrontEnd | None:
    """The serving front end ahead of each prefill server and each aggregated replica: simulate's (the pools'
    coefficient set's fitted ingress, processor sharing; None on the roofline). Where the API server sits in
    disaggregated serving: the router only forwards each request's HTTP body, unparsed (vLLM's proxy:
    vllm-project/vllm@030ea52effcb05071543c8c42b8f0145e94cee43:tests/v1/kv_connector/nixl_integration/toy_proxy_server.py
    posts it to a prefill server picked round robin, then to a decode server; SGLang's:
    sgl-project/sglang@001c2ae0901cd353c26fed2f435887c867b73eed:python/sglang/srt/disaggregation/mini_lb.py posts it to
    a prefill and a decode server at once, `asyncio.gather`), and each server's own API server parses, templates and
    tokenises it. So the prefill server's front end is on every request's path to its first token, one per prefill
    replica with its share; the decode server's crossing is not simulated (SGLang's overlaps the prefill; vLLM's proxy
    sends it after the prefill returns, about one ingress more on the TTFT at low load: kvplan's TTFT omits it)."""
    return of_set(setup.speed_engine, setup.speed)


def _through_prefill_servers(res: Result, requests, x: int) -> list[float] | None:
    """When the prefill queue gets each request: through one of x prefill servers' front ends, round robin
    (kvplan.simulator.frontend.spread); None where there is none."""
    fe = front_end(res.setup)
    return spread([r.arrival for r in requests], fe.per_request_s, x) if fe is not None else None


def _dtypes(pool: Pool) -> tuple:
    prof = pool.plan.stages[0].profile
    return prof.kv_dtype, prof.state_dtype


def search_ratio(res: Result, spec, hw, requests, max_gpus: int) -> dict:
    """Every xPyD within `max_gpus`, fewest GPUs first (both pools on one GPU type: also the lowest price), simulated
    until one meets the SLOs for slo_percent of requests; then the aggregated runs. Filled into res.search."""
    s = res.setup
    gp, gd = res.prefill.plan.deployment.gpus, res.decode.plan.deployment.gpus
    splits = sorted(((x, y) for x in range(1, min(MAX_REPLICAS, max_gpus // gp) + 1)
                     for y in range(1, min(MAX_REPLICAS, (max_gpus - x * gp) // gd) + 1)),
                    key=lambda xy: (xy[0] * gp + xy[1] * gd, abs(math.log(xy[0] * res.prefill_rps /
                                                                          (xy[1] * res.decode_rps)))))
    tried, chosen = [], None
    for x, y in splits[:MAX_SIMULATIONS]:
        summary = _run_split(res, spec, hw, requests, x, y)
        tried.append({"prefill_replicas": x, "decode_replicas": y, "gpus": x * gp + y * gd, **summary})
        if summary["pct_meeting_slo"] >= s.slo_percent:
            chosen = tried[-1]
            break
    gpus = chosen["gpus"] if chosen else max_gpus
    pools = [res.decode] + ([res.prefill] if res.prefill.plan.deployment != res.decode.plan.deployment else [])
    same = [aggregated(res, spec, hw, requests, gpus // p.plan.deployment.gpus, p) for p in pools
            if gpus >= p.plan.deployment.gpus]
    agg = max(same, key=lambda a: (a["pct_meeting_slo"], -(a["ttft_s"]["p90"] or 0.0)), default=None)
    fewest = [f for p in pools if (f := _fewest_aggregated(res, spec, hw, requests, p, max_gpus, same))]
    fe = front_end(s)
    res.search = {"chosen": chosen, "tried": tried, "aggregated_same_gpus": agg,
                  "aggregated_fewest": min(fewest, key=lambda a: a["gpus"], default=None),
                  "front_end": None if fe is None else {**fe.about(), "where": FRONT_ENDS}}
    return res.search


def _fewest_aggregated(res: Result, spec, hw, requests, pool: Pool, max_gpus: int, known: list) -> dict | None:
    """The fewest aggregated replicas of `pool`'s layout (within max_gpus) that meet the SLOs, by bisection
    (meeting them is taken to be monotone in replicas); None where even the most do not."""
    dep = pool.plan.deployment
    runs = {a["replicas"]: a for a in known if a["tp"] == dep.tp and a["pp"] == dep.pp}

    def run(r: int) -> dict:
        if r not in runs:
            runs[r] = aggregated(res, spec, hw, requests, r, pool)
        return runs[r]

    most = max_gpus // dep.gpus
    if most < 1 or run(most)["pct_meeting_slo"] < res.setup.slo_percent:
        return None
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if run(mid)["pct_meeting_slo"] >= res.setup.slo_percent else (mid + 1, hi)
    return run(lo)


def aggregated(res: Result, spec, hw, requests, replicas: int, pool: Pool) -> dict:
    """`replicas` copies of `pool`'s layout, each serving prefill and decode (simulate's engine: the engine's own steps,
    chunked prefill and admission, behind its own API server's front end) on its KV pool at the decode max_model_len;
    one replica is run on every replicas-th request (Poisson thinning keeps the rate per replica), and its figures
    stand for all."""
    s = res.setup
    dep = pool.plan.deployment
    model = sim_model(pool.plan, spec, hw, max_model_len=s.decode_max_model_len, step_overhead_s=s.step_overhead_s,
                      speed=s.speed, engine=s.speed_engine, version=s.speed_version)
    share = [replace(r, rid=i) for i, r in enumerate(requests[::replicas])]  # the recorder indexes by rid
    held = res.limits[pool.role]  # the pool's own engine limits (a hybrid's running cap is its pool's)
    fe = front_end(s)  # each replica its own API server, with its share of the requests
    cfg = held.config(front_end_s=fe.per_request_s if fe is not None else 0.0)
    rec = SimEngine(model, cfg).run(share)  # simulate's engine: the engine's own admission rule too
    summ = rec.summary(s.slo_ttft, s.slo_tpot)
    lat = summ["latency_s"]
    return {"replicas": replicas, "tp": dep.tp, "pp": dep.pp, "gpus": replicas * dep.gpus, "requests": len(share),
            "completed": summ["requests"]["completed"],
            "ttft_s": {k: lat["ttft"][k] for k in ("mean", "p50", "p90", "p99")},
            "tpot_s": {k: lat["tpot"][k] for k in ("mean", "p50", "p90", "p99")},
            "pct_meeting_slo": summ["goodput"]["pct_meeting_slo"] * summ["requests"]["completed"] / max(1, len(share))}


def fixed_requests(isl: int, osl: int, qps: float, duration: float, seed: int) -> list:
    """Poisson arrivals at `qps` for `duration` s, every request `isl` tokens in and `osl` out."""
    if qps * duration > MAX_REQUESTS:
        raise KvplanError(f"{arg('qps')} x {arg('duration')} asks for over {MAX_REQUESTS:,} requests", EXIT_USAGE,
                          param="qps", value=qps)
    rng, t, out = random.Random(seed), 0.0, []
    while True:
        t += rng.expovariate(qps)
        if t >= duration:
            return out
        out.append(SimRequest(len(out), t, isl, osl))


def _check_lengths(prefill_len: int | None, longest_in: int, decode_len: int | None, longest: int) -> None:
    """A pool's max_model_len given below the requests it must hold is refused: the engine rejects a request
    longer than its max_model_len (vLLM: the prompt plus max_tokens), so the plan would not run them. The decode
    pool holds the prompt and every output token; the prefill pool the prompt."""
    for name, given, need, what in (("decode_max_model_len", decode_len, longest, "prompt + output"),
                                    ("prefill_max_model_len", prefill_len, longest_in, "prompt")):
        if given is not None and given < need:
            raise KvplanError(f"{arg(name)} {given} is shorter than the longest request's {what}, {need:,} "
                              f"tokens: the pool could not hold it; raise it to {need:,} or leave it unset",
                              EXIT_USAGE, param=name, value=given)


def run_disagg(spec, hw, engine, req, prefill_dep, decode_dep, link, *, isl: int | None, osl: int | None,
               requests=None, prefill_max_model_len: int | None = None, decode_max_model_len: int | None = None,
               max_gpus: int = 64, **limits) -> Result:
    """`kvplan disagg` from parsed inputs: lengths from isl/osl or the requests (means for the timings,
    the longest for each pool's max_model_len unless given), the pools, and with requests the search."""
    if requests and len(requests) > MAX_DISAGG_REQUESTS:
        raise KvplanError(f"{len(requests):,} requests to simulate for every split; at most {MAX_DISAGG_REQUESTS:,}: "
                          f"lower {arg('qps')} or {arg('duration')}", EXIT_USAGE, param="qps")
    if requests:
        isl = isl or round(sum(r.prompt for r in requests) / len(requests))
        osl = osl or max(2, round(sum(r.output for r in requests) / len(requests)))
        longest_in = max(r.prompt for r in requests)
        longest = max(r.prompt + r.output for r in requests)
    elif isl is None or osl is None:
        raise KvplanError(f"give {arg('isl')} and {arg('osl')}, or a workload or trace", EXIT_USAGE, param="isl")
    else:
        longest_in, longest = isl, isl + osl
    _check_lengths(prefill_max_model_len, longest_in, decode_max_model_len, longest)
    setup = Setup(isl, osl, prefill_max_model_len or longest_in, decode_max_model_len or longest, **limits,
                  means=bool(requests))
    res = plan_disagg(spec, hw, engine, req, prefill_dep, decode_dep, link, setup)
    if requests:
        search_ratio(res, spec, hw, sorted(requests, key=lambda r: r.arrival), max_gpus)
    return res
