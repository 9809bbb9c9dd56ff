"""vLLM's settings for a plan: the releases kvplan reads, the `--engine-opt` keys, and `vllm serve`'s defaults by
release and GPU (max_num_batched_tokens / max_num_seqs tiers, gpu_memory_utilization, block size) overridden by
flags and options. Sources: kvplan/engines/vllm/engine.py's docstring and docs/engines.md section 1.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.base import check_opts, check_version, opt_bool, opt_int, parse_version
from kvplan.engines.context import engine_length
from kvplan.engines.emit import kv_dtype_arg
from kvplan.engines.options import opt_choice, opt_shared_bytes
from kvplan.engines.vllm import multimodal, pre_mla
from kvplan.engines.vllm.cache_dtype import check_flag
from kvplan.engines.vllm.awq_dequant import forced as awq_forced
from kvplan.engines.vllm.capture_list import asked_max
from kvplan.engines.vllm.deepseek_v4 import BLOCK as V4_BLOCK
from kvplan.engines.vllm.mxfp4 import BACKENDS as MXFP4_BACKENDS
from kvplan.engines.vllm.runner import estimate_subtracted
from kvplan.engines.vllm.settings import Settings
from kvplan.engines.vllm.speculative import vllm_pool_terms
from kvplan.engines.vllm.ssm_dtype import OPTS as STATE_OPTS, options as state_options, read_ssm_dtype
from kvplan.engines.vllm.v0_chunked import chunk_budget
from kvplan.engines.vllm.v0_fallback import fallback as v0_fallback, note as engine_note, runs_v1
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import has_mla

GIB = 2**30

VERSIONS = ("0.5.0", "0.6.6", "0.8.5", "0.10.1", "0.11.0", "0.15.0", "0.19.1", "0.20.0", "0.20.1", "0.22.0",
            "0.25.0", "0.30.0", "0.33.0")
DEFAULT_VERSION = "0.33.0"
OPTS = ("max_num_batched_tokens", "max_num_seqs", "enforce_eager", "async_scheduling", "limit_mm_per_prompt",
        "mm_processor_cache_gb", "flashinfer_sampler", "os_memory", "host_growth", "page_cache",
        "mxfp4_backend", "model_runner", "enable_chunked_prefill", "use_v1", "max_cudagraph_capture_size", "awq_kernel",
        "pp_layer_partition", *STATE_OPTS)  # the last but STATE_OPTS: kvplan.engines.stage_split's


def _device_name(gpu) -> str:
    """The device name vLLM's tier tests read (`current_platform.get_device_name()`, NVML's name on CUDA: what
    nvidia-smi prints), lowercased: the profile's `device_name`, else its `name` (a stated assumption:
    name_assumed, a plan warning)."""
    return str(getattr(gpu, "device_name", None) or getattr(gpu, "name", "") or "").lower()


def _big_gpu(gpu) -> bool:
    """vLLM's large-GPU tier from v0.9.0: >= 70 GiB and "a100" not in the device name (arg_utils v0.9.0 L1495,
    v0.11.0 L1605-1623: `device_memory >= 70 * GiB_bytes and "a100" not in device_name`)."""
    return gpu.memory_usable_bytes >= 70 * GIB and "a100" not in _device_name(gpu)


def _named_hopper(gpu) -> bool:
    """The tier test of v0.8.0-v0.8.4: "h100" or "h200" in the device name (arg_utils v0.8.0 L1693). The
    driver's names ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA GH200 480GB", ...) all pass; "NVIDIA H20"
    does not, as in vLLM."""
    name = _device_name(gpu)
    return "h100" in name or "h200" in name


def reads_device_name(v: tuple[int, ...], gpu) -> bool:
    """Whether batch_defaults' answer for release `v` on `gpu` depends on the device name (0.8.0-0.8.4 always;
    0.9.0+ where the memory clears 70 GiB and no larger tier decides first)."""
    if v < (0, 8, 0) or (0, 8, 5) <= v < (0, 9, 0):
        return False
    if v < (0, 8, 5):
        return True
    if v >= (0, 33, 0) and gpu.memory_usable_bytes >= 160 * GIB:
        return False
    return gpu.memory_usable_bytes >= 70 * GIB


def batch_defaults(v: tuple[int, ...], gpu, context: int, v1: bool | None = None) -> tuple[int, int]:
    """`vllm serve`'s (max_num_batched_tokens, max_num_seqs) for release `v` on `gpu`: the OPENAI_API_SERVER
    entries of `EngineArgs._set_default_args_v1` (table and line numbers: docs/engines.md section 1); on the V0
    engine (`v1` False; None: by release), `_set_default_args_v0`'s."""
    if v < (0, 8, 0) or v1 is False:
        return max(context, 2048), 256  # V0 without chunked prefill profiles a max_model_len batch
    if v < (0, 8, 4):  # by name; max_num_seqs 1024 everywhere (v0.8.0 L1693-1715, v0.8.3 L1647-1669)
        return (8192 if _named_hopper(gpu) else 2048), 1024
    if v < (0, 8, 5):  # by name, both tiered (v0.8.4 L1669-1682)
        big = _named_hopper(gpu)
    elif v < (0, 9, 0):  # by memory alone (v0.8.5 L1596-1609)
        big = gpu.memory_usable_bytes >= 70 * GIB
    else:  # by memory, A100s excepted by name (v0.9.0 L1495-1508 ... v0.11.0 L1605-1623)
        big = _big_gpu(gpu)
    if v >= (0, 33, 0) and gpu.memory_usable_bytes >= 160 * GIB:
        return 16384, 1024
    return (8192, 1024) if big else (2048, 256)


LLM_CLASS = "llm_class"  # the usage context (an engine's `explicit`, no flag) of a run under the offline LLM class
LLM_CLASS_FROM = (0, 10, 0)  # the first release whose LLM-class defaults kvplan read (wheels 0.10.0 ... 0.33.0)


def llm_class_defaults(v: tuple[int, ...], gpu) -> tuple[int, int] | None:
    """The offline `LLM` class's (max_num_batched_tokens, max_num_seqs) for release `v` on `gpu`: its usage context
    LLM_CLASS, which `vllm.LLM` passes to LLMEngine.from_engine_args (v0.10.0 `entrypoints/llm.py` L274, v0.33.0
    L342), as `vllm bench throughput` / `latency` do (they build an LLM: v0.10.0 `benchmarks/throughput.py` L43,
    `latency.py` L90). 16384 / 1024 on the large tier (the server's test: >= 70 GiB and not an A100, or >= 160 GiB
    from 0.33.0), else 8192 / 256: twice and four times the server's tokens, the same sequences (arg_utils v0.10.0
    L1584-1602, v0.19.1 L2053-2071, v0.20.1 L2208-2226, v0.33.0 L2973-3005). None before 0.10.0 (not read).
    AsyncLLMEngine / LLMEngine.from_engine_args default to ENGINE_CONTEXT: engine_context_defaults."""
    if v < LLM_CLASS_FROM:
        return None
    big = _big_gpu(gpu) or (v >= (0, 33, 0) and gpu.memory_usable_bytes >= 160 * GIB)
    return (16384, 1024) if big else (8192, 256)


ENGINE_CONTEXT = "engine_context"  # the usage context of a run under AsyncLLMEngine / LLMEngine.from_engine_args


def engine_context_defaults(v: tuple[int, ...], gpu=None) -> tuple[int, int] | None:
    """The (max_num_batched_tokens, max_num_seqs) of an engine built by `AsyncLLMEngine.from_engine_args` /
    `LLMEngine.from_engine_args` with no usage context given: ENGINE_CONTEXT (`v1/engine/async_llm.py`
    `from_engine_args`: v0.10.0 L180, v0.19.1 L244, v0.20.1 L236), in neither usage-context table, so SchedulerConfig's
    own 2048 / 128 on any GPU (v0.10.0 `config.py` SchedulerConfig.__post_init__ L2388-2402, chunked prefill on;
    `engine/arg_utils.py` `.get(usage_context, SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS)` and `_SEQS`: v0.19.1
    L2195-2204, v0.20.1 L2360-2369, v0.33.0 L3172-3181; `config/scheduler.py` 2048 / 128, v0.20.1 L42-44). `gpu`
    unused (no tier). None before 0.10.0 (not read)."""
    return None if v < LLM_CLASS_FROM else (2048, 128)


USAGE_DEFAULTS = {LLM_CLASS: llm_class_defaults, ENGINE_CONTEXT: engine_context_defaults}  # by usage context


def _kv_flag(req, model) -> str | None:
    """The --kv-cache-dtype the plan's command passes (kvplan.engines.emit.kv_dtype_arg, by kvplan's dtype name), as
    the oracle reads it: None for auto. No release with the oracle (0.8-0.10) has its auto follow a checkpoint's
    declared cache (vllm.cache_dtype: from 0.14.0), so no declared dtype is passed here."""
    return kv_dtype_arg(req.kv_dtype, model, {})


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    """vLLM's defaults for this GPU and release (`vllm serve`, or on V1 the step tokens and sequences of the usage
    context `explicit` names: llm_class_defaults, engine_context_defaults), overridden by flags and --engine-opt."""
    opts = dict(opts or {})
    explicit = explicit or {}
    check_opts("vllm", opts, OPTS)
    version = check_version("vllm", version, VERSIONS, DEFAULT_VERSION)
    v = parse_version(version)
    mla_note = pre_mla.note(model, version)  # before 0.7.1 an MLA model runs and caches decompressed (pre_mla)
    model = pre_mla.as_planned(model, version)
    use_v1 = opt_bool(opts, "use_v1", False) if "use_v1" in opts else None  # VLLM_USE_V1 (vllm.v0_fallback)
    found = v0_fallback(v, model, gpu, dep.pp, _kv_flag(req, model), req.weight_dtype, getattr(req, "lora", None))
    v1 = runs_v1(v, found, use_v1)
    gmu = explicit.get("gpu_memory_utilization") or (0.92 if v >= (0, 20, 0) else 0.90)
    mla = has_mla(model.layers)
    block = explicit.get("block_size") or (64 if mla and v1 else 16)  # FlashMLA forces 64
    if has_compressed(model.layers):  # DeepSeek-V4's sparse FlashMLA: 256 only
        block = explicit.get("block_size") or V4_BLOCK
    mnbt, seqs = batch_defaults(v, gpu, engine_length(model, req), v1)
    asked = opt_bool(opts, "enable_chunked_prefill", False) if "enable_chunked_prefill" in opts else None
    chunk, chunk_note = chunk_budget(v, model, gpu, engine_length(model, req), getattr(req, "lora", None), asked,
                                     not v1)
    if v1 and explicit.get("usage_context") in USAGE_DEFAULTS:  # the client's own, under what a run states
        own = USAGE_DEFAULTS[explicit["usage_context"]](v, gpu)
        opts = {**dict(zip(("max_num_batched_tokens", "max_num_seqs"), own or ())), **opts}
    mnbt = opt_int(opts, "max_num_batched_tokens", chunk or mnbt)  # V0's own chunked prefill (vllm.v0_chunked)
    # from v0.10.1 the default max_num_seqs is capped by max_num_batched_tokens (arg_utils v0.10.1 L1711)
    seqs = opt_int(opts, "max_num_seqs", min(seqs, mnbt) if v >= (0, 10, 1) else seqs)
    eager = opt_bool(opts, "enforce_eager", False)
    if mnbt < 1 or seqs < 1:
        raise KvplanError("max_num_batched_tokens and max_num_seqs must be at least 1", EXIT_USAGE)
    # int8, fp32 beside a 16-bit model, q8_0, ...: no release takes them
    check_flag(req.kv_dtype, model, version, req.weight_dtype)

    fell_back = opt_choice(opts, "model_runner", "auto", ("auto", "v1")) == "v1"  # a log's V1 fallback (vllm.runner)
    graphs = estimate_subtracted(model, v, gpu, eager, req.weight_dtype, fell_back)  # (0.20+, CUDA, not V2's 0)
    return Settings(version, float(gmu), int(block), mnbt, seqs, graphs,
                    opt_bool(opts, "async_scheduling", True), v1, gpu,
                    *vllm_pool_terms(model, v), eager=eager,
                    mm_limit=opt_int(opts, "limit_mm_per_prompt", multimodal.UNSET),
                    mm_cache_gb=multimodal.cache_gb(opts, v),
                    flashinfer_sampler=opt_bool(opts, "flashinfer_sampler", True) if "flashinfer_sampler" in opts
                    else None, mxfp4_backend=opt_choice(opts, "mxfp4_backend", None, MXFP4_BACKENDS),
                    weight_dtype=req.weight_dtype, v1_fallback=fell_back,
                    os_memory=opt_shared_bytes(opts, "os_memory", None, gpu),
                    host_growth=opt_shared_bytes(opts, "host_growth", 0, gpu),
                    page_cache=opt_shared_bytes(opts, "page_cache", None, gpu), max_model_len=engine_length(model, req),
                    v0_chunk_note=chunk_note, chunked_prefill_asked=asked, v0_chunked=chunk is not None,
                    engine_note=engine_note(v, found, use_v1, v1, gpu, mla), use_v1=use_v1, mla_note=mla_note,
                    **dict(zip(STATE_OPTS, state_options(opts, v))), ssm_dtype_read=read_ssm_dtype(model),
                    graph_shape=tuple(explicit.get("graph_shape") or ()), max_capture=asked_max(opts, v),
                    awq_forced=awq_forced(opts, model, req.weight_dtype, v))
