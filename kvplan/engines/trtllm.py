"""TensorRT-LLM (PyTorch backend): a fraction of the memory left free after a profiling run, in blocks of 32.

Sources (code index snapshots; docs/engines.md section 3):
  * `KvCacheConfig.free_gpu_memory_fraction` default 0.9, `tokens_per_block` 32, `max_num_tokens` 8192
    (`tensorrt_llm/llmapi/llm_args.py`; docs page examples/kvcacheconfig.html: "90% of free GPU memory").
  * budget: `tensorrt_llm/_torch/pyexecutor/_util.py` @ 0004396720054fd8e205cbf616f21f0b57c6b412,
    `KvCacheCreator.configure_kv_cache_capacity`: kv = (total - peak of the warm-up run) x fraction, where the
    peak holds the weights, the activations of `max_num_tokens` and non-torch memory.
  * bytes per token: `resource_manager.py` (commit d2a5560a) `get_cache_size_per_token`:
    L x kv_factor x (d x H // tp) x b, kv_factor 1 for MLA (d = 576, no tp split). Heads are NOT replicated
    when tp > H (d x H // tp), unlike vLLM and SGLang. Blocks: ceil(tokens / 32), min over ranks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.engines import Capacity, EngineResult, cdiv, check_opts, check_version, opt_float, opt_int
from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.layers import ChunkedLocal, FullAttention, MLALatent, SlidingWindow

GIB = 2**30
VERSIONS = ("0.20.0", "1.2.0")
DEFAULT_VERSION = "1.2.0"
OPTS = ("free_gpu_memory_fraction", "tokens_per_block", "max_num_tokens")


@dataclass(frozen=True)
class Settings:
    version: str
    free_gpu_memory_fraction: float
    tokens_per_block: int
    max_num_tokens: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    opts = dict(opts or {})
    check_opts("trtllm", opts, OPTS)
    version = check_version("trtllm", version, VERSIONS, DEFAULT_VERSION)
    frac = (explicit or {}).get("gpu_memory_utilization") or 0.9
    kv = req.kv_dtype
    if kv is not None and kv.block_elems > 1:
        raise KvplanError(f"TensorRT-LLM has no {kv.name} KV cache; use auto, fp16/bf16 or fp8", EXIT_USAGE)
    tpb = opt_int(opts, "tokens_per_block", 32)
    if tpb < 1:
        raise KvplanError("tokens_per_block must be at least 1", EXIT_USAGE)
    return Settings(version, opt_float(opts, "free_gpu_memory_fraction", float(frac)), tpb,
                    opt_int(opts, "max_num_tokens", 8192))


def bytes_per_token(layers, tp: int, kv_dtype) -> int:
    total = 0
    for layer in layers:
        if isinstance(layer, MLALatent):
            total += kv_dtype.bytes_for(layer.kv_lora_rank + layer.qk_rope_head_dim)
        elif isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):
            dv = getattr(layer, "v_head_dim", 0) or layer.head_dim
            total += kv_dtype.bytes_for(layer.num_kv_heads * (layer.head_dim + dv) // tp)  # no replication
    return total


def capacity(model, dep, kv_bytes: int, context: int, batch: int, st: Settings, kv_dtype, state_dtype=None):
    from kvplan.planner import split_layers

    bpt = max(bytes_per_token(model.layers[a:b], dep.tp, kv_dtype) for a, b in split_layers(model.num_layers, dep.pp))
    tokens = max(0, kv_bytes) // bpt if bpt else 0
    blocks = tokens // st.tokens_per_block  # whole blocks that fit the byte budget
    per_req = cdiv(context, st.tokens_per_block)
    conc = blocks / per_req if per_req else 0.0
    lines = [("KV budget per GPU", f"{kv_bytes / GIB:.2f} GiB"), ("kv size per token", f"{bpt:,} B"),
             ("blocks of " + str(st.tokens_per_block), f"{blocks:,}"), ("max tokens", f"{blocks * st.tokens_per_block:,}"),
             (f"requests of {context:,} tokens", f"{conc:.2f}")]
    notes = ()
    if any(getattr(l, "num_kv_heads", 10**9) < dep.tp for l in model.layers):
        notes = ("tp exceeds the KV heads: TensorRT-LLM's estimate (d x H // tp) under-counts the replicated heads",)
    return Capacity("trtllm", st.version, kv_bytes, blocks * st.tokens_per_block, conc, context, bpt, blocks,
                    st.tokens_per_block, tuple(lines), notes)


class TrtLlm:
    name = "trtllm"
    versions = VERSIONS
    default_version = DEFAULT_VERSION
    opts = OPTS
    settings = staticmethod(settings)
    capacity = staticmethod(capacity)

    def plan(self, model, gpu, dep, req, st: Settings) -> EngineResult:
        from kvplan.dtypes import canonical_kv_dtype
        from kvplan.planner import NCCL_BYTES, NON_TORCH_BYTES, activation_estimate, plan

        act = activation_estimate(model, dep.tp, tokens=st.max_num_tokens)
        over = act + NON_TORCH_BYTES + (NCCL_BYTES if dep.gpus > 1 else 0)
        # kv = (total - weights - overhead) x fraction: the planner's (total - w - o) with utilisation 1,
        # then scaled here.
        r = dataclasses.replace(req, gpu_memory_utilization=1.0, block_size=st.tokens_per_block,
                                overhead_bytes=req.overhead_bytes if req.overhead_bytes is not None else over)
        p = plan(model, gpu, dep, r)
        kv_dtype = r.kv_dtype or canonical_kv_dtype("auto", model.dtype)
        free = p.kv_memory_bytes_per_gpu
        kv = free if req.kv_cache_memory_bytes is not None else int(free * st.free_gpu_memory_fraction)
        cap = capacity(model, dep, kv, req.context, req.batch, st, kv_dtype)
        mc = min(model.max_context, (cap.blocks // max(1, req.batch)) * st.tokens_per_block)
        p = dataclasses.replace(p, kv_memory_bytes_per_gpu=kv, kv_cache_tokens=cap.tokens,
                                max_concurrency=cap.max_concurrency_int, max_context=mc,
                                max_context_limited_by="model" if mc == model.max_context else "memory",
                                fits=cap.max_concurrency >= req.batch)
        return EngineResult(p, cap, {**st.as_dict(), "overhead_estimate": over})


ENGINE = TrtLlm()
