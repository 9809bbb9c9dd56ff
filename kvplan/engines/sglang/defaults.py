"""SGLang's defaults that depend on the GPU and the layout: `mem_fraction_static` by release, the chunked-prefill
size, the decode CUDA-graph batch, and whether dp ranks run as DP attention.

Sources (PyPI wheels; docs/engines.md section 2):
  * default mem_fraction_static: 0.4.3.post4 `srt/server_args.py` L204-214 (by tp only); 0.4.9 L280-320 through
    0.5.2 (reserve by GPU memory: (2.8 + tp*pp/10) GiB below 35 GiB, (9.5 + tp*pp/2) below 90, (12 + tp*pp/2)
    below 160, else 32; + 4 GiB under DP attention); 0.5.3 L637-680 and 0.5.23 `srt/arg_groups/memory_hook.py`
    L281-345 (reserve in MiB = 512 + 1.5 x max(chunked_prefill, 2048) + tp*pp/8 x 1024 + 2 x cuda-graph max bs,
    + 3 (4.5 above a max bs of 300) x max bs x DP ranks under DP attention, floored at 10 GiB above 60 GiB).
    From 0.5.10 the piecewise (0.5.23: prefill) CUDA-graph reserve (kvplan.engines.sglang.piecewise; 464 MiB on an
    H100 80 GB at 0.5.23). Not modelled: 0.5.23's DeepEP reserves (only with --moe-a2a-backend deepep, which kvplan
    does not plan) and its post-capture sizing (off by default, SGLANG_ENABLE_POST_CAPTURE_KV_SIZING).
  * the GPU memory all three read: `get_device_memory_capacity` -> `get_nvgpu_memory_capacity`, the device total
    `nvidia-smi --query-gpu=memory.total` prints in MiB, `torch.cuda.mem_get_info()[1]` only where nvidia-smi fails
    (0.4.9 `srt/utils.py` L1354-1380, `server_args.py` L277; 0.5.5 `server_args.py` L579 and
    `srt/utils/common.py` L1516-1541; 0.5.8 `srt/utils/common.py` L1667): a profile's `memory_smi_bytes`, else its
    torch total. On an L40S (46,068 MiB in nvidia-smi, 45,486 in torch) 0.5.5's default is 0.851, not 0.849.
  * chunked_prefill_size by GPU memory (0.4.3 `server_args.py`: 2048 below 25,000 MB, else 8192; 0.5.23
    `memory_hook.py`: 2048 / 4096 / 8192 / 16384 below 20 / 60 / 160 GiB / above); the decode cuda-graph max batch
    by GPU tier (0.5.23 `memory_hook.py` L89-170), raised for Qwen3-VL on Hopper from 0.5.20 (`expanded_graph_bs`);
    each DP-attention worker's share of it (`dp_chunk_divisor`). Read against 0.5.23 this round: the tiers, the
    reserve's terms and the DP division (`arg_groups/parallel_hook.py` L327-331, // attn_dp_size) agree; not
    modelled from 0.5.22: a default decode batch above --max-running-requests cut down to it (`capped_graph_bs`).
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.options import opt_bool, opt_int
from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.versions import parse_version, release_post
from kvplan.hardware.facts import capability_of, vendor_of

# Under DP attention each worker's scheduler takes the server's chunked_prefill_size after __post_init__ has cut it:
# by 2 up to 0.4.4 ("if self.enable_dp_attention: self.dp_size = self.tp_size ... self.chunked_prefill_size =
# self.chunked_prefill_size // 2", sglang 0.4.3.post2 wheel `srt/server_args.py` L253-257, 0.4.4 L264-267; each
# worker's `srt/managers/scheduler.py` reads it as is, 0.4.3.post2 L334), by dp_size from 0.4.4.post1 (its wheel
# L264-270, 0.4.4.post2 L289, 0.4.4.post3 L290; later releases: kvplan.engines.sglang.admission's note). So at
# 0.4.3.post2's default 8,192 on a 141 GB H200 at --tp 8 a worker prefills 4,096 tokens a step, not 8,192 // 8 = 1,024.
DP_CHUNK_BY_DP_FROM = ((0, 4, 4), 1)  # (release, post): 0.4.4.post1


def dp_chunk_divisor(version: str | None, dp: int) -> int:
    """What SGLang at `version` divides chunked_prefill_size by for each of `dp` DP-attention workers
    (DP_CHUNK_BY_DP_FROM): 2 before 0.4.4.post1, dp from it (and where no release is given: the current rule)."""
    if dp <= 1:
        return 1
    if version is None:
        return dp
    return 2 if release_post(version) < DP_CHUNK_BY_DP_FROM else dp


def capacity_mib(gpu) -> float:
    """The GPU memory SGLang sizes its defaults by, in MiB (module docstring): nvidia-smi's total where the profile
    gives it, else the torch total (SGLang's own fallback)."""
    return (getattr(gpu, "memory_smi_bytes", None) or gpu.memory_usable_bytes) / 2**20


def default_fraction(version: str, gpu_mib: float, tp: int, pp: int = 1, chunked: int = 8192,
                     graph_bs: int = 256, attn_dp: int = 0, piecewise_mib: float = 0.0) -> float:
    """SGLang's default mem_fraction_static for a GPU of `gpu_mib` MiB (see module docstring); `piecewise_mib`, the
    piecewise (0.5.23: prefill) CUDA-graph reserve (kvplan.engines.sglang.piecewise), counts before the 10 GiB floor."""
    v = parse_version(version)
    if v < (0, 4, 7):
        for min_tp, frac in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
            if tp >= min_tp:
                return frac
        return 0.88
    if v < (0, 5, 3):  # 0.4.7-0.5.2 (0.5.2 `server_args.py` __post_init__: the same table, its H20 tier 12 as well)
        gib = gpu_mib / 1024
        if gib < 35:
            reserved = (2.8 + tp * pp / 10) * 1024
        elif gib < 90:
            reserved = (9.5 + tp * pp / 2) * 1024
        elif gib < 160:
            reserved = (12 + tp * pp / 2) * 1024
        else:
            reserved = 32 * 1024
        if attn_dp:
            reserved += 4 * 1024  # "if self.enable_dp_attention: reserved_mem += 4 * 1024" (0.5.2)
        return round((gpu_mib - reserved) / gpu_mib, 3)
    reserved = 512 + 1.5 * activation_tokens(chunked) + tp * pp / 8 * 1024 + 2 * graph_bs
    if attn_dp:
        reserved += dp_attention_reserve(graph_bs, attn_dp)
    reserved += piecewise_mib
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


# SGLang reads any chunked_prefill_size <= 0 (its documented -1) as chunked prefill off: the scheduler sets it to None
# ("elif self.chunked_prefill_size is not None and self.chunked_prefill_size <= 0: self.chunked_prefill_size = None",
# 0.5.10 wheel `srt/managers/scheduler.py` L877-879, 0.5.23 L1372-1373), and from 0.5.3 the default fraction's
# activation reserve counts max_prefill_tokens instead of the chunk ("if self.chunked_prefill_size > 0: reserved_mem +=
# max(self.chunked_prefill_size, 2048) * 1.5 else: reserved_mem += max(self.max_prefill_tokens, 2048) * 1.5", 0.5.3
# `server_args.py` L641-644, 0.5.7 L913-916, 0.5.15 L3634-3637; 0.5.23 `arg_groups/memory_hook.py` L304-307), whose
# default is 16,384 (0.5.3 `server_args.py` L191; 0.5.23 `arg_groups/fields/schedule.py` L71-81; kvplan does not
# read --max-prefill-tokens). So at -1 the reserve is 24,576 MiB where a 8,192 chunk's is 12,288. The prefill graph's
# captured sizes run up to the chunk, so none are captured at -1 (piecewise.capture_sizes(-1) is empty; an MLA
# backend's flat 1.5 GiB stays). Before 0.5.3 the reserve does not read the chunk.
CHUNK_OFF = -1
MAX_PREFILL_TOKENS = 16384


def read_chunk(opts: dict, default: int) -> int:
    """chunked_prefill_size as SGLang reads it: a positive chunk, or CHUNK_OFF for any value <= 0 (see above)."""
    raw = str(opts.get("chunked_prefill_size", "")).strip().replace("_", "")
    if re.fullmatch(r"-\d+", raw):
        return CHUNK_OFF
    chunk = opt_int(opts, "chunked_prefill_size", default)
    return chunk if chunk > 0 else CHUNK_OFF


def activation_tokens(chunked: int) -> int:
    """The tokens SGLang's default fraction (0.5.3 on) reserves activations for, 1.5 MiB each: the chunk, at least
    2,048, or max_prefill_tokens where chunked prefill is off (CHUNK_OFF's note)."""
    return max(chunked, 2048) if chunked > 0 else max(MAX_PREFILL_TOKENS, 2048)


def default_chunked(version: str, gpu_gib: float) -> int:
    v = parse_version(version)
    if v < (0, 5, 0):
        return 2048 if gpu_gib * 2**30 < 25_000 * 10**6 else 8192  # 0.4.3: "< 25,000 MB"
    if v < (0, 5, 3):  # 0.5.2 `server_args.py` __post_init__: A10/L40/4090 2k, H100/H200/A100/H20 8k, else 16k
        return 2048 if gpu_gib < 35 else 8192 if gpu_gib < 160 else 16384
    small = 4096 if v >= SMALL_TIER_FROM else 2048  # the 20-35 GiB tier (GRAPH_TIERS' note)
    for limit, size in ((20, 2048), (35, small), (60, 4096), (160, 8192)):
        if gpu_gib < limit:
            return size
    return 16384


# The decode CUDA-graph max batch SGLang picks where none is given, by GPU memory tier (GiB, below which) and
# --tp-size (< 4, >= 4), as _handle_gpu_memory_settings sets it for CUDA (0.5.3 `server_args.py` L542-627 through
# 0.5.19's `arg_groups/memory_hook.py`; 0.5.23 `memory_hook.py` L89-170). The 20-35 GiB tier (A10, RTX 4090/5090)
# changed twice: 16 / 80 in 0.5.3-0.5.4, 24 / 80 in 0.5.5-0.5.19, 48 / 160 (and a 4,096-token chunk, not 2,048)
# from 0.5.20 (wheels 0.5.3, 0.5.4, 0.5.5, 0.5.8, 0.5.10, 0.5.13, 0.5.15-0.5.20, 0.5.22, 0.5.23 read).
SMALL_TIER_FROM = (0, 5, 20)  # the 20-35 GiB tier's 4,096-token chunk and 48 / 160 batch
GRAPH_TIERS = ((20, (8, 8)), (35, None), (60, (32, 160)), (160, (256, 512)))  # H100 (< 90) and H200 alike
SMALL_TIER = ((SMALL_TIER_FROM, (48, 160)), ((0, 5, 5), (24, 80)), ((0, 0, 0), (16, 80)))


def default_graph_bs(version: str, gpu_gib: float, tp_size: int = 1) -> int:
    """SGLang's decode cuda-graph max batch for a GPU of `gpu_gib` at --tp-size `tp_size` (GRAPH_TIERS)."""
    v = parse_version(version)
    for limit, pair in GRAPH_TIERS:
        if gpu_gib < limit:
            pair = pair or next(p for since, p in SMALL_TIER if v >= since)
            return pair[0] if tp_size < 4 else pair[1]
    return 512


# From 0.5.22 a default decode CUDA-graph max batch above --max-running-requests (the server's, as given) is cut down
# to it before the reserve is sized: "if decode_max_bs_is_default and cfg.max_running_requests is not None and
# decode_cuda_graph_config.max_bs > cfg.max_running_requests: decode_cuda_graph_config.max_bs =
# cfg.max_running_requests" (0.5.22 wheel `srt/arg_groups/memory_hook.py` L182-188, 0.5.23 L182-188; not in 0.5.20
# nor 0.5.21). A stated --cuda-graph-max-bs is kept.
CAP_TO_RUNNING_FROM = (0, 5, 22)


def capped_graph_bs(version: str, graph_bs: int, running: int) -> int:
    """The default decode CUDA-graph max batch after 0.5.22's cut to --max-running-requests (`running`, 0: none)."""
    if parse_version(version) >= CAP_TO_RUNNING_FROM and 0 < running < graph_bs:
        return running
    return graph_bs


# Qwen3-VL on a Hopper GPU of 60 GiB or more: where --max-running-requests (at most 512) is above the default decode
# CUDA-graph max batch, SGLang raises the batch to it before sizing the reserve ("Keep profiled high-concurrency
# Qwen3-VL decode inside CUDA graph": `srt/arg_groups/model_overrides/qwen3_vl.py` L20-62, identical in the 0.5.20 and
# 0.5.23 wheels, called from `memory_hook.py` 0.5.20 L182-189, 0.5.23 L191-197; `is_sm90_supported`: major 9 only).
# SGLang keys it on model_type qwen3_vl / qwen3_vl_moe with multimodal on; kvplan on the architectures they serve.
QWEN3_VL_EXPAND_FROM = (0, 5, 20)
QWEN3_VL_ARCHS = ("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration")


def expanded_graph_bs(version: str, graph_bs: int, running: int, model, gpu) -> int:
    """The decode CUDA-graph max batch after SGLang's Qwen3-VL expansion (QWEN3_VL_EXPAND_FROM; `graph_bs` the
    default, `running` the --max-running-requests given, 0 if none); CUDA only (`is_sm90_supported`)."""
    cuda = vendor_of(gpu) == "NVIDIA"
    if (parse_version(version) >= QWEN3_VL_EXPAND_FROM and model.architecture in QWEN3_VL_ARCHS and cuda
            and sglang_mm.is_multimodal(model, version) and (capability_of(gpu) or (0, 0))[0] == 9
            and capacity_mib(gpu) >= 60 * 1024 and graph_bs < running <= 512):
        return running
    return graph_bs


def dp_attention_reserve(graph_bs: int, attn_dp: int) -> float:
    """MiB SGLang adds to its reserve under DP attention (0.5.3 `server_args.py` L650-658; 0.5.15 L3650-3658; 0.5.23
    `memory_hook.py` `reserve_for_graph_mb` L370-378): "more padding for some operations", 3 MiB a graph batch slot
    a DP rank, and 1.5 more above a max batch of 300."""
    return graph_bs * attn_dp * (3 + (1.5 if graph_bs > 300 else 0))


def dp_attention(model, dep, opts: dict) -> bool:
    """Whether this deployment is SGLang DP attention (--enable-dp-attention): by default a MoE model's
    dp ranks are, a dense model's are replicas (--dp-size alone). Layouts kvplan does not place as
    SGLang would are refused with the reason (docs/engines.md 9.2)."""
    dp = dep.dp
    moe = bool(model.params.num_experts)
    on = opt_bool(opts, "enable_dp_attention", dp > 1 and moe)
    if on and dp == 1:
        raise KvplanError(f"enable_dp_attention needs {arg('dp')} above 1 (kvplan's {arg('dp')} is SGLang's "
                          "--dp-size; its --tp-size is then tp × dp)", EXIT_USAGE, param="dp", value=dp)
    if on and not moe:
        raise KvplanError("enable_dp_attention on a dense model: SGLang then runs its MLPs tensor parallel over "
                          f"every rank, which kvplan does not model; plan {arg('dp')} replicas "
                          "(enable_dp_attention=false)", EXIT_USAGE, param="engine_opts",
                          value={"enable_dp_attention": opts.get("enable_dp_attention")})
    if dp > 1 and moe and not on:
        raise KvplanError(f"{arg('dp')} on a MoE model without enable_dp_attention is SGLang replicas (each with all "
                          f"experts over --tp-size): plan one replica with {arg('tp')} and use cheapest "
                          f"{arg('replicas')}", EXIT_USAGE, param="dp", value=dp)
    return on
