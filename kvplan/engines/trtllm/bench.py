"""trtllm-bench's own max_batch_size and max_num_tokens: what `trtllm-bench throughput` runs with when the
command gives neither (TensorRT-LLM's perf overview pages leave both to it).

Restated from NVIDIA/TensorRT-LLM@04cba882084a25665e7f80f5bda71b35b9790b6f:tensorrt_llm/bench/build/tuning.py
(`calc_engine_setting`, `finetune_setting`) and @0171265edef1c67ef334e0db2427148161aa2815:
tensorrt_llm/bench/benchmark/utils/general.py (`get_settings`; the commits the code index holds, not re-read
release by release):

  * the KV room: NVML's device total (GiB: tensorrt_llm/bench/build/utils.py `get_device_memory`) x tp x pp
    less the parameters at the weights' bytes per element (FP8 1, NVFP4 0.5, anything else 2), times the
    KV fraction (`--kv_cache_free_gpu_mem_fraction`; not given, trtllm-bench's default 0.90, as perf-overview.md says;
    a TensorRT engine's, tuned by `trtllm-bench build`: 0.95 whatever the run says, BUILD_FRACTION);
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

What the tool reads is the checkpoint's Hugging Face view, not kvplan's layer specs (thirty-third round):
  * only the quantization algorithms in TUNED_QUANTS (NVFP4, FP8, FP8_BLOCK_SCALES, none) are tuned; any other
    (gpt-oss's MXFP4, AWQ / GPTQ int4, int8) runs at BuildConfig's defaults, max_batch_size 2,048 and max_num_tokens
    8,192 (NVIDIA/TensorRT-LLM@000a01de66f0eab4ab05640711f0253f50f5209c:tensorrt_llm/bench/build/build.py
    `get_benchmark_engine_settings`; BuildConfig @008b2b8d23af95e4e19fa6f354f9c5f6349b2bfc:tensorrt_llm/builder.py),
    then get_settings' floor of ISL + max_batch_size;
  * "the parameters" are the safetensors' element count (tensorrt_llm/bench/build/dataclasses.py @04cba882
    `ModelConfig.get_param_count`: `sum(metadata.parameter_count.values())`), and a packed 4-bit checkpoint stores
    two weights in one uint8 element: NVFP4's weight [N, K/2] uint8 and scale [N, K/16] fp8 are 9/16 of an element a
    weight (`stored_elements`), which the tool then prices at NVFP4's 0.5 byte.

An MLA model (DeepSeek-V3 / R1) is not sized here (None: the engine's own defaults stand). The tool reads its
config.json as ModelConfig does, num_key_value_heads (128, every head) of head_size hidden_size // num_attention_heads
(7,168 / 128 = 56 where the loaded config has no head_dim: `set_values_if_none`) in every layer, K and V: 2 x 128 x
56 / 576 = 24.9 times the latent the engine caches. Read so, the dev-guide page's DeepSeek-R1 B200 / GB200 runs
(384 a rank at 1000/1000) price 34-51% slow and the training CV 0.08 point worse (docs/speed-history.md, "Tried and
not adopted"), and whether the checkpoints' remote config class sets head_dim (transformers' own sets 64) was not read.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from kvplan.model.layers import ATTENTION_KINDS
from kvplan.model.weights import weight_bytes

GIB = 1 << 30
ELEM_BYTES = {"fp8": 1.0, "nvfp4": 0.5, "fp4": 0.5}  # tuning.py BYTES_PER_ELEM; anything else 2
KV_FRACTION = 0.90  # `--kv_cache_free_gpu_mem_fraction` not given: "the default setting of 0.90" (perf-overview.md)
# The fraction a TensorRT engine's limits were tuned at: `trtllm-bench build --dataset` calls
# get_benchmark_engine_settings with no fraction, so calc_engine_setting's default 0.95, whatever the later
# `throughput` run is told (NVIDIA/TensorRT-LLM@000a01de66f0eab4ab05640711f0253f50f5209c:tensorrt_llm/bench/build/
# build.py, `kv_cache_gpu_mem_fraction: float = 0.95` and build_command's call; the older FP8-only build.py, with
# benchmark_config.yml, calls calc_engine_setting likewise, whose default is 0.95: the code index's stored copies,
# file ids 6212504592 and 5900118795, no commit given). The build has no fraction option; the PyTorch flow's
# get_settings passes the run's (@0171265e general.py).
BUILD_FRACTION = 0.95
MAX_REQUESTS = 4096  # finetune_setting: the decoder buffers' cap
MAX_TOKENS = 32768  # finetune_setting: the activation buffers' cap
TUNED = frozenset({"", "bf16", "fp16", "fp32", "fp8", "nvfp4", "fp4"})  # build.py TUNED_QUANTS, in kvplan's words
UNTUNED = (2048, 8192)  # BuildConfig's max_batch_size and max_num_tokens: any other quantization algorithm
PACKED = {"nvfp4": 9 / 16, "fp4": 9 / 16}  # safetensors elements a weight: uint8 pairs + scales (tuned formats only)


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


def stored_elements(spec, method: str) -> float:
    """The checkpoint's safetensors element count, trtllm-bench's "parameters": the parameter count, less what a
    packed 4-bit format saves. kvplan's own bytes of the format say how many weights it quantized: n_q weights at
    c elements (= bytes) each and the rest at 16 bits, so n_q = (2 P - B) / (2 - c) and the elements P - (1 - c) n_q."""
    total = spec.params.total
    c = PACKED.get(method)
    if c is None:
        return float(total)
    quantized = (2 * total - weight_bytes(spec, "nvfp4" if method == "fp4" else method).total) / (2 - c)
    return total - (1 - c) * max(0.0, quantized)


def kv_geometry(spec, tp: int) -> tuple[int, int, int] | None:
    """(attention layers, KV heads at least tp, head size) as the tool reads config.json; None without an attention
    layer with KV heads (an MLA model: the module's docstring)."""
    attn = [l for l in spec.layers if l.kind in ATTENTION_KINDS and getattr(l, "num_kv_heads", 0)]
    if not attn:
        return None
    return len(attn), max(tp, max(l.num_kv_heads for l in attn)), max(l.head_dim for l in attn)


def bench_settings(spec, device_bytes: int, *, tp: int, pp: int, isl: float, osl: float,
                   weight_dtype: str | None, kv_dtype: str | None, fraction: float = KV_FRACTION,
                   chunked: bool = False) -> BenchSettings | None:
    """trtllm-bench's (max_batch_size, max_num_tokens) for `spec` on tp x pp GPUs of `device_bytes` each (NVML's
    total) at the dataset's ISL / OSL, or None where not one request fits (trtllm-bench refuses to run).
    `weight_dtype` None: the checkpoint's own format."""
    method = (weight_dtype or spec.quantization.method or "").lower()
    geometry = kv_geometry(spec, tp)
    if geometry is None or osl <= 0:
        return None
    if method not in TUNED:
        bs, tokens = UNTUNED
    else:
        layers, heads, head = geometry
        per_token = 2 * layers * heads * head * elem_bytes(kv_dtype) / GIB
        room = device_bytes / GIB * tp * pp - stored_elements(spec, method) * elem_bytes(method) / GIB
        requests = room * fraction / (per_token * (isl + osl))
        if requests < 1:
            return None
        bs, tokens = finetune(requests, isl, osl, pp)
    if not chunked:
        tokens = max(tokens, int(math.ceil(isl)) + bs)
    return BenchSettings(bs, tokens)
