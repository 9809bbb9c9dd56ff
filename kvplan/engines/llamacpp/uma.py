"""llama.cpp on a unified-memory GPU: its cache is -c cells whatever is free, so what the OS holds decides only
whether the plan fits.

Read in ggml-org/ggml@d99724f2 (2026-08-21) `src/ggml-cuda/ggml-cuda.cu`:
  * `ggml_backend_cuda_device_get_memory` (L4769-4808, MemAvailable read by L4695-4767; llama.cpp PR #17368,
    "DGX Spark: UMA support", ggml commit 090eb5e3, 2025-11-20): on Linux, outside HIP builds, a device whose
    cudaDeviceProp.integrated is set, or any device under GGML_CUDA_ENABLE_UNIFIED_MEMORY, reports /proc/meminfo's
    MemAvailable (free hugepages where hugetlbfs is set up) as its free memory; cudaMemGetInfo's otherwise. That free
    figure is what llama.cpp's own fitting of unset parameters reads (not modelled: kvplan plans the -c it emits).
  * `ggml_cuda_device_malloc` (L138-166): GGML_CUDA_ENABLE_UNIFIED_MEMORY allocates with cudaMallocManaged.
The KV buffers themselves are -c x bytes per cell (kvplan.engines.llamacpp.engine), with no share of free memory in
them, so on a unified GPU kvplan keeps them exact and subtracts the OS's stated share (engine option `os_memory`)
from what the weights, the cache and the compute buffers may take; unstated, it assumes none and says so.
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.hardware.facts import unified
from kvplan.engines.options import ignored_on
from kvplan.planning.plan import PlanWarning


def warnings(gpu, stated: int | None) -> tuple[PlanWarning, ...]:
    """What a llama.cpp plan on a unified-memory GPU assumes of the OS's share (the option said ignored elsewhere)."""
    if not unified(gpu):
        return ignored_on(gpu, {"os_memory": stated})
    head = ("llama.cpp allocates its -c cells whatever is free (ggml reports a unified GPU's free memory as the OS's "
            "MemAvailable, which only its own parameter fitting reads); the plan fits while weights, cache and "
            "compute buffers fit beside what the OS and other processes hold: ")
    if stated is None:
        return (PlanWarning(head + f"kvplan assumed they hold none (state theirs with {arg('engine_opts')} "
                            "os_memory=SIZE)"),)
    return (PlanWarning(head + "stated os_memory {}, kept out of the {}", (stated, gpu.memory_usable_bytes),
                        ("GiB", "GiB")),)
