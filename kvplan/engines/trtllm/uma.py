"""TensorRT-LLM (PyTorch backend) on a unified-memory GPU: its budget counts the page cache and the OS as used.

TensorRT-LLM's pool is `(total - peak of the estimation run) x free_gpu_memory_fraction` (kvplan.engines.trtllm.engine),
the peak holding torch's memory and everything outside it, `total - free - torch reserved`, with free the device's own
count: `torch.cuda.mem_get_info()` before and after the estimation run, the fraction applied to `total - peak`
(NVIDIA/TensorRT-LLM@0004396720054fd8e205cbf616f21f0b57c6b412:tensorrt_llm/_torch/pyexecutor/_util.py,
`KvCacheCreator.configure_kv_cache_capacity` and `_cal_max_memory`: `(total_gpu_memory - peak_memory + allocated_bytes)
* fraction`), so what is used outside torch costs the pool the fraction of each byte. On an integrated GPU that count
is the kernel's MemFree, which counts the page cache as used
(unslothai/unsloth#10704, a GB10: writing a 60 GiB file moved cuda_free with MemFree 103.25 -> 41.52 GiB while
MemAvailable went 115.85 -> 115.65), and the training record jeansblog/trt_llm@661401c2 README.md (1.1.0rc3,
gpt-oss-120b on a GB10, tests/fixtures/logs/corpus/trtllm-jeansblog-gpt-oss-120b-gb10-v110rc3.log) prints it: "Memory
used after loading model weights (outside torch) ... 49.78 GiB" beside 63.52 GiB inside torch, of a 119.70 GiB device
total, so 6.40 GiB free, and a 5.95 GiB pool. The budget's reads are cudaMemGetInfo's alone (no MemAvailable branch
in the functions cited above), so the record and the source agree.

On an NVIDIA profile with `memory_unified: true` kvplan therefore counts as used, beside the weights and activations:
  * what the OS and other processes hold (engine option `os_memory`; none assumed, said);
  * a cold load's page cache, the checkpoint's bytes as stored on every rank (engine option `page_cache`; 0 for a
    warm start whose cache is then part of os_memory).
Where the weights, the cache and the OS's share leave nothing, the kernel has evicted part of the cache to keep its
watermarks free, and the pool is what it kept free (the record's 6.40 GiB): runtime state kvplan cannot know, so the
plan says so rather than giving a figure (state page_cache=SIZE to plan another).
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.hardware.facts import unified, vendor_of
from kvplan.engines.options import ignored_on
from kvplan.planning.plan import PlanWarning

VENDORS = ("NVIDIA",)  # the record read is an NVIDIA part; another vendor's unified part is not read


def applies(gpu) -> bool:
    return unified(gpu) and vendor_of(gpu) in VENDORS


def used_bytes(gpu, os_memory: int | None, page_cache: int | None, checkpoint: int) -> int:
    """What the budget counts as used on a unified NVIDIA GPU beyond weights and activations: the OS's stated share
    and the page cache (a cold load: the whole checkpoint, unless stated); 0 elsewhere."""
    if not applies(gpu):
        return 0
    return (os_memory or 0) + (checkpoint if page_cache is None else page_cache)


def warnings(gpu, os_memory: int | None, page_cache: int | None, checkpoint: int,
             fraction: float) -> tuple[PlanWarning, ...]:
    """What a plan assumes of the page cache and the OS on a unified GPU, and what free_gpu_memory_fraction is a
    share of (the options said ignored elsewhere)."""
    if not applies(gpu):
        why = "is not unified memory" if not unified(gpu) else "is not an NVIDIA part (no TensorRT-LLM record read)"
        return ignored_on(gpu, {"os_memory": os_memory, "page_cache": page_cache}, why)
    cache = checkpoint if page_cache is None else page_cache
    said = "as stated" if page_cache is not None else "a cold start: caches dropped before it, every rank"
    os_said = "none assumed" if os_memory is None else "as stated"
    return (PlanWarning(f"TensorRT-LLM's free_gpu_memory_fraction {fraction:g} is a share of what its estimation run "
                        "leaves free, the total less everything used, both the device's own count read at run time "
                        "(torch.cuda.mem_get_info: on a unified GPU the kernel's MemFree, page cache counted as used, "
                        "as a GB10 record prints it): kvplan counted the checkpoint's "
                        f"page cache {{}} ({said}; {arg('engine_opts')} page_cache=SIZE) and what the OS and other "
                        f"processes hold, {{}} ({os_said}; os_memory=SIZE), as used beside the overhead (its estimate "
                        f"or {arg('overhead')}), so each GiB of them costs the pool {fraction:g} GiB",
                        (cache, os_memory or 0), ("GiB", "GiB")),)


# where the weights, the page cache and the OS's share leave no pool (TrtLlm.result)
EVICTED = PlanWarning("the weights, that page cache and the OS's share do not fit beside each other: the kernel evicts "
                      "cache to keep its watermarks free, and the pool is a fraction of what it keeps free, which "
                      "kvplan cannot know (a GB10 record kept 6.40 GiB free: a 5.95 GiB pool); state page_cache=SIZE "
                      "to plan a figure")
