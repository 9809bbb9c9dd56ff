"""What a new user's audit of the CLI found wrong (issues 21 and 22): each a one-line error, a printed assumption,
or an --explain line whose arithmetic is the total it states."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.api import plan
from kvplan.cli import app
from kvplan.core.errors import KvplanError

runner = CliRunner()


def run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


@pytest.mark.parametrize("command", ["check-bench", "check-log"])
def test_a_folder_given_as_the_file_is_not_called_missing(kvplan_home, tmp_path, command):
    # It exists, so "no such file" (exit 3) was false: a folder where a file belongs is bad input (exit 2).
    one_line_error(run(command, tmp_path), 2, "is a folder")


def test_explain_state_line_multiplies_out_to_its_total_when_the_recurrent_part_is_fp32(kvplan_home):
    # Qwen3.5-35B-A3B's config.json: 30 gated_deltanet layers of 40, linear_num_key_heads 16, linear_key_head_dim
    # 128, linear_num_value_heads 32, linear_value_head_dim 128, linear_conv_kernel_dim 4, mamba_ssm_dtype float32.
    # conv values (2 x 16 x 128 + 32 x 128) x (4 - 1) = 24,576 in bf16; recurrent 32 x 128 x 128 = 524,288 in fp32.
    # 30 x (24,576 x 2 + 524,288 x 4) = 30 x 2,146,304 = 64,389,120 B = 61.41 MiB. The line used to print
    # "30 layers x 548,864 state values x 2 B (recurrent part in fp32)", a product of 32.9 MB, beside 61.41 MiB.
    r = run("fit", "qwen3.5-35b-a3b", "--gpu", "h200", "--gpus", "1", "--ctx", "4k", "--explain")
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())  # --explain's lines wrap at 80 columns (test_audit_round2)
    assert "30 gated_deltanet layers × (24,576 conv values × 2 B + 524,288 recurrent values × 4 B (fp32)) " \
           "= 61.41 MiB per sequence, whatever S" in text


def test_cheapest_names_the_speed_model_its_tokens_per_second_come_from(kvplan_home):
    # tok/s/req and --min-tokens-per-second are 1 / the calibrated decode step (README, `cheapest`), so the
    # coefficient set and its held-out band are printed, as fit, sweep and simulate print them; --json carries them.
    r = run("cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "-g", "h100", "--gpu-counts", "1", "--json")
    assert r.exit_code == 0, r.output
    assert any(x.startswith("step times: calibrated") and "held-out TPOT" in x for x in r.stderr.splitlines())
    doc = json.loads(r.stdout)
    assert doc["decode_speed_model"].startswith("calibrated") and doc["decode_speed_band"]["tpot"]["n"] > 0
    helptext = run("cheapest", "--help", env={"COLUMNS": "200"}).stdout
    assert "(roofline)" not in helptext and "calibrated decode step" in helptext


@pytest.mark.parametrize("model, kind", [("deepseek-v3", "mla"), ("qwen3-next-80b-a3b-thinking", "state")])
def test_gpus_search_says_why_every_layout_was_refused(kvplan_home, model, kind):
    # 8 divides both models' heads (128; 16), so "tp must divide the attention heads" was never the cause: --lora
    # is refused on MLA and recurrent layers (README, LoRA adapters) on every layout, as --tp 8 alone says.
    r = run("fit", model, "--gpu", "h200", "--gpus", "8", "--ctx", "32k", "--lora", "4:16")
    line = r.stderr.strip().splitlines()[-1]  # after "model: ... from the catalog" on stderr
    assert r.exit_code == 2 and "Traceback" not in r.output and line.startswith("Error: ")
    assert f"this model has {kind} layers" in line and "attention heads" not in line
    with pytest.raises(KvplanError, match=f"this model has {kind} layers"):  # the API's search alike
        plan(model, "h200", gpus=8, context=32768, lora="4:16")


def test_validate_table_keeps_each_figure_whole_at_80_columns():
    # `validate` on CPU printed "-" and "90.05%" on two lines (and "16,777,216" / "B"): a figure cut in two,
    # its sign lost to a reader of the second line. Only the label column may wrap.
    from types import SimpleNamespace

    from rich.console import Console

    from kvplan.cli.validate import _render

    record = {"model": "llama-3.2-1b-instruct", "layers": 4, "layers_total": 16, "batch": 2, "ctx": 1024,
              "prompt_tokens": 1016, "decode_steps": 8, "kv_dtype": "bf16", "device_name": "a CPU",
              "torch_version": "2", "measured_kv_bytes": 2**24, "predicted_kv_bytes_paged16": 2**24,
              "tokens_match": True, "seed": 0, "ok": True}
    checks = [SimpleNamespace(name="weights_planner_spec", predicted=2_023_819_264, measured=201_400_320,
                              error=201_400_320 / 2_023_819_264 - 1, tolerance=0.0, enforced=False, ok=True),
              SimpleNamespace(name="kv_cache_after_decode", predicted=2**24, measured=2**24, error=0.0, tolerance=0.0,
                              enforced=True, ok=True)]
    console = Console(width=80, record=True, force_terminal=False)
    _render(console, record, checks)
    text = console.export_text()
    assert "│ 2,023,819,264 B │ 201,400,320 B │ -90.05% │" in text  # 201,400,320 / 2,023,819,264 - 1 = -0.9005
    assert "16,777,216 B │  16,777,216 B │" in text and max(map(len, text.splitlines())) <= 80


def test_explain_lines_add_up_where_sglang_pools_the_states(kvplan_home):
    # SGLang keeps Qwen3-Next's Gated DeltaNet states as slots of its MambaPool: conv states bf16, recurrent fp32
    # (mamba_ssm_dtype), and a running request holds 3 slots under 0.5.23's radix cache (its own + the 2 of
    # Req.mamba_ping_pong_track_buffer, managers/schedule_batch.py). --explain used to print one slot in bf16
    # ("36 layers x 274,432 state values x 2 B = 18.84 MiB") beside a one-sequence total that held three in fp32.
    # Per tp-2 rank (Qwen3-Next config.json: 16 key heads, 32 value heads, head dims 128, conv kernel 4):
    # conv (2 x 16 x 128 + 32 x 128) x 3 / 2 = 12,288 values, recurrent 32 x 128 x 128 / 2 = 262,144 values;
    # 36 x (12,288 x 2 + 262,144 x 4) = 38,633,472 B a slot, x 3 = 115,900,416 B; tokens: 12 full layers x 2 x 256
    # x 1 KV head x 2 B = 12,288 B x 32,768 = 402,653,184 B; one sequence 518,553,600 B.
    r = run("fit", "qwen3-next-80b-a3b-thinking", "--gpu", "h200", "--tp", "2", "--ctx", "32k", "--engine", "sglang",
            "--engine-version", "0.5.23", "--explain")
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())  # --explain's lines wrap at 80 columns (test_audit_round2)
    assert "36 gated_deltanet layers: states in the engine's state pool" in out
    assert "state slots a running request holds, as the engine sizes them (its slot count and state dtypes): " \
           "115,900,416 B (110.53 MiB)" in out
    assert "One sequence of 32,768 tokens: 518,553,600 B (0.48 GiB) per GPU" in out
    assert "18.84 MiB" not in out


def test_check_bench_says_a_burst_is_every_request_at_once_not_inf_req_per_s(kvplan_home):
    # trtllm-bench's report sends its 3,000 requests at once (request rate "inf" in --json, as vLLM spells it):
    # the table's load line read "inf req/s".
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "bench" / "trtllm-bench-llama31-8b-fp8.txt"
    r = run("check-bench", fixture, "--gpu", "h100", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "in 128 / out 128 tokens · 3,000 requests at once" in r.stdout and "inf req/s" not in r.stdout


def test_gpus_search_table_labels_its_speed_as_the_roofline_bound(kvplan_home):
    # The layouts table's "tok/s" was the roofline's bound (694 for llama-3.1-8b at tp 4 on H100: 1 / 1.44 ms),
    # printed unlabelled above a plan whose calibrated figure is 3.6x lower; the column and footnote now say so.
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--gpus", "4", "--ctx", "32k", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    head = r.stdout.split("Memory per GPU")[0]
    assert "tok/s ≤" in head and "the roofline's bound" in " ".join(head.split())
    plan = json.loads(run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "4", "--ctx", "32k", "--json").stdout)
    row = next(x for x in head.splitlines() if x.startswith("1 │ tp 4 "))
    assert f"{plan['decode_tokens_per_second']:,.0f}" in row  # the roofline's, not the calibrated figure
    assert f"{plan['decode_tokens_per_second_calibrated']:,.0f}" not in row


def test_gpus_table_says_its_memory_is_the_usable_gib(kvplan_home):
    # "a10 … NVIDIA A10 24GB … 22.0" under a bare "GiB": the usable memory torch reports (21.99 GiB, QwenLM/Qwen3
    # issue 1387: 23,610,785,792 B / 2^30), not the marketed 24 GB; the table now says what each column is.
    out = run("gpus", env={"COLUMNS": "80"}).stdout
    said = " ".join(out.split("━")[0].split())
    assert "GiB: usable memory (2^30 B" in said and "TB/s: memory bandwidth (10^12 B/s)" in said
    a10 = next(x for x in out.splitlines() if x.startswith("a10 "))
    assert "│  21.99 │" in a10  # to 2 decimals, as fit says usable memory


@pytest.mark.parametrize("lengths", [("--isl", "2k"), ("--osl", "256"), ("--isl", "2k", "--osl", "256")])
def test_disagg_refuses_isl_osl_beside_a_workload(kvplan_home, lengths):
    # With --workload the simulated requests keep the workload's own lengths (the chat workload's prompts are not
    # 2,048 tokens), while --isl/--osl used to replace only the means the pools are timed at, labelled "(means)":
    # two different lengths in one answer. The combination is refused (usage error, exit 2), naming both flags.
    r = run("disagg", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "2", *lengths)
    one_line_error(r, 2, "--isl / --osl with a workload or trace")


def test_a_coefficient_set_with_no_held_out_figure_says_its_error_is_unmeasured(monkeypatch):
    # check-bench on a trtllm-bench 0.17.0 report prices it with TensorRT-LLM's before-1.0 set. Until the fortieth
    # round every source of that set fell on the training side of the split, so bands.json had no held-out figure for
    # it and the step-time line no band to print; since then the 0.14 perf overview (held out) measures it. Its
    # bands are taken away here, as a set with no held-out source has none: a note says the error is unmeasured
    # (it used to say nothing). vLLM's set keeps its bands.
    from pathlib import Path

    import kvplan.speed.coverage as coverage
    from kvplan.cli.speed_flags import speed_notes

    real = coverage.band
    monkeypatch.setattr(coverage, "band", lambda key, m: None if key == "trtllm<1.0" else real(key, m))
    fix = Path(__file__).parent / "fixtures" / "bench" / "trtllm-bench-llama31-8b-fp8.txt"
    r = run("check-bench", fix, "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.output
    (bench,) = json.loads(r.stdout)["runs"]
    note = "no held-out source prices trtllm<1.0's coefficients: their error is unmeasured"
    assert any(note in a for a in bench["assumed"]) or note in r.stderr, (bench["assumed"], r.stderr)
    assert not any("unmeasured" in line for line in speed_notes("calibrated", "vllm", "h100", "llama"))
