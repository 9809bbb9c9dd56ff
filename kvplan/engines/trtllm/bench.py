"""trtllm-bench's own max_batch_size and max_num_tokens: what `trtllm-bench throughput` runs with when the
command gives neither (TensorRT-LLM's perf overview pages leave both to it).

Restated from NVIDIA/TensorRT-LLM@04cba882084a25665e7f80f5bda71b35b9790b6f:tensorrt_llm/bench/build/tuning.py
(`calc_engine_setting`, `finetune_setting`) and @0171265edef1c67ef334e0db2427148161aa2815:
tensorrt_llm/bench/benchmark/utils/general.py (`get_settings`; the commits the code index holds, not re-read
release by release):

  * the KV room: NVML's device total (GiB: tensorrt_llm/bench/build/utils.py `get_device_memory`) x tp x pp
    less the parameters at the weights' bytes per element (FP8 1, NVFP4 0.5, anything else 2), times the
    KV fraction (`--kv_cache_free_gpu_mem_fraction`; not given, trtllm-bench's default 0.90, as perf-overview.md says);
  * a request's KV: 2 x attention layers x max(tp, KV heads) x head size x the KV's bytes per element
    (FP8 1, NVFP4 0.5, else 2) x (ISL + OSL): requests = room / that (ISL + OSL is also what the
    GUARANTEED_NO_EVICT policy trtllm-bench runs reserves a request: kvplan.engines.scheduler.resident_context;
    kvplan.bench.running takes the smaller of this batch and the engine's own pool over it, one cap, not two);
  * raw batch = min(requests, 4096) / pp; raw tokens = min(raw batch x (1 + ISL / OSL), 32768);
  * max_batch_size: raw batch rounded up to 32 (at least 64) below 256, to 128 below 1024, else to 256;
  * max_num_tokens: raw tokens rounded up to 256 (at least 2048) below 4096, to 512 below 8192, else to
    1024; with chunked prefill off (trtllm-bench's default) at least max ISL + max_batch_size.

Under enable_attention_dp the tool's tuning still reads `--tp` as one tensor-parallel group (`get_settings` passes
params tp and pp only), while TensorRT-LLM runs max_batch_size on each attention rank, each with its own pool
(kvplan.engines.trtllm.layout; kvplan.bench.running sizes the ranks with the engine's rules).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from kvplan.model.layers import ATTENTION_KINDS

GIB = 1 << 30
ELEM_BYTES = {"fp8": 1.0, "nvfp4": 0.5, "fp4": 0.5}  # tuning.py BYTES_PER_ELEM; anything else 2
KV_FRACTION = 0.90  # `--kv_cache_free_gpu_mem_fraction` not given: "the default setting of 0.90" (perf-overview.md)
MAX_REQUESTS = 4096  # finetune_setting: the decoder buffers' cap
MAX_TOKENS = 32768  # finetune_setting: the activation buffers' cap


class BenchSettings(NamedTuple):
    max_batch_size: int
    max_num_tokens: int


def elem_bytes(dtype: str | None) -> float:
    """Bytes per element tuning.py reads for a quantization algorithm (weights or KV): FP8 1, NVFP4 0.5, else 2."""
    return ELEM_BYTES.get((dtype or "").lower(), 2.0)


# finetune_setting's rounding: (below this, round up to this multiple, at least this), else the last multiple
BATCH_STEPS = ((256, 32, 64), (1024, 128, 0)), 256
TOKEN_STEPS = ((4096, 256, 2048), (8192, 512, 0)), 1024


def stepped(x: float, steps) -> int:
    """`x` rounded up as finetune_setting rounds a batch or a token count (BATCH_STEPS, TOKEN_STEPS)."""
    tiers, last = steps
    for below, multiple, least in tiers:
        if x < below:
            return max(least, multiple * math.ceil(x / multiple))
    return last * math.ceil(x / last)


def finetune(requests: float, isl: float, osl: float, pp: int = 1) -> BenchSettings:
    """`finetune_setting` with optimistic tuning: (max_batch_size, max_num_tokens) from the requests the KV
    memory holds at ISL + OSL each."""
    raw_bs = min(requests, MAX_REQUESTS) / pp
    raw_tokens = min(raw_bs * (1 + isl / osl), MAX_TOKENS)
    return BenchSettings(stepped(raw_bs, BATCH_STEPS), stepped(raw_tokens, TOKEN_STEPS))


def bench_settings(spec, device_bytes: int, *, tp: int, pp: int, isl: float, osl: float,
                   weight_dtype: str | None, kv_dtype: str | None, fraction: float = KV_FRACTION,
                   chunked: bool = False) -> BenchSettings | None:
    """trtllm-bench's (max_batch_size, max_num_tokens) for `spec` on tp x pp GPUs of `device_bytes` each (NVML's
    total) at the dataset's ISL / OSL, or None where not one request fits (trtllm-bench refuses to run)."""
    attn = [l for l in spec.layers if l.kind in ATTENTION_KINDS and getattr(l, "num_kv_heads", 0)]
    if not attn or osl <= 0:
        return None
    heads = max(tp, max(l.num_kv_heads for l in attn))
    head = max(l.head_dim for l in attn)
    per_token = 2 * len(attn) * heads * head * elem_bytes(kv_dtype) / GIB
    room = device_bytes / GIB * tp * pp - spec.params.total * elem_bytes(weight_dtype) / GIB
    requests = room * fraction / (per_token * (isl + osl))
    if requests < 1:
        return None
    bs, tokens = finetune(requests, isl, osl, pp)
    if not chunked:
        tokens = max(tokens, int(math.ceil(isl)) + bs)
    return BenchSettings(bs, tokens)
