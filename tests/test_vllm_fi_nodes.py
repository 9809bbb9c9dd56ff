"""vLLM's FlashInfer all-reduce fusion workspace for a tp group across nodes (kvplan.engines.vllm.non_torch.
across_nodes): vLLM's pass and its enable rule test no node (0.17.0 allreduce_rms_fusion.py L707-784, config/vllm.py
L113-132), FlashInfer shares its symmetric buffers across hosts only by fabric handles (multi-node NVLink), so the
workspace exists on one node or inside a GB200 NVL72 rack's NVLink domain, and not over plain nodes, where its
creation fails and vLLM runs without the pass.
"""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.engines.vllm.non_torch import fi_allreduce_workspace
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20
H100, GB200 = find_gpu("h100-sxm"), find_gpu("gb200")  # GB200: trays of 4 in a 72-GPU NVSwitch domain


def test_tp_8_over_gb200_trays_keeps_the_workspace():
    # vLLM 0.19.0, SM100 at tp 8: FI_ALLREDUCE_FUSION_MAX_SIZE_MB 1 -> T = min(1 MiB / (8192 x 2 B), 8192) = 64 tokens;
    # data 8 x 64 x 8192 x 2 = 8 MiB, flags 8 x 256 x 4 = 8 KiB, Lamport 3 x 8 MiB = 24 MiB; each (+ a 2 KiB pad)
    # rounded to the 512 MiB multicast granularity: 3 x 512 = 1,536 MiB on one node of 8; over trays of 4 (fabric
    # handles) `auto` is MNNVL from 0.19.0, one McastGPUBuffer block (FlashInfer 0.6.6) of 3 x 2 MiB Lamport buffers
    # -> 512 MiB (tests/test_vllm_mnnvl.py)
    assert fi_allreduce_workspace((0, 19, 0), 8, 8192, 2, 8192, gpu=GB200, node=4) == 512 * MIB
    assert fi_allreduce_workspace((0, 19, 0), 8, 8192, 2, 8192, gpu=GB200, node=8) == 1_536 * MIB


def test_tp_8_over_two_plain_nodes_has_none():
    # H100 at tp 8, SM90 0.5 MiB -> T = 32 tokens; on one node 3 x 512 MiB as above; over two hosts of 4, none
    assert fi_allreduce_workspace((0, 19, 0), 8, 8192, 2, 8192, gpu=H100, node=8) == 1_536 * MIB
    assert fi_allreduce_workspace((0, 19, 0), 8, 8192, 2, 8192, gpu=H100, node=4) == 0


def test_the_plan_drops_it_over_plain_nodes_only():
    model, req = find_in_catalog("llama-3.1-70b"), Request(context=32768)  # hidden 8192, bf16
    engine = resolve_engine("vllm", "0.19.0", [])

    def overhead(gpu, node):
        return engine.plan(model, gpu, Deployment(tp=8, node_gpus=node), req).overhead_bytes_per_gpu

    assert overhead(H100, 8) - overhead(H100, 4) == 1_536 * MIB
    assert overhead(GB200, 8) - overhead(GB200, 4) == 1_024 * MIB  # the NVL72 rack: a workspace stays, MNNVL's
