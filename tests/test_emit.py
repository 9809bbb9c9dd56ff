"""`fit --emit`: the serve command carries the plan's own numbers."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def emitted(*args):
    r = runner.invoke(app, ["fit", *args, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    return d, shlex.split(d["emit"])


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_emit_vllm():
    d, argv = emitted("llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--ctx", "128k", "--emit", "vllm")
    assert argv[:3] == ["vllm", "serve", "meta-llama/Meta-Llama-3.1-70B"]
    assert flag(argv, "--max-model-len") == "131072" and flag(argv, "-tp") == "4"
    assert flag(argv, "--gpu-memory-utilization") == f"{d['engine']['settings']['gpu_memory_utilization']:g}"
    assert int(flag(argv, "--max-num-seqs")) == max(1, d["max_concurrency"])


def test_emit_vllm_fp8_cache():
    _, argv = emitted("qwen3-8b", "--gpu", "h100", "--ctx", "32k", "--kv-dtype", "fp8", "--emit", "vllm")
    assert flag(argv, "--kv-cache-dtype") == "fp8"


def test_emit_sglang():
    d, argv = emitted("qwen3-32b", "--gpu", "h100", "--gpus", "2", "--ctx", "32k", "--engine", "sglang", "--emit", "sglang")
    assert flag(argv, "--context-length") == "32768" and flag(argv, "--tp-size") == "2"
    assert float(flag(argv, "--mem-fraction-static")) == d["engine"]["settings"]["mem_fraction_static"]


def test_emit_llamacpp_total_context_and_slots():
    _, argv = emitted("qwen3-8b", "--gpu", "4090", "--ctx", "8k", "--batch", "4", "--kv-dtype", "q8_0",
                      "--emit", "llama.cpp")
    assert flag(argv, "-c") == str(4 * 8192) and flag(argv, "-np") == "4"
    assert flag(argv, "-ctk") == "q8_0" and flag(argv, "-ctv") == "q8_0" and flag(argv, "-fa") == "on"


def test_emit_mismatch_and_unsupported():
    r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--engine", "sglang", "--emit", "vllm"])
    assert r.exit_code == 2 and r.output.startswith("Error:")
    r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--emit", "trtllm"])
    assert r.exit_code == 2 and "--emit supports" in r.output


def test_emit_vllm_states_the_margin_and_raises_utilization_only_when_needed():
    # Qwen3-8B on one H100 (vLLM 0.33 defaults, gmu 0.92): 8 x 32k tokens need 8 x 32768 x 36 layers
    # x 8 heads x 128 x 2 x 2 B = 36 GiB; the plan's budget holds that, so 0.92 stays and the margin is stated.
    d, argv = emitted("qwen3-8b", "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--batch", "8", "--emit", "vllm")
    assert flag(argv, "--gpu-memory-utilization") == "0.92"
    assert "need 36.00 GiB" in d["emit_margin"] and "to spare" in d["emit_margin"]
    # --gpu-memory-utilization 0.5 cannot hold them (0.5 x 79.18 GiB - 16.4 GiB of weights < 36 GiB):
    # the command carries the lowest value that does, with 5% to spare, and says it was raised.
    d, argv = emitted("qwen3-8b", "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--batch", "8",
                      "--gpu-memory-utilization", "0.5",
                      "--emit", "vllm")
    g = float(flag(argv, "--gpu-memory-utilization"))
    assert 0.5 < g < 0.92 and "raised from 0.5" in d["emit_margin"]


def test_emit_sglang_raises_the_fraction_only_when_the_pool_is_short():
    # Qwen3-32B at tp 2 on H100s, 8 x 32k = 262,144 tokens (+10% margin = 288,358): at
    # mem_fraction_static 0.5 the pool is far smaller, so the command carries a higher fraction and says so.
    d, argv = emitted("qwen3-32b", "--gpu", "h100", "--gpus", "2", "--ctx", "32k", "--batch", "8",
                      "--engine", "sglang", "--engine-opt", "mem_fraction_static=0.5", "--emit", "sglang")
    f = float(flag(argv, "--mem-fraction-static"))
    assert 0.5 < f < 0.99 and "raised from 0.5" in d["emit_margin"] and "need 262,144" in d["emit_margin"]
    assert d["kv_cache_tokens"] < 262144  # the plan at 0.5 itself does not hold them
