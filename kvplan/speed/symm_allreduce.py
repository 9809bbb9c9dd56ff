"""vLLM's one-kernel all-reduce limit by release where torch's symmetric-memory all-reduce follows its custom kernel.

From 0.11.0 `VLLM_ALLREDUCE_USE_SYMM_MEM` is on by default (envs.py L1410-1411; "0" in 0.10.2, L1220-1221), and
CudaCommunicator builds a SymmMemCommunicator on CUDA (`distributed/device_communicators/cuda_communicator.py` 0.11.0
L67-71) that stays enabled where the capability string and the world size are in SYMM_MEM_ALL_REDUCE_MAX_SIZES and
the buffer gets a multicast pointer, which needs NVSwitch (`symm_mem.py` L57-93). `all_reduce` tries the custom
kernel, then the symmetric-memory one below its table's size, then NCCL (0.11.0 L121-151; 0.19.0 L180-223; 0.33.0
L362-431, after FlashInfer's all-reduce and the others it tries first). The custom kernel's own limit shrinks to
min(CUSTOM_ALL_REDUCE_MAX_SIZES, 8 MiB) there (`custom_all_reduce.py` 0.11.0 L113-119: 256 KiB on H100 at tp 8), but
both are one kernel a call behind one barrier, so for a bfloat16 run the speed terms' one-shot pricing
(kvplan.speed.model CUSTOM_ALLREDUCE) holds up to the symmetric-memory limit, and NCCL's ring starts there (another
dtype stops at the shrunk custom limit: below). The table
(`all_reduce_utils.py` 0.11.0 L45-58, the same in 0.17.0 L49-62) gains "10.3" in 0.19.0 (L52-70, the same in
0.24.0 and 0.33.0 L58-76); 0.33.0's "10.7" has no profile. The communicator is built whether or not the custom
kernel is (`if use_torch_symm_mem and current_platform.is_cuda()`, 0.11.0 L67; 0.33.0 L127), so a run with
--disable-custom-all-reduce keeps it below its size (kvplan.speed.fit reads custom_allreduce_bytes' `custom`).

It takes bfloat16 alone: SymmMemCommunicator sets `self.dtype = torch.bfloat16` and `should_use_symm_mem` returns
False for an input of another dtype (0.11.0 L51 and L99; 0.17.0 L54 / L120, 0.19.1 L53 / L119, 0.24.0 and 0.25.0 the
same, 0.33.0 L54 / L120: no release read lifts it). The custom kernel's limit, though, shrinks whenever the
communicator is on, whatever the model's dtype (`symm_mem_enabled` is the communicator's state at the distributed
set-up: cuda_communicator.py 0.11.0 L75-80; custom_all_reduce.py 0.11.0 L113-119, 0.17.0 L122-133, 0.33.0 L238-251
also asking `world_size in` the capability's table), to min(CUSTOM_ALL_REDUCE_MAX_SIZES, 8 MiB) (all_reduce_utils.py
0.11.0 L30-43: "9.0" 64 / 32 MiB at 2 / 4 ranks, 512 / 256 KiB at 6 / 8, "10.0" 2 / 2 / 1 / 1 MiB; "10.3" 4 / 4 /
8 / 4 MiB from 0.19.0, the release its symmetric-memory entry came: 0.19.0 and 0.19.1 L44-49, 0.33.0 the same). So a
float16 model (the run's --dtype half, or a float16 config) on 8 H100s leaves the kernel at 256 KiB for NCCL's ring,
not 64 MiB: `one_kernel_bytes`, priced by the dtype the run computes in (kvplan.speed.compute_dtype,
Shape.act_dtype). The buffers themselves do not depend on it: the symmetric buffer is `max_size // 2` bfloat16
elements, max_size bytes, for every model (0.11.0 L83-86), and both are outside vLLM's budget
(kvplan.engines.custom_allreduce).
"""

from __future__ import annotations

from kvplan.core.releases import release_of
from kvplan.speed.eras import padded

MIB = 2**20
SYMM_MEM_ENGINES = ("vllm",)  # engines whose all-reduce tries torch's symmetric memory after the custom kernel
SINCE = (0, 11, 0)  # VLLM_ALLREDUCE_USE_SYMM_MEM on by default
# SYMM_MEM_ALL_REDUCE_MAX_SIZES: {capability: {world size: the first message size NCCL takes}}, with the release
# each capability entered the table
SYMM_MEM_MAX = {(9, 0): {2: 64 * MIB, 4: 32 * MIB, 6: 64 * MIB, 8: 64 * MIB},
                (10, 0): {2: 8 * MIB, 4: 32 * MIB, 6: 128 * MIB, 8: 128 * MIB},
                (10, 3): {2: 4 * MIB, 4: 32 * MIB, 6: 32 * MIB, 8: 64 * MIB}}
ENTERED = {(10, 3): (0, 19, 0)}
# CUSTOM_ALL_REDUCE_MAX_SIZES: {capability: {world size: the custom kernel's limit where the communicator is on}}
CUSTOM_MAX = {(9, 0): {2: 64 * MIB, 4: 32 * MIB, 6: MIB // 2, 8: MIB // 4},
              (10, 0): {2: 2 * MIB, 4: 2 * MIB, 6: MIB, 8: MIB},
              (10, 3): {2: 4 * MIB, 4: 4 * MIB, 6: 8 * MIB, 8: 4 * MIB}}
SYMM_DTYPE = "bf16"  # the one dtype the communicator takes


def symm_mem_bytes(tp: int, gpu, version: str | None) -> int:
    """The message size from which vLLM `version` (None: the current one) hands a tp group of `tp` GPUs of profile
    `gpu` to NCCL after its symmetric-memory all-reduce; 0 where that communicator is off (before 0.11.0, a capability
    or world size not in its table, no NVSwitch multicast)."""
    rel = release_of(version) if version else None
    cap = getattr(gpu, "capability", None)
    if (rel and padded(rel) < SINCE) or getattr(gpu, "interconnect_kind", None) != "nvswitch" or cap is None:
        return 0
    if rel and padded(rel) < ENTERED.get(tuple(cap), SINCE):
        return 0
    return SYMM_MEM_MAX.get(tuple(cap), {}).get(tp, 0)


def one_kernel_bytes(limit: int, tp: int, gpu, version: str | None, dtype: str = SYMM_DTYPE) -> int:
    """The message size from which vLLM `version` hands a tp group's `dtype` all-reduces to NCCL, its custom kernel
    taking them below `limit` (0: not built): where the symmetric-memory communicator is on, the kernel's limit at most
    CUSTOM_MAX's and the communicator's past it for bfloat16 alone (module docstring)."""
    symm = symm_mem_bytes(tp, gpu, version)
    if not symm:
        return limit
    own = min(limit, CUSTOM_MAX.get(tuple(gpu.capability), {}).get(tp, limit))
    return max(own, symm if dtype == SYMM_DTYPE else 0)
