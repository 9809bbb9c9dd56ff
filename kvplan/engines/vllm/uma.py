"""vLLM on a unified-memory GPU: where its free memory comes from, its start-up check, and what its budget counts.

Read from the released wheels (docs/engines.md 1.2c):
  * free memory. `MemorySnapshot.measure` (`vllm/utils/mem_utils.py`) takes `cudaMemGetInfo`'s free and total,
    then on an integrated GPU replaces free by the OS's `psutil.virtual_memory().available` (/proc/meminfo
    MemAvailable: free pages plus the reclaimable page cache), because cudaMemGetInfo's free leaves that cache out
    there. The total stays cudaMemGetInfo's (GB10: 121.69 GiB, the profile's `memory_usable_bytes`). Which GPUs:
    none in 0.11.0 (utils/__init__.py L2734); 0.12.0-0.19.x by compute capability 8.7, 11.0 or 12.1 ("Orin,
    Thor, Spark": mem_utils.py v0.12.0 L86-102, v0.15.0 L105-122); from 0.20.0 the device's own flag
    (`current_platform.is_integrated_gpu`: torch's `is_integrated`, cudaDeviceProp.integrated, platforms/cuda.py
    v0.20.0 L552-553, mem_utils.py L109-116; v0.30.0 L730-731, L143-150). ROCm's platform keeps the interface's
    False (platforms/interface.py v0.30.0 L1075-1084), so an MI300A is measured as a discrete GPU. GH200/GB200
    report integrated = 0: their HBM is the device's own (kvplan does not mark them unified).
  * the start-up check. `request_memory` (`vllm/v1/worker/utils.py` v0.15.0 L250-262, v0.30.0 L534-554; in
    gpu_worker.py v0.12.0 L232-237) refuses to start unless that free memory, measured when the worker starts
    (after NCCL), is at least ceil(total x gpu_memory_utilization). On a unified GPU the OS, its unreclaimable
    caches and every other process on the node hold part of the total then: engine option `os_memory`.
  * the budget. requested - non-KV memory, where non-KV is the drop of free memory from the worker's start to the
    end of the profile run (+ the transient torch peak, 0.27.0+: mem_utils.py v0.30.0 L312-321; before, weights +
    torch peak + the non-torch increase, itself total - free - torch reserved). With free = MemAvailable, whatever
    any process on the node allocates on the host meanwhile (a loader's pinned buffers, compile caches, the
    serving processes' heaps) is counted as GPU memory. kvplan counts the one such term the source fixes, the model
    runner's host token table (`token_table_bytes`), where vLLM reads the device's own count (MemFree) a cold
    load's page cache (`page_cache_bytes`, engine option `page_cache`), and whatever else the user states (engine
    option `host_growth`: no default, no training record measures it). The CUDA-graph estimate
    (gpu_model_runner.py v0.30.0 L6747-6761) samples cudaMemGetInfo's free, which on such a GPU drops with the page
    cache too: printed from -4.74 GiB (spark-vllm-docker#200) to +5.07 GiB (#396), so kvplan keeps its own estimate of
    the graphs (docs/engines.md 1.2c).
"""

from __future__ import annotations

import math

from kvplan.core.errors import arg
from kvplan.hardware.facts import capability_of, unified, vendor_of
from kvplan.engines.options import ignored_on
from kvplan.planning.plan import PlanWarning

MEMINFO_FROM = (0, 12, 0)  # the first release that reads MemAvailable on some GPUs
FLAG_FROM = (0, 20, 0)  # from here the device's integrated flag decides, not its compute capability
CAPABILITIES = ((8, 7), (11, 0), (12, 1))  # 0.12.0-0.19.x: Jetson Orin, Jetson Thor, GB10 (DGX Spark)
# vendors whose vLLM platform reads the integrated flag (0.20.0+: CudaPlatform; RocmPlatform keeps False)
FLAG_VENDORS = ("NVIDIA",)
MASK_FROM = (0, 12, 0)  # the V1 runner's bool token mask beside its int32 token ids (token_table_bytes)
RUNNER_CHOICE_FROM = (0, 22, 0)  # from here vLLM picks the V1 or V2 model runner by model and feature


def _flag_vendor(gpu) -> bool:
    """Whether vLLM's platform for this GPU's vendor reads the integrated flag (FLAG_VENDORS)."""
    return vendor_of(gpu) in FLAG_VENDORS


def reads_meminfo(gpu, v: tuple[int, ...]) -> bool:
    """Whether vLLM release `v` takes this GPU's free memory from the OS's MemAvailable (a unified profile: its
    `memory_unified`, `vendor` and `compute_capability` fields)."""
    if not unified(gpu) or v < MEMINFO_FROM:
        return False
    if v < FLAG_FROM:
        return capability_of(gpu) in CAPABILITIES and _flag_vendor(gpu)
    return _flag_vendor(gpu)


def requested(total: int, gmu: float) -> int:
    """vLLM's requested memory, the free memory it needs at start-up: math.ceil(total x gpu_memory_utilization)."""
    return math.ceil(total * gmu)


def os_room(total: int, gmu: float) -> int:
    """The most the OS and every other process may hold when vLLM's worker starts: total - requested."""
    return total - requested(total, gmu)


def highest_starting(total: int, held: int) -> float:
    """The largest two-decimal utilisation whose request the free memory `total - held` covers (0.0: none)."""
    g = math.floor((total - held) / total * 100) / 100
    while g > 0 and requested(total, g) > total - held:
        g = round(g - 0.01, 2)
    return max(g, 0.0)


def refuses(gpu, st) -> bool:
    """vLLM's start-up check fails: the free memory the stated `os_memory` leaves is below what it requests."""
    if not unified(gpu) or st.os_memory is None:
        return False
    return st.os_memory > os_room(gpu.memory_usable_bytes, st.gpu_memory_utilization)


def host_bytes(gpu, st) -> int:
    """The host-side growth (engine option host_growth) vLLM counts as non-KV memory on a unified GPU, where the
    free memory it measures (MemAvailable, or cudaMemGetInfo's) drops with host allocations too; 0 elsewhere."""
    return st.host_growth if unified(gpu) else 0


def token_table_bytes(gpu, st) -> int:
    """The host memory vLLM's model runner fills with one token id per request slot and position, max_num_seqs x
    max_model_len, on an NVIDIA unified-memory profile (0 elsewhere, and under the V0 engine).

    The runner is built after the snapshot the budget starts from (`v1/worker/gpu_worker.py` v0.20.0 L282 then
    L302-310; v0.29.0 L439 then the runner below it), so on an integrated GPU, where the free memory vLLM reads drops
    with host allocations (MemAvailable from 0.12.0, cudaMemGetInfo's count before), this table is non-KV memory; on a
    discrete GPU it is host RAM and costs nothing. Bytes per slot and position:
      * V1 runner: `InputBatch.token_ids_cpu_tensor`, int32 zeros (4 B; `v1/worker/gpu_input_batch.py` v0.11.0 L111),
        and from 0.12.0 `is_token_ids_tensor`, bool zeros (1 B more; v0.12.0 L110-123, v0.29.0 L134-147).
      * V2 runner: `RequestState.all_token_ids`, a pinned int32 UVA buffer (4 B; `v1/worker/gpu/states.py` v0.22.0
        L33-37, v0.29.0 L34-39, `buffer_utils.py` v0.29.0 L48). VLLM_USE_V2_MODEL_RUNNER defaults off up to 0.21
        (`envs.py` v0.21.0 L1711-1713); from 0.22.0 the choice is by model and feature (`config/vllm.py`
        `use_v2_model_runner`), so from there kvplan counts the 4 B both runners hold, not V1's 1 B mask (a lower
        bound where V1 runs), nor V2's M-RoPE position table (`gpu/mm/rope.py` v0.29.0 L49-54).
    """
    return st.max_num_seqs * st.max_model_len * _token_entry_bytes(gpu, st)


def _token_entry_bytes(gpu, st) -> int:
    """Bytes of the runner's host token table per request slot and position (token_table_bytes); 0 where none."""
    if not unified(gpu) or not st.v1 or not _flag_vendor(gpu):
        return 0
    return 5 if MASK_FROM <= st.v < RUNNER_CHOICE_FROM else 4


def host_counted(gpu, st, checkpoint: int) -> int:
    """All vLLM counts of the host as non-KV memory on a unified GPU: the runner's token table, the page cache the
    load leaves where the device count leaves it out, and the stated host growth (0 on a discrete GPU)."""
    return (token_table_bytes(gpu, st) + page_cache_bytes(gpu, st, checkpoint)
            + host_bytes(gpu, st))


def page_cache_bytes(gpu, st, checkpoint: int) -> int:
    """The checkpoint's file pages a cold load leaves in the page cache, which vLLM counts as non-KV memory where its
    free memory is the device's own count on an NVIDIA unified GPU (not MemAvailable: reads_meminfo); 0 elsewhere.
    Engine option page_cache=SIZE states it (0: a warm start, whose cache the start-up check then counts as the OS's).

    On an integrated GPU cudaMemGetInfo's free is the kernel's MemFree, which counts the page cache as used (vLLM's
    own comment, `utils/mem_utils.py` v0.30.0 L143-150; unslothai/unsloth#10704 measured it on a GB10: writing a
    60 GiB file moved cuda_free 103.25 -> 41.52 GiB with MemFree, MemAvailable 115.85 -> 115.65). The default loader
    opens every safetensors file with `safe_open` and `get_tensor`s every tensor on every rank before taking its
    shard (`model_loader/weight_utils.py` `safetensors_weights_iterator`), so after caches are dropped a load adds
    the whole checkpoint to the page cache, after the snapshot the budget starts from: the non-torch increase
    (total - free - torch reserved: `utils/__init__.py` v0.11.0 `memory_profiling`) holds it, unless the kernel
    evicts it, which it does only when free memory runs out, and then the budget is gone anyway (requested - free at
    start <= 0)."""
    if not unified(gpu) or not _flag_vendor(gpu) or reads_meminfo(gpu, st.v):
        return 0
    return checkpoint if st.page_cache is None else st.page_cache


def warnings(gpu, st) -> tuple[PlanWarning, ...]:
    """What a plan on a unified-memory GPU assumes about vLLM's free memory and start-up (none elsewhere)."""
    if not unified(gpu):
        # host_growth defaults to 0, so only a size given is named
        return ignored_on(gpu, {"os_memory": st.os_memory, "host_growth": st.host_growth or None,
                                "page_cache": st.page_cache})
    gmu, total = st.gpu_memory_utilization, gpu.memory_usable_bytes
    need = requested(total, gmu)
    meminfo = reads_meminfo(gpu, st.v)
    free = ("the OS's MemAvailable (free pages and reclaimable page cache)" if meminfo else
            "the device's own count (torch.cuda.mem_get_info), not the OS's MemAvailable")
    short = "MemAvailable" if meminfo else "that count"
    share = (f"vLLM {st.version}'s gpu_memory_utilization {gmu:g} is a share of the GPU's total (cudaMemGetInfo's, "
             "read at run time), and its KV budget is that share less non-KV memory: what the OS and other "
             "processes hold is not subtracted from it but checked at start-up. ")
    out = []
    if st.os_memory is None:
        out.append(PlanWarning(share + f"vLLM takes this GPU's free memory from {free}, and starts only "
                               f"if it is at least {gmu:g} x {{}} = {{}} when its worker starts: kvplan assumed the OS "
                               f"and other processes hold at most {{}} then (state theirs with {arg('engine_opts')} "
                               "os_memory=SIZE)", (total, need, os_room(total, gmu)),
                               ("GiB", "GiB", "GiB")))
    elif refuses(gpu, st):
        out.append(PlanWarning(share + f"vLLM would refuse to start: with the OS and other processes holding {{}} "
                               f"(os_memory), {free} is {{}}, below the {gmu:g} x {{}} = {{}} it requests",
                               (st.os_memory, total - st.os_memory, total, need), ("GiB", "GiB", "GiB", "GiB")))
    else:
        out.append(PlanWarning(share + f"vLLM starts: the OS and other processes holding {{}} (os_memory) leave "
                               f"{{}} free, at least the {gmu:g} x {{}} = {{}} it requests",
                               (st.os_memory, total - st.os_memory, total, need), ("GiB", "GiB", "GiB", "GiB")))
    per = _token_entry_bytes(gpu, st)
    table = (f"the model runner's host token table (max_num_seqs x max_model_len x {per} B = {st.max_num_seqs:,} x "
             f"{st.max_model_len:,} x {per} B = {{}}) and " if per else "")
    sizes = ((token_table_bytes(gpu, st),) if per else ()) + (host_bytes(gpu, st),)
    out.append(PlanWarning("vLLM counts what the node's processes allocate on the host between its worker's "
                           f"start and the end of its profile run as non-KV memory (the drop of {short}): "
                           f"kvplan counted {table}{{}} more ({arg('engine_opts')} host_growth=SIZE), beside the "
                           f"overhead (its estimate or {arg('overhead')}); the KV "
                           f"budget is smaller by whatever more they take; {_page_cache_said(gpu, st, meminfo)}",
                           sizes, ("GiB",) * len(sizes)))
    return tuple(out)


def _page_cache_said(gpu, st, meminfo: bool) -> str:
    """What the plan assumed of the page cache (page_cache_bytes), in words."""
    if meminfo:
        ignored = f" ({arg('engine_opts')} page_cache ignored)" if st.page_cache is not None else ""
        return ("the page cache (the checkpoint's files the load reads) kvplan counted as free, as MemAvailable does "
                f"(less min(cache / 2, the low watermark)){ignored}")
    if not _flag_vendor(gpu):
        return ("the page cache kvplan counted as free: whether this vendor's device count leaves it out is not "
                "read (a warm start's cache may make the start-up check fail, a cold load's shrink the budget)")
    said = "as stated" if st.page_cache is not None else "a cold start: caches dropped before it"
    return (f"the checkpoint's page cache, which that count leaves out, kvplan counted as non-KV memory ({said}; "
            f"{arg('engine_opts')} page_cache=SIZE; a warm start's cache is the OS's share at the check instead)")


def emit_note(settings: dict, total: int, gmu: float) -> str | None:
    """What `--emit vllm` adds on a unified-memory GPU: the most the OS may hold at the utilisation it prints
    (settings: the plan's settings dict, with `memory_unified` and `os_memory`)."""
    if not settings.get("memory_unified"):
        return None
    room, held = os_room(total, gmu), settings.get("os_memory")
    verdict = "" if held is None or held <= room else (
        f"; with the stated {held / 2**30:.2f} GiB vLLM would refuse to start: the most that starts is "
        f"{highest_starting(total, held):g}")
    return (f"unified memory: at {gmu:g} vLLM starts only while the OS and other processes hold at most "
            f"{room / 2**30:.2f} GiB when its worker starts{verdict}")
