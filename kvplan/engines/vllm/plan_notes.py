"""vLLM: the notes a plan's capacity carries, each from the module that knows its rule, in the order they print.

Kept apart from engine.py so that the engine reads as the budget and the pool; every note here says something a
plan assumes (a runner, a capture list, a kernel) or leaves unpriced, by release.
"""

from __future__ import annotations

from kvplan.engines import fp8_blocks
from kvplan.engines.vllm import (load_split, marlin_dense_pad, marlin_fp8, marlin_moe_pad, rocm_allreduce, v0_mla,
                                 w4a8)
from kvplan.engines.vllm.cudagraphs import capture_note, graph_notes
from kvplan.engines.vllm.mxfp4 import unbundled_hopper, unbundled_note
from kvplan.engines.vllm.overhead import sampler_note
from kvplan.engines.vllm.runner import runner_note
from kvplan.engines.vllm.settings import Settings
from kvplan.planning.plan_warnings import PlanWarning


def capacity_notes(model, dep, req, st: Settings) -> tuple:
    """What Vllm.capacity adds after the pool's own notes: options the release lacks, kernels assumed, speed causes
    not priced, the runner, the CUDA-graph capture list and estimate, the sampler, the load's segment tails."""
    old_flag = ("--kv-cache-memory-bytes exists from vLLM 0.11.0, not in " + st.version
                if req.kv_cache_memory_bytes is not None and st.v < (0, 11, 0) else None)
    marlin = unbundled_note(st.v) if unbundled_hopper(model, st.gpu, st.v, st.mxfp4_backend) else None
    first = (old_flag, marlin,
             v0_mla.uncertainty_note(model, st.v),  # V0's MLA budget: the one log holds more than the source
             v0_mla.speed_note(model, st.v),  # V0's MLA step: slower than the calibrated step, cause not priced
             rocm_allreduce.note(st.gpu, dep.tp, st.version),  # RCCL's ring alone (ROCm: < 0.8.3, or not gfx94x/95x)
             runner_note(model, st.v, st.gpu, st.weight_dtype, st.v1_fallback))  # V1 or V2 assumed, and why (0.22+)
    graphs = (*capture_note(model, st), *graph_notes(model, dep, st))  # the capture list; the fit, or V2's 0
    last = (sampler_note(st.v, st.flashinfer_sampler, st.v1),
            load_split.note(model, dep, st))  # the load's split limit: segment tails in the weights (0.21+)
    return (*(n for n in first if n), *graphs, *(n for n in last if n))


def release_notes(st: Settings) -> tuple:
    """What the release runs, said before the plan's other notes: an MLA model's layers decompressed before 0.7.1
    (kvplan.engines.vllm.pre_mla), which engine 0.8-0.10 run, V1 or the V0 fallback (kvplan.engines.vllm.v0_fallback),
    V0's own chunked prefill (kvplan.engines.vllm.v0_chunked)."""
    said = tuple(PlanWarning.literal(n) for n in (st.mla_note, st.engine_note) if n)
    return (*said, *((PlanWarning(st.v0_chunk_note),) if st.v0_chunk_note else ()))


def refined(model, dep, st: Settings) -> tuple:
    """The refined MoE block scales, said where they are counted (kvplan.engines.fp8_blocks.refined_scale_bytes)."""
    got = fp8_blocks.refined_scale_note(model, dep, st.v)
    if got is None:
        return ()
    block, extra = got
    return (PlanWarning(f"vLLM {st.version} refines the experts' FP8 block scales to {block} x {block} (each rank's "
                        f"expert shard is not whole {model.quantization.group_size}-blocks; the default moe_backend "
                        "'auto', refine_fp8_moe_block_shape): {} per GPU more weights than a 1/tp share of the "
                        "checkpoint's scales, counted", (extra,), ("MiB",)),)


def marlin(model, dep, st) -> tuple:
    """What Marlin does to the weights as loaded, said: GPTQ MoE and dense tile padding, FP8 weight-only repacking;
    and CUTLASS W4A8's scale repacking (vllm.w4a8)."""
    return (*marlin_moe_pad.note(model, dep, st), *marlin_dense_pad.note(model, dep, st),
            *marlin_fp8.note(model, dep, st), *w4a8.note(model, dep, st))
