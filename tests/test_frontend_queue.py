"""The serving front end ahead of the simulated engine (kvplan.simulator.frontend; issue 21): processor sharing at the
coefficient set's fitted `ingress`, a request charged its wait beyond its own crossing. Hand arithmetic on the queue
and on a burst through a tiny engine; check-bench on published result files (tests/fixtures/bench/SOURCES.md):
a burst's TTFT carries the wait, an in-process run and a closed loop none, a Poisson run at low load moves by less
than one crossing; and check-bench's burst TTFT beside the corpus model's (kvplan.speed.fit) on one training point
of GPUStack's perf lab (1,000 prompts at once)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvplan.bench import detect
from kvplan.bench.result import BenchRun, Settings
from kvplan.cli import bench_predict
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.frontend import FrontEnd, INGRESS, front_end, ingress_of, releases, waits
from kvplan.simulator.model import Group, SimModel, StageCost
from kvplan.simulator.workload import SimRequest
from kvplan.speed.model import coefficients
from conftest import speed_cases

FIX = Path(__file__).parent / "fixtures" / "bench"
VLLM_INGRESS = coefficients("vllm")[INGRESS]  # the shipped set's seconds a request (11.3 ms at 0df27ca)


def _runs(name):
    return detect.read_runs((FIX / name).read_text(), name)


def test_processor_sharing_by_hand():
    # N = 5 sent at once, 1 s of work each: all five share the server, each at 1/5 of its rate, so all leave at
    # 5 x 1 = 5 s: each spent 5 s in the front end, its own crossing included (first come first served: 1, ..., 5)
    assert waits([0.0] * 5, 1.0) == [5.0] * 5
    # two, 0.5 s apart: the first crosses alone for 0.5 s (0.5 left), then both at half rate: the first's 0.5 takes
    # 1 s, leaving at 1.5 (1.5 - 0); the second has 0.5 done then, alone, leaves at 2.0 (2.0 - 0.5 = 1.5)
    assert waits([0.0, 0.5], 1.0) == pytest.approx([1.5, 1.5])
    # apart by more than a crossing: each crosses alone, 1 s; no cost: nobody waits
    assert waits([0.0, 10.0], 1.0) == [1.0, 1.0] and waits([0.0] * 3, 0.0) == [0.0] * 3
    # equal work finishes first come first served: the engine's arrivals stay sorted, rids stay indices
    sent = (0.0, 0.0, 0.3, 0.31, 2.0, 2.0, 2.0)
    seen = releases(sent, 0.25)
    assert all(a <= b for a, b in zip(seen, seen[1:]))
    assert seen == pytest.approx([a + x for a, x in zip(sent, waits(sent, 0.25))])
    # by hand, 0.25 s each: two at 0 share it, 0.15 done each by 0.3 (0.1 left); three share 0.01 s (0.0967 left each
    # of the first two, 0.2467 for the third); four share until the first two are through, 0.0967 x 4 = 0.3867 s
    # later, at 0.6967; the third and fourth have gained 0.0967 (0.15 and 0.1533 left), two share 0.15 x 2 = 0.3 s:
    # the third is through at 0.9967, the fourth 0.0033 s later alone, at 1.0. The engine sees each once it is
    # through, its own crossing included (as the corpus model charges it). The last three, at 2.0 with nobody ahead,
    # share it, 3 x 0.25 = 0.75 s: through and seen at 2.75
    assert seen == pytest.approx([0.69667] * 2 + [0.99667, 1.0] + [2.75] * 3, abs=1e-5)


def _tiny(step=0.01):
    return SimModel("t", kv_budget_bytes=8 * 2**30, block_size=16, groups=(Group(160 * 1024),), max_model_len=65536,
                    stages=(StageCost(dense_read_bytes=16 * 10**9, kv_bytes_per_token=160 * 1024),),
                    bandwidth_bytes_per_s=3.35e12, fixed_step_s=step)


def test_a_burst_through_the_front_end_waits_n_crossings():
    # 100 requests at t = 0, 5 ms each in the front end: processor sharing lets all through at 100 x 5 ms = 0.5 s,
    # each charged all of it, its own crossing included (the corpus model's N x ingress). The engine then runs the
    # same schedule 0.5 s later: TTFT and E2E + 0.5 s exactly, TPOT unchanged, and Little's law still holds
    reqs = [SimRequest(i, 0.0, 16, 4) for i in range(100)]
    before = Engine(_tiny(), EngineConfig()).run(reqs).summary(10.0, 1.0)
    after = Engine(_tiny(), EngineConfig(front_end_s=0.005)).run(reqs).summary(10.0, 1.0)
    lat0, lat1 = before["latency_s"], after["latency_s"]
    assert lat1["ttft"]["mean"] - lat0["ttft"]["mean"] == pytest.approx(100 * 0.005, abs=1e-9)
    assert lat1["e2e"]["p50"] - lat0["e2e"]["p50"] == pytest.approx(0.5, abs=1e-9)
    assert lat1["tpot"]["mean"] == pytest.approx(lat0["tpot"]["mean"], rel=1e-12)
    assert after["time"]["last_arrival_s"] == 0.0  # the figures count from when each was sent
    law = after["littles_law"]
    assert law["mean_in_system"] == pytest.approx(law["throughput_x_mean_latency"], rel=1e-6)


def test_the_front_end_reads_the_coefficient_set_and_none_on_the_roofline():
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.simulator.adapter import sim_model
    from kvplan.sources.resolve import resolve_model
    spec, gpu = resolve_model("llama-3.1-8b").spec, find_gpu("h100")
    plan = resolve_engine().plan(spec, gpu, Deployment(1, 1), Request(context=8192))
    calibrated = sim_model(plan, spec, gpu, engine="vllm")
    assert ingress_of(calibrated) == pytest.approx(VLLM_INGRESS) and VLLM_INGRESS > 0
    assert front_end(calibrated, "vllm").per_request_s == pytest.approx(VLLM_INGRESS)
    assert front_end(calibrated, "vllm", served=False) is None  # an in-process harness crosses none
    assert front_end(sim_model(plan, spec, gpu, speed="roofline"), "vllm") is None  # the lower bound keeps none
    # its line: 1,000 at once wait ~1,000 x 11.3 ms; nothing said is asked of a free front end (front_end: None)
    line = FrontEnd(0.0113, "x").said([SimRequest(i, 0.0, 1, 1) for i in range(1000)])
    assert "11.3 ms a request" in line and "the burst of 1,000 waits ~11.3 s" in line


def _predicted(run, gpu):
    r = bench_predict.resolve(run, None, gpu, None, None, None, None, ())
    return bench_predict.predict(run, r, ())


def test_check_bench_prices_a_bursts_wait(monkeypatch):
    # vllm bench serve, 16 prompts at once (no rate: inf), gemma-3-27b on an H100: the 16 cross vLLM's front end
    # together and reach the engine after 16 x ingress (10.6 ms shipped in the twenty-fourth round: 0.170 s), each
    # charged its own crossing too, as the corpus model does; the engine's schedule moves as a whole, so every TTFT is
    # 16 x ingress later than with no front end
    (run,) = _runs("vllm-report-gemma3-27b.txt")
    with_fe, _, notes = _predicted(run, "h100")
    assert any(n.startswith(f"front end: {VLLM_INGRESS * 1e3:.1f} ms a request") and "the burst of 16" in n
               for n in notes), notes
    monkeypatch.setattr(bench_predict, "front_end", lambda *a, **k: None)
    without, _, _ = _predicted(run, "h100")
    assert with_fe["ttft"].mean - without["ttft"].mean == pytest.approx(16 * VLLM_INGRESS, rel=1e-6)
    assert with_fe["tpot"].mean == pytest.approx(without["tpot"].mean, rel=1e-9)


def test_check_bench_in_process_run_crosses_no_front_end(monkeypatch):
    # trtllm-bench drives the executor in its own process (kvplan.speed.fields.IN_PROCESS_TOOLS): its 3,000 requests,
    # all sent at once, would wait seconds in a front end (TensorRT-LLM's sets fit a nonzero ingress); none here
    (run,) = _runs("trtllm-bench-llama31-8b-fp8.txt")
    predicted, _, notes = _predicted(run, "h100")
    assert not any("front end" in n for n in notes)
    monkeypatch.setattr(bench_predict, "front_end", lambda *a, **k: None)
    assert _predicted(run, "h100")[0] == predicted


def test_check_bench_open_loop_at_low_load_moves_less_than_one_crossing(monkeypatch):
    # llm-d's 10 req/s Poisson run over 4 L40S replicas (2.5 req/s each): the front end is 2.5 x 10.6 ms = 3% busy,
    # so a request rarely finds another crossing: its mean TTFT moves by its own crossing and less than one more
    (run,) = _runs("vllm-l40s-llama32-3b-10qps.json")
    with_fe, _, notes = _predicted(run, None)
    assert any(n.startswith("front end:") for n in notes)
    monkeypatch.setattr(bench_predict, "front_end", lambda *a, **k: None)
    without, _, _ = _predicted(run, None)
    for metric in ("ttft", "e2el"):
        assert 0.9 * VLLM_INGRESS <= with_fe[metric].mean - without[metric].mean < 2 * VLLM_INGRESS


def test_check_bench_closed_loop_charges_each_request_its_own_crossing(monkeypatch):
    # a closed loop of 4: each request reaches the engine one crossing of the front end after it is sent, as the
    # corpus model charges a closed loop (kvplan.speed.frontend.ingress_queue: 1 x ingress on TTFT and E2E); the
    # schedule moves as a whole, so the mean TTFT is later by exactly one crossing
    (run,) = _runs("vllm-report-gemma3-27b.txt")
    run = run.with_settings(concurrency=4)
    predicted, _, notes = _predicted(run, "h100")
    assert any(n.startswith(f"front end: {VLLM_INGRESS * 1e3:.1f} ms a request") and "closed loop" in n
               for n in notes), notes
    monkeypatch.setattr(bench_predict, "front_end", lambda *a, **k: None)
    assert predicted["ttft"].mean - _predicted(run, "h100")[0]["ttft"].mean == pytest.approx(VLLM_INGRESS, rel=1e-6)


def test_check_bench_and_the_corpus_model_agree_on_a_served_burst():
    # GPUStack's perf lab, DeepSeek-R1 on 8 x H200 under vLLM 0.11.0: 1,000 prompts of 128 tokens, 4 out, all at
    # once (a training source: kvplan.speed.corpus.in_training). The corpus model prices its TTFT as 1,000 x ingress
    # (11.3 s) plus the engine's burst; check-bench now waits 1,000 x ingress in the front end, then simulates the
    # engine. The two engine models differ (closed form vs event-driven), so they agree within 10%, where before this
    # change
    # check-bench's TTFT lacked the 11.3 s, most of the corpus model's
    from kvplan.bench.running import running
    from kvplan.speed.corpus import in_training
    from kvplan.speed.fit import build_all, settle
    source = "gpustack-perflab-deepseek-r1-h200"
    assert in_training(source)
    cases, _ = speed_cases()
    case = next(c for c in cases if (c.source, c.id) == (source, "L379-vllm"))
    assert (case.load.isl, case.load.osl, case.load.num_prompts, case.tp, case.version) == (128, 4, 1000, 8, "0.11.0")
    assert case.load.rate == math.inf and case.load.served and not case.load.concurrency
    (built,), _ = build_all([case], running)
    corpus_ttft = settle(built, coefficients(case.era))["ttft"]
    run = BenchRun("vllm-json", "the run", Settings(model="deepseek-r1", engine="vllm", engine_version="0.11.0", tp=8,
                                                    isl=128, osl=4, request_rate=math.inf, num_prompts=1000))
    simulated = _predicted(run, "h200")[0]["ttft"].mean
    assert simulated > 1000 * VLLM_INGRESS
    assert simulated == pytest.approx(corpus_ttft, rel=0.10)


@pytest.mark.parametrize("speed", ["calibrated", "roofline"])
def test_simulate_says_its_front_end_and_the_roofline_keeps_none(tmp_path, speed):
    # 200 requests of a trace at t = 0 on vLLM's set: "front end: 11.3 ms a request ..." on stderr and in --json's
    # meta (mean time there 200 x ingress, its own crossing included: 2.12 s at 10.6 ms); the bare roofline, the
    # labelled lower bound, has no front end
    import json
    from typer.testing import CliRunner
    from kvplan.cli.main import whole_app
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,input_tokens,output_tokens\n" + "0,128,4\n" * 200)
    r = CliRunner().invoke(whole_app(), ["simulate", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--trace",
                                         str(trace), "--speed", speed, "--json"])
    assert r.exit_code == 0, r.output
    meta = json.loads(r.stdout)["meta"]
    if speed == "roofline":
        assert "front_end" not in meta and "front end:" not in r.stderr
        return
    assert f"front end: {VLLM_INGRESS * 1e3:.1f} ms a request" in r.stderr
    assert f"the burst of 200 waits ~{200 * VLLM_INGRESS:.1f} s" in r.stderr
    assert meta["front_end"]["discipline"] == "processor sharing"
    assert meta["front_end"]["mean_wait_s"] == pytest.approx(200 * VLLM_INGRESS, rel=1e-9)


def test_the_python_api_runs_the_same_front_end():
    # kvplan's own rules read vLLM's coefficient set (kvplan.speed.model.ENGINE_ALIASES): its ingress, as the CLI's;
    # Poisson at 2/s keeps the front end 2 x 10.6 ms = 2% busy, so the mean wait is one crossing and well under two
    import kvplan
    run = kvplan.simulate("llama-3.1-8b", "h100", workload="chat", qps=2, duration=20)
    assert run.front_end["per_request_s"] == pytest.approx(VLLM_INGRESS)
    assert 0.9 * VLLM_INGRESS <= run.front_end["mean_wait_s"] < 2 * VLLM_INGRESS
    assert kvplan.simulate("llama-3.1-8b", "h100", workload="chat", qps=2, duration=5,
                           speed="roofline").front_end is None


@pytest.mark.parametrize("endpoint", ["chat", "completions", None])
def test_a_chat_request_vllm_renders_natively_crosses_no_front_end(endpoint):
    # vLLM renders gpt-oss's chat requests through harmony, not the Python chat template the ingress prices
    # (kvplan.speed.frontend.native_chat): a burst stated on the chat endpoint waits nothing in the front end; on
    # /v1/completions, or where the file states none, 99 x ingress as any model's
    run = BenchRun("vllm-json", "the run", Settings(model="gpt-oss-20b", engine="vllm", endpoint=endpoint, tp=1,
                                                    isl=128, osl=4, request_rate=math.inf, num_prompts=100))
    _, _, notes = _predicted(run, "h100")
    crossed = [n for n in notes if n.startswith("front end: ") and "ms a request" in n]
    native = [n for n in notes if n.startswith("front end: none for chat requests in harmony")]
    assert (bool(native), bool(crossed)) == ((True, False) if endpoint == "chat" else (False, True)), notes


def test_the_files_state_their_endpoint():
    # AIPerf's input_config.endpoint.type "chat"; vllm bench serve's --save-result backend "vllm" posts to
    # /v1/completions; SGLang's "sglang-oai" likewise; a printed vLLM report names no backend
    assert _runs("aiperf-gpt-oss-20b.json")[0].settings.endpoint == "chat"
    assert _runs("vllm-l40s-llama32-3b-10qps.json")[0].settings.endpoint == "completions"
    assert _runs("vllm-report-gemma3-27b.txt")[0].settings.endpoint is None
    from kvplan.bench.serving import endpoint_of_backend
    assert [endpoint_of_backend(b) for b in ("openai-chat", "sglang-oai-chat", "openai", "sglang", None)] == \
        ["chat", "chat", "completions", None, None]
