"""kvplan.validate.steptime on the CPU with a tiny model: the points it times and the speed-corpus file it writes.

The GPU run (scripts/gpu_speed.sh) is the same code with full widths; here the figures are only checked
for shape and sense (positive, one point per batch x context, the schema of tests/fixtures/speed/README.md).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="step times need torch (the [validate] extra)")

from kvplan.sources.resolve import resolve_model  # noqa: E402
from kvplan.validate import steptime  # noqa: E402
from kvplan.validate.blueprint import Widths  # noqa: E402

TINY = Widths(hidden=64, mlp=64, vocab=128)


@pytest.fixture(scope="module")
def measured():
    spec = resolve_model("llama-3.2-1b-instruct").spec
    return spec, steptime.measure(spec, [1, 3], [8, 24], layers=1, widths=TINY, warmup=1, repeats=3)


def test_points_cover_every_batch_and_context(measured):
    _, (facts, points, skipped) = measured
    got = sorted((p["phase"], p["batch"], p["ctx"]) for p in points)
    assert got == sorted([("prefill", 1, 8), ("prefill", 1, 24), ("decode", 1, 8), ("decode", 3, 8),
                          ("decode", 1, 24), ("decode", 3, 24)])
    assert not skipped and facts["layers"] == 1 and facts["device"] == "cpu"
    for p in points:
        ms = p["ms"]
        assert p["repeats"] == 3 and 0 < ms["median"] <= ms["p99"] and ms["mean"] > 0


def test_corpus_doc_follows_the_speed_schema(measured, tmp_path):
    spec, (facts, points, skipped) = measured
    doc = steptime.corpus_doc(spec.name, facts, points, skipped, date="2026-12-02", host="test")
    src = doc["source"]
    assert src["id"] == "kvplan-torch-llama-3.2-1b-instruct-test-2026-12-02" and src["kind"] == "results"
    assert "reduced model: 1 of 16 layers" in src["notes"] and src["cite"].startswith("first-party")
    assert doc["defaults"]["engine"] == "kvplan-torch" and "gpu_name" in doc["defaults"]  # a CPU has no profile
    ids = [p["id"] for p in doc["points"]]
    assert len(ids) == len(set(ids)) == 6
    decode = next(p for p in doc["points"] if p["id"].endswith("decode-b3-c24"))
    assert (decode["isl"], decode["osl"], decode["concurrency"], decode["batch"]) == (24, 1, 3, 3)
    assert set(decode["metrics"]) == {"tpot_ms"} and set(decode["metrics"]["tpot_ms"]) == {"mean", "median", "p99"}
    prefill = next(p for p in doc["points"] if p["id"].endswith("prefill-b1-c8"))
    assert set(prefill["metrics"]) == {"ttft_ms"}


def test_the_command_writes_its_file_and_refuses_bad_lists(tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli.main import whole_app

    base = ["step-times", "llama-3.2-1b-instruct", "--layers", "1", "--shrink", "--warmup", "0", "--repeats", "1"]
    r = CliRunner().invoke(whole_app(), [*base, "--batches", "1", "--contexts", "8", "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    import yaml

    (path,) = tmp_path.glob("*.yaml")
    doc = yaml.safe_load(path.read_text())
    assert path.name == doc["source"]["id"] + ".yaml" and len(doc["points"]) == 2
    for bad in (["--batches", "0"], ["--contexts", "a,b"], ["--repeats", "0"],
                ["--batches", ",".join(map(str, range(1, 300)))]):
        r = CliRunner().invoke(whole_app(), [*base, *bad, "-o", str(tmp_path)])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_gpu_key_comes_from_the_profiles_device_name():
    from kvplan.hardware.gpus import gpu_by_device_name as by_name

    assert by_name("NVIDIA H200").key == "h200-sxm" and by_name("nvidia h100 80gb hbm3").key == "h100-sxm"
    assert by_name("Some New GPU") is None and by_name(None) is None


def test_gpu_speed_script_runs_its_stages_on_a_cpu(tmp_path):
    """scripts/gpu_speed.sh end to end with its CPU knobs (validate_gpu.sh skipped, one tiny model): the flow the
    H200 run takes, and the corpus file it leaves; without CUDA (its default) it stops at once with exit 3."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = dict(os.environ, KVPLAN_PYTHON=sys.executable)
    if not torch.cuda.is_available():  # with CUDA the default run is the whole GPU job (minutes): not here
        r = subprocess.run(["bash", str(REPO / "scripts" / "gpu_speed.sh"), str(tmp_path / "a")], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 3 and "CUDA is not available" in r.stderr
    env.update(GPU_SPEED_DEVICE="cpu", GPU_SPEED_VALIDATE_S="0", GPU_SPEED_POINTS="llama-3.2-1b-instruct|1|8",
               GPU_SPEED_STEPTIME_ARGS="--layers 1 --shrink")
    r = subprocess.run(["bash", str(REPO / "scripts" / "gpu_speed.sh"), str(tmp_path / "b")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (corpus,) = (tmp_path / "b").glob("kvplan-torch-*.yaml")
    import yaml

    assert [p["id"].split("-instruct-")[1] for p in yaml.safe_load(corpus.read_text())["points"]] == \
        ["prefill-b1-c8", "decode-b1-c8"]
