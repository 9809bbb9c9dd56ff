"""Notes stored with a catalog entry's quantization (what reading its checkpoint's quantization_config noticed) are
printed as a Hub read prints them: `models show` lists them as data (stdout, and `--json`'s quantization_notes),
and `fit` says them on stderr as notes and carries them in `--json` (issue 22)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.sources.catalog import find_in_catalog

runner = CliRunner()
# DeepSeek-V4-Flash's catalog entry: its compressed attention's block-FP8 tensors are not read by shape
# (kvplan.readers.block_scales), so their scales are pooled, and the entry says so
V4 = "deepseek-v4-flash"


def _stored_notes() -> list[str]:
    spec = find_in_catalog(V4)
    assert spec is not None and spec.quantization.notes, "the entry this test reads must carry a quantization note"
    return list(spec.quantization.notes)


def test_models_show_prints_the_entrys_quantization_notes(kvplan_home):
    notes = _stored_notes()
    r = runner.invoke(app, ["models", "show", V4])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    at = lines.index("quantization_notes:")
    assert lines[at + 1: at + 1 + len(notes)] == [f"  - {n}" for n in notes]
    assert f"note: {notes[0]}" in r.stderr.splitlines()
    data = json.loads(runner.invoke(app, ["models", "show", V4, "--json"]).stdout)
    assert data["quantization_notes"] == notes
    # a model whose quantization noticed nothing says so
    plain = runner.invoke(app, ["models", "show", "qwen3-8b"])
    assert "quantization_notes: none" in plain.stdout.splitlines()


def test_fit_says_them_on_stderr_and_carries_them_in_json(kvplan_home):
    notes = _stored_notes()
    r = runner.invoke(app, ["fit", V4, "--gpu", "h200", "--gpus", "8", "--tp", "8", "--ctx", "8k"])
    assert r.exit_code == 0, r.output
    assert f"note: {notes[0]}" in r.stderr.splitlines() and notes[0] not in r.stdout
    j = runner.invoke(app, ["fit", V4, "--gpu", "h200", "--gpus", "8", "--tp", "8", "--ctx", "8k", "--json"])
    assert json.loads(j.stdout)["quantization_notes"] == notes
    plain = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "8k", "--json"])
    assert "quantization_notes" not in json.loads(plain.stdout)
