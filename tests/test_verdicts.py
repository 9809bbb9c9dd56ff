"""Verdict bugs fixed with the engine template (issue 15, issue 13 item 4), one regression test each.

Every engine now makes its Plan through kvplan.engines.base.Engine.result, and the verdict rules
every engine shares live in kvplan.planning.plan.assemble: a context past the model's limit, or an exact
--kv-cache-memory that does not fit beside the weights, is not a fit and holds no request.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from kvplan.sources.catalog import find_in_catalog
from kvplan.cli import app
from kvplan.planning.deploy import Deployment
from kvplan.core.dtypes import KV_DTYPES
from kvplan.engines import resolve_engine
from kvplan.core.errors import EXIT_DOES_NOT_FIT
from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import Kind
from kvplan.planning.plan import Request

runner = CliRunner()
ENGINES = ("vllm", "sglang", "trtllm", "llama.cpp", "transformers")
GIB = 2**30


def fit_json(*args):
    r = runner.invoke(app, ["fit", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout), r.stderr


@pytest.mark.parametrize("engine", (None, *ENGINES))
def test_kv_cache_memory_larger_than_the_gpu_does_not_fit(engine):
    # An L4 has 22.03 GiB usable (torch total); a 100 GiB KV budget cannot sit beside any weights on it.
    args = ["llama-3.1-8b", "--gpu", "l4", "--gpus", "1", "--ctx", "8k", "--kv-cache-memory", "100GiB"]
    args += ["--engine", engine] if engine else []
    plan, err = fit_json(*args)
    assert plan["fits"] is False and plan["max_concurrency"] == 0
    assert "exceed the GPU's usable memory" in err
    assert runner.invoke(app, ["fit", *args, "--check"]).exit_code == EXIT_DOES_NOT_FIT


@pytest.mark.parametrize("engine", (None, *ENGINES))
def test_context_beyond_the_model_limit_does_not_fit(engine):
    # Llama 3.1 8B attends 131,072 tokens; 200,000 on an MI300X (192 GiB) would "fit" by memory alone.
    args = ["llama-3.1-8b", "--gpu", "mi300x", "--gpus", "1", "--ctx", "200000"]
    args += ["--engine", engine] if engine else []
    plan, err = fit_json(*args)
    assert plan["fits"] is False and plan["max_concurrency"] == 0
    assert "exceeds the model's context limit (131,072): the limit binds, not memory" in err
    assert plan["binds"] == "context limit" and plan["context_limit"] == 131_072
    assert runner.invoke(app, ["fit", *args, "--check"]).exit_code == EXIT_DOES_NOT_FIT


def test_context_beyond_max_model_len_names_the_flag_not_the_model():
    # 65,536 is the --max-model-len asked for, not Llama 3.1 8B's 131,072: the warning says whose limit binds
    args = ["llama-3.1-8b", "--gpu", "mi300x", "--gpus", "1", "--ctx", "128k", "--max-model-len", "64k"]
    plan, err = fit_json(*args)
    assert plan["fits"] is False and plan["context_limit"] == 65_536
    assert "exceeds --max-model-len, the longest request the engine accepts (65,536)" in err
    assert "the model's context limit" not in err


@pytest.mark.parametrize("engine", (None, *ENGINES))
@pytest.mark.parametrize("case", (["--kv-cache-memory", "100GiB", "--ctx", "8k"], ["--ctx", "200000"],
                                  ["--ctx", "128k", "--batch", "64"], ["--ctx", "8k"]))
def test_no_fit_never_shows_enough_concurrency(engine, case):
    """'fits: no' beside a concurrency that covers the batch was a contradiction; now either the
    plan fits or it holds fewer requests than asked."""
    args = ["llama-3.1-8b", "--gpu", "l4", "--gpus", "1", *case] + (["--engine", engine] if engine else [])
    plan, _ = fit_json(*args)
    assert plan["fits"] == (plan["max_concurrency"] >= plan["batch"]), plan


def test_trtllm_fraction_never_deepens_a_shortfall():
    # Llama 3.1 70B in bf16 (~131 GiB of weights) on one H100: the memory after the warm-up is negative.
    # kv = free x fraction made 0.9 look roomier than 0.5 the wrong way round (0.9 x -50 < 0.5 x -50).
    m, gpu, req = find_in_catalog("llama-3.1-70b"), find_gpu("h100"), Request(context=8192)
    kv = {f: resolve_engine("trtllm", None, [f"free_gpu_memory_fraction={f}"]).plan(m, gpu, Deployment(), req)
          .kv_memory_bytes_per_gpu for f in (0.5, 0.9)}
    assert kv[0.5] < 0 and kv[0.5] == kv[0.9]
    # Where memory is left, a larger fraction gives more KV memory (Llama 3.1 8B on an H100).
    small = find_in_catalog("llama-3.1-8b")
    kv = {f: resolve_engine("trtllm", None, [f"free_gpu_memory_fraction={f}"]).plan(small, gpu, Deployment(), req)
          .kv_memory_bytes_per_gpu for f in (0.5, 0.9)}
    assert 0 < kv[0.5] < kv[0.9]


def test_llamacpp_concurrency_is_not_capped_at_4096():
    # Gemma 3 1B at 4k on an MI300X: each slot of 4,096 cells is small, so more than 4,096 fit.
    m, gpu = find_in_catalog("gemma-3-1b-it"), find_gpu("mi300x")
    eng = resolve_engine("llama.cpp")
    res = eng.result(m, gpu, Deployment(), Request(context=4096))
    n = res.plan.max_concurrency
    assert n > 4096
    # The oracle is llama.cpp's own arithmetic (commit 0c1e5709), written out here, not kvplan's layout:
    #   -c 4096n -np n, kv_unified off: n streams of n_ctx_seq = GGML_PAD(4096n / n, 256) = 4,096 cells
    #   (llama-context.cpp L290-306); the 22 SWA layers of Gemma 3 1B get GGML_PAD(min(4096, n_swa 512
    #   x 1 + n_ubatch 512), 256) = 1,024 cells per stream (llama-kv-cache-iswa.cpp L69-81); the 4
    #   global layers the full 4,096. One cell of one layer is a K and a V row of 1 kv head x 256 f16
    #   = 512 B each. One slot: 4 x 4096 x 1024 + 22 x 1024 x 1024 = 39,845,888 B (38 MiB).
    slot = 4 * 4096 * 1024 + 22 * 1024 * 1024
    assert slot == 39_845_888
    room = res.plan.kv_memory_bytes_per_gpu  # the budget beside weights and compute buffer (not under test)
    assert n == room // slot


def _explained_sequence_bytes(text: str) -> tuple[int, int]:
    """(sum of the layer lines' bytes, the total line's bytes) from --explain output."""
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    parts = [float(v.replace(",", "")) * units[u] for v, u in re.findall(r"→ ([\d.,]+) (B|KiB|MiB|GiB)$", text, re.M)]
    total = int(re.search(r"One sequence of [\d,]+ tokens: ([\d,]+) B", text).group(1).replace(",", ""))
    return sum(parts), total


@pytest.mark.parametrize("model", ("gemma-3-27b-it", "gpt-oss-120b"))
@pytest.mark.parametrize("engine", (None, "vllm", "sglang", "trtllm", "transformers"))
def test_explain_lines_add_up_to_the_engines_total(model, engine):
    args = (["fit", model, "--gpu", "h100", "--gpus", "8", "--ctx", "32k", "--explain"]
            + (["--engine", engine] if engine else []))
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    parts, total = _explained_sequence_bytes(r.stdout)
    assert abs(parts - total) <= 0.01 * total, (parts, total)  # the lines round to 2 decimals


def test_vllm_explain_shows_the_sliding_window_blocks():
    # vLLM 0.33 on an H100: max_num_batched_tokens 8192, doubled by async scheduling: T = 16,384.
    # A Gemma 3 sliding layer (window 1,024) takes cdiv(min(1,023 + 16,384, 32,768), 16) + 1 = 1,089
    # blocks = 17,424 slots (kv_cache_interface.py SlidingWindowSpec), not the 1,024 the window holds.
    r = runner.invoke(app, ["fit", "gemma-3-27b-it", "--gpu", "h100", "--gpus", "8", "--ctx", "32k", "--explain",
                            "--engine", "vllm"])
    assert "min(S, window 1,024) = 1,024 → 17,424 in pages" in r.stdout


def test_trtllm_sequence_bytes_count_sliding_layers_whole():
    # TensorRT-LLM sizes every attention layer by the whole sequence in blocks of 32 (capacity()'s
    # blocks per request = ceil(S / 32)): Gemma 3 27B, 62 layers x 16 KV heads x 2 x 128 x 2 B = 8,192 B
    # per layer-token at tp 1; S = 4,000 -> 4,000 rounded to 4,000 (125 blocks): 62 x 8,192 x 4,000.
    m = find_in_catalog("gemma-3-27b-it")
    p = resolve_engine("trtllm").plan(m, find_gpu("mi300x"), Deployment(), Request(context=4000))
    assert sum(1 for l in m.layers if l.kind in (Kind.FULL, Kind.SLIDING)) == 62
    assert p.kv_bytes_per_sequence_per_gpu == 62 * 8192 * 4000
    assert KV_DTYPES["bf16"].bytes_for(m.layers[0].elements_per_token(1)) == 8192
