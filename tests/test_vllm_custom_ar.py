"""vLLM's custom all-reduce buffers and the node rule (kvplan.engines.vllm.custom_ar): in the non-torch figure before
0.11.0 only, and not built for a tp group that spans nodes.

Source (vllm sdists): `distributed/device_communicators/custom_all_reduce.py` 0.10.0 L83-87 / 0.11.0 L84-88 ("Custom
allreduce is disabled because this process group spans across nodes"), L51 `_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]`,
`meta_ptrs` cudaMalloc(meta_size() + 8 MiB) and `buffer_ptrs` cudaMalloc(8 MiB); `v1/worker/gpu_worker.py` 0.10.0
snapshot L163 before the distributed set-up L181, 0.11.0 the set-up L169 before the snapshot L182 (vllm#25359).
"""

from __future__ import annotations

import dataclasses

from kvplan import api
from kvplan.engines.vllm import custom_ar
from kvplan.hardware.gpus import find_gpu
from kvplan.engines.vllm.non_torch import NON_TORCH_TP_LEGACY, NON_TORCH_TP_V011, non_torch

MIB = 2**20


def test_the_buffers_by_hand():
    # meta: 4 KiB + 8 MiB in 2 MiB pages = 10 MiB; buffer: 8 MiB; 18 MiB = 18,874,368 B
    assert custom_ar.BUFFERS == 18_874_368


def test_a_two_node_tp16_plan_at_0_10_has_no_buffers_in_the_window():
    # 0.10.0, tp 16 over two nodes of 8: the legacy constant (143 MiB, fitted on one-node groups that built the
    # instance) less the 18 MiB never built: 125 MiB = 131,072,000 B
    assert NON_TORCH_TP_LEGACY == 143 * MIB
    assert non_torch(16, 1, (0, 10, 0), node=8) == 131_072_000
    assert non_torch(8, 1, (0, 10, 0), node=8) == 143 * MIB  # one node, a supported size: built, as fitted
    # GB200 trays of 4: tp 8 spans two hosts, which in_the_same_node_as does not pass, NVLink or not
    assert non_torch(8, 1, (0, 10, 0), node=4) == 131_072_000
    assert non_torch(16, 1, (0, 10, 0), node=8, v1=False) == 131_072_000  # V0's worker: snapshot first too


def test_from_0_11_the_buffers_are_outside_the_window_on_any_node():
    # the distributed set-up precedes the snapshot: tp 16 over two nodes books the same 563 MiB as tp 8 on one
    assert non_torch(16, 1, (0, 11, 0), node=8) == non_torch(8, 1, (0, 11, 0), node=8) == NON_TORCH_TP_V011


def test_the_plan_books_18_mib_less_across_nodes_at_0_10():
    def overhead(**node):
        return api.plan("llama-3.1-405b", "h100-80", tp=8, context="8k", engine="vllm", engine_version="0.10.0",
                        **node).overhead_bytes_per_gpu

    # tp 8 over two nodes of 4 (--gpus-per-node 4) builds no instance: 18,874,368 B less than on one node of 8
    assert overhead() - overhead(gpus_per_node=4) == 18_874_368
    # tp 16 builds none on any node (16 is not a supported size): the node size moves nothing
    assert (api.plan("llama-3.1-405b", "h100-80", tp=16, context="8k", engine="vllm", engine_version="0.10.0",
                     gpus_per_node=16).overhead_bytes_per_gpu
            == api.plan("llama-3.1-405b", "h100-80", tp=16, context="8k", engine="vllm",
                        engine_version="0.10.0").overhead_bytes_per_gpu)


def test_more_than_two_pcie_only_gpus_build_none_at_0_10():
    # 0.10.0 custom_all_reduce.py L134-141: world_size > 2 and not fully connected returns before the buffers. L40S
    # (interconnect.kind pcie): tp 4 and tp 8 carry the legacy 143 MiB less the 18 MiB never built, 125 MiB =
    # 131,072,000 B; tp 2 passes on any link (143 MiB, 149,946,368 B)
    l40s = find_gpu("l40s")
    assert non_torch(4, 1, (0, 10, 0), gpu=l40s, node=8) == 131_072_000
    assert non_torch(8, 1, (0, 10, 0), gpu=l40s, node=8) == 131_072_000
    assert non_torch(2, 1, (0, 10, 0), gpu=l40s, node=8) == 149_946_368
    # H100 SXM (nvswitch, domain 8): fully connected, built, the constant as fitted
    assert non_torch(4, 1, (0, 10, 0), gpu=find_gpu("h100-80"), node=8) == 149_946_368
    # a profile that does not say its fabric keeps the buffers (the constant's fit)
    assert non_torch(4, 1, (0, 10, 0), gpu=None, node=8) == 149_946_368


def test_the_plan_books_18_mib_less_on_pcie_at_tp4():
    def overhead(gpu):
        return api.plan("llama-3.1-70b", gpu, tp=4, context="8k", engine="vllm",
                        engine_version="0.10.0").overhead_bytes_per_gpu

    # the L40S profile (pcie) against the same profile without its fabric (kept as fitted): 18,874,368 B less
    l40s = find_gpu("l40s")
    assert overhead(dataclasses.replace(l40s, interconnect_kind=None)) - overhead(l40s) == 18_874_368
    h100 = find_gpu("h100-80")  # nvswitch, domain 8: built, as with no fabric said
    assert overhead(dataclasses.replace(h100, interconnect_kind=None)) == overhead(h100)


def test_v0_tp1_with_pipeline_stages_has_no_buffers():
    # a group of one returns before any buffer (0.10.0 L93-95): V0 at tp 1, pp 2 books the legacy 143 MiB less
    # 18 MiB, 131,072,000 B; tp 1 pp 1 keeps V0's one-GPU 160 MiB
    assert non_torch(1, 2, (0, 6, 0), node=8) == 131_072_000
    assert non_torch(1, 1, (0, 6, 0), node=8) == 160 * MIB


def test_amd_before_0_8_3_builds_no_buffers():
    # vLLM through 0.8.2 sets disable_custom_all_reduce on ROCm (0.7.3 config.py L1413-1417, 0.8.2 L1550-1554), so
    # CudaCommunicator builds no CustomAllreduce (cuda_communicator.py L45-50); 0.8.3 builds it on gfx94*
    # (config.py L1632-1636, platforms/rocm.py L307-311). MI300X (xGMI, 8 fully connected), tp 8 on one node:
    # 0.7.3 (V0) 143 - 18 = 125 MiB = 131,072,000 B; 0.8.3 the legacy 143 MiB = 149,946,368 B, as on an H100
    mi300x = find_gpu("mi300x")
    assert non_torch(8, 1, (0, 7, 3), gpu=mi300x, node=8) == 131_072_000
    assert non_torch(8, 1, (0, 8, 2), gpu=mi300x, node=8) == 131_072_000
    assert non_torch(8, 1, (0, 8, 3), gpu=mi300x, node=8) == 149_946_368
    assert non_torch(8, 1, (0, 7, 3), gpu=find_gpu("h100-80"), node=8) == 149_946_368
    # AMD's fork build that keeps the kernel on (ROCm/vllm@21f6ca217, kvplan.speed.amd_allreduce.AMD_FORK_BUILDS)
    assert non_torch(8, 1, "0.7.3.dev138+g21f6ca217", gpu=mi300x, node=8) == 149_946_368


def test_amd_builds_buffers_only_on_the_gfx_targets_its_release_names():
    # platforms/rocm.py use_custom_allreduce: `supported_archs = ['gfx94']` in 0.8.3 (L307-311) and 0.8.5 (L340-341),
    # ['gfx94', 'gfx95'] from 0.9.0 (L374-375); elsewhere config.py sets disable_custom_all_reduce (0.8.3 L1632-1636)
    # and no CustomAllreduce is built. Two ranks (any link passes), one node, the legacy window (before 0.11.0):
    # built, the legacy 143 MiB = 149,946,368 B; not built, 143 - 18 = 125 MiB = 131,072,000 B
    mi250x, mi300x, mi355x = find_gpu("mi250x"), find_gpu("mi300x"), find_gpu("mi355x")
    assert non_torch(2, 1, (0, 8, 3), gpu=mi300x, node=8) == 149_946_368  # gfx942
    assert non_torch(2, 1, (0, 8, 3), gpu=mi250x, node=8) == 131_072_000  # gfx90a: never
    assert non_torch(2, 1, (0, 10, 1), gpu=mi250x, node=8) == 131_072_000
    assert non_torch(2, 1, (0, 8, 5), gpu=mi355x, node=8) == 131_072_000  # gfx950 before 0.9.0
    assert non_torch(2, 1, (0, 9, 0), gpu=mi355x, node=8) == 149_946_368
    assert non_torch(2, 1, (0, 10, 1), gpu=find_gpu("mi100"), node=8) == 131_072_000  # gfx908


def test_the_plan_reads_the_release_as_the_speed_side_does():
    # one rule for both sides (kvplan.speed.amd_allreduce.runs_custom_allreduce_on_amd): 0.8.2 upstream on MI300X
    # books 18,874,368 B less per GPU than the same release built by AMD's fork, which keeps the buffers
    from kvplan.speed.amd_allreduce import runs_custom_allreduce_on_amd

    def overhead(version):
        return api.plan("llama-3.1-70b", "mi300x", tp=8, context="8k", engine="vllm",
                        engine_version=version).overhead_bytes_per_gpu

    fork = "0.8.2+g21f6ca217"
    mi300x = find_gpu("mi300x")
    assert not runs_custom_allreduce_on_amd("vllm", "0.8.2", mi300x, 8)
    assert runs_custom_allreduce_on_amd("vllm", fork, mi300x, 8)
    assert overhead(fork) - overhead("0.8.2") == 18_874_368


def test_the_fork_build_turns_it_off_on_mi250_and_on_navi_at_two():
    # ROCm/vllm@21f6ca217 vllm/config.py L1388-1398: `is_mi250() and tensor_parallel_size > 1` (gcnArchName holds
    # "gfx90a", utils.py L495-501) and `is_navi() and tensor_parallel_size <= 2` ("gfx1", L1700-1707) set
    # disable_custom_all_reduce; nothing else tests the GPU. Legacy window, one node: built, the legacy 143 MiB =
    # 149,946,368 B; not built, 143 - 18 = 125 MiB = 131,072,000 B
    from kvplan.speed.amd_allreduce import runs_custom_allreduce_on_amd, turned_on_on_amd
    fork = "0.7.3.dev138+g21f6ca217"
    mi250x, navi, mi100 = find_gpu("mi250x"), find_gpu("rx-7900-xtx"), find_gpu("mi100")
    assert not runs_custom_allreduce_on_amd("vllm", fork, mi250x, 2)
    assert not runs_custom_allreduce_on_amd("vllm", fork, mi250x, 8)
    assert not runs_custom_allreduce_on_amd("vllm", fork, navi, 2)
    # gfx1100 at tp 4 passes config.py's test, but four RX 7900 XTX on PCIe are not one xGMI hop apart pair by pair
    # (platforms/rocm.py L139-159), so CustomAllreduce builds none (custom_all_reduce.py L135-141)
    assert turned_on_on_amd("vllm", fork, navi, 4) and not runs_custom_allreduce_on_amd("vllm", fork, navi, 4)
    assert runs_custom_allreduce_on_amd("vllm", fork, mi100, 2)  # gfx908 is neither
    assert non_torch(2, 1, fork, gpu=mi250x, node=8) == 131_072_000
    assert non_torch(2, 1, fork, gpu=navi, node=8) == 131_072_000
    assert non_torch(4, 1, fork, gpu=navi, node=8) == 131_072_000  # tp 4 on PCIe: none built either
    assert non_torch(2, 1, fork, gpu=mi100, node=8) == 149_946_368
    assert non_torch(2, 1, "0.7.3", gpu=mi100, node=8) == 131_072_000  # upstream 0.7.3: off on ROCm


def test_the_fork_build_turns_it_off_with_pipeline_stages():
    # ROCm/vllm@21f6ca217 vllm/config.py L1434-1439 (`_verify_args`): `world_size > 1 and pipeline_parallel_size > 1`
    # sets disable_custom_all_reduce ("not supported with pipeline parallelism"; upstream removed it in
    # vllm-project/vllm#6117). MI300X (gfx942, 8 on one xGMI mesh) at tp 4: built at pp 1, the legacy 143 MiB =
    # 149,946,368 B; at pp 2 none, 143 - 18 = 125 MiB = 131,072,000 B
    from kvplan.speed.amd_allreduce import runs_custom_allreduce_on_amd
    fork, mi300x = "0.7.3.dev138+g21f6ca217", find_gpu("mi300x")
    assert runs_custom_allreduce_on_amd("vllm", fork, mi300x, 4, pp=1)
    assert not runs_custom_allreduce_on_amd("vllm", fork, mi300x, 4, pp=2)
    assert non_torch(4, 1, fork, gpu=mi300x, node=8) == 149_946_368
    assert non_torch(4, 2, fork, gpu=mi300x, node=8) == 131_072_000


def test_speed_and_memory_read_the_fork_rule_alike():
    # the speed side's custom all-reduce limit (kvplan.speed.model.custom_allreduce_bytes): 0 where the kernel is off
    # (RCCL takes every call); where it runs, the fork's own ROCm limit, `_MAX_CAR_SIZE = 2 * 8192 * 1024` =
    # 16,777,216 B ("crossover is at 16MB buffer size for ROCm", ROCm/vllm@21f6ca217
    # vllm/distributed/device_communicators/custom_all_reduce.py L53-56; `inp_size < self.max_size`, L289), not
    # upstream vLLM's 8 MiB
    from kvplan.speed.model import custom_allreduce_bytes
    fork = "0.7.3.dev138+g21f6ca217"
    assert custom_allreduce_bytes("vllm", 2, find_gpu("mi250x"), fork) == 0
    assert custom_allreduce_bytes("vllm", 2, find_gpu("rx-7900-xtx"), fork) == 0
    assert custom_allreduce_bytes("vllm", 4, find_gpu("rx-7900-xtx"), fork) == 0  # PCIe at tp 4: none built
    assert custom_allreduce_bytes("vllm", 2, find_gpu("mi100"), fork) == 16_777_216
    assert custom_allreduce_bytes("vllm", 8, find_gpu("mi300x"), fork) == 16_777_216
    # and the plan says why where it is off
    from kvplan.engines.vllm.rocm_allreduce import note
    # (built from FORK_OFF and the profile's gfx target, not a card's name)
    said = note(find_gpu("mi250x"), 2, fork)
    assert "off on gfx90a* at tp > 1 and on gfx1* at tp <= 2" in said and "off at tp 2 on gfx90a," in said
    assert note(find_gpu("mi100"), 2, fork) is None
