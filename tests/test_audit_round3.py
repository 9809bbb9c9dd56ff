"""The third audit round: what a new user hit, each pinned by a test that fails without its fix."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import REPO
from kvplan.cli import app

runner = CliRunner()


def _error(result, code: int, needle: str) -> str:
    """Exit `code`, stderr's last line one `Error:` naming `needle` (a `model: ...` line may come before it)."""
    assert result.exit_code == code, (result.exit_code, result.output)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and needle in last and "Traceback" not in result.output, result.stderr
    return last


def _emitted(*args) -> list[str]:
    r = runner.invoke(app, ["fit", *args, "--json"])
    assert r.exit_code == 0, r.output
    return shlex.split(json.loads(r.stdout)["emit"])


# --- --emit on a GPU without BF16 math ---------------------------------------------------------------------------
# t4.yaml and v100-*.yaml say `bf16: false` (NVIDIA's Turing and Volta whitepapers: no BF16 tensor math before
# Ampere). vLLM refuses a bf16 model there: "Bfloat16 is only supported on GPUs with compute capability of at least
# 8.0 ... You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half."
# (vllm 0.8.0 wheel, vllm/v1/worker/gpu_worker.py L302-306). SGLang's --dtype auto keeps a bf16 config's dtype
# whatever the GPU (sglang 0.5.23 wheel, sglang/srt/configs/model_config.py L2303-2320). Llama-3.1-8B's config.json
# says torch_dtype bfloat16, so the command has to ask for float16 by name.
@pytest.mark.parametrize("gpu", ["t4", "v100-32"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_emit_asks_for_float16_on_a_gpu_without_bf16(kvplan_home, gpu, engine):
    argv = _emitted("llama-3.1-8b", "--gpu", gpu, "--ctx", "4k", "--engine", engine, "--emit", engine)
    assert argv[argv.index("--dtype") + 1] == "float16"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_emit_leaves_dtype_auto_where_the_gpu_has_bf16(kvplan_home, engine):
    argv = _emitted("llama-3.1-8b", "--gpu", "h100", "--ctx", "4k", "--engine", engine, "--emit", engine)
    assert "--dtype" not in argv


def test_emit_fp8_at_load_on_a_gpu_without_bf16_still_runs_the_activations_in_float16(kvplan_home):
    # --quantization fp8 quantizes the linear weights only; the rest of the model (and the cache) is in --dtype
    argv = _emitted("llama-3.1-8b", "--gpu", "t4", "--ctx", "4k", "--engine", "vllm", "--weight-dtype", "fp8",
                    "--emit", "vllm")
    assert argv[argv.index("--dtype") + 1] == "float16" and argv[argv.index("--quantization") + 1] == "fp8"


# --- SGLang's --kv-cache-dtype choices -------------------------------------------------------------------------
# The argparse choices in the wheels: 0.4.0 auto, fp8_e5m2 (sglang/srt/server_args.py L296); 0.4.3 and 0.5.3 add
# fp8_e4m3 (L374, L1462); 0.5.23 auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16
# (sglang/srt/arg_groups/fields/model.py L209-218). No int8, float16 or float32 in any of them.
@pytest.mark.parametrize("kv", ["int8", "fp32"])
def test_sglang_refuses_a_cache_dtype_its_flag_has_no_choice_for(kvplan_home, kv):
    r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "4k", "--engine", "sglang", "--kv-dtype", kv])
    _error(r, 2, f"has no {kv} choice")


def test_sglang_emits_fp8_by_the_one_spelling_its_release_takes(kvplan_home):
    new = _emitted("qwen3-8b", "--gpu", "h100", "--ctx", "4k", "--engine", "sglang", "--kv-dtype", "fp8",
                   "--emit", "sglang")
    old = _emitted("qwen3-8b", "--gpu", "h100", "--ctx", "4k", "--engine", "sglang", "--engine-version", "0.4.0",
                   "--kv-dtype", "fp8", "--emit", "sglang")
    assert new[new.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert old[old.index("--kv-cache-dtype") + 1] == "fp8_e5m2"


def test_sglang_a_16_bit_cache_of_a_16_bit_model_needs_no_flag(kvplan_home):
    # fp16 asked of a bf16 model: the same 2 bytes, which auto gives (no float16 choice to ask for)
    argv = _emitted("qwen3-8b", "--gpu", "h100", "--ctx", "4k", "--engine", "sglang", "--kv-dtype", "fp16",
                    "--emit", "sglang")
    assert "--kv-cache-dtype" not in argv


# --- validate --device cpu, end to end through the installed entry point ----------------------------------------
def test_validate_on_cpu_runs_end_to_end_through_the_command_line():
    pytest.importorskip("torch", reason="validate needs torch (the [validate] extra)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "kvplan", "validate", "llama-3.2-1b-instruct", "--device", "cpu", "--ctx", "16",
           "--steps", "1", "--layers", "1", "--shrink", "--hidden", "64", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    # Llama-3.2-1B-Instruct's config.json (shared/configs/meta-llama__Llama-3.2-1B-Instruct.json): 8 KV heads x
    # head_dim 64 x 2 (K and V) x 2 B (torch_dtype bfloat16) = 2,048 B per token per layer; 1 layer x 16 tokens x
    # 1 sequence = 32,768 B, measured on the torch tensors the decode filled.
    assert record["device"] == "cpu" and record["measured_kv_bytes"] == 32_768 == record["predicted_kv_bytes"]
    assert record["ok"] and record["tokens_match"] and "Traceback" not in run.stderr
