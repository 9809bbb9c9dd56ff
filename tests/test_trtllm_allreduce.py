"""TensorRT-LLM's custom all-reduce workspace (kvplan.engines.trtllm.allreduce): three IpcMemory buffers a rank,
size x tp, 256 x tp and 3 x size x tp, each in 2 MiB pages, only for a tp group on one node; booked in the overhead
before the KV pool (it is allocated at model construction, before KvCacheCreator's free-memory read).

Sources (the module docstring): NVIDIA/TensorRT-LLM allreduce_helper.py @4fb601b9 L122-131 (the three buffers),
L83 (67,108,864 B); plugin.py @c20322ff max_workspace_size_auto (16,000,000 at tp <= 2, 8,000,000 above);
_ipc_utils.py @c8965302 (align_size(size, 1 << 21); nothing where tp_size > gpus_per_node).
"""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.engines.trtllm.allreduce import workspace_bytes
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20


def test_the_workspace_at_tp_8_by_hand():
    # 1.2.0, size 64 MiB: data 8 x 64 = 512 MiB; barriers 256 x 8 = 2,048 B -> one 2 MiB page; Lamport 3 x 512 =
    # 1,536 MiB: 2,050 MiB a rank
    assert workspace_bytes(8, 8, "1.2.0") == 2_050 * MIB == 2_149_580_800
    # 0.20.0, size 8,000,000 (tp > 2): 64,000,000 B -> 31 pages of 2,097,152 (65,011,712); 2 MiB; 192,000,000 B ->
    # 92 pages (192,937,984): 260,046,848 B
    assert workspace_bytes(8, 8, "0.20.0") == 65_011_712 + 2_097_152 + 192_937_984 == 260_046_848
    # 0.20.0 at tp 2, size 16,000,000: 32,000,000 -> 16 pages (33,554,432); 2 MiB; 96,000,000 -> 46 pages (96,468,992)
    assert workspace_bytes(2, 8, "0.20.0") == 33_554_432 + 2_097_152 + 96_468_992


def test_none_across_nodes_or_on_one_gpu():
    assert workspace_bytes(8, 4, "1.2.0") == 0  # tp 8 over trays of 4: IpcMemory opens nothing, NCCL runs it
    assert workspace_bytes(1, 8, "1.2.0") == 0


def test_the_plan_books_it_before_the_pool():
    model, h100 = find_in_catalog("llama-3.1-70b"), find_gpu("h100-sxm")
    engine = resolve_engine("trtllm", "1.2.0", [])
    req = Request(context=32768)
    one = engine.plan(model, h100, Deployment(tp=8), req)
    spread = engine.plan(model, h100, Deployment(tp=8, node_gpus=4), req)  # the same tp 8 over two nodes of 4
    assert one.overhead_bytes_per_gpu - spread.overhead_bytes_per_gpu == 2_149_580_800
    # kv = (total - weights - overhead) x 0.9, so the pool is 0.9 x the workspace smaller on one node
    assert abs((spread.kv_memory_bytes_per_gpu - one.kv_memory_bytes_per_gpu) - 0.9 * 2_149_580_800) < 2


def test_attention_dp_says_the_whole_groups_workspace_it_does_not_book():
    from kvplan import api
    # tp 1 x dp 8 on one node, 1.2.0: the whole group of 8 would take 8 x 64 + 2 + 3 x 8 x 64 = 2,050 MiB a rank
    # (the hand sum above); kvplan books the attention tp's (tp 1: none) and says the rest in a warning
    said = [str(w) for w in api.plan("deepseek-v3", "h200", tp=1, dp=8, ep=8, engine="trtllm", engine_version="1.2.0",
                                     context=8192).warnings]
    assert any("up to 2,050 MiB smaller" in w for w in said)
    said = [str(w) for w in api.plan("deepseek-v3", "h200", tp=8, engine="trtllm", context=8192).warnings]
    assert not any("under attention DP" in w for w in said)
