"""llama.cpp keeps the input embedding (token_embd) in host memory (issue 22): a plan's GPU weights leave it out, a
tied output head's GPU copy stays, and the plan says what the host holds.

Source: llama.cpp ec98e2002 src/llama-model.cpp (as vendored at ollama/ollama@f63eea3d
llama/llama.cpp/src/llama-model.cpp): L2411-2412 "there is very little benefit to offloading the input layer, so
always keep it on the CPU", `dev_input = { cpu_dev, &cpu_buft_list }`; L2648 a model with no output.weight loads
token_embd again as the output (TENSOR_DUPLICATED), L2504-2506 placed as the output layer (the last GPU), L2618-2623
shared only within one buffer type. Q4_K is 144 B per 256 values, Q6_K 210 (ggml/src/ggml-common.h block_q4_K,
block_q6_K). The GGUF files are written here (conftest), their data sparse.
"""

from __future__ import annotations

import json

from conftest import llama_31_8b_gguf
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
FILE = 4_912_898_304  # the Q4_K_M file's tensors (tests/test_gguf.py: LLAMA_Q4_K_M_BYTES)
EMBD = 128_256 * 4_096 // 256 * 144  # token_embd, Q4_K: 295,501,824 B
OUTPUT = 128_256 * 4_096 // 256 * 210  # output.weight, Q6_K: 430,940,160 B


def _plan(path, *extra):
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "32k",
                              "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["plans"][0], " ".join(res.stderr.split())


def test_an_untied_embedding_is_host_memory_not_gpu_weights(tmp_path):
    path = tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    llama_31_8b_gguf(path)
    plan, said = _plan(path)
    assert EMBD == 295_501_824
    # the file's weights stay the model's; on the GPU: 4,912,898,304 - 295,501,824 = 4,617,396,480 B
    assert plan["weight_bytes"] == FILE
    assert plan["weight_bytes_per_gpu"] == FILE - EMBD == 4_617_396_480
    assert "token_embd (128,256 x 4,096, 295,501,824 B = 281.8 MiB) stays in host memory" in said
    assert "TENSOR_DUPLICATED" not in said


def test_a_tied_head_keeps_its_gpu_copy(tmp_path):
    path = tmp_path / "Llama-3.1-8B-tied-Q4_K_M.gguf"
    llama_31_8b_gguf(path, tied=True)  # no output.weight; token_embd at the output's Q6_K
    plan, said = _plan(path)
    # 4,912,898,304 - 430,940,160 (output) - 295,501,824 (Q4_K table) + 430,940,160 (Q6_K table) = 4,617,396,480 B
    # in the file; token_embd in host memory and its copy as the output head on the GPU, so the GPU holds every
    # tensor's bytes once
    assert plan["weight_bytes"] == FILE - EMBD == 4_617_396_480
    assert plan["weight_bytes_per_gpu"] == FILE - EMBD
    assert "430,940,160 B = 411.0 MiB) stays in host memory" in said and "TENSOR_DUPLICATED" in said

