"""The serving front end in every command that simulates (issue 21): `sweep --workload`, `cheapest --workload` and
`disagg` put simulate's front end (kvplan.simulator.frontend: the coefficient set's fitted ingress, processor sharing)
ahead of the engine, so a deployment at a rate gets one TTFT whichever command runs it; the roofline keeps none.
Hand arithmetic on bursts (all sent at t = 0): N through one server all leave at N x ingress, each released to the
engine then, at N x ingress (its own crossing included, as the corpus model charges it: kvplan.simulator.frontend)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.core.errors import EXIT_DOES_NOT_FIT
from kvplan.engines.vllm import api_servers
from kvplan.simulator.frontend import INGRESS, of_set, releases, shared, spread
from kvplan.simulator.pd import simulate_pd
from kvplan.simulator.workload import SimRequest
from kvplan.speed.model import coefficients

VLLM_INGRESS = coefficients("vllm")[INGRESS]  # the shipped set's seconds a request (10.1 ms in round 20)


def _invoke(*args, code: int = 0):
    r = CliRunner().invoke(whole_app(), list(args))
    assert r.exit_code == code, r.output
    return r


def _burst(tmp_path, n: int = 200):
    trace = tmp_path / "burst.csv"
    trace.write_text("arrival,input_tokens,output_tokens\n" + "0,128,4\n" * n)
    return str(trace)


def test_servers_apart_each_take_their_share_by_hand():
    s = 1.0
    # 8 sent at once to one server: all leave at 8 x 1 = 8 s and are released then (own crossing included)
    assert releases([0.0] * 8, s) == [8.0] * 8
    # the same 8 over 2 servers apart, round robin: 4 each, all leave and are released at 4 s
    assert spread([0.0] * 8, s, 2) == [4.0] * 8
    # 3 over 2 servers: requests 0 and 2 share server 0 (leave at 2 s); request 1 alone on server 1 (leaves at 1 s)
    assert spread([0.0, 0.0, 0.0], s, 2) == [2.0, 1.0, 2.0]
    assert spread([0.0] * 4, s, 1) == releases([0.0] * 4, s)


def test_of_set_is_the_sets_ingress_and_none_on_the_roofline():
    fe = of_set("vllm")
    assert fe is not None and fe.per_request_s == VLLM_INGRESS and "vllm" in fe.source
    assert of_set("vllm", "roofline") is None


def test_sweep_and_simulate_give_one_deployment_one_ttft():
    # the issue: the same deployment at the same rate got another TTFT from sweep --workload (no front end) than
    # from simulate (0.32246 s against 0.32207 s at p99 before this change, llama-3.1-8b on one H100, chat 10/s)
    common = ["--engine", "vllm", "--workload", "chat", "--qps", "10", "--duration", "20", "--json"]
    sw = json.loads(_invoke("sweep", "-m", "llama-3.1-8b", "--ctx", "8k", "--gpu", "h100", "--gpu-counts", "1",
                            *common).stdout)
    sim = json.loads(_invoke("simulate", "llama-3.1-8b", "-g", "h100", "--max-model-len", "8k", *common).stdout)
    row = next(p for p in sw["plans"] if p["tp"] == 1 and p["kv_dtype"] == "bf16")
    ttft = sim["runs"]["paged"]["summary"]["latency_s"]["ttft"]
    assert row["sim_ttft_p99_s"] == ttft["p99"]
    assert sw["sim_front_end"] == sim["meta"]["front_end"]


def test_sweep_burst_waits_n_crossings(tmp_path):
    # 200 sent at once: every request reaches the engine at 200 x ingress (10.6 ms as shipped: 2.12 s), so even the
    # p99 TTFT is past it; the note says so once (not once a plan), and --json carries the mean wait, 200 x ingress
    r = _invoke("sweep", "-m", "llama-3.1-8b", "--ctx", "8k", "--gpu", "h100", "--gpu-counts", "1,2", "--engine",
                "vllm", "--trace", _burst(tmp_path), "--json")
    doc = json.loads(r.stdout)
    assert r.stderr.count("front end:") == 1 and "(every plan, as simulate runs it)" in r.stderr
    assert doc["sim_front_end"]["mean_wait_s"] == pytest.approx(200 * VLLM_INGRESS, rel=1e-9)
    simulated = [p for p in doc["plans"] if p["sim_ttft_p99_s"] is not None]
    assert len(simulated) > 1 and all(p["sim_ttft_p99_s"] > 200 * VLLM_INGRESS for p in simulated)


def test_sweep_on_the_roofline_keeps_no_front_end(tmp_path):
    r = _invoke("sweep", "-m", "llama-3.1-8b", "--ctx", "8k", "--gpu", "h100", "--gpu-counts", "1", "--speed",
                "roofline", "--trace", _burst(tmp_path), "--json")
    doc = json.loads(r.stdout)
    assert "sim_front_end" not in doc and "front end:" not in r.stderr
    assert min(p["sim_ttft_p99_s"] for p in doc["plans"] if p["sim_ttft_p99_s"] is not None) < 200 * VLLM_INGRESS


def test_cheapest_burst_crosses_the_front_end(tmp_path):
    # a TTFT of 0.95 x 200 x ingress (2.01 s at the shipped 10.6 ms) cannot be met by a burst of 200 that waits
    # 200 x ingress in the front end, whatever the GPUs; with 5 s it can (the engine's own work on 128-token prompts,
    # 1.2 s at most)
    args = ["cheapest", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--concurrency", "1", "--engine", "vllm",
            "--trace", _burst(tmp_path), "--slo-tpot", "1", "--json"]
    tight = json.loads(_invoke(*args, "--slo-ttft", f"{0.95 * 200 * VLLM_INGRESS:.3f}", code=EXIT_DOES_NOT_FIT).stdout)
    simulated = [c for c in tight["fails"] if c.get("sim_ttft_p99_s") is not None]
    assert not tight["meets"] and simulated and all(c["sim_ttft_p99_s"] > 200 * VLLM_INGRESS for c in simulated)
    r = _invoke(*args, "--slo-ttft", "5")
    loose = json.loads(r.stdout)
    assert loose["meets"] and r.stderr.count("front end:") == 1
    assert loose["workload"]["front_end"]["mean_wait_s"] == pytest.approx(200 * VLLM_INGRESS, rel=1e-9)


def test_disagg_prefill_servers_each_front_their_share():
    # a burst of 4 at t = 0, fixed 0.1 s prefill steps (all 4 in one), 0.01 s decode steps, no transfer time: alone,
    # TTFT 0.1 s for the first to join the decode batch, 0.11 s for the three joining at its next step. Through one
    # prefill server all four are released at 4 x 1 s (their own crossings included): every TTFT 4 s later; through
    # two servers apart (round robin), 2 each, released at 2 x 1 s: 2 s later
    reqs = [SimRequest(i, 0.0, 16, 4) for i in range(4)]
    kw = dict(prefill_step_s=lambda prompts: 0.1, decode_step_s=lambda n, ctx: 0.01, held_bytes=lambda t: t,
              kv_bytes=1 << 30, transfer_s=lambda p: 0.0, budget=8192, max_num_seqs=64)
    arrivals = [r.arrival for r in reqs]
    alone = simulate_pd(reqs, 1, 1, **kw)
    assert alone["ttft"] == pytest.approx([0.1, 0.11, 0.11, 0.11])
    one = simulate_pd(reqs, 1, 1, seen=spread(arrivals, 1.0, 1), **kw)
    assert one["ttft"] == pytest.approx([4.1, 4.11, 4.11, 4.11])
    two = simulate_pd(reqs, 2, 1, seen=spread(arrivals, 1.0, 2), **kw)
    assert two["ttft"] == pytest.approx([2.1, 2.11, 2.11, 2.11])


def test_disagg_says_where_its_front_ends_sit():
    import kvplan

    r = kvplan.disagg("llama-3.1-8b", "h100", isl=2048, osl=256, qps=20, duration=5, max_gpus=4)
    fe = r.search["front_end"]
    assert fe["per_request_s"] == VLLM_INGRESS and "prefill server" in fe["where"]
    cli = _invoke("disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "2k", "--osl", "256", "--qps", "20",
                  "--duration", "5", "--max-gpus", "4")
    assert cli.stderr.count("front end:") == 1 and "one per prefill server" in cli.stderr
    roof = kvplan.disagg("llama-3.1-8b", "h100", isl=2048, osl=256, qps=20, duration=5, max_gpus=4, speed="roofline")
    assert roof.search["front_end"] is None


def test_data_parallel_ranks_behind_one_server_share_its_front_end_by_hand():
    # a burst of N = 8 over dp 4 behind one API server: all 8 cross it together, leave at 8 x 1 s and reach their
    # engines then; the rank simulated takes requests 0 and 4: each waits N x 1 = 8 s, not the N/4 x 1 = 2 s of four
    # servers apart (spread: 2 each)
    assert shared([0.0] * 8, 1.0, 4) == [8.0, 8.0]
    assert spread([0.0] * 8, 1.0, 4)[::4] == [2.0, 2.0]
    assert shared([0.0, 5.0], 1.0, 1) == releases([0.0, 5.0], 1.0)


def _burst_run(engine: str, n: int = 400, version: str | None = None):
    from kvplan.bench.result import BenchRun, Settings

    return BenchRun("vllm-json", "a burst", Settings(model="llama-3.1-8b", engine=engine, engine_version=version, tp=1,
                                                     gpus=4, isl=128, osl=4, request_rate=float("inf"), num_prompts=n))


def _check_bench_ttft(monkeypatch, engine: str, front: bool, version: str | None = None) -> tuple:
    from kvplan.cli import bench_predict

    if not front:
        monkeypatch.setattr(bench_predict, "front_end", lambda *a, **k: None)
    run = _burst_run(engine, version=version)
    r = bench_predict.resolve(run, None, "h100", None, None, None, None, ())
    assert r.replicas == 4  # 4 GPUs at tp 1: 4 replicas, the load split evenly
    metrics, _, notes = bench_predict.predict(run, r, ())
    return metrics["ttft"].mean, notes


@pytest.mark.parametrize("engine, shares_one", [("sglang", True), ("vllm", False)])
def test_check_bench_dp_replicas_behind_one_api_server(monkeypatch, engine, shares_one):
    # 400 prompts at once on 4 replicas (tp 1 on 4 GPUs). SGLang's --dp runs one TokenizerManager for every rank: all
    # 400 cross it together, so each waits 400 x ingress (SGLang's set: 2.1 ms, 0.84 s); vLLM's internal load balancer
    # runs one API server a DP rank (--api-server-count defaults to --data-parallel-size): 100 each, 100 x ingress
    # (vLLM's 10.6 ms as shipped: 1.06 s). A burst's schedule moves as a whole, so the TTFT moves by exactly that wait.
    ingress = coefficients(engine)[INGRESS]
    with_fe, notes = _check_bench_ttft(monkeypatch, engine, True)
    without, _ = _check_bench_ttft(monkeypatch, engine, False)
    waited = (400 if shares_one else 100) * ingress
    assert with_fe - without == pytest.approx(waited, rel=1e-6)
    said = next(n for n in notes if n.startswith("front end:"))
    assert ("one API server for the 4 replicas" in said) == shares_one
    assert (f"the burst of {400 if shares_one else 100} waits" in said)


@pytest.mark.parametrize("version, shares_one", [("0.14.1", True), ("0.13.0", True), ("0.15.0", False),
                                                 ("0.20.0", False)])
def test_check_bench_vllm_api_servers_by_release(monkeypatch, version, shares_one):
    # vLLM's --api-server-count defaulted to 1 through 0.14.1 (its wheel: vllm/entrypoints/openai/cli_args.py L286,
    # default=1) and to --data-parallel-size from 0.15.0 (cli_args.py L289 default=None; serve.py L98), consecutive
    # releases. A burst of 400 on 4 DP ranks at vLLM's shipped ingress c (11.04 ms when written): one server, each
    # of the 400 waits 400 x c (4.42 s), its own crossing included; a server a rank, each replica's 100 wait 100 x c
    # (1.10 s).
    ingress = coefficients("vllm")[INGRESS]
    with_fe, notes = _check_bench_ttft(monkeypatch, "vllm", True, version)
    without, _ = _check_bench_ttft(monkeypatch, "vllm", False, version)
    assert with_fe - without == pytest.approx((400 if shares_one else 100) * ingress, rel=1e-6)
    said = next(n for n in notes if n.startswith("front end:"))
    assert ("one API server for the 4 replicas" in said) == shares_one
    assert f"vLLM {version} runs one API server " in said


def test_vllm_api_servers_read_releases():
    from kvplan.engines import resolve_engine as get_engine

    assert [api_servers.one_for_all(v) for v in ("0.5.0", "0.9.1", "0.14.1", "0.15.0", "0.33.0")] == [
        True, True, True, False, False]
    assert get_engine("vllm", "0.14.1").dp_front_end()[0] and not get_engine("vllm").dp_front_end()[0]
    assert get_engine("vllm").dp_front_end("0.10.1")[0] and not get_engine("vllm", "0.14.1").dp_front_end("0.15.0")[0]
    assert get_engine("vllm", "0.14.1").dp_front_end("main")[0]  # not a release number: the engine's own
    assert get_engine("sglang").dp_front_end("0.4.0") == (True, "")
