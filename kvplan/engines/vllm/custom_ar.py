"""vLLM's custom all-reduce buffers in the budget's window: before 0.11.0 only, and only where vLLM builds them.

`CustomAllreduce.__init__` (vllm 0.10.0 and 0.11.0 sdists, `distributed/device_communicators/custom_all_reduce.py`;
0.10.0 L51-168, 0.11.0 L51-175) allocates per rank, once, at `init_worker_distributed_environment` (the tp group's
`GroupCoordinator`): `meta_ptrs`, `cudaMalloc(meta_size() + max_size)` (max_size 8 MiB: `max_size=8192 * 1024`), and
`buffer_ptrs`, `cudaMalloc(max_size)`, in whole 2 MiB pages: 10 + 8 = 18 MiB outside PyTorch's allocator, plus
`rank_data`, a torch tensor, which the non-torch figure does not hold. It builds none where the group spans nodes
("Custom allreduce is disabled because this process group spans across nodes": 0.10.0 L83-87, 0.11.0 L84-88, the
first check, on `in_the_same_node_as`, which a multi-node NVLink rack's trays, being hosts, do not pass in these
releases; later ones try a cross-node group on MNNVL, vllm#50000 and #53253, outside this rule), where
the group's size is not 2, 4, 6 or 8 (`_SUPPORTED_WORLD_SIZES`, L51; 0.10.0 L97-102, 0.11.0 L98-103; a group of one
returns before it, L93-95: tp 1 builds none, with pipeline stages or not), or where more than two ranks are not fully
connected ("not supported on more than two PCIe-only GPUs", 0.10.0 L134-141, 0.11.0 L141-147; the 0.9.2 log of
tests/fixtures/logs/corpus/vllm-debate-qwen3-14b-tp4-pcie.log prints it at tp 4): the fabric is the profile's
(kvplan.hardware.facts.fully_connected, read by kvplan.engines.custom_allreduce, which holds the shared sizes); a
profile that does not say keeps the buffers, as the constant was fitted. Two ranks pass on any link; the P2P test
after it (`_can_p2p`, 0.10.0 L146-151) is taken to pass (booked on the safe side).

Whether the budget sees them is the snapshot's order. Before 0.11.0 the worker takes its start-up snapshot before the
distributed set-up (0.10.0 `v1/worker/gpu_worker.py` `init_device`: `MemorySnapshot()` L163, then
`init_worker_distributed_environment` L181; V0's `worker/worker.py` L189 then L194), so the buffers are in the
non-torch increase (`utils/__init__.py` memory_profiling L2713, measured from that snapshot), and the legacy constant,
fitted on single-node tp 2 / 4 / 8 logs, holds them. From 0.11.0 the distributed set-up runs first ("Initialize the
distributed environment BEFORE taking memory snapshot", 0.11.0 `gpu_worker.py` L165-182, vllm#25359; 0.17.0 L261-284
the same): the buffers, on one node or none, are outside the window and out of the KV budget, so the node rule moves
nothing there.

On an AMD GPU through 0.8.2 there are none: `ParallelConfig._verify_args` sets `disable_custom_all_reduce` on ROCm
("Disabled the custom all-reduce kernel because it is not supported on AMD GPUs": 0.7.3 wheel `config.py` L1413-1417,
0.8.2 L1550-1554), the worker passes it on (`set_custom_all_reduce(not disable_custom_all_reduce)`, 0.7.3
`worker/worker.py` L502, `v1/worker/gpu_worker.py` L253), and ROCm's communicator, the CUDA one (0.7.3
`platforms/rocm.py` L232-233), builds no `CustomAllreduce` then (`device_communicators/cuda_communicator.py` L19-25,
L45-50; 0.8.2 the same, its worker L503 and L280). 0.8.3 builds it where `use_custom_allreduce` holds (config.py
L1632-1636; `platforms/rocm.py` L307-311, gfx94*), the same two buffers (`custom_all_reduce.py` L156-161,
`allocate_shared_buffer_and_handle`). `use_custom_allreduce` is a gfx-target test: gfx94x from 0.8.3, gfx94x and
gfx95x from 0.9.0 (platforms/rocm.py 0.8.5 L340-341, 0.9.0 L374-375, the same since), so an MI250X (gfx90a) or an
MI100 on 0.8.3-0.10.x builds none either and holds no buffers in the window. The rule is the speed side's, read from
one place on the profile's `compute_capability` (kvplan.speed.amd_allreduce.runs_custom_allreduce_on_amd, which knows
the AMD fork builds that keep it on).
"""

from __future__ import annotations

from kvplan.engines.custom_allreduce import SUPPORTED, fabric_allows, ipc_buffer_bytes
from kvplan.engines.versions import dotted, parse_version
from kvplan.hardware.facts import vendor_of
from kvplan.speed.amd_allreduce import runs_custom_allreduce_on_amd

BUFFERS = ipc_buffer_bytes()  # 18 MiB: meta_ptrs + buffer_ptrs
IN_WINDOW_BEFORE = (0, 11, 0)  # the start-up snapshot moved after the distributed set-up (vllm#25359)


def unbuilt_bytes(tp: int, node: int, version: tuple[int, ...] | str, gpu=None, pp: int = 1) -> int:
    """The custom all-reduce buffers a legacy constant holds (fitted where vLLM built them) that a tp group of `tp`
    ranks over nodes of `node` GPUs of profile `gpu` does not have: BUFFERS where they fall in the window (before
    0.11.0) and vLLM builds none (one rank, a group across nodes, a size not supported, more than two ranks not fully
    connected, an AMD GPU before 0.8.3 or of a gfx target its release does not run it on, an AMD fork build with `pp`
    pipeline stages more than one), else 0. `version`: parsed, or as named (a string: an AMD fork build's hash in
    it)."""
    named = isinstance(version, str)
    if (parse_version(version) if named else version) >= IN_WINDOW_BEFORE:
        return 0
    release = version if named else dotted(version)
    amd_off = vendor_of(gpu) == "AMD" and not runs_custom_allreduce_on_amd("vllm", release, gpu, tp, pp)
    built = tp <= node and tp in SUPPORTED and fabric_allows(gpu, tp, unknown=True) and not amd_off
    return 0 if built else BUFFERS
