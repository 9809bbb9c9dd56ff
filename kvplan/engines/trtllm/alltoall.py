"""TensorRT-LLM's MoE all-to-all under attention DP: when a rank allocates its workspace, said, not sized.

Read in NVIDIA/TensorRT-LLM, code-index forms of the fused-MoE backends' static
`select_alltoall_method_type(mapping, top_k, dtype, use_cuda_graph)` (`_torch/modules/fused_moe/`; not read tag by
tag, and later backends that override it to NotEnabled, the CuTe DSL one among them, not told apart). It returns
NotEnabled (the MoE runs allgather / reduce-scatter, no workspace) unless every test passes:
`mapping.enable_attention_dp`, `mapping.tp_size > 1` (under attention DP every rank), TRTLLM_MOE_DISABLE_ALLTOALLV
unset, and `mapping.moe_ep_size > top_k`; then MNNVL where `MnnvlMemory.supports_mnnvl()` (`_mnnvl_utils.py`: "We
check if it has all NVLink up now. But it is not equivalent to MNNVL support": every NVLink link of the device up,
which an HGX board's NVSwitch links are; one early form also asks for an aarch64 host, a later one refuses SM 120/121
and PCIe NVL SKUs), else DeepEP / DeepEP low-latency only where TRTLLM_CAN_USE_DEEP_EP=1 and deep_ep is installed
(bf16). The MNNVL path's `MnnvlMoe.get_moe_workspaces(mapping)` allocates `MnnvlMemory(mapping,
torch.ops.trtllm.get_moe_commworkspace_size_per_rank(mapping.moe_ep_size))` (fabric memory mapped over every ep rank;
a prepare workspace beside it, `get_moe_prepare_workspace_size_per_rank`). The size the C++ op returns, read in
three code-index forms (round 47), by ep size E and the device's multiprocessor count S, each FIFO a (peer rank,
channel) pair and one or two 256-byte `ALIGN_256` head/tail structs beside it:
  * fixed: `getMoeCommWorkspaceSize` = 8 x 256 KiB x E x 8 + 256 x E x 8, eight channels whatever the GPU
    (NVIDIA/TensorRT-LLM@0cfd1aa9e909e715e9ae68c1e1eca163134baf30 cpp/tensorrt_llm/kernels/moeCommKernels.h,
    `RECV_FIFO_DEPTH = 8`, `RECV_FIFO_ENTRY_BYTES = 256 * 1024`, `CHANNEL_COUNT = 8`; #3504's era, April 2025);
  * by SM: the same FIFOs over C = max(S // 2 // (2 x ceil(E / 8)), 1) channels ("use half SMs for
    communication", `computeMoeCommChannelCount`; zongfeijing/TensorRT-LLM@5c3df8db7a94109fcd3cad6680ac2e7945879ba1,
    the same path);
  * fused (#6973, "Optimize and refactor alltoall in WideEP", reviewed 2025-08-20): `getFusedMoeCommWorkspaceSize`
    = `computeWorkspaceSizePreRank(E, C)` = 4 x 256 KiB x E x C + 2 x 256 x E x C, C as above
    (NVIDIA/TensorRT-LLM@0272643accfb0724eea9ca37763c57bbe9dbed2a cpp/tensorrt_llm/kernels/fusedMoeCommKernels.h,
    `FIFO_DEPTH = 4`, `FIFO_ENTRY_BYTES = 256 * 1024`).
`MnnvlMemory` then rounds the size up to the device's allocation granularity. At E 8 on 132 SMs (C 33): 128.02,
528.06 and 264.13 MiB a rank. Which form each release kvplan models carries is not known here (the tags cannot be
read: the repository's snapshot is over the fetch limit and the code index keeps no tag), and from TensorRT-LLM#9329
(2025-11) a second backend, the one-sided `MoeAlltoAll` sized by ep x max tokens x hidden x dtype
(`calculate_required_workspace_size`), can be picked instead; so none is booked, and a plan where the selection
holds says so with the forms' range on its GPU (`note`, `workspace_range`).
DeepSeek-V3 / Qwen3-235B (top-k 8) at ep 8 stay at NotEnabled (8 > 8 fails); gpt-oss (top-k 4) at ep 8 on an NVLink
board selects MNNVL.
"""

from __future__ import annotations

from kvplan.hardware.facts import ASSUMED_SM_COUNT, NVLINK_KINDS  # NVLINK_KINDS: GPUs with NVLink links to be up

KIB = 1024
FIFO_INFO = 256  # an ALIGN_256 struct of head and tail (uint64 each), padded to 256 B
# The C++ op's forms (module docstring): (FIFO bytes a (peer, channel), FIFO-info structs a (peer, channel), channels
# fixed or None where they come from the SM count)
FORMS = {"fixed": (8 * 256 * KIB, 1, 8), "by SM": (8 * 256 * KIB, 1, None), "fused": (4 * 256 * KIB, 2, None)}
BRIDGED = "nvlink-bridge"  # PCIe NVL cards: a later supports_mnnvl refuses them, earlier forms do not (docstring)


def selects_alltoall(model, gpu, dep) -> bool:
    """Whether TensorRT-LLM's default selection picks the MNNVL all-to-all for `model` at `dep` on `gpu` (the module
    docstring): attention DP, ep above the model's top-k, and NVLink links on the profile."""
    top_k = model.params.experts_per_token or 0
    return dep.dp > 1 and dep.ep > top_k > 0 and getattr(gpu, "interconnect_kind", None) in NVLINK_KINDS


def channels(ep: int, sm_count: int) -> int:
    """computeMoeCommChannelCount: half the SMs, two blocks (send, receive) a channel per eight peers, at least one."""
    return max(sm_count // 2 // (2 * -(-ep // 8)), 1)


def workspace_bytes(form: str, ep: int, sm_count: int) -> int:
    """The comm workspace a rank in C++ form `form` (FORMS) at ep size `ep` on `sm_count` multiprocessors."""
    fifo, infos, fixed = FORMS[form]
    return ep * (fixed or channels(ep, sm_count)) * (fifo + infos * FIFO_INFO)


def workspace_range(ep: int, gpu) -> tuple[int, int]:
    """The smallest and largest comm workspace a rank over the forms read, on the profile's SM count (ASSUMED_SM_COUNT
    where it gives none)."""
    sms = getattr(gpu, "sm_count", None) or ASSUMED_SM_COUNT
    sizes = [workspace_bytes(form, ep, sms) for form in FORMS]
    return min(sizes), max(sizes)


def note(model, gpu, dep) -> str | None:
    """The one-line statement of the all-to-all workspace kvplan does not book, where the selection holds; else None."""
    if not selects_alltoall(model, gpu, dep):
        return None
    where = ("NVLink links up: the MNNVL method, unless the release's supports_mnnvl refuses PCIe NVL cards, as "
             "later forms do" if getattr(gpu, "interconnect_kind", None) == BRIDGED else
             "NVLink links up: the MNNVL method")
    low, high = workspace_range(dep.ep, gpu)
    return (f"TensorRT-LLM's MoE all-to-all (attention DP, ep {dep.ep} above top-k {model.params.experts_per_token}, "
            f"{where}) allocates a workspace per rank (get_moe_commworkspace_size_per_rank: {low / 2**20:,.0f} to "
            f"{high / 2**20:,.0f} MiB over the C++ forms read, by the GPU's SM count) whose form kvplan cannot tie to "
            "the release: not booked, so the pool is high by it (kvplan.engines.trtllm.alltoall)")
