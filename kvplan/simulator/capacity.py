"""A workload as a procurement target: simulate a plan, and filter `cheapest` candidates by an SLA.

`sweep --workload` adds the simulated figures of each plan to its row (`SIM_COLUMNS`);
`cheapest --workload` keeps the deployments whose simulation serves the requests with at least
`slo_pct` percent of them within the TTFT and TPOT targets. Each run takes its plan's engine's own
scheduler limits (`sim_max_num_seqs`, `sim_max_num_batched_tokens`: vLLM's differ by GPU), and its requests cross
the serving front end ahead of the engine as `simulate`'s do (kvplan.simulator.frontend: the coefficient set's
fitted ingress, processor sharing; none on the roofline), so a deployment gets the TTFT here that `simulate` gives it
at the same rate. Each simulation takes a fraction of a second to seconds, so callers bound how many they run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.compare.cheapest import NOT_SIMULATED
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.frontend import ingress_of
from kvplan.simulator.limits import plan_limits

SIM_COLUMNS = ("sim_mean_running", "sim_requests_per_s", "sim_output_tokens_per_s", "sim_ttft_p99_s",
               "sim_tpot_p99_s", "sim_pct_meeting_slo", "sim_goodput_requests_per_s", "sim_kv_waste_pct",
               "sim_preemptions", "sim_rejected", "sim_max_num_seqs", "sim_max_num_batched_tokens")


@dataclass(frozen=True)
class Target:
    """What a deployment must do with the requests: serve them all, `slo_pct`% within both SLOs."""

    requests: tuple
    slo_ttft: float = 2.0
    slo_tpot: float = 0.1
    slo_pct: float = 99.0
    step_overhead_s: float = 0.0
    label: str = "workload"
    engine: str | None = None  # whose calibrated step times (kvplan.speed); None: vLLM's
    configured: object = None  # the configured engine whose own scheduler limits each run takes; None: 256 / 8,192
    speed: str = "calibrated"  # or "roofline"


def simulate_plan(plan, spec, gpu, target: Target, replicas: int = 1) -> dict:
    """The paged-pool summary of `target.requests` on `plan` (kvplan.simulator.results.Recorder.summary), run at
    the plan's engine's own scheduler limits (kvplan.simulator.limits.plan_limits), with them (`scheduler_limits`),
    behind simulate's serving front end (kvplan.simulator.frontend.ingress_of: 0 on the roofline). `replicas`
    independent copies of the plan (`cheapest --replicas`) each serve every replicas-th request (round robin), each
    behind its own front end: one copy is simulated on its share, which every copy's figures are alike."""
    model = sim_model(plan, spec, gpu, step_overhead_s=target.step_overhead_s, speed=target.speed, engine=target.engine,
                      version=getattr(target.configured, "version", None))
    if model.kv_budget_bytes < model.block_bytes():
        return {}
    held = plan_limits(target.configured, plan, spec, gpu)
    cfg = held.config(front_end_s=ingress_of(model))  # the engine's own admission rule too (kvplan.engines.admission)
    share = list(target.requests) if replicas <= 1 else \
        [replace(q, rid=i) for i, q in enumerate(target.requests[::replicas])]  # rid = index, as Engine.run takes
    summary = Engine(model, cfg).run(share).summary(target.slo_ttft, target.slo_tpot)
    return {**summary, "scheduler_limits": held.meta()}


def sim_row(summary: dict) -> dict:
    """SIM_COLUMNS of one summary (all None when the plan has no KV memory to simulate)."""
    if not summary:
        return dict.fromkeys(SIM_COLUMNS)
    lat, r = summary["latency_s"], summary["requests"]
    return {
        "sim_mean_running": summary["concurrency"]["mean_running"],
        "sim_requests_per_s": summary["throughput"]["requests_per_s"],
        "sim_output_tokens_per_s": summary["throughput"]["output_tokens_per_s"],
        "sim_ttft_p99_s": lat["ttft"]["p99"], "sim_tpot_p99_s": lat["tpot"]["p99"],
        "sim_pct_meeting_slo": summary["goodput"]["pct_meeting_slo"],
        "sim_goodput_requests_per_s": summary["goodput"]["requests_per_s"],
        "sim_kv_waste_pct": summary["kv"]["waste_pct"],
        "sim_preemptions": r["preemptions"], "sim_rejected": sum(r["rejected"].values()) + r["dropped"],
        "sim_max_num_seqs": summary["scheduler_limits"]["max_num_seqs"],
        "sim_max_num_batched_tokens": summary["scheduler_limits"]["max_num_batched_tokens"],
    }


def shortfall(summary: dict, target: Target) -> str | None:
    """Why a simulated deployment misses the target, or None when it meets it."""
    if not summary:
        return "doesn't fit: no KV memory to serve the workload"
    r = summary["requests"]
    # Requests longer than the length limit fail on every deployment alike (the caller warns of
    # them); requests the pool can never hold are this deployment's failure.
    lost = r["rejected"].get("never fits in the KV pool", 0) + r["dropped"]
    if lost:
        return f"cannot hold {lost:,} of the {target.label}'s requests in its KV pool at all"
    pct = summary["goodput"]["pct_meeting_slo"]
    if pct < target.slo_pct:
        return (f"misses the SLA: {pct:.1f}% of requests meet TTFT ≤ {target.slo_ttft:g} s and TPOT ≤ "
                f"{target.slo_tpot * 1e3:g} ms (< {target.slo_pct:g}%)")
    return None


def sim_key(c) -> tuple:
    """The simulated figures' key of a `cheapest` candidate: its GPU, one copy's layout, and its copies."""
    d = c.deployment
    return (c.gpu, d.gpus, d.tp, d.pp, c.replicas)


def filter_candidates(candidates: list, spec, gpus: dict, target: Target, progress=None) -> tuple[list, dict]:
    """`cheapest` candidates re-judged by the workload, ranked as before, and the simulated
    figures of each candidate simulated ({(gpu, gpus, tp, pp): sim_row}).

    Per GPU type, deployments that meet the memory target are simulated from the fewest GPUs up;
    the first that meets the SLA is the cheapest of its type, so larger ones are not simulated
    (marked as such). `gpus` maps GPU keys to profiles."""
    done: set = set()
    judged: dict = {}
    sims: dict = {}
    # fewest GPUs first, copies counted (2 x 1 GPU before 4 GPUs); of as many, one copy first
    order = sorted(range(len(candidates)), key=lambda i: (candidates[i].gpu, candidates[i].gpus,
                                                          candidates[i].replicas))
    for n, i in enumerate(order):
        c = candidates[i]
        if not c.meets:
            judged[i] = c
            continue
        if c.gpu in done:
            judged[i] = replace(c, meets=False, why=NOT_SIMULATED)
            continue
        summary = simulate_plan(c.plan, spec, gpus[c.gpu], target, c.replicas)
        sims[sim_key(c)] = sim_row(summary)
        why = shortfall(summary, target)
        if why is None:
            done.add(c.gpu)
        judged[i] = replace(c, meets=why is None, why=why)
        if progress is not None:
            progress(n + 1, len(order))
    out = [judged[i] for i in range(len(candidates))]
    return [c for c in out if c.meets] + [c for c in out if not c.meets], sims


# A run reaches a steady state when the arrival window is long against a request's time in the system: for about
# one mean latency W the deployment fills (Little's law, L = rate x W, is reached only then) and for about one W after
# the last arrival it drains, both lighter than the steady load. Past W / window = 1/3 the run is mostly filling and
# draining: a rate far past the deployment's capacity "meets" the SLA because arrivals stop before the queue forms
# (llama-3.1-8b on an H100, chat, 5 s of arrivals: 41.5 req/s met, 11 req/s found over 300 s).
UNSTEADY_SHARE = 1 / 3
STEADIER_SHARE = 0.1  # past this share the answer is said to lean on the filling and draining


def ramp_share(summary: dict) -> tuple[float, float, float] | None:
    """(mean time in the system W in s, arrival window in s, W / window) of one run's summary; None without a
    completed request. A window of 0 (every request at once) is a share of infinity."""
    mean = summary["latency_s"]["e2e"]["mean"]
    if mean is None:
        return None
    window = summary["time"].get("last_arrival_s") or 0.0
    return mean, window, (mean / window if window > 0 else float("inf"))


def max_rate(model, requests_at, target: Target, config=None, start: float = 1.0, steps: int = 6,
             progress=None) -> dict:
    """The highest arrival rate (requests/s) that `model` serves within `target`.

    `requests_at(rate)` gives the requests of one trial (a workload drawn at that rate, or a trace
    rescaled to it). Doubles the rate from `start` until the SLA fails, then bisects
    (geometrically) `steps` times between the last rate that met it and the first that did not.
    A rate is "met" on that trial's sample of requests; nearby rates can differ by the sample's
    luck. Returns {"rate", "summary" (at that rate, or None), "failed_at", "trials": [(rate,
    percent meeting the SLA)]}."""
    cfg = config or EngineConfig()
    trials = []

    def trial(rate):
        reqs = requests_at(rate)
        s = Engine(model, cfg).run(reqs).summary(target.slo_ttft, target.slo_tpot) if reqs else None
        ok = s is not None and shortfall(s, Target((), target.slo_ttft, target.slo_tpot, target.slo_pct)) is None
        trials.append((rate, s["goodput"]["pct_meeting_slo"] if s else None))
        if progress is not None:
            progress(len(trials))
        return ok, s

    good, good_summary, bad = None, None, None
    rate = start
    for _ in range(20):  # up to start x 2^19
        ok, s = trial(rate)
        if not ok:
            bad = rate
            break
        good, good_summary, rate = rate, s, rate * 2
    if bad is not None and good is None:  # even `start` fails: search below it
        lo = start / 2**10
        ok, s = trial(lo)
        if not ok:
            return {"rate": None, "summary": None, "failed_at": lo, "trials": trials}
        good, good_summary = lo, s
    for _ in range(steps if bad is not None else 0):
        mid = (good * bad) ** 0.5
        ok, s = trial(mid)
        if ok:
            good, good_summary = mid, s
        else:
            bad = mid
    return {"rate": good, "summary": good_summary, "failed_at": bad, "trials": trials}
