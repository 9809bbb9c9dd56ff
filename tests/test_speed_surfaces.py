"""The speed model's corpus and surfaces (kvplan.speed): the training split by source, every corpus point read or
counted, the train CV that never reads a held-out source, `ship`'s refusals, and the speed figures fit, simulate and
cheapest print (the terms by hand and the shipped coefficients: tests/test_speed.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.corpus import in_training
from kvplan.speed.terms import TERMS
from conftest import load_script, speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"
H100 = find_gpu("h100-sxm")


def test_the_split_is_by_source_and_deterministic():
    import hashlib

    ids = [f"source-{i}" for i in range(1000)]
    share = sum(map(in_training, ids)) / len(ids)
    assert 0.65 < share < 0.75
    h = hashlib.sha256(b"vllm-pr-12345").digest()
    assert in_training("vllm-pr-12345") == ((h[0] * 256 + h[1]) % 100 < 70)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_every_corpus_point_is_a_case_or_a_counted_skip():
    cases, skipped = speed_cases()
    yaml = pytest.importorskip("yaml")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where built: 1 CPU-s over the corpus, not 8
    total = sum(len(yaml.load(f.read_text(), Loader=loader)["points"]) for f in CORPUS.glob("*.yaml"))
    assert len(cases) + sum(skipped.values()) == total
    assert {c.engine for c in cases} == {"vllm", "sglang", "trtllm", "llama.cpp"}


def test_a_setting_outside_the_corpus_says_so():
    from kvplan.speed.coverage import label, outside

    cov = speed.shipped()["coverage"]
    # (T4 was the example until a training source ran vLLM on one: hamzahtariq11-serve-llm-vllm-t4)
    assert "h100-sxm" in cov["gpus"] and "a10" not in cov["gpus"]
    assert outside("vllm", "h100-sxm", "llama") == []
    assert outside("vllm", "a10", "llama") == ["GPU a10 is not among the speed corpus's training sources"]
    assert "not among the speed corpus's training sources: vllm's coefficients" \
        in outside("hf_transformers", "h100-sxm", "llama")[0]
    # llama.cpp's training points are llama-bench's (pp / tg of one sequence): a served batch is extrapolated
    assert not speed.shipped()["engines"]["llama.cpp"]["served"] and speed.shipped()["engines"]["vllm"]["served"]
    assert any("llama-bench runs only" in w for w in outside("llama.cpp", "h100-sxm", "llama"))
    assert label("kvplan").startswith("calibrated (vllm coefficients")
    assert label("vllm", "roofline") == "roofline (a lower bound)"


def test_simulate_speed_flag(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli.main import app_for

    args = ["simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "4", "--duration", "20",
            "--json"]
    runner = CliRunner()
    cal = runner.invoke(app_for("simulate"), args)
    roof = runner.invoke(app_for("simulate"), [*args, "--speed", "roofline"])
    assert cal.exit_code == 0 and roof.exit_code == 0, (cal.output, roof.output)
    c, r = json.loads(cal.stdout), json.loads(roof.stdout)
    assert (c["meta"]["step_time"].startswith("calibrated (vllm")
            and r["meta"]["step_time"] == "roofline (a lower bound)")
    assert c["meta"]["step_time_band"]["tpot"]["n"] > 0 and r["meta"]["step_time_band"] is None
    assert "calibrated (vllm" in c["meta"]["step_time_note"] and "roofline" in r["meta"]["step_time_note"]
    tpot = lambda d: d["runs"]["paged"]["summary"]["latency_s"]["tpot"]["p50"]  # noqa: E731
    assert tpot(c) > tpot(r) > 0  # the calibrated step is never faster than the roofline
    bad = runner.invoke(app_for("simulate"), [*args, "--speed", "fast"])
    assert bad.exit_code == 2 and "--speed must be calibrated or roofline" in bad.output


def test_cheapest_speed_floor_reads_the_calibrated_step():
    from kvplan.compare.cheapest import cheapest
    from kvplan.planning.deploy import Deployment
    from kvplan.sources.catalog import find_in_catalog

    spec = find_in_catalog("llama-3.1-8b")
    (c,) = [x for x in cheapest(spec, [H100], 8192, 8, deployments=[Deployment(1, 1)]) if x.plan is not None]
    roof, cal = 1 / c.plan.decode_step_seconds, c.tokens_per_second_per_request
    assert c.step_seconds and cal < roof  # the calibrated decode is slower than the roofline's bound
    floor = (cal + roof) / 2  # met by the roofline, not by the calibrated step
    (slow,) = cheapest(spec, [H100], 8192, 8, deployments=[Deployment(1, 1)], min_tokens_per_second=floor)
    assert not slow.meets and slow.why.startswith("too slow: ")


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_train_cv_never_reads_a_held_out_source(monkeypatch):
    
    from kvplan.speed.fit import build_all

    bench = load_script("benchmarks/speed_corpus.py", "speed_corpus_bench")
    fitted_on, fitted_eras = [], []

    def fake_fit(built):  # records what each fold trains on; vLLM's shipped set stands in for the fit
        fitted_on.append({b.case.source for b in built})
        fitted_eras.append({b.case.era for b in built})
        return speed.coefficients("vllm")

    monkeypatch.setattr(bench, "fit_engine", fake_fit)
    monkeypatch.setattr(bench, "fit_era", lambda era, built: fake_fit([b for b in built if b.case.era == era]))
    cases, _ = speed_cases()
    built, _ = build_all(cases)
    rows = bench.loso(built, train_only=True)
    scored = {b.case.source for b, _m, _p, _y in rows}
    train = {b.case.source for b in built if in_training(b.case.source)}
    folds = sorted({(b.case.source, b.case.era) for b in built if in_training(b.case.source)})
    assert scored and scored <= train and len(fitted_on) == len(folds)
    assert all(sources <= train for sources in fitted_on)
    # one fold per training source and era (gpustack's tables hold vLLM, SGLang and TensorRT-LLM runs), in
    # sorted order, each fitted without the source it scores; each era's points scored by a fit of that era
    assert len(folds) > len(train)
    assert all(src not in fitted_on[i] for i, (src, _era) in enumerate(folds))
    # an era with another training source is fitted on that era alone (TensorRT-LLM 0.17's lone source: its engine's)
    assert sum(fitted_eras[i] == {era} for i, (_src, era) in enumerate(folds)) >= len(folds) - 1
    # --eras: those eras' folds only, the same folds as in the whole run
    fitted_on.clear()
    fitted_eras.clear()
    some = bench.loso(built, train_only=True, eras={"sglang", "vllm"})
    mine = [f for f in folds if f[1] in ("sglang", "vllm")]
    assert some and {b.case.era for b, _m, _p, _y in some} == {"sglang", "vllm"} and len(fitted_on) == len(mine)
    assert all(src not in fitted_on[i] for i, (src, _era) in enumerate(mine))


def test_the_per_request_cost_is_said_with_the_rate_it_allows(monkeypatch):
    # A fitted cost per request is GPU time in the step that admits it: 1 / cost requests/s per replica at most
    # (at a made-up 25 ms: 40 requests/s). The note says both, read from the engine's coefficients.
    from kvplan.cli import speed_flags

    coef = dict(zip(TERMS, speed.coefficients("vllm")), request=0.025)
    monkeypatch.setattr(speed_flags, "coefficients", lambda engine: tuple(coef[t] for t in TERMS))
    (note,) = speed_flags.request_note("calibrated", "vllm")
    assert "a fitted 25.0 ms of step time" in note and "at most 40 requests/s: a limit of the fit" in note
    assert speed_flags.request_note("roofline", "vllm") == []


def test_ship_refuses_a_flag_or_a_folder_without_a_corpus(tmp_path, capsys):
    """`python -m kvplan.bench.ship --help` once read `--help` as the corpus folder and wrote an empty fit over the
    shipped coefficients; a flag or a folder with no corpus now writes nothing."""
    from kvplan.bench.ship import main

    out = tmp_path / "c.json"
    assert main(["--help"]) == 0 and "usage" in capsys.readouterr().err
    assert main([str(tmp_path), "2026-01-01", str(out)]) == 2 and not out.exists()
    assert "no speed corpus" in capsys.readouterr().err
    assert main([str(tmp_path), "2026-01-01", str(tmp_path / "missing" / "c.json")]) == 2
    assert "is no folder" in capsys.readouterr().err and not (tmp_path / "missing").exists()


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_a_trtllm_bench_page_read_at_the_kv_dtype_its_figures_allow():
    """TensorRT-LLM's 1.0 perf overview states no KV dtype; its Llama-3.1-8B FP8 row at 128/4096 on one H100 SXM (14,325
    output tok/s) is read at an FP8 KV cache because a bf16 one cannot reach it. Each output token reads its request's
    cached context: tok/s <= bandwidth / (mean context x KV bytes a token), the mean context 128 + 4,096 / 2 = 2,176.
    Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes a token in bf16, 65,536 in fp8.
    H100 SXM datasheet 3.35 TB/s: bf16 3.35e12 / (2,176 x 131,072) = 11,746 tok/s < 14,325; fp8 23,491 > 14,325."""
    import yaml

    from kvplan.speed.shape import shape_for

    doc = yaml.safe_load((CORPUS / "trtllm-perf-overview-v1.0.yaml").read_text())
    (p,) = [q for q in doc["points"] if q["id"] == "llama31-8b-h100-sxm-tp1-fp8-128-4096"]
    measured = p["metrics"]["output_throughput"]
    assert (p["kv_dtype"], measured, p["isl"], p["osl"]) == ("fp8", 14325, 128, 4096)
    spec = find_in_catalog(p["kvplan_model"])
    context = p["isl"] + p["osl"] / 2
    ceiling = {}
    for kv in (None, "fp8"):
        per_token = shape_for(spec, H100, weight_dtype="fp8", kv_dtype=kv).kv_bytes_per_token
        ceiling[kv] = H100.bandwidth_bytes_per_s / (context * per_token)
    assert ceiling[None] == pytest.approx(11_746, abs=1) and ceiling["fp8"] == pytest.approx(23_491, abs=1)
    assert ceiling[None] < measured < ceiling["fp8"]
