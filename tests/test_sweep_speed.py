"""sweep's and the HTML's decode speed is the calibrated step-time model's (issue 21), the roofline beside it
as a bound: each sweep row's calibrated figure is kvplan.speed.plan.plan_decode_seconds for that plan (the
memoized shapes change no number), never faster than the roofline, labelled in the table, JSON and HTML,
and `--speed roofline` leaves the roofline alone."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app
from kvplan.compare.sweep import sweep
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.report.export import sweep_rows
from kvplan.report.html import render_html
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.plan import plan_decode_seconds

runner = CliRunner()
# dense GQA; sliding-window layers (bounded windows in the shape); MoE with MLA; a hybrid with Mamba layers
MODELS = ("llama-3.1-8b", "gemma-2-9b", "deepseek-v2-lite", "ai21-jamba-1.5-mini")


def _sweep(engine=None, speed="calibrated", batch=4):
    specs = [find_in_catalog(m) for m in MODELS]
    gpus = [find_gpu("h100"), find_gpu("a100-80"), find_gpu("mi300x")]
    return sweep(specs, gpus, [1, 2, 4], [4096, 32768], ["auto", "fp8"], batch=batch, engine=engine, speed=speed)


@pytest.mark.parametrize("engine", [None, "sglang"])
def test_calibrated_column_is_plan_decode_seconds(engine):
    chosen = resolve_engine(engine) if engine else None
    r = _sweep(chosen)
    rows = sweep_rows(r)
    fitting = [(p, row) for p, row in zip(r.plans, rows) if p.fits]
    assert len(fitting) > 50
    for p, row in fitting:
        want = plan_decode_seconds(p, r.models[p.model], r.gpus[p.gpu], engine or "kvplan")
        assert row["decode_step_seconds_calibrated"] == pytest.approx(want, rel=1e-12), (p.model, p.gpu)
        assert row["decode_tokens_per_second_calibrated"] == pytest.approx(p.request.batch / want, rel=1e-12)
        assert row["decode_tokens_per_second_per_request_calibrated"] == pytest.approx(1 / want, rel=1e-12)
    # not a constant: the step moves with the GPU, the context and the model
    assert len({round(row["decode_step_seconds_calibrated"], 12) for _, row in fitting}) > len(fitting) // 2
    for p, row in zip(r.plans, rows):
        if not p.fits:
            assert row["decode_step_seconds_calibrated"] is None


def test_calibrated_never_faster_than_roofline():
    r = _sweep(batch=16)
    rows = [row for row in sweep_rows(r) if row["fits"]]
    assert rows
    for row in rows:  # the roofline terms' coefficients are held >= 1 (README "Speed: how far to trust it")
        assert row["decode_tokens_per_second_calibrated"] <= row["decode_tokens_per_second"] * (1 + 1e-12), row["model"]
    # and engines measurably run slower than the roofline: the bound is not the figure
    assert sum(row["decode_tokens_per_second_calibrated"] < 0.95 * row["decode_tokens_per_second"]
               for row in rows) > len(rows) // 2


def test_roofline_speed_has_no_calibrated_figure():
    rows = sweep_rows(_sweep(speed="roofline"))
    assert all(row["decode_step_seconds_calibrated"] is None for row in rows)
    assert any(row["decode_tokens_per_second"] for row in rows)


def test_html_labels_the_calibrated_chart_and_bound_column():
    r = _sweep()
    rows = sweep_rows(r)
    page = render_html(rows, speed_label="calibrated (vllm coefficients); held-out TPOT median error 58%")
    assert "Decode tokens/s (calibrated, whole batch)" in page
    assert "held-out TPOT median error 58%" in page
    assert "decode tok/s (batch, calibrated)" in page and "decode tok/s (batch, roofline bound)" in page
    bare = render_html(sweep_rows(_sweep(speed="roofline")))
    assert "Decode tokens/s (roofline, whole batch)" in bare and "(batch, calibrated)" not in bare


def test_cli_table_json_and_html_say_which_speed(tmp_path, kvplan_home):
    base = ["sweep", "-m", "llama-3.1-8b", "-g", "h100,a100-80", "-c", "8k", "--gpu-counts", "1,2"]
    r = runner.invoke(app, base + ["-o", str(tmp_path / "p.html")])
    assert r.exit_code == 0, r.output
    assert "tok/s calibrated, roofline a bound" in r.stdout and "roofline" in r.stdout.splitlines()[1]
    assert "held-out TPOT median error" in r.stderr
    page = (tmp_path / "p.html").read_text()
    assert "Decode tokens/s (calibrated, whole batch)" in page and "held-out TPOT median error" in page
    doc = json.loads(runner.invoke(app, base + ["--json"]).stdout)
    assert doc["decode_speed"] == "calibrated" and doc["decode_speed_band"]["tpot"]["n"] > 0
    assert all(p["decode_tokens_per_second_calibrated"] < p["decode_tokens_per_second"] for p in doc["plans"])
    bare = runner.invoke(app, base + ["--speed", "roofline", "--json"])
    doc = json.loads(bare.stdout)
    assert doc["decode_speed"] == "roofline" and doc["decode_speed_band"] is None
    assert all(p["decode_tokens_per_second_calibrated"] is None for p in doc["plans"])
    table = runner.invoke(app, base + ["--speed", "roofline"]).stdout
    assert "tok/s roofline" in table
    one_line_error(runner.invoke(app, base + ["--speed", "fast"]), 2, "calibrated or roofline")


def test_workload_sweep_says_its_step_times_once(tmp_path):
    """With --workload the simulated run used to print the step-time line a second time beside the summary's
    (the same words twice on stderr): once is the contract, with the per-request note the simulation adds."""
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-c", "8k", "-g", "h100", "--gpu-counts", "1",
                            "--workload", "chat", "--duration", "5", "--output", str(out)])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines() if hasattr(r, "stderr") else r.output.splitlines()
    assert sum(line.startswith("step times:") for line in lines) == 1, r.output
    assert any(line.startswith("note: each request is charged") for line in lines), r.output
