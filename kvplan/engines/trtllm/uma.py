"""TensorRT-LLM (PyTorch backend) on a unified-memory GPU: its budget counts the page cache and the OS as used.

TensorRT-LLM's pool is `(total - peak of the estimation run) x free_gpu_memory_fraction` (kvplan.engines.trtllm.engine),
the peak holding torch's memory and everything outside it, `total - free - torch reserved`, with free the device's own
count. On an integrated GPU that count is the kernel's MemFree, which counts the page cache as used
(unslothai/unsloth#10704, a GB10: writing a 60 GiB file moved cuda_free with MemFree 103.25 -> 41.52 GiB while
MemAvailable went 115.85 -> 115.65), and the training record jeansblog/trt_llm@661401c2 README.md (1.1.0rc3,
gpt-oss-120b on a GB10, tests/fixtures/logs/corpus/trtllm-jeansblog-gpt-oss-120b-gb10-v110rc3.log) prints it: "Memory
used after loading model weights (outside torch) ... 49.78 GiB" beside 63.52 GiB inside torch, of a 119.70 GiB device
total, so 6.40 GiB free, and a 5.95 GiB pool. No MemAvailable branch is read in TensorRT-LLM's source this round:
the rule below follows that record, not a cited line of code.

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


def warnings(gpu, os_memory: int | None, page_cache: int | None, checkpoint: int) -> tuple[PlanWarning, ...]:
    """What a plan assumes of the page cache and the OS on a unified GPU (the options said ignored elsewhere)."""
    given = [k for k, v in (("os_memory", os_memory), ("page_cache", page_cache)) if v is not None]
    if not applies(gpu):
        if given:
            why = "is not unified memory" if not unified(gpu) else \
                "is not an NVIDIA part (no TensorRT-LLM record read)"
            return (PlanWarning(f"{arg('engine_opts')} {' and '.join(given)} ignored: GPU profile '{gpu.key}' {why}"),)
        return ()
    cache = checkpoint if page_cache is None else page_cache
    said = "as stated" if page_cache is not None else "a cold start: caches dropped before it, every rank"
    os_said = "none assumed" if os_memory is None else "as stated"
    return (PlanWarning("TensorRT-LLM's budget counts the device's own free memory (the kernel's MemFree on a unified "
                        "GPU: page cache counted as used, as a GB10 record prints it): kvplan counted the checkpoint's "
                        f"page cache {{}} ({said}; {arg('engine_opts')} page_cache=SIZE) and what the OS and other "
                        f"processes hold, {{}} ({os_said}; os_memory=SIZE), as used", (cache, os_memory or 0),
                        ("GiB", "GiB")),)


# where the weights, the page cache and the OS's share leave no pool (TrtLlm.result)
EVICTED = PlanWarning("the weights, that page cache and the OS's share do not fit beside each other: the kernel evicts "
                      "cache to keep its watermarks free, and the pool is a fraction of what it keeps free, which "
                      "kvplan cannot know (a GB10 record kept 6.40 GiB free: a 5.95 GiB pool); state page_cache=SIZE "
                      "to plan a figure")
