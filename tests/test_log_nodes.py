"""The nodes a start-up log says it ran on (kvplan.engines.lognodes): read where the engine prints them, else said to
be assumed, on excerpts from public threads."""

from __future__ import annotations

from kvplan.engines.lognodes import node_gpus, node_note, read_nodes
from kvplan.engines.logrecord import LogRecord, logged_deployment
from kvplan.engines.vllm.non_torch import non_torch
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment, node_size

# foundation-model-stack/fastsafetensors#36 (vLLM over Ray on two DGX Sparks, tp 2): the head's worker prints without
# an address, the other host's with one, and the custom all-reduce says the group spans nodes
RAY_TWO_SPARKS = """\
(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=1171) WARNING 12-17 23:27:54 [custom_all_reduce.py:92] Custom \
allreduce is disabled because this process group spans across nodes.
(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=285, ip=192.168.177.12) spark2:285:285 [0] NCCL INFO Channel 00/0 : \
1[0] -> 0[0] [send] via NET/IB/0
"""
# sgl-project/sglang#550 (multi-node tensor parallelism): node 0's launch line of a tp 16 run over two nodes
SGLANG_TWO_NODES = ("GLOO_SOCKET_IFNAME=eth0 python3 -m sglang.launch_server --model-path "
                    "meta-llama/Meta-Llama-3-70B-Instruct --tp 16 --nccl-init-addr 172.16.5.82:20000 --nnodes 2 "
                    "--node-rank 0\n")


def _read(text: str, engine: str) -> LogRecord:
    rec = LogRecord(engine)
    read_nodes(text, rec)
    return rec


def test_ray_hosts_are_the_head_and_the_addresses():
    rec = _read(RAY_TWO_SPARKS, "vllm")
    assert rec.nodes == 2 and rec.spans
    assert node_gpus(rec, 2) == 1  # tp 2 over 2 hosts: 2 / 2 = 1 GPU a node (a Spark has one)
    dep = Deployment(2, node_gpus=node_gpus(rec, 2))
    assert node_note(rec, dep) == "nodes of 1 GPU (from the log: Ray's worker prefixes: the head and 1 other host(s))"


def test_sglang_states_its_node_count():
    rec = _read(SGLANG_TWO_NODES, "sglang")
    assert rec.nodes == 2 and rec.read["nodes"] == "--nnodes 2"
    assert node_gpus(rec, 16) == 8  # tp 16 x pp 1 over 2 nodes: 16 / 2 = 8
    assert node_gpus(rec, 12) == 6 and node_gpus(rec, 15) is None  # uneven: not read
    # the ServerArgs dump's form of the same field
    assert _read("server_args=ServerArgs(tp_size=16, dp_size=1, nnodes=2, node_rank=0)", "sglang").nodes == 2


def test_a_count_not_printed_is_said_assumed():
    rec = _read(RAY_TWO_SPARKS.splitlines()[0], "vllm")  # the warning alone: several nodes, no count
    assert rec.nodes is None and rec.spans
    assert node_note(rec, Deployment(2)) == ("the log says a tp group spans nodes but not how many: assumed 8 GPUs "
                                             "per node for the node rules")
    # no word of nodes: a tp group within the assumed node needs no line; one past it (GB200's trays of 4) does
    quiet = _read("INFO tensor_parallel_size=8\n", "vllm")
    assert node_note(quiet, Deployment(8)) is None
    assert node_note(quiet, Deployment(8), find_gpu("gb200")) == ("the log states no node count: 4 GPUs per node, "
                                                                  "the GPU profile's node_gpus for the node rules")


def test_one_node_stated_is_all_the_gpus_and_said_only_past_the_assumed_node():
    rec = _read("server_args=ServerArgs(tp_size=16, nnodes=1, node_rank=0)", "sglang")
    assert node_gpus(rec, 16) == 16  # tp 16 on one node: a node of 16 GPUs, no span
    assert node_note(rec, Deployment(16, node_gpus=16)) == "nodes of 16 GPUs (from the log: nnodes=1)"
    assert node_note(rec, Deployment(4, node_gpus=4)) is None  # 4 GPUs on one node: as assumed, no line


def test_a_group_said_to_span_nodes_without_a_count_is_planned_across_two():
    # fastsafetensors#36's warning alone: the tp group spans hosts, no count. Planned with nodes of half the tp group,
    # rounded up (the fewest nodes, two, that split it): tp 2 -> 1, tp 8 -> 4, tp 8 x pp 2 -> 4 (the tp group's)
    rec = _read(RAY_TWO_SPARKS.splitlines()[0], "vllm")
    assert (node_gpus(rec, 2), node_gpus(rec, 8), node_gpus(rec, 8, 2), node_gpus(rec, 1)) == (1, 4, 4, None)
    notes: list[str] = []
    dep = logged_deployment(rec, 8, notes, find_gpu("h100-80"))
    assert dep.node_gpus == 4 and node_size(dep) == 4
    assert notes[-1] == ("the log says a tp group spans nodes but not how many: planned as nodes of 4 GPUs, half the "
                         "tp group of 8 (the fewest nodes, two, that split it), so the node rules see the group across "
                         "nodes (no custom all-reduce booked, as the log says)")
    # vLLM 0.10.0 at tp 8: the assumed node of 8 would book the 18 MiB of buffers the log says are not built
    # (143 MiB); over nodes of 4 they are not: 143 - 18 = 125 MiB = 131,072,000 B
    assert non_torch(8, 1, (0, 10, 0), node=node_size(Deployment(8))) == 143 * 2**20
    assert non_torch(8, 1, (0, 10, 0), node=node_size(dep)) == 131_072_000
