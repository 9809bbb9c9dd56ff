"""check-bench on a llama-bench run without FlashAttention: the row's setting is read and said, not ignored.

llama-bench's json/jsonl/csv rows carry `flash_attn` (0 / 1, -1 for auto since llama.cpp#15434's enum; true / false
in builds whose field was a bool); its markdown table shows it as `fa` only where the run set it away from the default
(ggml-org/llama.cpp@050fc7f3 tools/llama-bench/llama-bench.cpp, markdown_printer). Without FlashAttention llama.cpp
materializes each layer's attention scores (kvplan.speed.ggml), which the corpus fit prices and the simulator's step
model does not (StepModel refuses them): check-bench says so on that row alone.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.bench.llamabench import parse_md, parse_rows
from kvplan.cli.main import whole_app

runner = CliRunner()
ROW = {"model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "gpu_info": "NVIDIA GeForce RTX 4080",
       "n_batch": 2048, "n_ubatch": 512, "type_k": "f16", "n_prompt": 512, "n_gen": 0, "n_depth": 0}
OFF = "FlashAttention off (the file's flash_attn 0)"
UNSTATED = "the file states no FlashAttention setting"


def test_the_rows_flash_attn_is_read_as_printed():
    rows = [{**ROW, "flash_attn": v, "avg_ts": 7000.0} for v in (1, 0, -1, True, False, "off")]
    rows.append({**ROW, "avg_ts": 7000.0})  # a build before the field: not invented
    assert [r.settings.flash_attn for r in parse_rows(rows)] == ["1", "0", "-1", "true", "false", "off", None]


def test_the_md_tables_fa_column_where_the_run_set_it():
    head = "| model | backend | ngl | fa | test | t/s |\n| --- | --- | --: | -: | --: | --: |\n"
    runs = parse_md(head + "| qwen2 7B Q4_K - Medium | CUDA | 99 | 1 | pp512 | 7340.20 ± 23.45 |\n"
                    "| qwen2 7B Q4_K - Medium | CUDA | 99 | 0 | pp512 | 6100.00 ± 20.00 |\n")
    assert [r.settings.flash_attn for r in runs] == ["1", "0"]
    no_fa = head.replace(" fa |", "").replace(" -: |", "", 1)
    (run,) = parse_md(no_fa + "| qwen2 7B Q4_K - Medium | CUDA | 99 | pp512 | 7340.20 ± 23.45 |\n")
    assert run.settings.flash_attn is None  # the build's default: not stated


def test_the_note_is_on_the_row_without_flash_attention_alone(tmp_path):
    """Two rows of one shape (pp512 of Qwen2.5-7B Q4_K_M), flash_attn 1 and 0: the 0 row says its figure is expected
    below the prediction; the 1 row says nothing of FlashAttention; both are predicted alike (one build priced)."""
    path = tmp_path / "fa.json"
    rows = [{**ROW, "flash_attn": 1, "avg_ts": 7100.0}, {**ROW, "flash_attn": 0, "avg_ts": 6500.0}]
    path.write_text(json.dumps(rows))
    r = runner.invoke(whole_app(), ["check-bench", str(path), "--gpu", "rtx-4090", "--json"])
    assert r.exit_code == 0, r.output
    on, off = json.loads(r.stdout)["runs"]
    assert not any("FlashAttention" in line for line in on["assumed"])
    (note,) = [line for line in off["assumed"] if "FlashAttention" in line]
    assert note.startswith(OFF) and "expected slower than predicted" in note
    assert on["rows"][0]["predicted"] == off["rows"][0]["predicted"]  # said, not priced
    assert OFF in r.stderr and r.stderr.count("FlashAttention") == 2  # the note and its "prices ... on"


def test_a_row_that_states_nothing_says_so(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps([{**ROW, "avg_ts": 7100.0}]))
    r = runner.invoke(whole_app(), ["check-bench", str(path), "--gpu", "rtx-4090", "--json"])
    assert r.exit_code == 0, r.output
    ((note,),) = [[x for x in run["assumed"] if "FlashAttention" in x] for run in json.loads(r.stdout)["runs"]]
    assert note.startswith(UNSTATED) and "llama.cpp#23714" in note
