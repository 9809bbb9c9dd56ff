"""Issue 25 (hardening, round 3): a regression test per item, each from the issue's own case on real
fixtures (bundled catalog, tests/fixtures/logs, ../shared/configs). Item 1 is tests/test_tables_80.py."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import one_line_error, shared_config
from kvplan.cli import app

LOGS = Path(__file__).parent / "fixtures" / "logs"
runner = CliRunner()


# --- item 2: check-log reads the deployment from the log and says every assumption -------------------------

def test_check_log_sglang_4xl4_infers_tp_and_says_its_assumptions():
    # SGLang 0.4.3 on 4x L4, QwQ-32B (Qwen2.5-32B geometry): only TP0 lines in the log, "mem usage=15.54 GB".
    # Weights 32.76e9 params x 2 B = 61.03 GiB whole; / 4 = 15.26 GiB, within 2 % of 15.54 (tp 1, 2, 8 are not).
    r = runner.invoke(app, ["check-log", str(LOGS / "sglang_qwq32b_4xl4.log"), "--model", "qwen2.5-32b", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    weights = next(row for row in doc["rows"] if row["quantity"].startswith("weights per GPU"))
    assert weights["ok"] and abs(weights["error"]) < 0.02  # was "+292.71% differs" at tp 1
    notes = "\n".join(doc["notes"])
    assert "tp 4 inferred" in notes and "pass --tp" in notes
    assert "does not print its SGLang version" in notes and "--engine-version" in notes
    assert "no --gpu" in notes  # the budget rows' absence is said


def test_check_log_rank_tags_give_tp():
    from kvplan.engines.logparse import parse_log

    text = (LOGS / "sglang_qwq32b_4xl4.log").read_text()
    assert parse_log(text).tp is None  # TP0 alone says nothing
    tagged = text + "".join(f"[2025-03-08 12:29:21 TP{i}] Load weight end.\n" for i in (1, 2, 3))
    rec = parse_log(tagged)
    assert rec.tp == 4 and rec.read["tp"] == "lines tagged TP0..TP3"


# --- item 15: a sweep's size said up front, capped, and refused under a memory limit ------------------------

ISSUE_SWEEP = ["sweep", "-m", "all", "-g", "all", "-c", ",".join(str(1024 * i) for i in range(1, 1025)),
               "--kv-dtype", "auto,fp8", "--gpu-counts", "1,2,4,8,16,32,64"]


def _limited(args, limit=8 * 2**30):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    env = {**os.environ, "KVPLAN_HOME": "/nonexistent-kvplan-home"}
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=cap, env=env)


def test_the_issues_sweep_is_refused_up_front_under_8_gb():
    out = _limited(ISSUE_SWEEP)
    assert out.returncode == 2, out.stderr
    err = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "--max-plans" in err[0] and "plans are more than 1,000,000" in err[0], err
    plans = int(err[0].split("Error: ")[1].split(" plans")[0].replace(",", ""))
    assert plans > 30_000_000  # the issue's ~37 million: every catalog model x 34 GPUs x 7 counts x 1,024 x 2


def test_no_cap_still_refused_by_the_memory_limit():
    out = _limited([*ISSUE_SWEEP, "--max-plans", "0"])
    assert out.returncode == 2 and "GiB this process may use" in out.stderr, out.stderr


def test_a_small_sweep_says_its_size_first(kvplan_home):
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "h100", "-c", "8k", "--gpu-counts", "1"])
    assert r.exit_code == 0, r.output
    assert "sweep: 1 plan to make; about 0 s" in r.stderr.splitlines()[1]
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "h100,l40s", "-c", "8k", "--gpu-counts", "1",
                            "--max-plans", "1"])
    assert r.exit_code == 2 and r.stderr.splitlines()[-1].endswith("pass --max-plans 2 to go on"), r.output


# --- item 13: every time and rate bounded to what a float carries ------------------------------------------

TRACES = Path(__file__).parent / "fixtures" / "traces"


@pytest.mark.parametrize("args,needle", [
    (["--step-overhead", "1e308"], "--step-overhead must be between 0 and 1000 seconds"),  # was NaN: internal error
    (["--qps", "1e-300"], "--qps must be between 1e-06 and 1e+06"),  # was an overflow
    (["--trace", str(TRACES / "mooncake_conversation_400.jsonl"), "--qps", "5e-324"], "--qps must be between"),
])
def test_simulate_times_are_bounded(args, needle, kvplan_home):
    env = {**os.environ, "KVPLAN_HOME": str(kvplan_home)}
    out = subprocess.run([sys.executable, "-m", "kvplan", "simulate", "llama-3.1-8b", "--gpu", "h100", *args],
                         capture_output=True, text=True, timeout=60, env=env)  # the trace case never ended
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith(f"Error: {needle}"), out.stderr


def test_a_trace_stretched_past_the_clock_is_refused():
    from kvplan.core.errors import KvplanError
    from kvplan.simulator.session import shape_trace
    from kvplan.simulator.workload import SimRequest

    reqs = [SimRequest(i, 5e-324 * i, 100, 10) for i in range(3)]  # a span of 1e-323 s
    with pytest.raises(KvplanError, match="float clock"):
        shape_trace(reqs, qps=1e-6, duration=None)  # 1e-6 x 1e-323 is 0: the factor 2 / 0 was a crash or NaN


# --- item 12: a model folder whose name is not UTF-8, written to every output --------------------------------

EXTRA = Path(__file__).resolve().parents[1] / "scripts" / "catalog_extra"


@pytest.mark.parametrize("ext", ["csv", "json", "html"])
def test_non_utf8_folder_name_into_every_output(ext, tmp_path, kvplan_home):
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/m\xff\xfe"))
    folder.mkdir()
    (folder / "config.json").write_text((EXTRA / "Qwen__Qwen3.5-27B.json").read_text())
    out = tmp_path / f"x.{ext}"
    r = runner.invoke(app, ["sweep", "-m", str(folder), "-g", "h100", "-c", "8k", "--gpu-counts", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output  # was: internal error: UnicodeEncodeError
    text = out.read_bytes().decode("utf-8")  # valid UTF-8, the bytes shown as \xNN as the terminal shows them
    if ext == "json":
        assert json.loads(text)["plans"][0]["model"] == "m\\xff\\xfe"
    else:
        assert "m\\xff\\xfe" in text


# --- item 14: GLM-4.5 with a per-layer hybrid_override_pattern and its MTP layer ----------------------------

def test_glm45_pattern_and_mtp_layer_plan(tmp_path, kvplan_home):
    cfg = shared_config("zai-org__GLM-4.5")
    assert cfg["num_hidden_layers"] == 92 and cfg["num_nextn_predict_layers"] == 1
    cfg["hybrid_override_pattern"] = "*" * 92  # 92 entries; the MTP reader counts 92 + 1 layers
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "8k", "--json"])
    assert r.exit_code in (0, 6), r.output  # was: internal error: IndexError in count_params
    assert json.loads(r.stdout)


# --- item 11: check-log applies the engine's layer checks ---------------------------------------------------

@pytest.mark.parametrize("model,needle", [
    ("falcon-h1-0.5b-instruct", "attention and a Mamba state side by side"),  # was: AttributeError head_dim
    ("deepseek-v3.2", "indexer key cache"),  # was planned silently
])
def test_check_log_llamacpp_refuses_what_fit_refuses(model, needle, kvplan_home):
    log = str(LOGS / "llamacpp_command_r_f16.log")
    fit = runner.invoke(app, ["fit", model, "--engine", "llama.cpp", "--gpu", "h100", "--ctx", "8k"])
    check = runner.invoke(app, ["check-log", log, "--model", model])
    errors = [[line for line in r.stderr.splitlines() if line.startswith("Error: ")] for r in (fit, check)]
    assert fit.exit_code == check.exit_code == 2 and errors[0] == errors[1] and needle in errors[0][0], errors
    assert "Traceback" not in check.output


# --- item 9: accepted when it should be refused ------------------------------------------------------------

def test_heads_not_a_multiple_of_kv_heads_is_refused(tmp_path, kvplan_home):
    cfg = json.loads((EXTRA / "Qwen__Qwen3.5-27B.json").read_text())
    text = cfg.get("text_config", cfg)
    text["num_attention_heads"], text["num_key_value_heads"] = 32, 7  # the issue's 32 and 7
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    one_line_error(runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "8k"]), 2,
                   "num_attention_heads (32) is not a multiple of num_key_value_heads (7)")


@pytest.mark.parametrize("engine,sizes", [([], "1, 2, 4, 8, 16"), (["--engine", "vllm"], "1, 8, 16, 32, 64, 128, 256")])
def test_block_size_7_is_refused(engine, sizes, kvplan_home):
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--block-size", "7", *engine])
    assert sizes in one_line_error(r, 2, "--block-size 7")
    assert runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--block-size", "32", *engine]).exit_code == 0


def test_importing_a_bundled_name_needs_force(kvplan_home):
    r = runner.invoke(app, ["models", "import", "llama-3.1-8b"])
    assert r.exit_code == 2 and "--force" in r.stderr and not (kvplan_home / "models").exists(), r.output
    r = runner.invoke(app, ["models", "import", "llama-3.1-8b", "--force"])
    assert r.exit_code == 0 and (kvplan_home / "models" / "llama-3.1-8b.json").is_file()


# --- item 8: small things a reader trips on -----------------------------------------------------------------

def test_no_decode_speed_for_a_plan_that_does_not_fit(kvplan_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    # Llama-3.1-8B on one L4 at 64k: 24 GB cannot hold 16 GB of weights and 8 GiB of KV; at 8k it fits
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "l4", "--ctx", "64k"])
    fits = next(line for line in r.stdout.splitlines() if line.strip().startswith("fits"))
    assert fits.split("│")[1].strip().startswith("no")  # the asked context does not fit (the second: 2 GPUs)
    speed = next(line for line in r.stdout.splitlines() if "decode tokens/s" in line)
    assert speed.split("│")[1].strip() == "–"
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "l4", "-c", "32k,8k,8k", "--gpu-counts", "1"])
    rows = [line for line in r.stdout.splitlines() if line.startswith("llama-3.1-8b")]
    assert len(rows) == 2  # 32k,8k,8k: 8k once
    assert [row.split("│")[-1].strip() == "–" for row in rows] == [False, True]  # 8k fits, 32k does not


def test_counts_are_singular_for_one(kvplan_home):
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "h100", "-c", "8k", "--gpu-counts", "1"])
    assert "1 plan (1 fit)" in r.stderr and "Best 1 of 1 plan" in r.stdout and "1 plans" not in r.output


def test_usage_names_the_argument_plainly():
    r = runner.invoke(app, ["fit", "--help"], env={"COLUMNS": "80"})
    assert "[OPTIONS] MODEL" in r.stdout and "{model}" not in r.stdout.lower()


def test_simulate_html_metadata_has_units(tmp_path, kvplan_home):
    out = tmp_path / "s.html"
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "5", "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "kv_pool_bytes_per_gpu" not in html and "KV pool per GPU: " in html and " GiB (" in html


# --- item 5: cheapest --workload says "not simulated", not "failing" ----------------------------------------

def test_cheapest_workload_counts_never_simulated_are_not_failing(kvplan_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = runner.invoke(app, ["cheapest", "llama-3.1-8b", "--workload", "chat", "--qps", "5", "--duration", "20",
                            "--gpu", "h100,l4"])
    assert r.exit_code == 0, r.output
    failing = [line for line in r.stdout.splitlines() if "│" in line and not line.split("│")[0].strip().isdigit()]
    assert not any(line.startswith("h100") for line in failing)  # 1 H100 serves it: 2..64 were never failing
    assert "Not simulated (fewer GPUs of the type already serve the workload): h100-sxm 2, 4, 8, 16, 32, 64 GPUs" \
        in r.stdout


# --- item 7: a KV budget larger than the GPU; --find-rate's headline next to the throughput ---------------

def test_kv_budget_past_the_gpu_holds_no_context(kvplan_home):
    # L4: 22.03 GiB usable; 100 GiB of KV beside 14.96 GiB of weights cannot start: no context, no request
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "l4", "--ctx", "8k", "--kv-cache-memory", "100GiB",
                            "--json"])
    plan = json.loads(r.stdout)["plans"][0]
    assert (plan["fits"], plan["max_concurrency"], plan["max_context"]) == (False, 0, 0)
    assert plan["max_context_limited_by"] == "memory"  # was 131,072 "(model limit)" beside fits: false


def test_find_rate_says_offered_rate_and_drain(kvplan_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    # 30: no steady state
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--find-rate", "--duration", "60"])
    assert r.exit_code == 0, r.output
    assert "req/s offered (the throughput below counts completions over the whole run" in r.stderr
    throughput = next(line for line in r.stdout.splitlines() if line.startswith("throughput"))
    assert "then the queue drains" in throughput


# --- item 6: the HTML memory chart marks what does not fit; "free" is not two things -------------------------

def test_html_memory_chart_marks_non_fitting_and_keeps_its_scale(tmp_path, kvplan_home):
    out = tmp_path / "d.html"
    r = runner.invoke(app, ["sweep", "-m", "deepseek-v3,llama-3.1-8b", "-g", "h100", "-c", "8k", "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    # DeepSeek-V3 on 1-4 H100s: 625 GiB of weights on 1 GPU (671e9 params, fp8) cannot fit: marked
    assert "h100-sxm ×1 · KV bf16 ✗ does not fit" in html and "h100-sxm ×1 · KV bf16\"" in html  # llama fits
    # the axis ends 10 % past the H100's 79.2 GiB usable, not at the ~625 GiB bar
    assert '"range":[0,87.1]' in html
    assert '"name":"free"' not in html and '"name":"outside the budget"' in html


# --- item 10: the transformers path decided before importing it, and said ----------------------------------

def test_unknown_model_type_refused_without_importing_torch(tmp_path):
    # MiniMax-M2.7's real config with a model_type nobody has (as the fuzzer mutates it): refused from the
    # config and transformers' mapping files alone; neither torch nor transformers is imported (was 5.7 s)
    cfg = json.loads((EXTRA / "MiniMaxAI__MiniMax-M2.7.json").read_text())
    cfg["model_type"] = "minimax_m9"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code = ("import sys, json\nfrom kvplan.core.errors import KvplanError\nfrom kvplan.readers.configs import "
            f"spec_from_config\ntry:\n    spec_from_config(json.load(open({str(tmp_path / 'config.json')!r})), 'x')\n"
            "except KvplanError as e:\n    print(e.message)\n"
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert "has no class for it either" in lines[0], out.stdout + out.stderr
    assert lines[-1] == "False False"


def test_derived_layout_is_said_and_quiet(tmp_path, kvplan_home):
    pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text((EXTRA / "MiniMaxAI__MiniMax-M2.7.json").read_text())  # minimax_m2
    r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "8k", "--gpus", "8", "--json"])
    assert r.exit_code in (0, 6), r.output
    assert "derived from transformers' MiniMaxM2ForCausalLM built on the meta device (torch and transformers" \
        in r.stderr
    assert "deprecated" not in r.stderr  # transformers' own chatter stays out


# --- the fuzzer's --offload target: what it found ----------------------------------------------------------

def test_a_400_digit_offload_size_is_one_line(kvplan_home):
    # fuzz case 44 (seed 0) of tests/test_fuzz.py's offload target: float() of 400 digits is inf
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "2", "--qps", "2",
                            "--offload", "disk:" + "9" * 400, "--host", "dgx-h100", "--offload-backend", "lmcache"])
    assert "is absurd (more than an exbibyte)" in one_line_error(r, 2)


def test_a_byte_count_past_2_53_stays_exact():
    # 2**60 - 1 = 1,152,921,504,606,846,975 bytes has no float: float() gives 2**60 exactly. Bytes are integers
    # inside, so a whole number is parsed as one (and 2**60 + 1 is past the exbibyte bound, refused).
    from kvplan.core.errors import KvplanError
    from kvplan.core.units import parse_bytes

    assert parse_bytes("1152921504606846975") == 2**60 - 1
    assert parse_bytes("3GiB") == 3 * 2**30 and parse_bytes("1.5GiB") == 3 * 2**29
    with pytest.raises(KvplanError, match="absurd"):
        parse_bytes("1152921504606846977")


def test_sweep_rows_stream_to_files_as_the_lists_did(kvplan_home):
    import io

    from kvplan.report.export import json_document, sweep_rows, write_csv, write_json_document
    import kvplan

    result = kvplan.sweep(["llama-3.1-8b"], gpu=["h100", "l40s"], context=["8k", "32k"], gpu_counts=[1, 2])
    rows = sweep_rows(result)
    streamed = io.StringIO()
    write_json_document({"n": len(rows)}, (r for r in rows), streamed)
    # json_document is write_json_document's text: check the document itself, one compact row per line
    text = streamed.getvalue()
    assert json.loads(text) == {"n": len(rows), "plans": json.loads(json.dumps(rows))} and len(rows) == 8
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    assert text.splitlines()[3:-2] == [line + "," for line in lines[:-1]] + lines[-1:]
    assert (json_document({}, []) == '{"plans": []\n}\n'
            and json.loads(json_document({"n": 0}, [])) == {"n": 0, "plans": []})
    streamed, listed = io.StringIO(), io.StringIO()
    write_csv(iter(rows), streamed)
    write_csv(rows, listed)
    assert streamed.getvalue() == listed.getvalue() and streamed.getvalue().count("\r\n") == len(rows) + 1


def test_an_overloaded_open_loop_says_so_and_a_kept_up_one_not():
    from kvplan.report.simulation import _overload
    # 12,000 requests arriving over 60 s = 200 req/s; 6 req/s served, the run ends at 2,000 s: 1,940 s of draining
    # (97% of the run, past the quarter) and 6 < 0.9 x 200: overloaded
    over = {"time": {"last_arrival_s": 60.0, "makespan_s": 2000.0}, "requests": {"arrived": 12000},
            "throughput": {"requests_per_s": 6.0}}
    assert _overload(over) == [("load", "overloaded: 200.00 req/s arrived, 6.00 req/s served; the queue grows "
                                        "while arrivals last")]
    # 1,200 requests over 60 s = 20 req/s, served 19.5 req/s over 61.5 s: the last requests' own latency, not a queue
    kept = {"time": {"last_arrival_s": 60.0, "makespan_s": 61.5}, "requests": {"arrived": 1200},
            "throughput": {"requests_per_s": 19.5}}
    assert _overload(kept) == []


def test_a_derived_moe_model_counts_its_moe_layers():
    # MiniMax-M2.x's decoder layer always holds a routed-expert block (transformers' MiniMaxM2DecoderLayer has
    # `mlp = MiniMaxM2SparseMoeBlock(config)` in every layer, no dense layers), and its config says
    # num_hidden_layers 62: all 62 are MoE. The catalog entry said 0 before derive counted them, so
    # vLLM's fused_moe buffers, expert-parallel traffic and the pipeline stages' mix saw a dense model.
    pytest.importorskip("transformers")
    from kvplan.readers.configs import spec_from_config

    cfg = json.loads((EXTRA / "MiniMaxAI__MiniMax-M2.7.json").read_text())
    spec, _ = spec_from_config(cfg, "MiniMax-M2.7")
    assert cfg["num_hidden_layers"] == 62 and spec.params.num_moe_layers == 62
    assert spec.params.num_experts == 256 and spec.params.experts_per_token == 8


def test_the_catalogued_minimax_entries_count_62_moe_layers():
    # the bundled entries built by scripts/build_catalog.py through the same derivation (no transformers needed)
    from kvplan.sources.catalog import find_in_catalog

    for name in ("minimax-m2.5", "minimax-m2.7"):
        assert find_in_catalog(name).params.num_moe_layers == 62
