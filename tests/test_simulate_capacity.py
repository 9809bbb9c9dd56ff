"""A workload as a procurement target: simulated columns and the SLA filter for `cheapest`."""

from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import candidate_deployments
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model
from kvplan.simulator.capacity import SIM_COLUMNS, Target, filter_candidates, shortfall, sim_key, sim_row, simulate_plan
from kvplan.simulator.workload import WORKLOADS, generate


def test_more_gpus_serve_a_workload_one_cannot(kvplan_home):
    from kvplan.compare.cheapest import cheapest

    spec = resolve_model("llama-3.1-8b").spec
    gpus = {g.key: g for g in (find_gpu("l4"), find_gpu("h100"))}
    target = Target(tuple(generate(WORKLOADS["chat"], 6, 40, seed=1)), slo_ttft=2.0, slo_tpot=0.05, slo_pct=95)
    # 16k: one L4 (22.03 GiB torch total x 0.9 - 14.96 GiB of weights) holds a request, so the SLA decides
    cands = cheapest(spec, list(gpus.values()), 16384, 1, deployments=candidate_deployments(spec, 8))
    judged, sims = filter_candidates(cands, spec, gpus, target)
    assert len(judged) == len(cands)
    meets = [c for c in judged if c.meets]
    assert meets and all(c.why is None for c in meets)
    # One L4 (300 GB/s) cannot decode 6 chat requests/s at 50 ms per token; the SLA says why.
    l4_1 = next(c for c in judged if c.gpu == "l4" and c.deployment.gpus == 1)
    assert not l4_1.meets and "misses the SLA" in l4_1.why
    # Per GPU type only the smallest deployment meeting the SLA is simulated.
    h100 = sorted((c for c in judged if c.gpu.startswith("h100")), key=lambda c: c.deployment.gpus)
    assert h100[0].meets and all("not simulated" in c.why for c in h100[1:] if c.why)
    assert sims[sim_key(h100[0])]["sim_pct_meeting_slo"] >= 95


def test_sim_row_and_shortfall(kvplan_home):
    from kvplan.planning.deploy import Deployment
    from kvplan.engines import resolve_engine

    spec, gpu = resolve_model("qwen3-8b").spec, find_gpu("h100")
    p = resolve_engine().plan(spec, gpu, Deployment(1, 1), Request(context=32768))
    # the bare roofline (a lower bound): this light load meets the SLA with room to spare
    target = Target(tuple(generate(WORKLOADS["code"], 4, 30, seed=2)), speed="roofline")
    s = simulate_plan(p, spec, gpu, target)
    row = sim_row(s)
    assert set(row) == set(SIM_COLUMNS) and row["sim_rejected"] == 0 and row["sim_mean_running"] > 0
    assert shortfall(s, target) is None
    strict = Target(target.requests, slo_ttft=1e-6, speed="roofline")
    assert shortfall(simulate_plan(p, spec, gpu, strict), strict).startswith("misses the SLA: 0.0% of requests")
    assert sim_row({}) == dict.fromkeys(SIM_COLUMNS)


def test_max_rate_brackets_the_sla(kvplan_home):
    from kvplan.simulator.capacity import max_rate
    from kvplan.simulator.paper import opt13b_a100

    target = Target((), slo_ttft=2.0, slo_tpot=0.1, slo_pct=99)
    found = max_rate(opt13b_a100(), lambda r: generate(WORKLOADS["sharegpt"], r, 200, 0), target, steps=5)
    rate, bad = found["rate"], found["failed_at"]
    assert rate is not None and rate < bad <= 2 * rate
    by_rate = dict(found["trials"])
    assert by_rate[rate] >= 99 > by_rate[bad]
    assert found["summary"]["goodput"]["pct_meeting_slo"] == by_rate[rate]


def test_cli_find_rate(kvplan_home):
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "l40s", "--workload", "code", "--duration", "30",
                                 "--find-rate", "--slo-percent", "95", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    search = doc["meta"]["rate_search"]
    assert doc["meta"]["qps"] == search["rate"] > 0
    assert doc["runs"]["paged"]["summary"]["goodput"]["pct_meeting_slo"] >= 95
    assert "highest arrival rate meeting the SLA (95% of requests" in r.stderr


def test_replicas_serve_their_share(kvplan_home):
    # cheapest --replicas: R independent copies behind a round-robin balancer each serve every R-th request, each
    # behind its own front end. 1,000 requests at once (a burst) on one copy: the front end alone makes the mean
    # TTFT at least 999 x ingress; on one of 4 copies 250 requests, at least 249 x ingress and far below one copy's.
    from kvplan.engines import resolve_engine
    from kvplan.planning.deploy import Deployment
    from kvplan.simulator.adapter import sim_model
    from kvplan.simulator.frontend import ingress_of
    from kvplan.simulator.workload import SimRequest

    spec, gpu = resolve_model("llama-3.1-8b").spec, find_gpu("h100")
    p = resolve_engine().plan(spec, gpu, Deployment(1, 1), Request(context=8192))
    target = Target(tuple(SimRequest(i, 0.0, 128, 4) for i in range(1000)), slo_ttft=2.0, slo_tpot=0.1)
    one, four = simulate_plan(p, spec, gpu, target), simulate_plan(p, spec, gpu, target, replicas=4)
    assert one["requests"]["completed"] == 1000 and four["requests"]["completed"] == 250
    ingress = ingress_of(sim_model(p, spec, gpu))
    assert one["latency_s"]["ttft"]["mean"] > 999 * ingress and four["latency_s"]["ttft"]["mean"] > 249 * ingress
    assert four["latency_s"]["ttft"]["mean"] < one["latency_s"]["ttft"]["mean"] / 3
