"""The fourth audit round: bf16 on GPUs without it, and what a new user hit; each pinned by a test that fails
without its fix."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.hardware.facts import bf16_fact
from conftest import REPO

runner = CliRunner()


def run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def _emitted(*args) -> list[str]:
    r = run("fit", *args, "--json")
    assert r.exit_code == 0, r.output
    return shlex.split(json.loads(r.stdout)["emit"])


# --- bf16 where a profile leaves the field out ----------------------------------------------------------------
# NVIDIA: BF16 tensor math from compute capability 8.0 (Ampere); torch's rule (torch 2.13.0 wheel,
# torch/cuda/__init__.py L204, is_bf16_supported: `get_device_properties(device).major >= 8`, below it only
# emulation) and vLLM's refusal below 8.0 (vllm 0.8.0 wheel, vllm/v1/worker/gpu_worker.py L302-306). AMD: BF16
# MFMA from gfx908, the MI100 (CDNA; gpuopen.com "AMD matrix cores" lab note gives MI100's BF16 matrix rate,
# 92.3 TFLOPS), none on gfx906 (MI50/MI60, Vega 20: no matrix cores).
@pytest.mark.parametrize("vendor, cc, runs", [
    ("NVIDIA", "7.0", False), ("NVIDIA", "7.5", False), ("NVIDIA", "8.0", True), ("NVIDIA", "8.6", True),
    ("NVIDIA", "12.0", True), ("AMD", "gfx906", False), ("AMD", "gfx908", True), ("AMD", "gfx90a", True),
    ("AMD", "gfx942", True), ("AMD", "gfx1030", False), ("AMD", "gfx1100", True)])
def test_bf16_is_inferred_from_the_compute_capability(vendor, cc, runs):
    gpu = SimpleNamespace(bf16=None, vendor=vendor, compute_capability=cc, dense_flops={"bf16": 1})
    bf16, basis = bf16_fact(gpu)
    assert bf16 is runs and cc in basis  # the header names what it inferred from


def test_a_profile_field_wins_over_the_inference():
    gpu = SimpleNamespace(bf16=True, vendor="NVIDIA", compute_capability="7.5")
    assert bf16_fact(gpu) == (True, "")


def _user_t4(tmp_path, **changes):
    """t4.yaml as a user's profile under another key, without its `bf16: false` line (or with `changes`)."""
    data = yaml.safe_load((REPO / "kvplan" / "hardware" / "profiles" / "t4.yaml").read_text())
    data.pop("bf16")
    data.update(key="my-t4", aliases=[], **changes)
    (tmp_path / "hw").mkdir(exist_ok=True)
    (tmp_path / "hw" / "my-t4.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "hw"


def test_a_user_turing_profile_without_the_field_runs_bf16_as_fp16_and_says_why(kvplan_home, tmp_path):
    # compute_capability "7.5" (Turing) and no bf16 field: before, kvplan took bf16 and its vLLM command asked
    # for nothing, which vLLM refuses on a 7.5 card (see above)
    hw = _user_t4(tmp_path)
    r = run("fit", "llama-3.1-8b", "--gpu", "my-t4", "--tp", "2", "--ctx", "4k", "--hw-profiles", hw,
            env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "weights fp16 · KV fp16" in r.stdout
    assert "no bf16 on this GPU (inferred from compute capability 7.5" in r.stdout
    argv = _emitted("llama-3.1-8b", "--gpu", "my-t4", "--tp", "2", "--ctx", "4k", "--hw-profiles", hw,
                    "--emit", "vllm")
    assert argv[argv.index("--dtype") + 1] == "float16"


def test_a_profile_with_nothing_to_infer_from_says_bf16_is_assumed(kvplan_home, tmp_path):
    hw = _user_t4(tmp_path, vendor="Other", compute_capability=None, dense_flops={"fp16": 65_000_000_000_000})
    r = run("fit", "llama-3.1-8b", "--gpu", "my-t4", "--tp", "2", "--ctx", "4k", "--hw-profiles", hw,
            env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "weights bf16 · KV bf16" in r.stdout and "bf16 assumed" in r.stdout


# --- --emit llama.cpp on a GPU without BF16 ---------------------------------------------------------------------
# A bf16 checkpoint runs as fp16 there (the plan's header, vLLM's and SGLang's --dtype float16): the GGUF to load
# is F16 (convert_hf_to_gguf.py --outtype f16; the same 2 bytes a weight), not BF16, which the card has no math for.
@pytest.mark.parametrize("gpu, file", [("t4", "F16"), ("v100-32", "F16"), ("a100-80", "BF16")])
def test_emit_llamacpp_names_an_f16_gguf_on_a_gpu_without_bf16(kvplan_home, gpu, file):
    argv = _emitted("llama-3.1-8b", "--gpu", gpu, "--pp", "2", "--ctx", "4k", "--engine", "llama.cpp",
                    "--emit", "llama.cpp")
    assert argv[argv.index("-m") + 1] == f"llama-3.1-8b-{file}.gguf"
    r = run("fit", "llama-3.1-8b", "--gpu", gpu, "--pp", "2", "--ctx", "4k", "--engine", "llama.cpp",
            "--emit", "llama.cpp", env={"COLUMNS": "250"})
    assert f"--outtype {file.lower()}" in r.stderr + r.stdout


# --- an explicit --kv-dtype bf16 on a GPU without BF16 -----------------------------------------------------------
# Planned as fp16 and said so, as vLLM runs it: the command kvplan emits sets --dtype float16 and leaves
# --kv-cache-dtype at auto, and vLLM's auto cache is the model's dtype (vllm-project/vllm@0024350b
# vllm/utils/torch_utils.py, get_kv_cache_torch_dtype: "auto" -> model_dtype): an fp16 cache, the same 2 bytes.
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_kv_dtype_bf16_on_a_t4_is_planned_as_fp16_and_said(kvplan_home, engine):
    args = ("llama-3.1-8b", "--gpu", "t4", "--tp", "2", "--ctx", "4k", "--engine", engine, "--kv-dtype", "bf16")
    r = run("fit", *args, env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "KV fp16" in r.stdout and "bf16 run as fp16: no bf16 on this GPU" in r.stdout
    argv = _emitted(*args, "--emit", engine)
    assert argv[argv.index("--dtype") + 1] == "float16" and "bfloat16" not in argv


# --- find_in_catalog's index, built once per state of the catalog folders ---------------------------------------
def test_catalog_lookups_read_the_user_catalog_once_and_see_what_changes(kvplan_home, tmp_path, monkeypatch):
    from kvplan.sources import catalog

    data = json.loads(json.dumps(catalog._bundled_data()[0][0]))  # a bundled entry, renamed, as a user's import
    data.update(name="my-model", aliases=[], hf_repo=None)
    folder = kvplan_home / "models"
    folder.mkdir(parents=True)
    reads = []
    real = catalog._read_json
    monkeypatch.setattr(catalog, "_read_json", lambda f: reads.append(f.name) or real(f))
    assert catalog.find_in_catalog("my-model") is None
    (folder / "my-model.json").write_text(json.dumps(data))
    assert catalog.find_in_catalog("my-model").name == "my-model"
    for _ in range(5):  # before: every lookup parsed every user file again
        catalog.find_in_catalog("my-model")
    assert reads == ["my-model.json"]
    data["max_context"] *= 10  # an edit in place (another size) is seen
    (folder / "my-model.json").write_text(json.dumps(data))
    assert catalog.find_in_catalog("my-model").max_context == data["max_context"]
    extra = tmp_path / "extra"  # an extra folder is its own key
    extra.mkdir()
    (extra / "other.json").write_text(json.dumps({**data, "name": "other-model"}))
    assert catalog.find_in_catalog("other-model") is None
    assert catalog.find_in_catalog("other-model", [extra]).name == "other-model"


# --- new-user audit: an error line cannot drive the terminal ----------------------------------------------------
def test_an_error_echoing_a_files_bytes_prints_them_escaped_on_one_line(kvplan_home, tmp_path):
    # A binary or hostile trace's first line was echoed raw: NUL bytes, and ESC sequences the terminal runs
    # (here: clear the screen, then red), and a newline splitting the one Error: line in two.
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"\x00\x1b[2J\x1b[31marrival\xc2\x85\xe2\x80\xaeinput,c\n1,2,3\n")
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", trace)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error: unrecognised trace columns"), err
    assert "\x1b" not in err and "\x00" not in err and "\u202e" not in err and "\x85" not in err
    assert "\\x1b[2J" in err and "\\x00" in err and "\\u202e" in err


def test_one_line_leaves_printable_text_alone():
    from kvplan.core.markup import one_line

    assert one_line("tp × pp · 128 GiB – ok") == "tp × pp · 128 GiB – ok"
    assert one_line("a\nb\tc\x7f") == "a\\nb\\tc\\x7f"
