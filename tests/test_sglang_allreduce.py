"""SGLang's custom all-reduce buffers (kvplan/engines/sglang/allreduce.py), priced by hand from the source.

Source: sglang 0.4.9.post2 wheel (PyPI), `srt/distributed/device_communicators/custom_all_reduce.py` L147-151
(`_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]`, `_MAX_CAR_SIZE = 8192 * 1024`), L236 (off on more than two GPUs without
full NVLink), L264-277 (meta_ptrs = cudaMalloc(meta_size() + max_size), buffer_ptrs = cudaMalloc(max_size),
rank_data = torch.empty(max_size)); the same lines at 0.4.3.post4 L146-147 / L263-275 and 0.5.3 L59-60 / L176-188;
`parallel_state.py` `initialize_model_parallel` (0.4.10 L1352-1390, 0.5.3 L1516-1558) for the MoE groups. Read
2026-12-03.
"""

from __future__ import annotations

import dataclasses

from kvplan.engines import resolve_engine
from kvplan.engines.sglang import allreduce
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20
H100 = find_gpu("h100-sxm")  # interconnect.kind nvswitch, domain 8


def test_one_instance_by_hand():
    # meta:      cudaMalloc(4,096 + 8,388,608 = 8,392,704 B) -> 2 MiB pages: 5 x 2,097,152 = 10,485,760
    # buffer:    cudaMalloc(8,388,608)                         -> 4 pages          =  8,388,608
    # rank_data: torch.empty(8 MiB): a large request under 10 MiB -> one 20 MiB segment = 20,971,520
    # 10,485,760 + 8,388,608 + 20,971,520 = 39,845,888 B (38 MiB)
    assert allreduce.instance_bytes() == 39_845_888 == 38 * MIB


def test_which_groups_get_one():
    assert allreduce.custom_allreduce_bytes(H100, 4, 1, "0.4.9", node=8) == 39_845_888  # NVSwitch, 4 ranks
    assert allreduce.custom_allreduce_bytes(H100, 8, 1, "0.5.23", node=8) == 39_845_888
    assert allreduce.custom_allreduce_bytes(H100, 1, 1, "0.4.9", node=8) == 0  # one GPU
    assert allreduce.custom_allreduce_bytes(H100, 3, 1, "0.4.9", node=8) == 0  # not a supported world size
    assert allreduce.custom_allreduce_bytes(H100, 16, 1, "0.4.9", node=8) == 0  # past 8 (and past the node)
    l4 = find_gpu("l4")  # PCIe
    assert allreduce.custom_allreduce_bytes(l4, 4, 1, "0.4.3.post4", node=8) == 0  # "more than two PCIe-only GPUs"
    assert allreduce.custom_allreduce_bytes(l4, 2, 1, "0.4.3.post4", node=8) == 39_845_888  # two GPUs: any link
    nvl = find_gpu("h100-nvl")  # NVLink-bridged pairs, domain 2
    assert allreduce.custom_allreduce_bytes(nvl, 4, 1, "0.4.9", node=8) == 0
    assert allreduce.custom_allreduce_bytes(find_gpu("mi300x"), 8, 1, "0.4.9", node=8) == 0  # ROCm branch: not modelled


def test_moe_groups_from_0_4_10():
    # 1 < ep < tp: moe_ep (4 ranks) and moe_tp (8 / 4 = 2 ranks) each build one beside the tp group's: 3 x 38 MiB
    assert allreduce.groups(8, 4, "0.5.3") == (8, 4, 2)
    assert allreduce.custom_allreduce_bytes(H100, 8, 4, "0.5.3", node=8) == 3 * 39_845_888 == 119_537_664
    assert allreduce.groups(8, 4, "0.4.9") == (8,)  # 0.4.9 builds only tp and pp groups
    assert allreduce.groups(8, 8, "0.5.3") == (8,)  # ep == tp: moe_ep is the tp group, moe_tp has one rank
    assert allreduce.groups(8, 1, "0.5.3") == (8,)


def _settings(gpu, tp=4, version="0.4.9"):
    model = find_in_catalog("qwen3-235b-a22b")
    eng = resolve_engine("sglang", version, ["mem_fraction_static=0.93"])
    return eng.settings(model, gpu, Deployment(tp, 1), Request(context=4096, weight_dtype="fp8"))


def test_booked_before_the_weights():
    # INIT_BYTES_MULTI (409 MiB, the PCIe L4 figure: no custom all-reduce in it) + 38 MiB on NVSwitch, + NCCL's
    # NVSwitch buffers beyond the PCIe figure (1498 MiB: kvplan/engines/sglang/ncclmem.py, tests/test_sglang_ncclmem.py)
    assert _settings(H100).init_bytes == 409 * MIB + 39_845_888 + 1498 * MIB
    pcie = dataclasses.replace(H100, interconnect_kind="pcie", interconnect_domain=1)
    assert _settings(pcie).init_bytes == 409 * MIB


def test_a_profile_without_its_fabric_is_warned():
    model = find_in_catalog("qwen3-235b-a22b")
    eng = resolve_engine("sglang", "0.4.9")
    bare = dataclasses.replace(H100, interconnect_kind=None)
    said = " ".join(str(w.message) for w in eng.assumptions(model, bare, Deployment(4, 1), None))
    assert "interconnect.kind" in said and "no NVSwitch" in said
    assert not eng.assumptions(model, H100, Deployment(4, 1), None)
