"""SGLang on a unified-memory GPU: which free memory its pool is sized from, and what the OS and the page cache take.

Read from the released wheels (docs/engines.md 2.1b). SGLang sizes its token pool as `rest = avail_after_load -
B x (1 - mem_fraction_static)`, B the free memory its scheduler measures before the weights load
(`model_runner.py` `profile_max_num_token`, 0.5.9 `model_runner_kv_cache_mixin.py` L116-149; 0.5.23
`mem_cache/kv_cache_configurator.py` `_profile_available_bytes` L3007-3038, B `pre_model_load_memory` from
`distributed/bootstrap.py` L207-212); so `rest = B x f - D`, D the drop of free memory over the load: the fraction is
a share of B, not of the GPU's total (which only its default fraction reads). The free memory is
`get_available_gpu_memory`'s (`utils/common.py`):
  * up to 0.5.3: cudaMemGetInfo's free on every GPU;
  * 0.5.4-0.5.8.post1: the OS's `psutil.virtual_memory().available` (MemAvailable: free pages plus the reclaimable
    page cache) where `get_device_sm()` is 87, 110 or 121 ("Orin, Thor, Spark"; 0.5.4 L461, 0.5.8.post1 L513-521),
    else cudaMemGetInfo's;
  * 0.5.9 on: MemAvailable where torch's `get_device_properties(gpu).is_integrated` (cudaDeviceProp.integrated;
    0.5.9 L528-535, 0.5.23 L448-456), else cudaMemGetInfo's. On ROCm the same branch runs, but whether an MI300A
    reports itself integrated is not read: kvplan treats a unified profile of another vendor as read by the device's
    own count, and says so.
On an integrated GPU cudaMemGetInfo's free is the kernel's MemFree, which counts the page cache as used
(unslothai/unsloth#10704, a GB10: writing a 60 GiB file moved cuda_free with MemFree 103.25 -> 41.52 GiB while
MemAvailable went 115.85 -> 115.65). So:
  * what the OS and every other process hold when the scheduler measures B is not in B, and costs the pool
    f x that much (engine option `os_memory`; no default: kvplan assumes none and prints what each GiB costs);
  * where the device's count is read, a cold load's page cache (the checkpoint's files) is in D, so it costs the pool
    all of its bytes (engine option `page_cache`; default the checkpoint's bytes as stored, the same rule as
    kvplan.engines.vllm.uma.page_cache_bytes: SGLang's default loader reads every safetensors file through
    safe_open, so a load after caches were dropped leaves them in the cache); a warm start's cache is the OS's share
    at B instead (page_cache=0 and os_memory with it).
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.engines.base import parse_version
from kvplan.hardware.facts import capability_of, unified, vendor_of
from kvplan.engines.options import ignored_on, os_share
from kvplan.planning.plan import PlanWarning

SM_LIST_FROM = (0, 5, 4)  # the first release that reads MemAvailable on some GPUs (by compute capability)
FLAG_FROM = (0, 5, 9)  # from here the device's integrated flag decides
CAPABILITIES = ((8, 7), (11, 0), (12, 1))  # 0.5.4-0.5.8.post1's SHARED_SYSMEM_DEVICE_MEM_SMS: Orin, Thor, Spark
FLAG_VENDORS = ("NVIDIA",)  # vendors whose integrated flag kvplan knows the engine reads as a unified profile says


def reads_meminfo(gpu, version: str) -> bool:
    """Whether SGLang `version` takes this unified GPU's free memory from the OS's MemAvailable (its profile's
    `memory_unified`, `vendor` and `compute_capability` fields)."""
    v = parse_version(version)
    if not unified(gpu) or vendor_of(gpu) not in FLAG_VENDORS or v < SM_LIST_FROM:
        return False
    return v >= FLAG_FROM or capability_of(gpu) in CAPABILITIES


def page_cache_bytes(gpu, version: str, stated: int | None, checkpoint: int) -> int:
    """The checkpoint's page cache a load leaves in SGLang's weight drop, where the free memory it reads is the
    device's own count on an NVIDIA unified GPU (not MemAvailable); 0 elsewhere. `stated`: engine option page_cache
    (None: a cold load, the whole checkpoint)."""
    if not unified(gpu) or vendor_of(gpu) not in FLAG_VENDORS or reads_meminfo(gpu, version):
        return 0
    return checkpoint if stated is None else stated


def overhead_bytes(gpu, version: str, fraction: float, os_memory: int | None, stated_cache: int | None,
                   checkpoint: int) -> int:
    """What the OS's share and the page cache take from SGLang's pool on a unified GPU: f x os_memory + the
    page cache in the weight drop (0 on a discrete GPU)."""
    if not unified(gpu):
        return 0
    return int(os_share(gpu, os_memory) * fraction) + page_cache_bytes(gpu, version, stated_cache, checkpoint)


def warnings(gpu, st, checkpoint: int) -> tuple[PlanWarning, ...]:
    """What a plan on a unified-memory GPU assumes about the free memory SGLang's pool is sized from (none
    elsewhere; the options said ignored where given)."""
    if not unified(gpu):
        return ignored_on(gpu, {"os_memory": st.os_memory, "page_cache": st.page_cache})
    f, meminfo = st.mem_fraction_static, reads_meminfo(gpu, st.version)
    free = ("the OS's MemAvailable (free pages and reclaimable page cache)" if meminfo else
            "the device's own count (torch.cuda.mem_get_info: the kernel's MemFree, page cache counted as used)"
            if vendor_of(gpu) in FLAG_VENDORS else
            "the device's own count (whether this vendor's device reports itself integrated is not read)")
    base = (f"SGLang {st.version}'s mem_fraction_static {f:g} is a share of the free memory it reads before the "
            f"weights load, {free}, not of the GPU's total, and its pool is that share less the load's drop of it: "
            f"what the OS and other processes hold then costs the pool {f:g} of each GiB; ")
    out = [PlanWarning(base + f"kvplan assumed they hold none (state theirs with {arg('engine_opts')} os_memory=SIZE)")
           if st.os_memory is None else
           PlanWarning(base + "stated os_memory {}, the pool {} smaller, beside the overhead (its estimate or "
                       f"{arg('overhead')})", (st.os_memory, int(st.os_memory * f)), ("GiB", "GiB"))]
    cache = page_cache_bytes(gpu, st.version, st.page_cache, checkpoint)
    if cache:
        said = "as stated" if st.page_cache is not None else "a cold start: caches dropped before it"
        out.append(PlanWarning("the checkpoint's page cache, which that count leaves out, kvplan counted in the "
                               f"weights' drop of free memory ({{}}, {said}; {arg('engine_opts')} page_cache=SIZE; "
                               "a warm start's cache is the OS's share instead)", (cache,), ("GiB",)))
    elif meminfo and st.page_cache is not None:
        out.append(PlanWarning(f"{arg('engine_opts')} page_cache ignored: SGLang {st.version} reads MemAvailable, "
                               "which counts the page cache as free"))
    return tuple(out)
