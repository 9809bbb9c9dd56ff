"""A tensor-parallel group larger than a node (kvplan.planning.deploy.node_of): the plan warns on what it does
not price (kvplan.planning.plan_warnings.node_span_warnings), and SGLang books no custom all-reduce for a tp group
that spans nodes outside multi-node NVLink (kvplan.planning.deploy.nvlink_reaches).

Source for the exact term: sglang 0.5.3 wheel `srt/distributed/device_communicators/custom_all_reduce.py` L96-101
("Custom allreduce is disabled because this process group spans across nodes", checked before the world size at
L110); 0.5.23 `custom_all_reduce_utils.py` L459-464 the same; vLLM 0.11.0 `custom_all_reduce.py` L84-88 the same.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.engines import resolve_engine
from kvplan.engines.sglang import allreduce
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100 = find_gpu("h100-sxm")  # interconnect nvswitch, domain 8, no node_gpus (an 8-GPU board assumed)
GB200 = find_gpu("gb200")  # node_gpus 4 (a tray), NVSwitch domain 72: multi-node NVLink


def _warnings(*args) -> list[str]:
    res = CliRunner().invoke(whole_app(), ["fit", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["warnings"]


def _spans(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "spans" in w]


def test_tp16_on_an_8_gpu_node_warns_and_tp8_does_not():
    wide = _spans(_warnings("llama-3.1-405b", "--gpu", "h100-80", "--tp", "16", "--ctx", "32k", "--engine", "vllm"))
    assert len(wide) == 1 and "spans 2 nodes (assumed 8 GPUs per node)" in wide[0]
    assert "NCCL_BUFFSIZE" in wide[0] and "speed figures" in wide[0] and "optimistic" in wide[0]
    assert not _spans(_warnings("llama-3.1-405b", "--gpu", "h100-80", "--tp", "8", "--ctx", "32k", "--engine", "vllm"))


def test_the_node_is_the_users_then_the_profiles():
    said = _spans(_warnings("llama-3.1-8b", "--gpu", "h100-80", "--tp", "4", "--gpus-per-node", "2"))
    assert len(said) == 1 and "spans 2 nodes (--gpus-per-node 2)" in said[0]
    assert not _spans(_warnings("llama-3.1-8b", "--gpu", "h100-80", "--tp", "4", "--gpus-per-node", "4"))
    # GB200: trays of 4 inside one NVL72 domain: ranks on the other tray are reached over NVLink, which the speed
    # terms price, so only the memory clause is said
    tray = _spans(_warnings("llama-3.1-8b", "--gpu", "gb200", "--tp", "8", "--engine", "sglang"))
    assert len(tray) == 1 and "node_gpus" in tray[0] and "multi-node NVLink" in tray[0]
    assert "optimistic" not in tray[0]


def test_sglang_custom_allreduce_off_across_nodes():
    # tp 2 on nodes of 1 GPU (H100, whose NVSwitch domain is its own board of 8): the group spans nodes, SGLang
    # builds no CustomAllreduce: 0 B, where the same group on one node holds one instance, 38 MiB = 39,845,888 B
    assert allreduce.custom_allreduce_bytes(H100, 2, 1, "0.5.3", node=8) == 39_845_888
    assert allreduce.custom_allreduce_bytes(H100, 2, 1, "0.5.3", node=1) == 0
    # GB200 tp 8 over two trays of 4: multi-node NVLink, CustomAllReduceV2 may admit it, booked (the safe side)
    assert allreduce.custom_allreduce_bytes(GB200, 8, 1, "0.5.23", node=4) == 39_845_888


def test_sglang_settings_drop_the_instance_across_nodes():
    model, engine = find_in_catalog("llama-3.1-8b"), resolve_engine("sglang", "0.5.3", [])
    req = Request(context=8192)
    one = engine.settings(model, H100, Deployment(tp=2), req)
    two = engine.settings(model, H100, Deployment(tp=2, node_gpus=1), req)
    # memory in use before the weights: the same CUDA context and NCCL term, less the one 39,845,888 B instance
    assert one.init_bytes - two.init_bytes == 39_845_888


def test_the_layout_search_keeps_tp_within_the_profiles_node():
    # llama-3.1-405b (128 heads, 126 layers) on 8 GB200s, whose profile gives trays of node_gpus 4. By hand, every
    # (tp, pp, dp) with tp | 4 and tp x pp x dp = 8: tp 1 (1,1,8) (1,2,4) (1,4,2) (1,8,1); tp 2 (2,1,4) (2,2,2)
    # (2,4,1); tp 4 (4,1,2) (4,2,1): 9 layouts, tp 8 not among them (it was while the search read 8 GPUs a node)
    from kvplan.compare.candidates import search_layouts

    model, engine = find_in_catalog("llama-3.1-405b"), resolve_engine(None, None, [])
    by_hand = {(1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1), (2, 1, 4), (2, 2, 2), (2, 4, 1), (4, 1, 2), (4, 2, 1)}
    plans = search_layouts(model, GB200, 8, Request(context=32768), engine)
    assert {(p.deployment.tp, p.deployment.pp, p.deployment.dp) for p in plans} == by_hand
    # the user's node size wins over the profile's: nodes of 8 add (8, 1, 1)
    wide = search_layouts(model, GB200, 8, Request(context=32768), engine, node_gpus=8)
    assert {(p.deployment.tp, p.deployment.pp, p.deployment.dp) for p in wide} == by_hand | {(8, 1, 1)}


def test_fit_says_the_node_the_search_assumed():
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-405b", "--gpu", "gb200", "--gpus", "8", "--ctx", "32k"])
    assert res.exit_code == 0, res.output
    assert ("note: layouts keep tensor parallelism within one node, 4 GPUs per node, the GPU profile's node_gpus"
            in res.stderr)
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "h100-80", "--gpus", "2"])
    assert "within one node, assumed 8 GPUs per node" in res.stderr


def test_attention_dp_checks_the_whole_tp_group_under_both_engines():
    # tp 1 x dp 16 = 16 ranks in one tp group: SGLang's --tp-size under DP attention (above) and TensorRT-LLM's
    # tensor_parallel_size under enable_attention_dp (kvplan/engines/trtllm/layout.py: Deployment(1, N) is
    # tensor_parallel_size N, Mapping.dp_size = tp_size), each the engine's tp_group: 16 / 8 = 2 nodes for both
    for engine, name in (("sglang", "SGLang's tp group"), ("trtllm", "TensorRT-LLM's tp group")):
        wide = _spans(_warnings("deepseek-v3", "--gpu", "h200", "--tp", "1", "--dp", "16", "--ep", "16", "--ctx",
                                "8k", "--engine", engine))
        assert len(wide) == 1 and wide[0].startswith(name), (engine, wide)
        assert "of 16 ranks spans 2 nodes (assumed 8 GPUs per node)" in wide[0]
        # dp 8: 8 ranks, one node
        assert not _spans(_warnings("deepseek-v3", "--gpu", "h200", "--tp", "1", "--dp", "8", "--ep", "8", "--ctx",
                                    "8k", "--engine", engine))


def test_sglang_dp_attention_checks_its_whole_tp_group():
    # SGLang under DP attention: --tp-size is every rank (attention tp x dp), the group its MoE collectives span
    # (sglang 0.5.9 wheel layers/dp_attention.py L230-244; server_args.py L5143-5145). tp 2 x dp 8 = 16 ranks on
    # nodes of 8: 16 / 8 = 2 nodes, though the attention tp (2) fits one
    wide = _spans(_warnings("deepseek-v3", "--gpu", "h200", "--tp", "2", "--dp", "8", "--ep", "16", "--ctx", "8k",
                            "--engine", "sglang"))
    assert len(wide) == 1 and wide[0].startswith("SGLang's tp group under DP attention")
    assert "of 16 ranks spans 2 nodes (assumed 8 GPUs per node)" in wide[0]
    # tp 1 x dp 8 = 8 ranks: one node, no warning
    assert not _spans(_warnings("deepseek-v3", "--gpu", "h200", "--tp", "1", "--dp", "8", "--ep", "8", "--ctx", "8k",
                                "--engine", "sglang"))
    # a tp group wider than the node without DP attention is still the plan's own check, said once
    one = _spans(_warnings("llama-3.1-405b", "--gpu", "h100-80", "--tp", "16", "--ctx", "8k", "--engine", "sglang"))
    assert len(one) == 1 and one[0].startswith("tensor parallelism 16 spans 2 nodes")
