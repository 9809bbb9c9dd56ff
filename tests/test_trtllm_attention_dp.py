"""TensorRT-LLM's attention DP (kvplan.engines.trtllm.layout): what a rank holds, its pool, the deployment's requests,
and the layouts it refuses. Hand arithmetic from Qwen/Qwen3-235B-A22B's config.json (94 layers, hidden 4096, 64 query
heads and 4 KV heads of 128, 128 experts of width 1536, vocabulary 151,936, untied LM head, bf16) and TensorRT-LLM's
rules as the module cites them (NVIDIA/TensorRT-LLM: mapping.py MappingBase.dp_size; resource_manager.py
KVCacheManager / get_cache_size_per_token, tp_size 1 under attention DP; modeling_deepseekv3.py, MLP and shared
experts at tp 1; embedding.py, no embedding parallelism under attention DP)."""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

H200 = find_gpu("h200")
QWEN = resolve_model("qwen3-235b-a22b").spec
DEP8 = Deployment(tp=1, pp=1, dp=8, ep=8)

# KV heads per rank: tp_size 1 under attention DP, so all 4 heads: 94 layers x 2 (K and V) x 4 x 128 x 2 B
KV_TOKEN = 94 * 2 * 4 * 128 * 2  # 192,512 B a token, on every rank
# parameters one rank holds whole: per layer q 4096 x 8192 + k, v 4096 x 512 each + o 8192 x 4096 = 71,303,168,
# the router 4096 x 128, two RMSNorms of 4096 and q/k norms of 128; the embedding and the untied LM head
# 151,936 x 4096 each, the final norm 4096
WHOLE = 94 * (71_303_168 + 4096 * 128 + 2 * 4096 + 2 * 128) + 2 * 151_936 * 4096 + 4096  # 7,997,238,784
EXPERTS = 94 * 128 * 3 * 4096 * 1536  # 227,096,395,776 routed-expert parameters, 1/8 of them a rank (moe_ep 8)
RANK_WEIGHTS = (WHOLE + EXPERTS // 8) * 2  # bf16: 72,768,576,512 B


def _result(dep=DEP8, ctx=8192, model=QWEN):
    return resolve_engine("trtllm").result(model, H200, dep, Request(ctx))


def test_a_rank_holds_whole_kv_heads_and_all_but_the_experts_whole():
    res = _result()
    assert res.capacity.bytes_per_token == KV_TOKEN == 192_512
    assert res.plan.weight_bytes_per_gpu == RANK_WEIGHTS == 72_768_576_512
    # the same 8 GPUs as one tp 8 group: get_cache_size_per_token's d x H // tp = 128 x 4 // 8 = 64 a layer's K or V,
    # 94 x 2 x 64 x 2 B = 24,064 B a token a rank (no replication of the 4 heads over 8 ranks)
    assert _result(Deployment(tp=8)).capacity.bytes_per_token == 94 * 2 * 64 * 2 == 24_064


def test_the_deployment_holds_dp_times_a_ranks_requests():
    res = _result()
    cap = res.capacity
    # a rank's pool: its budget // 192,512 B, rounded up to blocks of 32; requests of 8,192 tokens = 256 blocks each
    blocks = -(-(cap.kv_memory_bytes // KV_TOKEN) // 32)
    assert cap.blocks == blocks
    assert cap.max_concurrency == pytest.approx(blocks / 256)
    assert res.plan.max_concurrency == int(blocks / 256) * 8


def test_ep_unset_splits_the_experts_by_width_to_the_same_bytes():
    # --ep unset: moe_tp_size = tensor_parallel_size 8, moe_ep 1 (MappingBase.__init__): each rank 1/8 of every expert
    assert _result(Deployment(tp=1, dp=8)).plan.weight_bytes_per_gpu == RANK_WEIGHTS


def test_layouts_attention_dp_does_not_run_are_refused():
    with pytest.raises(KvplanError, match="Mapping.dp_size"):
        _result(Deployment(tp=2, dp=4, ep=8))
    dense = resolve_model("llama-3.1-8b-instruct").spec
    with pytest.raises(KvplanError, match="dense model"):
        _result(Deployment(tp=1, dp=2), model=dense)


def test_fit_with_trtllm_dp_ep_prints_the_layout_and_a_ranks_figures():
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["fit", "qwen3-235b-a22b", "--gpu", "h200", "--engine", "trtllm", "--dp", "8",
                                   "--ep", "8", "--ctx", "8k"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "tp 1 × dp 8, ep 8" in out
    assert "192,512 B" in out  # kv size per token, the engine's own figure
    assert "enable_attention_dp: true" in out and "tensor_parallel_size: 8" in out
    assert "moe_expert_parallel_size: 8" in out
    dense = CliRunner().invoke(app,
                               ["fit", "llama-3.1-8b-instruct", "--gpu", "h200", "--engine", "trtllm", "--dp", "2"])
    assert dense.exit_code != 0 and "Traceback" not in dense.output and "dense model" in dense.output
