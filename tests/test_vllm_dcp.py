"""vLLM decode context parallel (-dcp), planned as vLLM allocates it.

The expected figures are vLLM's arithmetic written out (docs/engines.md 9.1; v0.33.0
`v1/kv_cache_interface.py` L643-648: a rank's worst case is cdiv(cdiv(max_model_len, dcp), block)
pages; `v1/core/kv_cache_utils.py` L1061-1094: concurrency = num_blocks / blocks per request,
"GPU KV cache size" = int(concurrency x max_model_len); in the 0.10.2 .. 0.20.0 era the size is
(num_blocks // groups) x block x dcp). The KV budget is pinned with --kv-cache-memory-bytes so the
pool is exact; none of these numbers come from kvplan.
"""

from __future__ import annotations

import json

import pytest

from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

H200 = find_gpu("h200")
BUDGET = 40 * 2**30  # --kv-cache-memory-bytes 42,949,672,960


def _vllm(name: str, dep: Deployment, version: str = "0.33.0", ctx: int = 32768):
    engine = resolve_engine("vllm", version)
    return engine.result(resolve_model(name).spec, H200, dep, Request(ctx, kv_cache_memory_bytes=BUDGET))


def _line(res, label: str):
    return next(f.value for f in res.capacity.lines if f.label == label)


# DeepSeek-V3 (MLA: kv_lora 512 + rope 64 = 576 values, 61 layers, bf16 cache), vLLM's FlashMLA block
# of 64: a page is 64 x 576 x 2 = 73,728 B per layer, one block id 61 x 73,728 = 4,497,408 B on every
# rank (the latent is not split by tp, nor is a rank's page by dcp).
# num_blocks = 42,949,672,960 // 4,497,408 = 9,549 on each rank, with or without dcp.
# tp 8:          a 32,768-token request takes cdiv(32,768, 64) = 512 blocks -> 9,549 / 512 = 18.65 -> 18.
# tp 8, dcp 8:   cdiv(cdiv(32,768, 8), 64) = 64 blocks (one block id holds 64 x 8 = 512 of its tokens
#                across the dcp group) -> 9,549 / 64 = 149.203125 -> 149 requests;
#                GPU KV cache size int(149.203125 x 32,768) = 4,889,088 tokens (v0.33.0), and
#                9,549 x 64 x 8 = 4,889,088 in v0.11.0 ("Multiplying the GPU KV cache size by the dcp_world_size").
def test_deepseek_v3_dcp8_pool():
    tp8 = _vllm("deepseek-v3", Deployment(tp=8))
    dcp = _vllm("deepseek-v3", Deployment(tp=8, dcp=8))
    for res in (tp8, dcp):
        assert res.capacity.blocks == 9_549
        assert _line(res, "bytes per block id") == 4_497_408
    assert _line(tp8, "blocks per 32,768-token request") == 512 and tp8.plan.max_concurrency == 18
    assert _line(dcp, "blocks per 32,768-token request") == 64 and dcp.plan.max_concurrency == 149
    assert _line(dcp, "tokens per block id over the dcp group") == 512
    assert dcp.capacity.max_concurrency == pytest.approx(149.203125)
    assert dcp.plan.kv_cache_tokens == dcp.capacity.tokens == 4_889_088
    old = _vllm("deepseek-v3", Deployment(tp=8, dcp=8), version="0.11.0")
    assert old.capacity.tokens == old.plan.kv_cache_tokens == 9_549 * 64 * 8
    assert dcp.plan.weight_bytes_per_gpu == tp8.plan.weight_bytes_per_gpu  # dcp reuses the tp ranks


# Qwen3-235B-A22B (94 layers, 64 query heads, 4 KV heads of 128, bf16): at tp 8 each rank keeps
# max(1, 4 // 8) = 1 whole KV head, 2 x 128 x 2 B = 512 B per token per layer; vLLM allows dcp up to
# tp // 4 = 2 (and 64 / 4 = 16 query heads per KV head, divisible by 2). Block 16: a page is
# 16 x 512 = 8,192 B per layer, 94 x 8,192 = 770,048 B per block id; 42,949,672,960 // 770,048 =
# 55,775 blocks. tp 8: cdiv(32,768, 16) = 2,048 blocks a request -> 27.23 -> 27; dcp 2: cdiv(16,384, 16)
# = 1,024 -> 54.4677734375 -> 54; GPU KV cache size int(54.4677734375 x 32,768) = 1,784,800.
def test_qwen3_gqa_dcp2_pool():
    tp8 = _vllm("qwen3-235b-a22b", Deployment(tp=8))
    dcp = _vllm("qwen3-235b-a22b", Deployment(tp=8, dcp=2))
    assert tp8.capacity.blocks == dcp.capacity.blocks == 55_775
    assert _line(dcp, "bytes per block id") == 770_048
    assert tp8.plan.max_concurrency == 27 and dcp.plan.max_concurrency == 54
    assert dcp.plan.kv_cache_tokens == 1_784_800
    assert dcp.plan.kv_bytes_per_sequence_per_gpu == 94 * 512 * 16_384  # half of a request's tokens per rank


@pytest.mark.parametrize("model,dep,version,needle", [
    ("deepseek-v3", Deployment(tp=8, dcp=8), "0.10.1", "added in 0.10.2"),
    ("qwen3-235b-a22b", Deployment(tp=8, dcp=2), "0.10.2", "GQA came in 0.11.0"),
    ("qwen3-235b-a22b", Deployment(tp=8, dcp=4), "0.33.0", "maximum tp // KV heads = 2"),
    ("qwen3-235b-a22b", Deployment(tp=4, dcp=2), "0.33.0", "above the model's 4 KV heads"),
])
def test_vllm_dcp_refusals(model, dep, version, needle):
    with pytest.raises(KvplanError, match=needle):
        _vllm(model, dep, version)


def test_fit_vllm_dcp_emits_the_flag():
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["fit", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--engine", "vllm",
                                   "--dcp", "8", "--ctx", "32k", "--emit", "vllm", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    args = out["emit"].split()
    assert args[args.index("-tp") + 1] == "8" and args[args.index("--decode-context-parallel-size") + 1] == "8"
    assert int(args[args.index("--max-num-seqs") + 1]) >= out["max_concurrency"]
