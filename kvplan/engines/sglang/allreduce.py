"""SGLang's custom all-reduce buffers: memory in use before the weights load at tp > 1, which its pool's budget sees.

SGLang sizes its token pool as `free_after_weights - free_before_weights x (1 - fraction)`, with
`free_before_weights` read at the end of `init_torch_distributed` (0.4.9.post2 `model_executor/model_runner.py`
L478-570; kvplan.engines.sglang.engine): whatever the distributed set-up leaves allocated costs the pool
`fraction` x its bytes. `initialize_model_parallel` builds the tp group's `GroupCoordinator`, whose
`CustomAllreduce` (0.4.3.post4 / 0.4.9.post2 / 0.5.3 `distributed/device_communicators/custom_all_reduce.py`,
CUDA branch; read from the PyPI wheels, 2026-12-03) allocates per rank, once:

* `meta_ptrs`: `cudaMalloc(meta_size() + max_size)`, the synchronisation flags (`sizeof(Signal)`, a few KiB)
  plus an 8 MiB scratch buffer (`_MAX_CAR_SIZE = 8192 * 1024`; 16 MiB on ROCm, not modelled);
* `buffer_ptrs`: `cudaMalloc(max_size)`, the IPC buffer eager inputs are copied into;
* `rank_data`: `torch.empty(8 MiB)`, the table of registered pointer tuples.

The two cudaMalloc'd buffers take whole 2 MiB pages (the driver's allocation granularity, the same 2 MiB PyTorch
rounds large segments to: kvplan.core.caching_allocator); `rank_data` goes through PyTorch's caching allocator, a
request between 1 and 10 MiB, so it takes a 20 MiB segment (`segment_size`). 10 + 8 + 20 = 38 MiB per instance.
The other ranks' buffers are mapped with `cudaIpcOpenMemHandle`, which allocates nothing on this GPU. The 12 MiB
tail of `rank_data`'s segment may later hold a small weight tensor; that reuse is not replayed (kvplan books at
most 12 MiB too much, on the safe side).

When it exists (`__init__`, same files): CUDA (NVIDIA), a group of 2, 4, 6 or 8 ranks (`_SUPPORTED_WORLD_SIZES`),
on one node (`in_the_same_node_as`, else "Custom allreduce is disabled because this process group spans across
nodes": 0.5.3 L96-101, before the world-size check at L110; 0.5.23 `custom_all_reduce_utils.py` L459-464), and at
more than two ranks every pair linked by NVLink (`is_full_nvlink`; "not supported on more than two PCIe-only
GPUs"). kvplan reads the NVLink from the profile's `interconnect.kind`: `nvswitch` with a `domain` holding the
group; a profile without the field is taken as no NVSwitch (the engine's plan warning says so). It takes a group of
more ranks than the node's GPUs (kvplan.planning.deploy.node_size) as spanning nodes: so the tp group is, its ranks
being consecutive; a moe group of at most a node's ranks is still booked, on the safe side where its strided ranks
span nodes. One exception is booked, on the safe side: CustomAllReduceV2 (on by default in the 0.5.14, 0.5.15 and
0.5.23 wheels, `SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2`) admits a group across nodes that is one NVLink clique on a
VMM-backed allocator (0.5.23 `custom_all_reduce_v2.py` L582-597), so a group across nodes inside multi-node NVLink
(kvplan.planning.deploy.nvlink_past_node: GB200 NVL72 trays of 4) keeps its instance. The P2P
check passes without probing (`monkey_patch_p2p_access_check` unless `--enable-p2p-check`), so two GPUs get it
whatever their link. From 0.4.10 (`parallel_state.py` `initialize_model_parallel`: 0.4.10 L1352-1390, 0.5.3
L1516-1558) expert parallelism with 1 < ep < tp adds a `moe_ep` group of ep ranks and a `moe_tp` group of tp / ep
ranks, each a `GroupCoordinator` with its own instance; the attention-tp group of DP attention has none
(`layers/dp_attention.py`: `use_custom_allreduce=False`).

What else the distributed set-up or tp > 1 allocates, and whether the budget sees it (docs/engines.md 2.2): the
pynccl communicator (in the budget, sized by NCCL's channel search, not by SGLang: the PCIe figure of
INIT_BYTES_MULTI, and inside an NVSwitch domain what SGLang's logs measured, kvplan.engines.sglang.ncclmem); NCCL NVLS
and cuMem (off: `NCCL_NVLS_ENABLE=0`, `NCCL_CUMEM_ENABLE=0` unless asked, 0.4.9.post2 `entrypoints/engine.py` L623-624);
MSCCL++, torch symmetric memory (off by default); CUDA-graph capture, the graph buffers it registers and FlashInfer's
fusion workspace (created at the first forward, after the pool: outside the budget).
"""

from __future__ import annotations

from kvplan.core.caching_allocator import segment_size
from kvplan.engines.base import parse_version
from kvplan.engines.custom_allreduce import SUPPORTED, fabric_allows, ipc_buffer_bytes
from kvplan.hardware.facts import vendor_of
from kvplan.planning.deploy import nvlink_reaches

MIB = 2**20
RANK_DATA = 8 * MIB  # rank_data = torch.empty(8 MiB)
MOE_GROUPS_FROM = (0, 4, 10)


def instance_bytes() -> int:
    """Memory one CustomAllreduce holds on its rank: the two IPC buffers (kvplan.engines.custom_allreduce) and
    rank_data's segment, 10 + 8 + 20 = 38 MiB."""
    return ipc_buffer_bytes() + segment_size(RANK_DATA)


def in_nvswitch_domain(gpu, ranks: int) -> bool:
    """Whether a group of `ranks` GPUs of this profile sits inside one NVSwitch domain (NVIDIA only)."""
    if ranks < 2 or vendor_of(gpu) != "NVIDIA":
        return False
    domain = getattr(gpu, "interconnect_domain", None) or 0
    return getattr(gpu, "interconnect_kind", None) == "nvswitch" and domain >= ranks


def enabled(gpu, ranks: int) -> bool:
    """Whether a group of `ranks` GPUs of this profile gets a CustomAllreduce (CUDA branch only)."""
    if ranks not in SUPPORTED or vendor_of(gpu) != "NVIDIA":
        return False
    return fabric_allows(gpu, ranks, unknown=False)  # a profile without the fabric: no NVSwitch (needs_fabric)


def groups(tp_size: int, ep: int, version: str) -> tuple[int, ...]:
    """Sizes of the groups whose GroupCoordinator may build a CustomAllreduce on one rank: the tp group, and from
    0.4.10 the moe_ep and moe_tp groups where 1 < ep < tp."""
    out = [tp_size]
    if parse_version(version) >= MOE_GROUPS_FROM and 1 < ep < tp_size and tp_size % ep == 0:
        out += [ep, tp_size // ep]
    return tuple(out)


def custom_allreduce_bytes(gpu, tp_size: int, ep: int, version: str, node: int) -> int:
    """Bytes per rank the custom all-reduce holds before the weights load (0 where SGLang builds none). `node`: GPUs
    per node (kvplan.planning.deploy.node_size); a group of more ranks builds one only inside multi-node NVLink
    (kvplan.planning.deploy.nvlink_reaches)."""
    return sum(instance_bytes() for n in groups(tp_size, ep, version)
               if enabled(gpu, n) and nvlink_reaches(gpu, n, node))


def needs_fabric(gpu, tp_size: int) -> bool:
    """Whether the rule read a fabric the profile leaves out (a plan warning: no NVSwitch assumed)."""
    return (tp_size in SUPPORTED and tp_size > 2 and vendor_of(gpu) == "NVIDIA"
            and getattr(gpu, "interconnect_kind", None) is None)
