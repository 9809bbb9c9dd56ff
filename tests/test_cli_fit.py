"""`kvplan fit` as users run it, through Typer's CliRunner: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

REQUIRED = {"model", "gpu", "gpus", "tp", "pp", "context", "batch", "weight_dtype", "kv_dtype", "weight_bytes",
            "weight_bytes_per_gpu", "kv_bytes_per_token", "kv_bytes_per_sequence", "kv_memory_bytes_per_gpu",
            "kv_cache_tokens", "max_concurrency", "max_context", "fits", "decode_step_seconds",
            "decode_tokens_per_second"}


def run(*args):
    return runner.invoke(app, list(args))


def test_main_job_table(kvplan_home):
    r = run("fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k")
    assert r.exit_code == 0, r.output
    assert "Memory per GPU" in r.stdout and "max concurrency" in r.stdout
    assert "llama-3-70b → llama-3.1-70b" in r.stderr


def test_main_job_json_plans(kvplan_home):
    r = run("fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"plans", "recommended"}
    one, best = out["plans"][0], out["plans"][out["recommended"]]
    assert REQUIRED <= set(one)
    # 80 x 2 x 8 x 128 x 2 B = 327,680 B/token; x 131,072 = 42,949,672,960 B (seed article)
    assert one["kv_bytes_per_token"] == 327_680 and one["kv_bytes_per_sequence"] == 42_949_672_960
    assert not one["fits"] and one["gpus"] == 1  # 141 GB of weights on an 80 GB card
    assert best["fits"] and best["gpus"] > 1


def test_explicit_deployment_is_one_object(kvplan_home):
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "2", "--ctx", "32768", "--batch", "4", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert REQUIRED <= set(out) and out["tp"] == 2 and out["gpus"] == 2 and out["batch"] == 4


def test_kv_cache_memory_flag_is_exact(kvplan_home):
    # 1 GiB / (32 x 2 x 8 x 128 x 2 B = 131,072 B/token) = 8,192 tokens; at 2048 tokens: 4 sequences
    r = run("fit", "llama-3.1-8b", "--gpu", "h100", "--gpus", "1", "--ctx", "2k", "--kv-cache-memory", "1GiB", "--json")
    out = json.loads(r.stdout)
    assert out["kv_cache_tokens"] == 8192 and out["max_concurrency"] == 4


def test_explain_prints_formula(kvplan_home):
    r = run("fit", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--ctx", "4096", "--explain")
    assert r.exit_code == 0
    assert "80 full layers × 2 × 128 × 2 KV heads × 2 B (bf16)" in r.stdout


def test_explain_names_the_cache_as_a_t4_runs_it(kvplan_home):
    # A T4 is compute capability 7.5: no BF16 math, so engines cast a bf16 checkpoint to fp16 (vLLM refuses bfloat16
    # below 8.0: vllm 0.8.0 wheel, v1/worker/gpu_worker.py L303); the header says "KV fp16" and --explain must agree.
    # Llama-3.1-8B at tp 2 (16 GB holds no 16 GB of bf16 weights): 32 layers x 2 x 128 x 4 KV heads a rank x 2 B
    # = 65,536 B/token either way.
    r = run("fit", "llama-3.1-8b", "--gpu", "t4", "--ctx", "4096", "--tp", "2", "--explain")
    assert r.exit_code == 0
    assert "32 full layers × 2 × 128 × 4 KV heads × 2 B (fp16) = 65,536 B/token" in r.stdout
    assert "(bf16)" not in r.stdout and "bf16 cache" not in r.stdout


@pytest.mark.parametrize("args, code, needle", [
    (["fit", "llama-3-70b", "--gpu", "h1000"], 3, "did you mean"),
    (["fit", "lama-3-70b", "--gpu", "h100"], 3, "did you mean"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--ctx", "0"], 2, "positive"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--ctx", "-5"], 2, "token count"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--ctx", "10G"], 2, "token count"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--ctx", "99999999999"], 2, "absurd"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--kv-dtype", "fp7"], 2, "unknown KV cache dtype"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--weight-dtype", "int3"], 2, "unknown weight dtype"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--tp", "3"], 2, "does not divide"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--batch", "0"], 2, "--batch"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--gpu-memory-utilization", "1.5"], 2, "(0, 1]"),
    (["fit", "llama-3-70b", "--gpu", "h100", "--kv-cache-memory", "lots"], 2, "not a size"),
    (["fit", "./no/such/dir", "--gpu", "h100"], 3, "no such file"),
])
def test_bad_input_one_line_and_exit_code(kvplan_home, args, code, needle):
    r = run(*args)
    assert r.exit_code == code, r.output
    assert needle in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in r.output


def test_check_flag_exits_when_it_does_not_fit(kvplan_home):
    assert run("fit", "llama-3.1-405b", "--gpu", "l4", "--gpus", "1", "--check").exit_code == 6


def test_local_folder_and_unknown_family(kvplan_home, tmp_path):
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "brand_new", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
        "num_hidden_layers": 24, "vocab_size": 32000, "intermediate_size": 8192, "max_position_embeddings": 8192}))
    r = run("fit", str(folder), "--gpu", "l40s", "--json")
    assert r.exit_code == 0, r.output
    assert "no dedicated reader" in r.stderr and "local" in r.stderr
    assert json.loads(r.stdout)["plans"][0]["kv_bytes_per_token"] == 24 * 2 * 4 * 128 * 2


def test_local_config_file_named_by_its_stem(kvplan_home, tmp_path):
    # config.json takes its folder's name; a config saved under another name (a variant beside others) its own
    cfg = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
           "num_hidden_layers": 24, "vocab_size": 32000, "intermediate_size": 8192, "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "llama-yarn.json").write_text(json.dumps(cfg))
    assert f"model: {tmp_path.name} from local" in run("fit", str(tmp_path / "config.json"), "--gpu", "l40s").stderr
    assert "model: llama-yarn from local" in run("fit", str(tmp_path / "llama-yarn.json"), "--gpu", "l40s").stderr


def test_malformed_local_config(kvplan_home, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = run("fit", str(bad), "--gpu", "h100")
    assert r.exit_code == 2 and "not valid JSON" in r.stderr


def test_gpus_and_models_list(kvplan_home):
    r = run("gpus", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)) >= 30
    r = run("models", "list", "--json")
    rows = json.loads(r.stdout)
    assert len(rows) >= 40
    dsv3 = next(x for x in rows if x["name"] == "deepseek-v3")
    assert dsv3["kv_bytes_per_token"] == 61 * 576 * 2  # MLA latent, bf16


def test_python_dash_m_entry_point():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "kvplan", "fit", "gpt2", "--gpu", "t4", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["plans"][0]["kv_bytes_per_token"] == 12 * 2 * 12 * 64 * 2


def test_fit_start_up_imports_no_heavy_package():
    """torch, plotly and huggingface_hub belong to validate, reports and the Hub; `fit` on the catalog needs none."""
    import subprocess
    import sys

    probe = ("import sys, runpy\n"
             "sys.argv = ['kvplan', 'fit', 'llama-3-70b', '--gpu', 'a100-80', '--ctx', '128k']\n"
             "try:\n    runpy.run_module('kvplan', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print('HEAVY:' + ','.join(m for m in ('torch', 'plotly', 'huggingface_hub', 'numpy', 'pydantic')"
             " if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "HEAVY:\n" in r.stderr + "\n", r.stderr


def test_the_shared_cli_module_loads_no_planning_layer():
    """kvplan.cli.main imports _common for every command (gpus, check-log, --version): the notes only sweep and
    cheapest print live in kvplan.cli.selection, so _common stays at the layers below planning (it once pulled in
    planning.plan, model.spec and report.text: 31 kvplan modules and ~100 ms more on this machine)."""
    import subprocess
    import sys

    probe = ("import sys, kvplan.cli._common\n"
             "print(','.join(m for m in ('kvplan.planning', 'kvplan.model', 'kvplan.report.text')"
             " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


# --- models import: a bundled model's name is not silently shadowed; models show reads as text ----

def _small_llama(folder):
    """A made-up Llama-architecture config (2 layers, 2 KV heads x 64): nothing like Llama 3.1 70B."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 512, "num_attention_heads": 8,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000, "intermediate_size": 1024,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))
    return folder


def _kv_per_token(name):
    r = run("fit", name, "--gpu", "h100", "--ctx", "4k", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["plans"][0]["kv_bytes_per_token"]


def test_import_refuses_to_shadow_a_bundled_name(kvplan_home, tmp_path):
    folder = _small_llama(tmp_path / "llama-3.1-70b")
    r = run("models", "import", str(folder))
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.output
    assert "'llama-3.1-70b' is taken by the bundled model llama-3.1-70b" in r.stderr and "--name" in r.stderr
    assert not (kvplan_home / "models").exists()
    assert _kv_per_token("llama-3.1-70b") == 80 * 2 * 8 * 128 * 2  # still the bundled 70B: 80 layers, 8 KV heads x 128
    r = run("models", "import", str(folder), "--name", "my-small-llama")
    assert r.exit_code == 0, r.output
    assert _kv_per_token("my-small-llama") == 2 * 2 * 2 * 64 * 2  # 2 layers x K,V x 2 heads x 64 x bf16
    assert _kv_per_token("llama-3.1-70b") == 80 * 2 * 8 * 128 * 2


def test_import_refuses_a_bundled_alias_unless_forced(kvplan_home, tmp_path):
    folder = _small_llama(tmp_path / "llama-3.2-1b-instruct-hf")  # short aliases: llama-3.2-1b-instruct, llama-3.2-1b
    r = run("models", "import", str(folder))
    assert r.exit_code == 2 and "alias 'llama-3.2-1b-instruct' is taken" in r.stderr, r.output
    r = run("models", "import", str(folder), "--force")
    assert r.exit_code == 0, r.output
    assert (kvplan_home / "models" / "llama-3.2-1b-instruct-hf.json").is_file()


def test_import_of_a_catalog_entry_needs_force(kvplan_home):
    r = run("models", "import", "llama-3-70b")  # the bundled spec itself: a shadow copy (issue 25 item 9)
    assert r.exit_code == 2 and "--force" in r.output and not (kvplan_home / "models").exists(), r.output
    r = run("models", "import", "llama-3-70b", "--force")
    assert r.exit_code == 0, r.output
    assert (kvplan_home / "models" / "llama-3.1-70b.json").is_file()


def test_models_show_prints_text_not_python_reprs(kvplan_home):
    r = run("models", "show", "gemma-2-2b-it")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "checkpoint_bytes: unknown" in lines  # the catalog has no checkpoint size for it (was `None`)
    notes = lines.index("notes:")
    assert lines[notes + 1].startswith("  - head_dim 256 is explicit")
    assert not any(bad in r.stdout for bad in ("None", "['", "[]", "{'"))
    r = run("models", "show", "qwen3-8b")
    assert "checkpoint_bytes: unknown" in r.stdout.splitlines() and "notes: none" in r.stdout.splitlines()
