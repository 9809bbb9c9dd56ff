"""SGLang's settings for one plan: the releases modelled, the options read, and `settings` (the default
`mem_fraction_static`, chunked prefill, page, SWA share, memory in use before the weights, what loading adds) into
the frozen `Settings` every other SGLang rule reads; the pool they size is kvplan.engines.sglang.engine's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.base import check_opts, check_version, opt_bool, opt_float, opt_int, parse_version
from kvplan.engines.options import opt_shared_bytes, os_share
from kvplan.engines.context import engine_length
from kvplan.engines.sglang import allreduce as sglang_allreduce
from kvplan.engines.sglang import attention as sglang_attention
from kvplan.engines.sglang import dsa as sglang_dsa
from kvplan.engines.sglang import dsv4 as sglang_dsv4
from kvplan.engines.sglang import loaded as sglang_loaded
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.sglang import ncclmem as sglang_nccl
from kvplan.engines.sglang import piecewise as sglang_piecewise
from kvplan.engines.sglang import prefill_graph as sglang_prefill_graph
from kvplan.engines.sglang import swa as sglang_swa
from kvplan.engines.sglang import uma as sglang_uma
from kvplan.engines.sglang.defaults import (
    capacity_mib, capped_graph_bs, default_chunked, default_fraction, default_graph_bs, dp_attention,
    expanded_graph_bs, read_chunk,
)
from kvplan.engines.sglang.layout import OPTS as LAYOUT_OPTS
from kvplan.model.compressed import has_compressed
from kvplan.model.weights import weight_bytes
from kvplan.planning.deploy import node_size, stage_ranges
from kvplan.planning.plan import cache_dtypes

MIB = 2**20
VERSIONS = ("0.4.0", "0.4.3", "0.4.9", "0.5.3", "0.5.23")
DEFAULT_VERSION = "0.5.23"
OPTS = ("mem_fraction_static", "chunked_prefill_size", "page_size", "swa_full_tokens_ratio", "cuda_graph_max_bs",
        "enable_dp_attention", "vlm_cache_size_mb", "enable_multimodal",  # the last: multimodal.py
        "os_memory", "page_cache",  # a unified-memory GPU's OS share and page cache (kvplan.engines.sglang.uma)
        "pp_layer_partition",  # SGLANG_PP_LAYER_PARTITION (kvplan.engines.stage_split)
        *LAYOUT_OPTS, *sglang_mamba.OPTS, *sglang_attention.OPTS)  # layout.py, mamba.py, attention.py
# Memory taken before the weights load: what `init_torch_distributed` leaves in use (the CUDA context, NCCL's
# communicators and, on NVLink or two GPUs, custom all-reduce buffers; 0.4.3.post4 `model_runner.py` L258-316;
# custom all-reduce stays off on more than two PCIe-only GPUs, `custom_all_reduce.py` L235-241; where it is on, its
# buffers are added: kvplan.engines.sglang.allreduce; inside an NVSwitch domain NCCL's larger buffers, as SGLang's
# logs measured them: kvplan.engines.sglang.ncclmem). tp > 1: 0.40 GiB,
# the torch total SGLang's free memory counts from (cudaMemGetInfo; the L4 profile's 22,558 MiB) less the 21.63 GiB
# free before loading (avail 6.09 + mem usage 15.54 GB) of QwQ-32B at tp 4 on L4s (github.com/didier-durand/
# llms-in-clouds docs/sglang.md): 22,558 - 22,149.1 = 408.9 MiB (+-10 MiB from the printed decimals). It was
# 880 MiB, read against nvidia-smi's total (22.49 GiB), which free memory does not count from. tp=1: an estimate.
INIT_BYTES_TP1 = 512 * MIB
INIT_BYTES_MULTI = 409 * MIB


@dataclass(frozen=True)
class Settings:
    version: str
    mem_fraction_static: float
    chunked_prefill_size: int
    page_size: int
    swa_full_tokens_ratio: float
    init_bytes: int  # memory in use before the weights load (estimate)
    loaded_extra: int = 0  # bytes per GPU loading adds to the checkpoint (kvplan.engines.sglang.loaded)
    vlm_factor: float = 1.0  # the VLM scaling of the default fraction (kvplan.engines.sglang.multimodal)
    vlm_cache_mb: int = sglang_mm.DEFAULT_CACHE_MB  # SGLANG_VLM_CACHE_SIZE_MB
    usable_bytes: int = 0  # the GPU's memory as torch sees it (req_pool.room's start)
    hybrid_swa: bool = False  # sliding-window layers in a pool of their own (kvplan.engines.sglang.swa)
    state: sglang_mamba.StateSettings | None = None  # the recurrent-state pool's (kvplan.engines.sglang.mamba)
    max_running_requests: int | None = None  # --max-running-requests per dp worker
    allocator_rounding: int = 0  # of loaded_extra: PyTorch's caching allocator's rounding of the weights (loaded.py)
    attention_dp: int = 1  # DP-attention workers (--dp-size under --enable-dp-attention), else 1
    prefill_graph: tuple | None = None  # (backend or "off", MiB reserved, why) where the fraction is SGLang's default
    prefill_replay: bool = False  # a prefill graph is kept, fraction given or not: the speed figures read it
    multimodal: bool = False  # SGLang's is_multimodal: a vision model not switched off by default (multimodal.py)
    page_why: str = ""  # the attention backend that forces page_size, where one does (attention.py)
    aiter_factor: float = 1.0  # SGLang's cut of the fraction under aiter past 8,192 tokens (attention.aiter_cut)
    aiter_why: str = ""  # that cut, in words, where it applies
    dsa: sglang_dsa.DsaPool | None = None  # DeepSeek Sparse Attention's pool rules (kvplan.engines.sglang.dsa)
    # why kvplan does not plan this DSA pool: (message, param, value, allowed), raised where the pool is sized
    # (dsa.refuse); the
    # other settings stand, as the scheduler's chunk and DP-attention rules do not read the pool
    dsa_refused: tuple = ()
    os_memory: int | None = None  # unified memory: what the OS and other processes hold at B (sglang.uma)
    page_cache: int | None = None  # unified memory: a stated page cache in the weight drop (None: a cold load)
    uma_bytes: int = 0  # what those take from the pool (kvplan.engines.sglang.uma.overhead_bytes)
    os_held: int = 0  # what B lacks for the OS: os_memory on a unified GPU, else 0 (kvplan.engines.options.os_share)
    context_len: int = 0  # the server's model_config.context_len: its --context-length (engine_length), not a request's
    running_given: int = 0  # --max-running-requests as given (the whole server's), 0: not given (req_pool.py)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    opts = dict(opts or {})
    check_opts("sglang", opts, OPTS)
    version = check_version("sglang", version, VERSIONS, DEFAULT_VERSION)
    # SGLang sizes its defaults by the device total nvidia-smi prints (get_nvgpu_memory_capacity), torch's total only
    # where nvidia-smi fails: the profile's memory_smi_bytes, else its usable bytes (defaults.capacity_mib)
    gib = capacity_mib(gpu) / 1024
    chunked = read_chunk(opts, default_chunked(version, gib))  # -1: chunked prefill off (defaults.CHUNK_OFF)
    dpa = dp_attention(model, dep, opts)
    tp_size = dep.tp * dep.dp if dpa else dep.tp  # SGLang's --tp-size counts every rank under DP attention
    running, mm_flag = opt_int(opts, "max_running_requests", 0), opt_bool(opts, "enable_multimodal", False)
    graph_bs = opt_int(opts, "cuda_graph_max_bs", 0) or expanded_graph_bs(  # 0.5.22's cut, Qwen3-VL's (defaults.py)
        version, capped_graph_bs(version, default_graph_bs(version, gib, tp_size), running), running, model, gpu)
    backend, why = sglang_prefill_graph.decide(model, gpu, dep, version, dpa, mm_flag)
    piecewise = sglang_piecewise.graph_mib(model, chunked) if backend else 0.0  # its reserve, 0.5.10 on
    frac = default_fraction(version, capacity_mib(gpu), tp_size, dep.pp, chunked, graph_bs, dep.dp if dpa else 0,
                            piecewise)
    if (explicit or {}).get("gpu_memory_utilization"):
        frac = explicit["gpu_memory_utilization"]  # --gpu-memory-utilization doubles as the fraction
    given = bool((explicit or {}).get("gpu_memory_utilization")) or "mem_fraction_static" in opts
    frac = opt_float(opts, "mem_fraction_static", frac)
    # a vision model's fraction scaled: its own default from 0.4.9, any before (kvplan.engines.sglang.multimodal)
    vlm = sglang_mm.vlm_factor(model, version, mm_flag) if sglang_mm.scales_any_fraction(version) or not given else 1.0
    frac *= vlm
    # under aiter (named, or ROCm's default) past 8,192 tokens of the server's context_len (the --context-length kvplan
    # emits), SGLang cuts any fraction, given or default, by 0.85 (kvplan.engines.sglang.attention.aiter_cut)
    context_len = engine_length(model, req)
    aiter, aiter_why = sglang_attention.aiter_cut(model, gpu, version, opts, tp_size, context_len)
    frac *= aiter
    v4 = has_compressed(model.layers)  # DeepSeek-V4: its page and SWA share (kvplan.engines.sglang.dsv4)
    page_given = opt_int(opts, "page_size", 0) if "page_size" in opts else None  # else the backend's page, or 1
    page, page_why = ((sglang_dsv4.pool.PAGE if page_given is None else page_given), "") if v4 else \
        sglang_attention.page_size(model, gpu, version, opts, page_given)
    if page < 1:
        raise KvplanError("page_size must be at least 1", EXIT_USAGE)
    ratio = opt_float(opts, "swa_full_tokens_ratio", sglang_dsv4.pool.SWA_RATIO if v4 else 0.8)
    kv = req.kv_dtype
    if kv is not None and kv.block_elems > 1:
        raise KvplanError(f"SGLang has no {kv.name} KV cache; use auto, bf16, fp16 or fp8", EXIT_USAGE)
    dsa, dsa_refused = sglang_dsa.pool_or_reason(model, gpu, version, cache_dtypes(req, model)[0])
    # before the weights: the CUDA context and NCCL (INIT_BYTES_*), custom all-reduce buffers where SGLang builds
    # them (kvplan.engines.sglang.allreduce: NVSwitch, or two GPUs), and NCCL's larger buffers inside an NVSwitch
    # domain, as SGLang's "Init torch distributed ends" logs measured them (kvplan.engines.sglang.ncclmem)
    init = (INIT_BYTES_MULTI if dep.gpus > 1 else INIT_BYTES_TP1) + sglang_allreduce.custom_allreduce_bytes(
        gpu, tp_size, dep.ep, version, node_size(dep, gpu)) + sglang_nccl.nccl_extra_bytes(gpu, tp_size)
    extra, rounding = sglang_loaded.loaded_parts(model, gpu, tp_size, version, dep.ep, stage_ranges(model, dep),
                                                   req.weight_dtype, dep.tp)
    cache_mb = opt_int(opts, "vlm_cache_size_mb", sglang_mm.DEFAULT_CACHE_MB)
    attn_dp = dep.dp if dpa else 1
    state = sglang_mamba.state_settings(model, version, opts, attn_dp)
    return Settings(version, float(frac), chunked, page, ratio, init, extra, vlm, cache_mb, gpu.memory_usable_bytes,
                    sglang_swa.hybrid_swa(model, version), state, max(1, running // attn_dp) if running else None,
                    allocator_rounding=rounding, attention_dp=attn_dp,
                    prefill_graph=None if given or parse_version(version) < sglang_prefill_graph.FROM
                    else (backend or "off", piecewise, why), prefill_replay=backend is not None,
                    multimodal=sglang_mm.is_multimodal(model, version, mm_flag), page_why=page_why,
                    aiter_factor=aiter, aiter_why=aiter_why, dsa=dsa, dsa_refused=dsa_refused, context_len=context_len,
                    running_given=running,
                    **_unified(model, gpu, version, float(frac), opts))


def _unified(model, gpu, version: str, frac: float, opts: dict) -> dict:
    """The OS's share and the page cache on a unified-memory GPU, as stated, and what they take from the pool
    (kvplan.engines.sglang.uma; 0 on a discrete GPU, where the warnings say the options are ignored)."""
    os_memory, cache = opt_shared_bytes(opts, "os_memory", None, gpu), opt_shared_bytes(opts, "page_cache", None, gpu)
    taken = sglang_uma.overhead_bytes(gpu, version, frac, os_memory, cache, weight_bytes(model).total)
    return {"os_memory": os_memory, "page_cache": cache, "uma_bytes": taken,
            "os_held": os_share(gpu, os_memory)}
