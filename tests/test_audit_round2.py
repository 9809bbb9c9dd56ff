"""What a second new-user audit of the CLI found wrong: each a refusal of an answer that did not hold, a unit or
label that misled, or a figure printed in a form nobody can read."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def last_error(r, code: int, needle: str) -> str:
    """A refusal after notes on stderr: exit `code`, the last stderr line one `Error:` line, no traceback."""
    assert r.exit_code == code, (r.exit_code, r.output)
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: ") and needle in line and "Traceback" not in r.output, r.stderr
    return line


def test_find_rate_refuses_a_run_too_short_for_a_steady_state(kvplan_home):
    # The chat workload's outputs keep a request on an 8B model for seconds (its mean output is hundreds of tokens
    # at tens of ms a token): 5 s of arrivals end before the deployment fills, so any rate whose burst fits the
    # 256 running slots "met" the SLA (41.5 req/s here, where 300 s of arrivals find about 11). Refused: exit 2.
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--find-rate", "--duration", "5")
    line = last_error(r, 2, "no steady state")
    assert "a longer --duration" in line and "s of arrivals" in line


def test_find_rate_refuses_a_trace_that_is_one_burst(kvplan_home, tmp_path):
    # 40 requests of 900+ prompt tokens and 20 output tokens, rescaled to the rate tried: every rate up to the
    # search's ceiling (1 x 2^19 req/s) "met" the SLA, and 524,288 req/s was printed as the answer.
    rows = "".join(json.dumps({"timestamp": i * 200, "input_length": 900 + i, "output_length": 20}) + "\n"
                   for i in range(40))
    (tmp_path / "t.jsonl").write_text(rows)
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", tmp_path / "t.jsonl", "--find-rate")
    line = last_error(r, 2, "no steady state")
    assert "more of the trace's requests" in line and "e+0" not in line  # 524,288, not 5.24e+05


@pytest.mark.parametrize("version", ["0.5.0", "0.11.0", "0.33.0"])
@pytest.mark.parametrize("dtype", ["int8", "fp32"])
def test_vllm_refuses_a_cache_dtype_no_release_takes(kvplan_home, version, dtype):
    # vLLM's --kv-cache-dtype: argparse choices auto, fp8, fp8_e5m2, fp8_e4m3 to 0.8 (vllm 0.8.0 wheel,
    # engine/arg_utils.py L369); then CacheDType (config/cache.py), with neither "int8" nor "float32" up to main
    # (vllm-project/vllm@002f10e0:vllm/config/cache.py L38-57; vllm-project/vllm#33495 adding "int8" is unmerged).
    # kvplan planned both and emitted `--kv-cache-dtype int8`, which vLLM refuses at start-up. Llama-3.1-8B is bf16.
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--engine-version", version,
            "--kv-dtype", dtype)
    line = last_error(r, 2, f"vLLM has no {dtype} KV cache in any release")
    assert "--kv-dtype auto, bf16, fp16 or fp8" in line


def test_vllm_still_takes_fp8_and_the_other_16_bit_dtype(kvplan_home):
    for dtype in ("fp8", "fp16"):
        r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--kv-dtype", dtype,
                "--json")
        assert r.exit_code == 0, r.output


def test_sweep_keeps_the_plans_of_a_kv_dtype_the_engine_takes(kvplan_home):
    # 1 GPU type x 4 GPU counts (1, 2, 4, 8) x 2 KV dtypes = 8 plans. vLLM has no int8 cache, so its 4 plans are
    # skipped; the 4 fp8 plans used to be skipped with them (the grid of both dtypes refused as one).
    r = run("sweep", "-m", "llama-3.1-8b", "-g", "h100", "-c", "8k", "--kv-dtype", "fp8,int8", "--engine", "vllm",
            "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    plans = doc["plans"] if isinstance(doc, dict) else doc
    assert sorted(p["gpus"] for p in plans) == [1, 2, 4, 8] and {p["kv_dtype"] for p in plans} == {"fp8"}


def test_a_signed_figure_that_rounds_to_zero_has_no_sign():
    from kvplan.core.units import signed

    assert signed(-0.4) == "0" and signed(0.4) == "0" and signed(-0.6) == "-1" and signed(12.2) == "+12"
    assert signed(-0.00004, "+.2%") == "0.00%" and signed(0.003, "+.2f") == "0.00" and signed(-0.3, "+.2f") == "-0.30"
    assert signed(-1234.4, "+,.0f") == "-1,234"


def test_check_bench_prints_no_minus_zero_percent(kvplan_home, tmp_path):
    # vLLM's benchmark of Llama-3.2-3B on an L40S at 10 req/s, its measured throughputs set 0.2% above what kvplan
    # predicts for them (so the error cells would read "-0%"). A figure that rounds to zero carries no sign.
    from pathlib import Path

    original = Path(__file__).parent / "fixtures" / "bench" / "vllm-l40s-llama32-3b-10qps.json"
    (first,) = json.loads(run("check-bench", original, "--json").stdout)["runs"]
    predicted = {(x["metric"], x["stat"]): x["predicted"] for x in first["rows"]}
    doc = json.loads(original.read_text())
    for key, metric in (("request_throughput", "request_throughput"), ("output_throughput", "output_throughput"),
                        ("total_token_throughput", "total_throughput")):
        doc[key] = predicted[(metric, "mean")] * 1.002
    fixture = tmp_path / original.name
    fixture.write_text(json.dumps(doc))
    r = run("check-bench", fixture, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "-0%" not in r.stdout and "+0%" not in r.stdout
    (bench,) = json.loads(run("check-bench", fixture, "--json").stdout)["runs"]
    small = [x for x in bench["rows"] if x["error_pct"] is not None and abs(x["error_pct"]) < 0.5]
    assert small, "the fixture's throughputs are expected within 0.5%"
    assert sum(line.count("│    0% │") for line in r.stdout.splitlines()) >= len(small)


def test_a_kv_budget_past_the_gpu_stands_beside_what_else_the_gpu_holds(kvplan_home):
    # --kv-cache-memory 99999GiB on an H100 (79.18 GiB usable): the memory table read "usable memory 79.18 GiB,
    # KV cache 99,999.00 GiB, = free 99,998.00 GiB" with no word of the weights, and the warning's sum had no
    # separators. Now the weights and overhead stand beside the budget: 99,999 + 14.96 + 1.18 = 100,015.14 GiB.
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--kv-cache-memory", "99999GiB",
            env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    rows = {x.split("│")[0].strip(): x.split("│")[1].strip() for x in r.stdout.splitlines() if "│" in x}
    assert rows["− weights"] == "14.96 GiB" and rows["KV cache (--kv-cache-memory)"] == "99,999.00 GiB"
    assert rows["− overhead (est.)"] == "1.18 GiB" and rows["fits"] == "no (memory)"
    assert "(100,015.14 GiB) exceed the GPU's usable memory (79.18 GiB)" in r.stderr


@pytest.mark.parametrize("engine, label", [("vllm", "Model loading took"), ("sglang", "Load weight end")])
def test_the_engine_table_keeps_a_figure_on_one_line_at_80_columns(kvplan_home, engine, label):
    # "14.99 GiB = 14.96 checkpoint + 0.03 | loading": the value column wrapped inside a figure while the label
    # beside it ("Maximum concurrency for 8,192 tokens per request") could wrap instead. Figures whole; a label too
    # long to sit beside its figure has a line of its own above it (issue 22, report.fitted.print_stacked)
    import re

    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", engine, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.lstrip().startswith(label))
    line = lines[at] if "│" in lines[at] else lines[at + 1]
    assert re.search(r"│ [\d.]+ GiB = [\d.]+ checkpoint \+ [\d.]+ loading\s*$", line), line
    assert max(map(len, r.stdout.splitlines())) <= 80


@pytest.mark.parametrize("model, args", [("gemma-3-27b", ()), ("qwen3-next-80b-a3b-thinking", ("--engine", "sglang")),
                                         ("llama-3.1-8b", ("--lora", "4:16"))])
def test_explain_lines_fit_80_columns_and_break_between_terms(kvplan_home, model, args):
    # --explain printed lines of up to 150 columns, which a terminal wraps anywhere ("131,0" | "72 B/token").
    # Each line now breaks before an operator or after a clause, continued 4 columns in; no line passes 80.
    r = run("fit", model, "--gpu", "h200", "--tp", "2", "--ctx", "32k", "--explain", *args, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    explain = r.stdout[r.stdout.index("KV cache of "):].splitlines()
    assert max(map(len, explain)) <= 80 and len(explain) > 6
    units = {"B", "B/token", "KiB", "MiB", "GiB", "ms", "tokens/s", "TB/s"}
    assert not [x for x in explain if x.startswith("    ") and x.split()[0] in units], explain  # "4.00 | GiB"
    wide = run("fit", model, "--gpu", "h200", "--tp", "2", "--ctx", "32k", "--explain", *args, env={"COLUMNS": "300"})
    tail = wide.stdout[wide.stdout.index("KV cache of "):]
    assert " ".join("\n".join(explain).split()) == " ".join(tail.split())  # broken at spaces only


def test_explain_says_one_token_not_1_tokens(kvplan_home):
    # SGLang's page of 1 token: the header read "block 1 tokens".
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--explain")
    assert r.exit_code == 0, r.output
    assert "block 1 token:" in r.stdout and "block 1 tokens" not in r.stdout


@pytest.mark.parametrize("gpu, runs", [("t4", "fp16"), ("v100", "fp16"), ("a100-80", "bf16")])
def test_a_card_without_bf16_labels_the_plan_fp16(kvplan_home, gpu, runs):
    # Llama-3.1-8B's checkpoint is bf16. Volta (V100, 7.0) and Turing (T4, 7.5) have no BF16 (from Ampere, 8.0;
    # vLLM refuses bfloat16 below 8.0): the engine runs the weights and the cache in fp16, the same 2 bytes. The
    # profiles say `bf16: false`; the header said "weights bf16 · KV bf16" on them.
    r = run("fit", "llama-3.1-8b", "--gpu", gpu, "--tp", "2", "--ctx", "4k", env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    head = r.stdout.split("Memory per GPU")[0]
    assert f"weights {runs} · KV {runs}" in head
    assert ("no bf16 on this GPU" in head) == (runs == "fp16")


def test_front_end_waits_print_no_float_residue(kvplan_home, tmp_path):
    # Requests 200 ms apart never share the front end (about 10 ms each): every request spends exactly its own
    # crossing there, which a float's residue once printed as "wait 1.64e-16 s on average, at most 1.42e-15 s" (when
    # the wait left the own crossing out)
    from kvplan.speed.model import coefficients
    from kvplan.speed.terms import TERMS
    own = f"{coefficients('vllm')[TERMS.index('ingress')] * 1e3:,.2f} ms"
    rows = "".join(json.dumps({"timestamp": i * 200, "input_length": 900 + i, "output_length": 20}) + "\n"
                   for i in range(40))
    (tmp_path / "t.jsonl").write_text(rows)
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", tmp_path / "t.jsonl")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stderr.splitlines() if x.startswith("front end:"))
    assert "e-1" not in line and f"wait {own} on average, at most {own}" in line


def test_cheapest_keeps_a_gpu_key_whole(kvplan_home):
    # The "Not meeting it" table cut keys at their hyphens ("v100-sxm2-" over "16"): a key one types is never cut.
    r = run("cheapest", "llama-3.1-70b", "--ctx", "32k", "-n", "16", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert any(x.startswith("v100-sxm2-16 ") for x in lines) and not any(x.rstrip().endswith("-") for x in lines)
    assert max(map(len, lines)) <= 80
