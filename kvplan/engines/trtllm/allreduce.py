"""TensorRT-LLM's custom all-reduce workspace per rank (PyTorch backend): IpcMemory buffers, inside the KV budget.

What it allocates. Each `AllReduce` module of a tp > 1 model asks `get_allreduce_workspace(mapping)` at model
construction (`tensorrt_llm/_torch/distributed/ops.py`, NVIDIA/TensorRT-LLM@9e776418150235c761d2d737dc8290ff49a4eb9f:
one workspace per mapping, cached), which calls `CustomAllReduceHelper.allocate_allreduce_fusion_workspace(mapping,
max_workspace_size_auto(tp, support_deterministic=False))`: three IpcMemory buffers per rank, `size x tp` (data),
`256 x tp` (barriers) and `3 x size x tp` (Lamport), plus two small torch tensors (flags) left out here
(`tensorrt_llm/_torch/distributed/allreduce_helper.py` @4fb601b9e5bc0528db0d7b88837e0509edda1b72 L122-131).
`IpcMemory.open_ipc_memory` rounds each to 2 MiB (`align_size(size, 1 << 21)`) before `cudaMalloc`, and
`IpcMemory.__init__` opens nothing where the tp group is larger than a node (`open_ipc and mapping.tp_size <=
mapping.gpus_per_node`) or peer access fails (`can_access_peer`) (`tensorrt_llm/_ipc_utils.py`
@c89653021e66ca78c55f02b366f404455bc12e8d): across nodes the all-reduce runs on NCCL and nothing is allocated.

The size by release. `max_workspace_size_auto` returned 16,000,000 B at tp <= 2 and 8,000,000 B above
(`tensorrt_llm/plugin/plugin.py` @c20322ffd3dc0740ca530c9fad989b22e64f6e06, the 0.20-1.0 form); TensorRT-LLM#9145
(merged 2025-11, "Enlarged the AllReduce workspace size to 64MB": 8 MB caused hangs) made it 67,108,864 B at every
tp, overridable by TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE (allreduce_helper.py L46-84, the default at L83). The
merge postdates 1.1's release candidates; whether 1.1.0 carries it was not read, so kvplan books the 64 MiB form from
1.1.0, the safe side (a 1.1.0 without it holds less, and kvplan's KV budget is low by the difference there).

Where it lands: inside the budget. The workspace is made while the model is built, before weights load, and is held
(`cudaMalloc`, outside PyTorch's allocator) when `KvCacheCreator` reads the memory left after its warm-up run
(`_torch/pyexecutor/_util.py` @0004396720054fd8e205cbf616f21f0b57c6b412 configure_kv_cache_capacity: kv = (total -
peak) x free_gpu_memory_fraction, the peak counting non-torch memory), so it comes out of the pool as the weights do.
By hand at tp 8 on one node, 1.2.0: data 8 x 64 MiB = 512 MiB, barriers 2,048 B -> 2 MiB, Lamport 3 x 512 = 1,536 MiB:
2,050 MiB; 0.20.0: 8 x 8,000,000 = 64,000,000 -> 31 pages (65,011,712), 2 MiB, 192,000,000 -> 92 pages
(192,937,984): 260,046,848 B (248 MiB).
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.core.releases import release_of

MIB = 2**20
PAGE = 2 * MIB  # IpcMemory.open_ipc_memory: align_size(size, 1 << 21)
BARRIERS_PER_RANK = 256  # allocate_allreduce_fusion_workspace: IpcMemory(mapping, 256 * tp_size)
FIXED_FROM = (1, 1, 0)  # TensorRT-LLM#9145's 64 MiB, booked from 1.1.0 (module docstring)
FIXED = 67_108_864  # max_workspace_size_auto's default from TensorRT-LLM#9145
BEFORE_SMALL, BEFORE_LARGE = 16_000_000, 8_000_000  # before it: tp <= 2, and above


def workspace_size(tp: int, version: str | None) -> int:
    """`max_workspace_size_auto(tp, support_deterministic=False)` of TensorRT-LLM `version` (None: the newest form)."""
    v = release_of(version)
    if v is None or v >= FIXED_FROM:
        return FIXED
    return BEFORE_SMALL if tp <= 2 else BEFORE_LARGE


def workspace_bytes(tp: int, node: int, version: str | None) -> int:
    """Bytes per rank of the all-reduce workspace for a tp group of `tp` ranks on nodes of `node` GPUs: its three
    IpcMemory buffers in 2 MiB pages where the group sits on one node and tp > 1, else 0 (NCCL across nodes)."""
    if tp <= 1 or tp > node:
        return 0
    size = workspace_size(tp, version)
    return sum(round_up(b, PAGE) for b in (size * tp, BARRIERS_PER_RANK * tp, 3 * size * tp))


def unbooked_under_dp(dp: int, tp: int, node: int, version: str | None) -> str | None:
    """What a plan under attention DP leaves out: kvplan books the workspace by the attention tp (`workspace_bytes`),
    while TensorRT-LLM's tensor_parallel_size there is the whole tp x dp group; whether its AllReduce modules open the
    workspace on that mapping was not read, so the bytes it would take are said, not booked. None without DP or
    where the whole group would open none (across nodes)."""
    whole = workspace_bytes(tp * dp, node, version) if dp > 1 else 0
    if not whole:
        return None
    return (f"TensorRT-LLM's all-reduce workspace under attention DP is not booked: if its AllReduce modules open it "
            f"on the whole group of {tp * dp} ranks, each rank's KV pool is up to {whole / MIB:,.0f} MiB smaller than "
            "shown (kvplan.engines.trtllm.allreduce; the mapping they use was not read)")
