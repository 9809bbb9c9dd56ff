"""TensorRT-LLM's narrowed DeepSeek-V3 dense-MLP and shared-expert split (engines.trtllm.mlp_split).

Rule read in NVIDIA/TensorRT-LLM@a43cf9e363d5657061b5ce0e12f3d993a08d8158 `tensorrt_llm/_torch/models/
modeling_deepseekv3.py`: `DeepseekV3DecoderLayer._compute_mlp_tp_size` = gcd(intermediate_size / block, tp), then
gcd(that, gpus_per_node) where it exceeds gpus_per_node; `Deepseekv3MoE._compute_shared_expert_tp_size` =
gcd(shared width / block, tp). DeepSeek-R1's config.json: intermediate_size 18432 (its three dense layers),
moe_intermediate_size 2048 x n_shared_experts 1, weight_block_size [128, 128].

* dense MLP: 18432 / 128 = 144 blocks. tp 8: gcd(144, 8) = 8 (= tp, unchanged). tp 16: gcd(144, 16) = 16 > 8
  GPUs per node, so gcd(16, 8) = 8: narrowed. tp 32: gcd(144, 32) = 16 > 8: 8.
* shared expert: 2048 / 128 = 16 blocks. tp 16: gcd(16, 16) = 16 (unchanged); tp 32: gcd(16, 32) = 16: narrowed.

Bytes (block FP8: one byte a weight plus a 4-byte scale per 128 x 128 = 16,384 weights): the dense MLP's
1,189,085,184 weights + 72,576 x 4 = 1,189,375,488 B; the shared experts' 2,554,331,136 + 155,904 x 4 =
2,554,954,752 B. At tp 16 a rank holds 1/8 instead of 1/16 of the dense MLP: 1,189,375,488 / 16 = 74,335,968 B more.
At tp 32: dense 1/8 - 1/32 = 3/32 -> 111,503,952 B, shared 1/16 - 1/32 = 1/32 -> 79,842,336 B: 191,346,288 B more.
"""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.engines.base import Engine
from kvplan.engines.trtllm import mlp_split
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

R1 = find_in_catalog("deepseek-r1")
H200 = find_gpu("h200-sxm")
REQ = Request(context=4096)


@pytest.mark.parametrize("tp, want", [(1, None), (8, (8, 8)), (16, (8, 16)), (32, (8, 16))])
def test_r1_splits(tp, want):
    assert mlp_split.splits(R1, Deployment(tp)) == want


def test_attention_dp_and_other_models_untouched():
    assert mlp_split.splits(R1, Deployment(1, dp=16, ep=16)) is None  # MLP whole under attention DP (layout.py)
    assert mlp_split.splits(find_in_catalog("qwen3-235b-a22b"), Deployment(16)) is None  # not DeepSeek-V3's class


def _weights(tp, narrowed=True):
    engine = resolve_engine("trtllm", None, [])
    if not narrowed:  # the plain tensor-parallel placement, every MLP over tp
        engine.placement = lambda model, dep, gpu=None: Engine.placement(engine, model, dep, gpu)
    return engine.result(R1, H200, Deployment(tp), REQ).plan.stages[0].weight_bytes


@pytest.mark.parametrize("tp, more", [(8, 0), (16, 74_335_968), (32, 191_346_288)])
def test_per_rank_weights_hand_arithmetic(tp, more):
    assert _weights(tp) - _weights(tp, narrowed=False) == more


def test_stated_as_an_assumption():
    r = CliRunner().invoke(app, ["fit", "deepseek-r1", "--gpu", "h200-sxm", "--tp", "16", "--engine", "trtllm"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "dense MLP layers over 8 and its shared experts over 16 of the 16 tensor-parallel ranks" in text
    assert "assumed 8 GPUs per node" in text
    quiet = CliRunner().invoke(app, ["fit", "deepseek-r1", "--gpu", "h200-sxm", "--tp", "8", "--engine", "trtllm"])
    assert "gpus_per_node" not in quiet.output  # tp 8: every split is tp, nothing to say


def test_bf16_checkpoint_reads_the_default_group():
    # QuantConfig.group_size defaults to 128 (NVIDIA/TensorRT-LLM@01ea6d79 tensorrt_llm/models/modeling_utils.py):
    # a 16-bit DeepSeek-R1 splits as the FP8 one does
    bf16 = dataclasses.replace(R1, quantization=dataclasses.replace(R1.quantization, method="bf16", group_size=0,
                                                                     quant_method=""))
    assert mlp_split.splits(bf16, Deployment(32)) == (8, 16)


def test_a_width_not_whole_groups_is_refused():
    # a 16-wide group (NVFP4's) of a shared expert 2040 wide: 2040 % 16 = 8, TensorRT-LLM's assertion fails
    odd = dataclasses.replace(R1, quantization=dataclasses.replace(R1.quantization, group_size=16),
                              params=dataclasses.replace(R1.params, shared_experts=58 * 3 * 7168 * 2040))
    with pytest.raises(Exception, match="2040-wide shared experts is not a whole number of 16-wide"):
        mlp_split.splits(odd, Deployment(16))


# The node size. TensorRT-LLM's LLM API passes gpus_per_node, default torch.cuda.device_count() (the host's GPUs:
# BaseLlmArgs.validate_gpus_per_node, NVIDIA/TensorRT-LLM@fcd3f31682808ae56118ae43c1d7864a3a945e6f
# tensorrt_llm/llmapi/llm_args.py). A GB200 NVL72 compute tray shows 4 GPUs (MLCommons inference_results_v6.1,
# Crusoe's GB200-NVL72 system description: "accelerators_per_node": 4). Dense MLP at tp 8: gcd(144, 8) = 8 > 4, so
# gcd(8, 4) = 4; the shared expert has no node term: gcd(16, 8) = 8. A rank holds 1/4 instead of 1/8 of the dense
# MLP: 1,189,375,488 / 4 - 1,189,375,488 / 8 = 297,343,872 - 148,671,936 = 148,671,936 B more.
GB200 = find_gpu("gb200")


def test_gb200_tray_narrows_at_tp8():
    assert GB200.node_gpus == 4
    assert mlp_split.splits(R1, Deployment(8), GB200) == (4, 8)
    assert mlp_split.splits(R1, Deployment(8), H200) == (8, 8)  # an HGX profile gives none: 8 assumed, unchanged
    engine = resolve_engine("trtllm", None, [])
    narrowed = engine.result(R1, GB200, Deployment(8), REQ).plan.stages[0].weight_bytes
    engine.placement = lambda model, dep, gpu=None: Engine.placement(engine, model, dep, gpu)
    plain = engine.result(R1, GB200, Deployment(8), REQ).plan.stages[0].weight_bytes
    assert narrowed - plain == 148_671_936


def test_the_users_node_size_wins_and_is_said():
    # tp 16 with gpus_per_node 4: dense gcd(144, 16) = 16 > 4 -> gcd(16, 4) = 4; shared gcd(16, 16) = 16
    assert mlp_split.splits(R1, Deployment(16, node_gpus=4), H200) == (4, 16)
    assert mlp_split.splits(R1, Deployment(8, node_gpus=8), GB200) == (8, 8)  # an 8-GPU host: nothing narrows
    r = CliRunner().invoke(app, ["fit", "deepseek-r1", "--gpu", "h200-sxm", "--tp", "16", "--engine", "trtllm",
                                 "--gpus-per-node", "4"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "dense MLP layers over 4 and its shared experts over 16" in text and "--gpus-per-node 4" in text
    tray = CliRunner().invoke(app, ["fit", "deepseek-r1", "--gpu", "gb200", "--tp", "8", "--engine", "trtllm"])
    assert "4 GPUs per node, the GPU profile's node_gpus" in " ".join(tray.output.split())


def test_node_gpus_must_be_a_positive_integer(tmp_path):
    from kvplan.core.errors import KvplanError
    from kvplan.hardware.gpu_profile import parse_profile

    text = open(GB200.path).read().replace("node_gpus: 4", "node_gpus: 0")
    with pytest.raises(KvplanError, match="node_gpus"):
        parse_profile(text, str(tmp_path / "gb200.yaml"))


def test_api_passes_the_node_size_to_the_search_and_the_plan():
    from kvplan import api

    said = [w.message for w in api.plan("deepseek-r1", "h200-sxm", tp=16, engine="trtllm", gpus_per_node=4).warnings]
    assert any("dense MLP layers over 4" in m and "gpus_per_node 4" in m for m in said)
    engine = resolve_engine("trtllm", None, [])
    from kvplan.compare.candidates import search_layouts

    plans = search_layouts(R1, H200, 16, REQ, engine, node_gpus=4)
    assert {p.deployment.node_gpus for p in plans} == {4}
    assert max(p.deployment.tp for p in plans) == 4  # and the search keeps tp within that node
