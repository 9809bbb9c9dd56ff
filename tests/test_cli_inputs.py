"""`kvplan fit` deployments and inputs that QA found mishandled: each a one-line error or the right plan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import one_line_error, shared_config, unwrapped
from kvplan.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_tp_must_split_the_kv_heads_evenly_or_replicate_them(kvplan_home):
    # phi-4: 40 attention heads, 10 KV heads. tp 4 divides 40 but not 10, and 10 is not a divisor of 4:
    # ranks would hold 2.5 heads, which no engine can (vLLM's QKVParallelLinear asserts against it).
    one_line_error(run("fit", "phi-4", "--gpu", "l40s", "--ctx", "16k", "--tp", "4"), 2, "10 KV heads")
    r = run("fit", "phi-4", "--gpu", "l40s", "--ctx", "16k", "--tp", "2", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["tp"] == 2
    # The smallest-fit search skips tp 4 and 8 for it: 8 GPUs become tp 2 x pp 4.
    r = run("fit", "phi-4", "--gpu", "l40s", "--ctx", "16k", "--batch", "64", "--json")
    assert all(p["tp"] in (1, 2) for p in json.loads(r.stdout)["plans"])


def test_gpus_beyond_a_node_become_pipeline_stages(kvplan_home):
    # 16 GPUs as tp 8 within a node x pp 2 (sweep's and the smallest-fit search's split); 8 KV heads stay
    # unreplicated: 80 layers x 2 x 8 heads x 128 x 2 B = 327,680 B per token over all ranks.
    r = run("fit", "llama-3.1-70b", "--gpu", "h100", "--ctx", "128k", "--tp", "8", "--pp", "2", "--json")
    p = json.loads(r.stdout)
    assert (p["tp"], p["pp"], p["kv_bytes_per_token"]) == (8, 2, 327_680)
    # --gpus 16 alone plans every layout; tensor parallelism never leaves a node of 8.
    r = run("fit", "llama-3.1-70b", "--gpu", "h100", "--ctx", "128k", "--gpus", "16", "--json")
    rows = json.loads(r.stdout)["layouts"]
    assert rows and all(x["tp"] <= 8 and x["tp"] * x["pp"] * x["dp"] == 16 for x in rows)


def test_pp_alone_and_too_many_stages(kvplan_home):
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "1k", "--pp", "2", "--json")
    assert (json.loads(r.stdout)["tp"], json.loads(r.stdout)["pp"]) == (1, 2)
    one_line_error(run("fit", "llama-3.1-8b", "--gpu", "h100", "--pp", "33"), 2, "exceeds the 32 layers")


def test_a_kv_budget_larger_than_the_gpu_does_not_fit(kvplan_home):
    # 200 GiB of KV beside 15 GiB of weights on an 79.18 GiB H100 cannot be allocated.
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "1k", "--gpus", "1", "--kv-cache-memory", "200GiB",
            "--json")
    p = json.loads(r.stdout)
    assert p["fits"] is False and any("exceed the GPU's usable memory" in w for w in p["warnings"])


@pytest.mark.parametrize("text, needle", [
    ('{"hidden_size": NaN}', "NaN"),
    ('{"hidden_size": Infinity}', "Infinity"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_hostile_local_config_is_a_usage_error(kvplan_home, tmp_path, text, needle):
    (tmp_path / "config.json").write_text(text)
    one_line_error(run("fit", tmp_path, "--gpu", "h100"), 2, needle)


@pytest.mark.parametrize("args, needle", [
    (("--batch", "10000000"), "--batch must be between 1 and 1,000,000"),
    (("--block-size", "0"), "--block-size must be between 1 and 4,096"),  # as sweep and cheapest word it
    (("--gpu-memory-utilization", ""), "--gpu-memory-utilization"),
    (("--weight-dtype", ""), "unknown weight dtype"),
])
def test_out_of_range_values_are_refused_not_defaulted(kvplan_home, args, needle):
    one_line_error(run("fit", "gpt2", "--gpu", "t4", *args), 2, needle)


def test_weight_dtype_auto_is_the_checkpoints_own(kvplan_home):
    a = json.loads(run("fit", "gpt2", "--gpu", "t4", "--gpus", "1", "--weight-dtype", "auto", "--json").stdout)
    b = json.loads(run("fit", "gpt2", "--gpu", "t4", "--gpus", "1", "--json").stdout)
    assert a["weight_bytes"] == b["weight_bytes"]


def test_parser_errors_are_one_line_too():
    """A value Typer itself rejects (not an int) is also one `Error:` line and exit 2 from the real CLI."""
    r = subprocess.run([sys.executable, "-m", "kvplan", "fit", "gpt2", "--gpu", "t4", "--batch", "abc"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "--batch" in lines[0], r.stderr


def test_emit_names_a_local_model_by_its_folder(kvplan_home, tmp_path):
    folder = tmp_path / "my model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(shared_config("meta-llama__Llama-3.1-8B-Instruct")))
    r = run("fit", folder / "config.json", "--gpu", "h100", "--ctx", "8k", "--emit", "vllm")
    assert r.exit_code == 0, r.output
    assert f"vllm serve '{folder.resolve()}' " in unwrapped(r.stdout)


def test_sizes_read_as_vllm_reads_them(kvplan_home):
    # vLLM's human_readable_int: upper-case letters binary, lower-case decimal; GiB/GB spelled out as usual.
    def kv(size):
        r = run("fit", "gpt2", "--gpu", "t4", "--gpus", "1", "--kv-cache-memory", size, "--json")
        return json.loads(r.stdout)["kv_memory_bytes_per_gpu"]

    assert kv("2G") == kv("2GiB") == 2 * 2**30
    assert kv("2g") == kv("2GB") == 2 * 10**9
    one_line_error(run("fit", "gpt2", "--gpu", "t4", "--overhead", "1.5"), 2, "must be whole")
    r = run("fit", "gpt2", "--gpu", "t4", "--gpus", "1", "--overhead", "0GiB", "--json")
    assert json.loads(r.stdout)["overhead_bytes_per_gpu"] == 0


@pytest.mark.parametrize("args,option", [
    (("cheapest", "gpt-oss-120b", "-n", "16", "-c", "8k", "--gpu", "h100-sxm", "--gpu", "a100-80"), "'--gpu'"),
    (("sweep", "-m", "llama-3.1-8b", "--models=qwen3-8b", "-g", "h100", "--ctx", "8k"), "'--models'"),
])
def test_a_list_option_given_twice_is_refused(args, option):
    """The parser would keep the last list without a word (`cheapest --gpu h100-sxm --gpu a100-80` planned the
    A100 alone); kvplan refuses a comma-separated list option given twice, one line, exit 2, as any bad value."""
    r = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and option in lines[0] and "2 times" in lines[0]


def test_a_one_value_option_given_twice_keeps_the_last_and_repeatable_ones_repeat(kvplan_home):
    # fit's --gpu takes one GPU: the last wins, as on any command line (an alias's default overridden);
    # --engine-opt repeats by design and --json is a flag
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--engine-opt", "max_num_seqs=4",
            "--engine-opt", "enforce_eager=1", "--json", "--json", "--gpu", "a100-80")
    assert r.exit_code == 0, r.output
    assert {p["gpu"] for p in json.loads(r.stdout)["plans"]} == {"a100-sxm-80"}


def test_a_gpu_list_where_one_gpu_is_planned_says_where_lists_go():
    # fit plans one GPU type; `--gpu h100,a100-80` read as one unknown name before ("did you mean: h100, a100-80")
    r = subprocess.run([sys.executable, "-m", "kvplan", "fit", "llama-3.1-8b", "--gpu", "h100,a100-80", "--ctx", "8k"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "kvplan sweep -g h100,a100-80" in lines[0]


def test_validate_without_torch_says_how_to_install_it_before_looking_the_model_up(kvplan_home, monkeypatch):
    # validate's one optional dependency missing (sys.modules[name] = None: find_spec answers None, import fails).
    # The check ran after the model was resolved, so a name not in the catalog answered 3 (not found) and a Hub id
    # waited on the network (5) before the user learnt torch was missing; now it is the first thing checked: 2, the
    # code of an invocation refused before any work (1 is validate's measured-other-than-predicted)
    monkeypatch.setitem(sys.modules, "torch", None)
    for model in ("no-such-model-x", "llama-3.1-8b"):
        one_line_error(run("validate", model, "--ctx", "1k"), 2, "pip install 'kvplan[validate]'")
