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
a prepare workspace beside it, `get_moe_prepare_workspace_size_per_rank`), sizes the C++ op computes
(`getFusedMoeCommWorkspaceSize` in later forms: a channel count the kernel derives from the device's SM count, times a
FIFO layout per release), which kvplan has not derived: none are booked, and a plan where the selection holds says so
(`note`).
DeepSeek-V3 / Qwen3-235B (top-k 8) at ep 8 stay at NotEnabled (8 > 8 fails); gpt-oss (top-k 4) at ep 8 on an NVLink
board selects MNNVL.
"""

from __future__ import annotations

from kvplan.hardware.facts import NVLINK_KINDS  # profiles whose GPUs have NVLink links to be up

BRIDGED = "nvlink-bridge"  # PCIe NVL cards: a later supports_mnnvl refuses them, earlier forms do not (docstring)


def selects_alltoall(model, gpu, dep) -> bool:
    """Whether TensorRT-LLM's default selection picks the MNNVL all-to-all for `model` at `dep` on `gpu` (the module
    docstring): attention DP, ep above the model's top-k, and NVLink links on the profile."""
    top_k = model.params.experts_per_token or 0
    return dep.dp > 1 and dep.ep > top_k > 0 and getattr(gpu, "interconnect_kind", None) in NVLINK_KINDS


def note(model, gpu, dep) -> str | None:
    """The one-line statement of the all-to-all workspace kvplan does not book, where the selection holds; else None."""
    if not selects_alltoall(model, gpu, dep):
        return None
    where = ("NVLink links up: the MNNVL method, unless the release's supports_mnnvl refuses PCIe NVL cards, as "
             "later forms do" if getattr(gpu, "interconnect_kind", None) == BRIDGED else
             "NVLink links up: the MNNVL method")
    return (f"TensorRT-LLM's MoE all-to-all (attention DP, ep {dep.ep} above top-k {model.params.experts_per_token}, "
            f"{where}) allocates a workspace per rank sized by its C++ "
            "get_moe_commworkspace_size_per_rank, which kvplan does not read: not booked, so the pool is high by it "
            "(kvplan.engines.trtllm.alltoall)")
