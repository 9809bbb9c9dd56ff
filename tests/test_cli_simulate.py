"""`kvplan simulate` end to end: outputs, traces in every supported layout, and bad input as one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_json_document_and_files(kvplan_home, tmp_path):
    out = [tmp_path / "s.json", tmp_path / "s.csv", tmp_path / "s.html"]
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--qps", "4", "--duration", "20", "--json",
            *[x for p in out for x in ("-o", p)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert json.loads(out[0].read_text()) == doc
    assert doc["meta"]["model"] == "llama-3.1-8b" and doc["meta"]["requests"] > 40
    s = doc["runs"]["paged"]["summary"]
    assert s["requests"]["completed"] == doc["meta"]["requests"]
    # The pool is the plan's: the same KV memory `fit` reports for one H100 at the model's limit.
    fit = json.loads(run("fit", "llama-3.1-8b", "--gpu", "h100", "--gpus", "1", "--json").stdout)
    assert s["kv"]["budget_bytes"] == fit["kv_memory_bytes_per_gpu"]
    assert out[1].read_text().startswith("run,time_s,running,waiting,kv_reserved_bytes")
    page = out[2].read_text()
    assert "Plotly" in page and 'src="http' not in page and "KV memory per GPU" in page


def test_compare_runs_four_pools_on_the_same_requests(kvplan_home):
    r = run("simulate", "qwen3-8b", "--gpu", "l40s", "--workload", "sharegpt", "--qps", "3", "--duration", "30",
            "--compare", "--max-model-len", "2048", "--json")
    assert r.exit_code == 0, r.output
    runs = json.loads(r.stdout)["runs"]
    assert list(runs) == ["paged", "contiguous-max", "contiguous-pow2", "contiguous-oracle"]
    waste = {k: v["summary"]["kv"]["waste_pct"] for k, v in runs.items()}
    assert waste["paged"] < waste["contiguous-oracle"] < waste["contiguous-pow2"] < waste["contiguous-max"]
    assert len({v["summary"]["requests"]["arrived"] for v in runs.values()}) == 1
    table = run("simulate", "qwen3-8b", "--gpu", "l40s", "--qps", "3", "--duration", "10", "--compare")
    assert table.exit_code == 0 and all(len(line) <= 80 for line in table.stdout.splitlines()), table.stdout


TRACES = {
    "kvplan.csv": "arrival,input_tokens,output_tokens,prefix_id,prefix_tokens\n"
                  "0.0,600,20,sys,512\n0.5,700,30,sys,512\n1.0,80,5,,\n",
    "kvplan.jsonl": '{"arrival": 0, "input_tokens": 600, "output_tokens": 20}\n'
                    '{"arrival": 1.5, "input_tokens": 90, "output_tokens": 9}\n',
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.0000000,879,0\n",
    "burstgpt.csv": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n"
                    "118,GPT-4,417,30,447,API log\n",
    "mooncake.jsonl": '{"timestamp": 0, "input_length": 1200, "output_length": 10, "hash_ids": [1, 2, 3]}\n'
                      '{"timestamp": 300, "input_length": 1100, "output_length": 12, "hash_ids": [1, 2, 4]}\n',
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_trace_layouts(name, kvplan_home, tmp_path):
    path = tmp_path / name
    path.write_text(TRACES[name])
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", path, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["meta"]["trace_format"] == name.split(".")[0]
    expected = {"kvplan.csv": 3, "kvplan.jsonl": 2, "azure.csv": 2, "burstgpt.csv": 2, "mooncake.jsonl": 2}[name]
    assert doc["runs"]["paged"]["summary"]["requests"]["completed"] == doc["meta"]["requests"] == expected


def test_trace_arrivals_and_shared_prefixes():
    from kvplan.simulator.traces import load_trace

    import tempfile, os  # noqa: E401
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.jsonl")
        open(p, "w").write(TRACES["mooncake.jsonl"])
        reqs, info = load_trace(p)
        # 300 ms apart; 1,200 tokens = 2 whole 512-token blocks shared at most (the third is partial).
        assert [r.arrival for r in reqs] == [0.0, 0.3]
        assert [n for _, n in reqs[0].prefix] == [512, 512] and reqs[1].prefix[:2] == reqs[0].prefix
        p = os.path.join(d, "a.csv")
        open(p, "w").write(TRACES["azure.csv"])
        reqs, info = load_trace(p)
        assert info == {"format": "azure", "requests": 2, "dropped_zero_length": 1}
        assert reqs[1].arrival == pytest.approx(4.314579)


def test_trace_rescaled_to_a_rate_and_cut_at_a_duration():
    from kvplan.simulator.session import shape_trace
    from kvplan.simulator.workload import SimRequest

    reqs = [SimRequest(i, 10.0 * i, 100, 10) for i in range(11)]  # one every 10 s: 0.1 req/s over 100 s
    fast = shape_trace(reqs, qps=2.0, duration=None)
    assert [r.arrival for r in fast][:3] == [0.0, 0.5, 1.0] and fast[-1].arrival == 5.0  # (11 - 1) / 2 req/s
    assert len(shape_trace(reqs, qps=None, duration=25.0)) == 3  # arrivals 0, 10, 20


@pytest.mark.parametrize("args,code,needle", [
    (["--qps", "0"], 2, "--qps must be between 1e-06 and 1e+06"),
    (["--duration", "nan"], 2, "--duration must be between 0.001 and 1e+07"),
    (["--mode", "static"], 2, "--mode must be paged or contiguous"),
    (["--reserve", "half"], 2, "--reserve must be one of"),
    (["--workload", "chat", "--trace", "x.csv"], 2, "not both"),
    (["--workload", "poetry"], 2, "unknown workload 'poetry'"),
    (["--trace", "missing.csv"], 3, "not found"),
    (["-o", "out.txt"], 2, "format comes from the extension"),
    (["-o", "/no/such/folder/x.json"], 2, "does not exist"),
    (["--qps", "1e6", "--duration", "1e7"], 2, "the limit is"),
    (["--qps", "1e-300"], 2, "--qps must be between"),
    (["--step-overhead", "1e308"], 2, "--step-overhead must be between 0 and 1000"),
    (["--max-num-seqs", "0"], 2, "--max-num-seqs must be between"),
])
def test_bad_input_is_one_line(args, code, needle, kvplan_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(run("simulate", "llama-3.1-8b", "--gpu", "h100", *args), code, needle)


@pytest.mark.parametrize("text,needle", [
    ("arrival,input_tokens,output_tokens\n0,abc,3\n", "line 2: input_tokens 'abc' is not a number"),
    ("arrival,input_tokens,output_tokens\n0,-5,3\n", "whole number of tokens"),
    ("arrival,input_tokens,output_tokens\ninf,5,3\n", "not finite"),
    ("when,prompt,answer\n0,5,3\n", "unrecognised trace columns"),
    ('[{"arrival": 0}]', "JSON Lines"),
    ('{"arrival": 0, "input_tokens": 5, "output_tokens": 3}\n{"arrival": [1e999\n', "line 2: not a JSON object"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,3\n", "is not like 2023-11-16"),
    ("arrival,input_tokens,output_tokens\n" + "0," * 600_000 + "\n", "longer than"),
    ("arrival,input_tokens,output_tokens,prefix_id,prefix_tokens\n0,5,3,p,9\n", "must be less than input_tokens"),
    ("arrival,input_tokens,output_tokens\n0,0,3\n", "no request with input and output tokens"),
    ('{"timestamp": 0, "input_length": 900, "output_length": 3, "hash_ids": [1, true]}\n',
     "line 1: hash_ids must hold"),
    ('{"timestamp": 0, "input_length": 900, "output_length": 3, "hash_ids": [1.5, 2]}\n', "line 1: hash_ids must hold"),
])
def test_bad_traces_are_one_line(text, needle, kvplan_home, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(text)
    one_line_error(run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", path), 2, needle)


def test_no_room_for_kv_is_one_line(kvplan_home):
    one_line_error(run("simulate", "llama-3.1-70b", "--gpu", "l4"), 2, "no memory is left for the KV cache")


def test_cheapest_serves_a_workload(kvplan_home):
    r = run("cheapest", "llama-3.1-8b", "--gpu", "l4,h100", "--workload", "code", "--qps", "4", "--duration", "30",
            "--ctx", "16k", "--slo-tpot", "0.05", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["workload"]["workload"] == "code" and data["workload"]["slo_percent"] == 99
    best = data["meets"][0]
    assert best["sim_pct_meeting_slo"] >= 99 and best["sim_rejected"] == 0 and best["why"] is None
    assert any((f["why"] or "").startswith(("misses the SLA", "not simulated", "doesn't fit")) for f in data["fails"])
    one_line_error(run("cheapest", "llama-3.1-8b", "--gpu", "h100"), 2, "give --concurrency N, or a workload")


def test_sweep_simulates_each_plan(kvplan_home, tmp_path):
    import csv

    args = ["sweep", "--models", "llama-3.1-8b", "--gpu", "h100,l4", "--ctx", "16k", "--gpu-counts", "1,2",
            "--workload", "chat", "--qps", "3", "--duration", "20"]
    r = run(*args, "--json", "-o", tmp_path / "p.csv")
    assert r.exit_code == 0, r.output
    plans = json.loads(r.stdout)["plans"]
    assert len(plans) == 4 and all(p["sim_mean_running"] is not None for p in plans)
    by = {(p["gpu"], p["gpus"]): p for p in plans}
    # Two H100s serve the same requests at least as fast per token as one L4.
    assert by[("h100-sxm", 2)]["sim_tpot_p99_s"] < by[("l4", 1)]["sim_tpot_p99_s"]
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert "sim_pct_meeting_slo" in rows[0] and len(rows) == 4
    one_line_error(run("sweep", "--models", "all", "--gpu", "all", "--ctx", "8k", "--workload", "chat"), 2,
                   "simulates every plan")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engine_sizes_the_pool(engine, kvplan_home):
    r = run("simulate", "qwen3-8b", "--gpu", "h100", "--duration", "10", "--engine", engine, "--json")
    assert r.exit_code == 0, r.output
    meta = json.loads(r.stdout)["meta"]
    fit = json.loads(run("fit", "qwen3-8b", "--gpu", "h100", "--gpus", "1", "--engine", engine, "--json").stdout)
    assert meta["kv_pool_bytes_per_gpu"] == fit["kv_memory_bytes_per_gpu"]
    assert meta["block_size"] == fit["block_size"] and meta["kv_pool_sized_by"].startswith(engine)
