"""TensorRT-LLM's MoE all-to-all under attention DP: a rank's comm workspace, exact on 1.1.x, a floor elsewhere.

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
    the same path: a contributor's fork, not NVIDIA's tree);
  * fused (#6973, "Optimize and refactor alltoall in WideEP", reviewed 2025-08-20): `getFusedMoeCommWorkspaceSize`
    = `computeWorkspaceSizePreRank(E, C)` = 4 x 256 KiB x E x C + 2 x 256 x E x C, C as above
    (NVIDIA/TensorRT-LLM@0272643accfb0724eea9ca37763c57bbe9dbed2a cpp/tensorrt_llm/kernels/fusedMoeCommKernels.h,
    `FIFO_DEPTH = 4`, `FIFO_ENTRY_BYTES = 256 * 1024`).
`MnnvlMemory` then rounds the size up to the device's allocation granularity. At E 8 on 132 SMs (C 33): 128.02,
528.06 and 264.13 MiB a rank.
By release (the tags' commits: triton-inference-server/tensorrtllm_backend's `tensorrt_llm` submodule, v0.20.0
7965842954628b0b5456a2f7d59786d3dcd41647, v0.21.0 b4b1185af320f109f4cb73b1505832dbc63042d7, v1.0.0
ae8270b713446948246f16fadf4e2a32e35d0f62, none of whose files the code index holds; dates from a commit table of
TensorRT-LLM's main in the code index): #6973 reached main on 2025-08-24 (19a0ea363b), after release/1.0 was cut
(its review rule set up 2025-08-14, #6725; "release/1.0 retargeted" fixes from 2025-08-17, #6955) and before main
bumped to 1.1.0rc2 (2025-08-31, #7394) and to 1.2.0rc0 (2025-09-29, #7941), when release/1.1 had left it. So 1.1.x
carries the fused form (FUSED_LINE; 1.1.0 release candidates cut before 2025-08-24 read as 1.1.0 and are booked it,
the safe side), and kvplan books its comm workspace there exactly (`rank_bytes`). Elsewhere it books the smallest
form the release line can carry, as a floor, and the warning gives that line's own forms (`note`): 1.0.x and before
the fixed form, NVIDIA's tree's in their era (the by-SM form is a contributor fork's commit, zongfeijing's, not read
in NVIDIA's tree, so not booked; the fixed form's first release is not read tag by tag either); 1.2.x the fused form,
which its release candidates before TensorRT-LLM#7499 carry, where a later 1.2.x may pick the one-sided `MoeAlltoAll`
instead (#7499, "MnnvlThroughput AlltoAll", on main 2025-10-28; sized by ep x max tokens x hidden x dtype,
`calculate_required_workspace_size`; renamed NVLINK_ONE_SIDED by #9329), not priced. The prepare workspace
(`get_moe_prepare_workspace_size_per_rank`, its forms not read) and the rounding are booked nowhere: the warning says
so.
DeepSeek-V3 / Qwen3-235B (top-k 8) at ep 8 stay at NotEnabled (8 > 8 fails); gpt-oss (top-k 4) at ep 8 on an NVLink
board selects MNNVL.
"""

from __future__ import annotations

from kvplan.core.releases import release_of
from kvplan.hardware.facts import ASSUMED_SM_COUNT, NVLINK_KINDS, assumed_fact  # NVLINK_KINDS: NVLink links up

KIB = 1024
FIFO_INFO = 256  # an ALIGN_256 struct of head and tail (uint64 each), padded to 256 B
# The C++ op's forms (module docstring): (FIFO bytes a (peer, channel), FIFO-info structs a (peer, channel), channels
# fixed or None where they come from the SM count)
FORMS = {"fixed": (8 * 256 * KIB, 1, 8), "by SM": (8 * 256 * KIB, 1, None), "fused": (4 * 256 * KIB, 2, None)}
FUSED_LINE = (1, 1)  # the release line that carries #6973's fused form and no one-sided backend (docstring)
# The form booked by release line (docstring): through 1.0.x the fixed form, from 1.1 the fused (1.2.x: a floor)
FLOOR = (((0, 0), "fixed"), (FUSED_LINE, "fused"))
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


def sm_count(gpu) -> int:
    """The profile's multiprocessors, ASSUMED_SM_COUNT (kvplan.hardware.facts.assumed_fact) where it gives none."""
    return getattr(gpu, "sm_count", None) or ASSUMED_SM_COUNT


def line(version: str | None) -> tuple[int, int]:
    """The release line (major, minor) `version` runs; the newest line read, 1.2, for None or one not read as a
    release (kvplan's current TensorRT-LLM, 1.2.0)."""
    v = release_of(version)
    return tuple(v[:2]) if v else (1, 2)


def floor_form(version: str | None) -> str:
    """The form kvplan books for the release line of `version` (FLOOR): the one 1.1.x carries, else the smallest its
    line can carry."""
    return next(form for since, form in reversed(FLOOR) if line(version) >= since)


def booked(version: str | None) -> bool:
    """Whether the release's form is known exactly: the 1.1 line (FUSED_LINE; module docstring); elsewhere a floor."""
    return line(version) == FUSED_LINE


def rank_bytes(model, gpu, dep, version: str | None) -> int:
    """The comm workspace booked a rank where the selection holds: the release line's form (floor_form), else 0."""
    if not selects_alltoall(model, gpu, dep):
        return 0
    return workspace_bytes(floor_form(version), dep.ep, sm_count(gpu))


def note(model, gpu, dep, version: str | None = None) -> str | None:
    """The one-line statement of the all-to-all workspace booked, exactly (1.1.x) or as the line's floor, where the
    selection holds; else None."""
    if not selects_alltoall(model, gpu, dep):
        return None
    where = ("NVLink links up: the MNNVL method, unless the release's supports_mnnvl refuses PCIe NVL cards, as "
             "later forms do" if getattr(gpu, "interconnect_kind", None) == BRIDGED else
             "NVLink links up: the MNNVL method")
    head = (f"TensorRT-LLM's MoE all-to-all (attention DP, ep {dep.ep} above top-k {model.params.experts_per_token}, "
            f"{where}) allocates a workspace per rank (get_moe_commworkspace_size_per_rank")
    sms = f"{gpu.sm_count} SMs" if getattr(gpu, "sm_count", None) else f"{assumed_fact(gpu, 'sm_count')}, assumed"
    form = floor_form(version)
    size = workspace_bytes(form, dep.ep, sm_count(gpu))
    tail = ("its prepare workspace and the rounding to the allocation granularity are not, so the pool is high by "
            "them (kvplan.engines.trtllm.alltoall)")
    if booked(version):
        return f"{head}: {size:,} B on {sms}, the fused form 1.1.x carries) booked; {tail}"
    if form == "fixed":
        by_sm = workspace_bytes("by SM", dep.ep, sm_count(gpu))
        return (f"{head}: {size:,} B on {sms}, the fixed form of NVIDIA's tree in 1.0.x's era) booked as a floor; the "
                f"by-SM form, {by_sm / 2**20:,.0f} MiB, is a contributor fork's commit, not booked; {tail}")
    return (f"{head}: {size:,} B on {sms}, the fused form 1.2 release candidates before #7499 carry) booked as a "
            "floor; a later 1.2.x may pick the one-sided MoeAlltoAll instead (ep x max tokens x hidden x dtype), not "
            f"priced; {tail}")
