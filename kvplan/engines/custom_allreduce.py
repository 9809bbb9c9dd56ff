"""The custom all-reduce vLLM and SGLang share: its two IPC buffers, its group sizes and its fabric rule.

Both engines carry the same `CustomAllreduce` (vLLM's `distributed/device_communicators/custom_all_reduce.py`, 0.10.0
sdist; SGLang's copy of it, 0.5.3 wheel): `_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]` (0.10.0 L51), `max_size=8192 * 1024`
(SGLang's `_MAX_CAR_SIZE`), and per rank `meta_ptrs`, `cudaMalloc(meta_size() + max_size)`, and `buffer_ptrs`,
`cudaMalloc(max_size)`, each in whole 2 MiB pages (the driver's granularity): 10 + 8 = 18 MiB. Neither builds one for
a group of more than two ranks that is not fully connected ("Custom allreduce is disabled because it's not supported
on more than two PCIe-only GPUs": vLLM 0.10.0 L134-141 and 0.11.0 L141-147, `current_platform.is_fully_connected`,
NVML's NVLink state for every pair; vllm-project/vllm@00d618aab60448acdf3fac3e9c4e2e22d0c6c753 the same; SGLang's
`is_full_nvlink`, kvplan.engines.sglang.allreduce; on ROCm one xGMI hop between every pair, AMD's fork build
ROCm/vllm@21f6ca217b8af3b1864ce9734bfdd8f0bed926d6 custom_all_reduce.py L135-141, platforms/rocm.py L139-159): the
profile's fabric answers it (kvplan.hardware.facts.fully_connected, which the speed side's AMD rule reads too,
kvplan.speed.amd_allreduce). The rest (the node rule, `rank_data`, the window) is each engine's:
kvplan.engines.vllm.custom_ar, kvplan.engines.sglang.allreduce.

vLLM by release (PyPI wheels): `max_size=8192 * 1024` is the default in every release kvplan models (0.5.0 L91, 0.6.3
L54, 0.7.3 L58, 0.8.2 L58, 0.9.2 L57, 0.10.1 L57, 0.11.0 L57, 0.17.0 L59, 0.24.0 L59, 0.33.0 L138) and no caller passes
another (0.5.0 `parallel_state.py` L202; `cuda_communicator.py` 0.7.3 L47, 0.11.0 L75, 0.33.0 L159), so the speed side's
limit (kvplan.speed.model.CUSTOM_ALLREDUCE) is this one fact, MAX_SIZE reads it. The buffers: cudaMalloc'd from 0.7.x
(0.7.3 L155-159, `lib.cudaMalloc` L185; 0.8.3 `allocate_shared_buffer_and_handle`), torch tensors before
(`torch.zeros(meta_size() + max_size)`, `torch.empty(max_size)`: 0.5.0 L190-195, 0.6.3 L152-157), whose bytes are
PyTorch's caching allocator's, not re-derived here; `rank_data`, 8 MiB, a torch tensor in all (0.5.0 L203, 0.8.3 L167),
holds the pointer tuples that registering the CUDA-graph buffers writes (opening the peers' IPC handles maps their
memory and allocates none on the rank). From 0.11.0 on compute capability 9.0 / 10.0 the size is
min(CUSTOM_ALL_REDUCE_MAX_SIZES, 8 MiB) where the symmetric-memory communicator is on (0.11.0 `custom_all_reduce.py`
L113-119; 256 KiB at 8 H100s: 4 MiB of buffers), which adds its own symmetric buffer (`symm_mem.py` L80-86, 64 MiB at 8
H100s: `max_size // 2` bf16 elements for a model of any dtype, though its all-reduce takes bf16 alone, L99); both are
made at the distributed set-up, outside vLLM's budget window from 0.11.0
(kvplan.engines.vllm.custom_ar), so no figure moves (0.10.2 has the rule, its communicator off by default: envs.py
L1220-1221); where that communicator takes the messages the kernel gives up is the speed side's
(kvplan.speed.symm_allreduce).
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.hardware.facts import fully_connected
from kvplan.speed.model import CUSTOM_ALLREDUCE

MIB = 2**20
MAX_SIZE = CUSTOM_ALLREDUCE["vllm"][2]  # max_size=8192 * 1024 (SGLang's _MAX_CAR_SIZE on CUDA), the speed side's limit
META_SIZE = 4096  # meta_size(): sizeof(Signal), a few KiB; any value under 2 MiB gives the same pages
PAGE = 2 * MIB  # cudaMalloc's granularity
SUPPORTED = (2, 4, 6, 8)  # _SUPPORTED_WORLD_SIZES


def ipc_buffer_bytes() -> int:
    """The two cudaMalloc'd buffers one instance holds on its rank: meta_ptrs + buffer_ptrs, 10 + 8 = 18 MiB."""
    return round_up(META_SIZE + MAX_SIZE, PAGE) + round_up(MAX_SIZE, PAGE)


def fabric_allows(gpu, ranks: int, unknown: bool) -> bool:
    """Whether a group of `ranks` (a supported size) passes the fabric check: two ranks always, more only fully
    connected; `unknown` is the answer where the profile does not say (each engine's assumption)."""
    if ranks == 2:
        return True
    full = fully_connected(gpu, ranks)
    return unknown if full is None else full
