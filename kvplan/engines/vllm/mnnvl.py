"""FlashInfer's MNNVL all-reduce fusion workspace as vLLM builds it: its bytes on one rank, by release.

vLLM resolves VLLM_FLASHINFER_ALLREDUCE_BACKEND `auto` to "mnnvl" for a tp group over nodes from 0.19.0 and on one
node from 0.25.0 (`distributed/device_communicators/flashinfer_all_reduce.py` 0.19.0 L98-101, 0.25.0 L116, 0.26.0
L118, 0.33.0 L162-168) and creates the workspace through `flashinfer_comm.create_allreduce_fusion_workspace(backend,
world_size, rank, max_token_num, hidden_dim, dtype)` (0.25.0 L56-65) with the fusion pass's arguments: T =
min(FI_ALLREDUCE_FUSION_MAX_SIZE_MB / (H x dtype bytes), max_num_batched_tokens) and the model's dtype
(`compilation/passes/fusion/allreduce_rms_fusion.py` 0.25.0 L985-1006), no `force_oneshot_support`. FlashInfer then
builds MNNVLAllReduceFusionWorkspace (`comm/allreduce.py` 0.6.13 L441-466) whose one buffer size is (`comm/
trtllm_mnnvl_ar.py` 0.6.13 L101-122, L222-247): the larger of the one-shot size at the threshold, min(1,048,576 //
(tp x e x H), T) x H x tp x e (MNNVL_ONE_SHOT_THRESHOLD = 64 x 1024 x 8 x 2, L52), and the two-shot size, 2 x ceil(T
/ tp) x tp x H x e; three Lamport buffers of it are allocated in one block (NUM_LAMPORT_BUFFERS, L62, L136), as fp32
elements. How the block is allocated is the pinned FlashInfer's:

* torch's symmetric memory (`_alloc_symm_buffer_bytes`, `comm/torch_symmetric_memory.py` 0.6.13 L45-76:
  `symm_mem.empty`) in FlashInfer 0.6.11.post2 to 0.6.14, which vLLM 0.22.x (0.6.11.post2), 0.23.x and 0.24.x
  (0.6.12), 0.25.x (0.6.13) and 0.26.x (0.6.14) pin. Torch's allocator adds its signal pad (2 KiB) to the size
  rounded to 16 B and rounds the block to the driver's recommended allocation granularity, 2 MiB
  (CUDASymmetricMemoryAllocator::alloc, pytorch/pytorch@029e4735:torch/csrc/distributed/c10d/symm_mem/
  CUDASymmetricMemory.cu); the multicast object it binds is that same block (`mc_prop.size = block->block_size`),
  no memory of its own. So: round_up(2 KiB + round_up(3 x buffer, 16), 2 MiB).
* FlashInfer's own McastGPUBuffer (a SymmDeviceMemory, `comm/mnnvl.py`) in 0.6.6, 0.6.8.post1 (vLLM 0.19.x-0.21.x)
  and from 0.6.16.post3 (vLLM 0.27.0 on: 0.6.16.post3, 0.6.18, 0.6.18.post1, 0.7.0.post1, 0.7.2.post1 through 0.33.0):
  the buffer plus its 2 KiB signal pad rounded to the allocation granularity and then to the multicast granularity
  (`_get_allocation_prop`: 0.7.2.post1 L1024-1044), 512 MiB on NVSwitch systems (kvplan.engines.vllm.non_torch,
  MULTICAST_GRANULARITY), so one 512 MiB block in the usual case, not trtllm's three (0.6.6 and 0.6.8.post1 size the
  buffer as above, no round-up of their own: trtllm_mnnvl_ar.py 0.6.6 L81-112, mnnvl.py L1111-1148; docs/engines.md).
  FlashInfer 0.6.18 on rounds the buffer to 2 stages x 16 B first (TWOSHOT_NUM_STAGES, PACKED_ALIGNMENT_BYTES: vLLM
  0.29.0 on).

The pins are the PyPI wheels' `Requires-Dist: flashinfer-python==` (vLLM 0.19.0 0.6.6, 0.20.x and 0.21.0
0.6.8.post1, 0.22.x 0.6.11.post2, 0.23.0 and 0.24.0 0.6.12, 0.25.x 0.6.13, 0.26.0 0.6.14, 0.27.0 / 0.28.0
0.6.16.post3, 0.29.0 0.6.18, 0.30.0 0.6.18.post1, 0.31.0 / 0.32.0 0.7.0.post1, 0.33.0 0.7.2.post1); another
FlashInfer installed beside a release is not read.
"""

from __future__ import annotations

from kvplan.core.intmath import cdiv, round_up

MIB = 2**20
ONE_SHOT_THRESHOLD = 64 * 1024 * 8 * 2  # MNNVL_ONE_SHOT_THRESHOLD: 1 MiB
LAMPORT_BUFFERS = 3  # NUM_LAMPORT_BUFFERS
SIGNAL_PAD = 2048  # torch's and FlashInfer's signal pad (kSIGNAL_PAD_SIZE)
PAGE = 2 * MIB  # the driver's recommended allocation granularity
TORCH_SYMM = ((0, 22, 0), (0, 27, 0))  # the releases whose pinned FlashInfer allocates through torch
STAGE_ALIGNED_SINCE = (0, 29, 0)  # FlashInfer 0.6.18: the buffer rounded to 2 x 16 B


def buffer_bytes(tp: int, tokens: int, hidden: int, elem: int) -> int:
    """One Lamport buffer: max(one-shot at the threshold, two-shot) for T = `tokens` of `hidden` elements of `elem`
    bytes over `tp` ranks (MNNVLAllReduceFusionWorkspace.__init__ and get_required_buffer_size_bytes)."""
    one_shot_tokens = min(ONE_SHOT_THRESHOLD // (tp * elem * hidden), tokens)
    return max(one_shot_tokens * hidden * tp * elem, 2 * cdiv(tokens, tp) * tp * hidden * elem)


def mnnvl_bytes(version: tuple[int, ...], tp: int, tokens: int, hidden: int, elem: int, multicast: int) -> int:
    """Bytes per rank of the MNNVL workspace vLLM `version` creates (module docstring); `multicast`: the multicast
    granularity FlashInfer's own buffer rounds to."""
    buffer = buffer_bytes(tp, tokens, hidden, elem)
    if version >= STAGE_ALIGNED_SINCE:
        buffer = round_up(buffer, 2 * 16)
    size = LAMPORT_BUFFERS * buffer
    if TORCH_SYMM[0] <= version < TORCH_SYMM[1]:
        return round_up(SIGNAL_PAD + round_up(size, 16), PAGE)
    return round_up(round_up(size + SIGNAL_PAD, PAGE), multicast)
