"""The third audit round: what a new user hit, each pinned by a test that fails without its fix."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app

runner = CliRunner()


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
