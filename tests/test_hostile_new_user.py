"""Round 37: a new user's mistaken and hostile inputs, end to end, that were not yet refused or said.

Each case failed before its fix in one of three ways: read silently as something else (a config key of the wrong
JSON type, `true` as a token count, overlapping safetensors offsets counted twice, an unknown --kv-dtype ignored),
a late or half-done failure (an unwritable --output refused only after the work, with the first of two files
already written; step-times creating a typo's folder tree), or an internal error (a malformed HF_ENDPOINT). The
assumption lines are the other half of the brief: what a command assumed (engine and release, dtypes) is printed.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO, one_line_error
from kvplan.cli import app

runner = CliRunner()
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
LOG = REPO / "tests" / "fixtures" / "logs" / "vllm_v1_aiperf449.log"


def _folder(tmp_path: Path, config: dict, name: str = "m") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _fit(folder: Path, *extra: str):
    return runner.invoke(app, ["fit", str(folder), "--gpu", "h100", "--ctx", "1k", *extra])


# --- config.json: a key of the wrong JSON type is refused, naming it ---------------------------------------------

@pytest.mark.parametrize("key, value, needle", [
    ("model_type", ["llama"], "model_type must be a string"),  # was read as the family "['llama']"
    ("model_type", 5, "model_type must be a string"),
    ("architectures", "LlamaForCausalLM", "architectures must be a list"),  # transformers writes a list
    ("architectures", [1, 2], "list of class names"),
    ("quantization_config", "fp8", "quantization_config must be a mapping"),  # was ignored: planned as bf16
    ("quantization_config", [{"quant_method": "fp8"}], "quantization_config must be a mapping"),
    ("rope_scaling", "yarn", "rope_scaling must be a mapping"),  # was ignored: no scaling, a shorter limit
    ("text_config", [LLAMA], "text_config must be a mapping"),  # was ignored: the outer keys read instead
    ("torch_dtype", ["bfloat16"], "torch_dtype must be a string"),
    ("torch_dtype", "float8", "torch_dtype 'float8' is not a dtype kvplan reads"),  # was planned as bf16
])
def test_a_config_key_of_the_wrong_type_is_refused(kvplan_home, tmp_path, key, value, needle):
    r = _fit(_folder(tmp_path, {**LLAMA, key: value}))
    one_line_error(r, 2, needle)


def test_a_nested_text_config_is_checked_too(kvplan_home, tmp_path):
    outer = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
             "text_config": {**LLAMA, "rope_scaling": 8.0}}
    one_line_error(_fit(_folder(tmp_path, outer)), 2, "rope_scaling must be a mapping")


def test_torch_names_of_the_dtypes_are_still_read(kvplan_home, tmp_path):
    for i, name in enumerate(("float16", "torch.float16", "half")):
        r = _fit(_folder(tmp_path, {**LLAMA, "torch_dtype": name}, f"m{i}"))
        assert r.exit_code == 0 and "weights fp16" in r.stdout, (name, r.output)


def test_an_fp8_torch_dtype_is_planned_as_vllm_falls_back_and_said(kvplan_home, tmp_path):
    # RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic's config.json names "float8_e4m3fn"; vLLM's 'auto' dtype
    # falls back to the platform's first supported one, bf16 from compute capability 8.0 (vllm 0.30.0
    # config/model.py _resolve_auto_dtype L2277-2318), so an H100 plan is bf16, as with "bfloat16".
    r = _fit(_folder(tmp_path, {**LLAMA, "torch_dtype": "float8_e4m3fn"}))
    assert r.exit_code == 0 and "weights bf16" in r.stdout, r.output
    assert "note: config.json's torch_dtype float8_e4m3fn is the stored FP8" in r.stderr


# --- config.json: a missing key read as a default is said -------------------------------------------------------

@pytest.mark.parametrize("key, needle", [
    ("torch_dtype", "config.json names no torch_dtype: weights and the 'auto' KV cache planned as bf16"),
    # 4 x hidden_size = 4 x 64 = 256 (GPT-2's n_inner rule; Llama's own default would be 11008)
    ("intermediate_size", "config.json gives no MLP width (intermediate_size): 4 x hidden_size = 256 assumed"),
    ("max_position_embeddings",
     "config.json gives no context length (max_position_embeddings): 2,048 positions assumed"),
])
def test_a_missing_key_read_as_a_default_is_said(kvplan_home, tmp_path, key, needle):
    config = {k: v for k, v in LLAMA.items() if k != key}
    r = _fit(_folder(tmp_path, config))
    assert r.exit_code == 0, r.output
    assert f"note: {needle}" in r.stderr
    r = _fit(_folder(tmp_path, LLAMA, "whole"))
    assert needle not in r.stderr  # and not said where the config gives the key


# --- safetensors: offsets must tile the data, as the safetensors library checks -------------------------------------

def _safetensors(folder: Path, header: dict, data_bytes: int) -> None:
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data_bytes)


@pytest.mark.parametrize("offsets_b, data, needle", [
    # a: BF16 [10, 10] = 100 x 2 = 200 bytes at [0, 200]; b the same size at [100, 300] shares a's last 100 bytes:
    # counted before as 400 B of weights in a file holding 300
    ([100, 300], 300, "tensor 'b': data_offsets [100, 300] overlap the bytes before 200"),
    # b at [300, 500]: bytes 200 to 300 belong to no tensor
    ([300, 500], 500, "leave bytes 200 to 300 to no tensor"),
])
def test_safetensors_offsets_that_overlap_or_leave_a_gap_are_refused(kvplan_home, tmp_path, offsets_b, data, needle):
    folder = _folder(tmp_path, LLAMA)
    _safetensors(folder, {"a": {"dtype": "BF16", "shape": [10, 10], "data_offsets": [0, 200]},
                          "b": {"dtype": "BF16", "shape": [10, 10], "data_offsets": offsets_b}}, data)
    line = one_line_error(_fit(folder), 2, needle)
    assert "InvalidOffset" in line


def test_contiguous_safetensors_offsets_still_read(kvplan_home, tmp_path):
    folder = _folder(tmp_path, LLAMA)
    _safetensors(folder, {"__metadata__": {"format": "pt"},
                          "b": {"dtype": "BF16", "shape": [10, 10], "data_offsets": [200, 400]},
                          "a": {"dtype": "F32", "shape": [50], "data_offsets": [0, 200]}}, 400)
    r = _fit(folder)
    assert r.exit_code == 0, r.output
    assert "400 B in 1 safetensors file(s)" in r.stderr  # 100 x 2 + 50 x 4 = 400


# --- simulate traces: JSON's true is no number, a list names no prefix -------------------------------------------

@pytest.mark.parametrize("record, needle", [
    ({"arrival": 0, "input_tokens": True, "output_tokens": 5}, "line 1: input_tokens true is not a number"),
    ({"arrival": False, "input_tokens": 10, "output_tokens": 5}, "line 1: arrival false is not a number of seconds"),
    ({"arrival": 0, "input_tokens": 10, "output_tokens": 5, "prefix_id": [1], "prefix_tokens": 3},
     "line 1: prefix_id must be a string or an integer, got [1]"),
])
def test_trace_fields_of_the_wrong_type_are_refused(kvplan_home, tmp_path, record, needle):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(record) + "\n")
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", str(trace)])
    one_line_error(r, 2, needle)


# --- check-log: an unknown --kv-dtype, a device for a log -------------------------------------------------------

def test_check_log_refuses_an_unknown_kv_dtype_even_with_no_model(kvplan_home):
    # Before: accepted and ignored (nothing reads it without --model), exit 0.
    one_line_error(runner.invoke(app, ["check-log", str(LOG), "--kv-dtype", "fp9"]), 2, "unknown KV cache dtype 'fp9'")
    assert runner.invoke(app, ["check-log", str(LOG), "--kv-dtype", "fp8_e5m2"]).exit_code == 0


@pytest.mark.parametrize("command", ["check-log", "check-bench"])
def test_a_device_given_as_the_file_is_not_called_missing(command):
    one_line_error(runner.invoke(app, [command, "/dev/null"]), 2, "/dev/null is not a regular file")


# --- outputs: refused before the work, nothing half-written ------------------------------------------------------

def test_an_unwritable_second_output_leaves_the_first_unwritten(kvplan_home, tmp_path):
    # /proc takes no new file (root or not): before, sweep wrote plan.csv, then failed on the HTML after the work.
    csv = tmp_path / "plan.csv"
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "h100", "-c", "8k", "--gpu-counts", "1",
                            "-o", str(csv), "-o", "/proc/kvplan-hostile.html"])
    one_line_error(r, 2, "cannot write /proc/kvplan-hostile.html")
    assert not csv.exists() and "sweep:" not in r.stderr  # refused before any plan was made


def test_a_read_only_folder_is_refused_before_the_simulation(kvplan_home, tmp_path, monkeypatch):
    import errno
    import tempfile

    def read_only(*_a, **_k):  # what mkstemp raises in a read-only folder (a test run as root ignores chmod)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    out = tmp_path / "sim.json"
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "2",
                            "--duration", "5", "-o", str(out)])
    one_line_error(r, 1, f"cannot write {out}: Read-only file system")
    assert not out.exists()


def test_step_times_refuses_a_missing_folder_before_timing_and_creates_none(kvplan_home, tmp_path):
    # Before: `--output typo/dir/x` made the whole tree (mkdir -p) after minutes of timing.
    target = tmp_path / "no" / "such" / "dir"
    r = runner.invoke(app, ["step-times", "llama-3.2-1b-instruct", "--device", "cpu", "--output", str(target)])
    one_line_error(r, 2, f"folder {target.parent} does not exist")
    assert not (tmp_path / "no").exists()


# --- the Hub: a malformed HF_ENDPOINT fails fast, in one line -----------------------------------------------------

@pytest.mark.parametrize("endpoint", ["http://[::1", "not a url", "ftp://mirror.example", "http://"])
def test_a_malformed_hf_endpoint_is_one_line_and_fast(kvplan_home, monkeypatch, endpoint):
    # http://[::1 was an internal error (huggingface_hub.constants splits HF_ENDPOINT at import: ValueError)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    start = time.perf_counter()
    r = runner.invoke(app, ["fit", "someorg/some-model", "--gpu", "h100"])
    one_line_error(r, 2, "is not an http(s) URL with a host")
    assert time.perf_counter() - start < 5


# --- assumptions: each command says the engine (and release) and the dtypes it planned --------------------------

def test_fit_says_it_used_kvplans_own_rules(kvplan_home):
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k"])
    assert r.exit_code == 0 and "note: planned with kvplan's engine-neutral rules" in r.stderr
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm"])
    assert "engine-neutral" not in r.stderr and "vllm 0.33.0" in r.stdout


def test_cheapest_says_the_engine_release_and_the_dtypes(kvplan_home):
    r = runner.invoke(app, ["cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "-g", "h100", "--engine", "vllm",
                            "--engine-version", "0.11.0", "--kv-dtype", "fp8"])
    assert r.exit_code == 0, r.output
    assert "planned as vllm 0.11.0 allocates; weights bf16, KV fp8" in r.stderr
    r = runner.invoke(app, ["cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "-g", "h100,t4"])
    assert "planned with kvplan's engine-neutral rules" in r.stderr
    # each GPU's run dtypes, as fit heads them: a T4 (compute 7.5) has no bf16, so its plans are fp16; the header
    # named only the first GPU's (one line for all where they agree)
    assert "weights bf16, KV bf16 (on h100-sxm); weights fp16, KV fp16 (on t4)" in r.stderr
    r = runner.invoke(app, ["cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "-g", "h100,a100-sxm-80"])
    assert "; weights bf16, KV bf16\n" in r.stderr and "(on " not in r.stderr


def test_simulate_and_disagg_say_the_dtypes(kvplan_home):
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "2",
                            "--duration", "5", "--kv-dtype", "fp8"])
    assert r.exit_code == 0 and "requests up to 131,072 tokens; weights bf16, KV fp8" in r.stderr, r.output
    r = runner.invoke(app, ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512"])
    assert r.exit_code == 0 and "assuming: engine vllm 0.33.0; weights bf16, KV bf16; link" in r.stderr, r.output


@pytest.mark.parametrize("args, needle", [
    (["sweep", "-m", "llama-3.1-8b", "-g", "h100,all", "-c", "8k"],
     "--gpu 'h100,all': 'all'"),  # was "unknown GPU 'all'"
    (["sweep", "-m", "all,llama-3.1-8b", "-g", "h100", "-c", "8k"], "--models 'all,llama-3.1-8b': 'all'"),
])
def test_all_inside_a_list_is_said_to_stand_alone(kvplan_home, args, needle):
    one_line_error(runner.invoke(app, args), 2, needle)
