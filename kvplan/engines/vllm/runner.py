"""Whether vLLM subtracts a CUDA-graph estimate from the KV budget: by release, platform and the model runner it picks.

`v1/worker/gpu_worker.py` determine_available_memory asks the model runner for `profile_cudagraph_memory()` when
graphs will be captured and subtracts it under VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default from 0.20.0
(docs/engines.md section 1). Three things decide whether that figure is more than 0:

* --enforce-eager: no graphs.
* The platform: 0.20.0 profiles only `not current_platform.is_rocm()` (gpu_worker.py L379-385), 0.24.0 and 0.25.0
  only `current_platform.is_cuda()` (L444-453), "as graph pool handles and mem_get_info behave differently" there. So
  an AMD GPU's budget loses nothing to graphs before 0.26.0 (below).
* The model runner. From 0.22.0 vLLM picks its V2 runner by default for some models (`config/vllm.py`
  `use_v2_model_runner` and `_is_default_v2_model_runner_model`), and the V2 runner's `profile_cudagraph_memory`
  returns 0 up to 0.28.x (`v1/worker/gpu/model_runner.py` 0.22.0 L620-622, 0.23.0 L660-662, 0.24.0 L684-686,
  0.25.0 L680-682, 0.27.0 L749-751, 0.28.0 L843-845: "It is TBD whether we keep this API or not"); from 0.29.0 it
  measures (`gpu/cudagraph_utils.py` profile_cudagraph_memory: PIECEWISE graphs captured in full, FULL graphs
  extrapolated from two, the V1 runner's per-graph form, so kvplan keeps its estimate there). The default, by
  release (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in the same file):
    - 0.22.x: Qwen3ForCausalLM, neither MoE nor quantized;
    - 0.23.x: LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, neither MoE nor quantized;
    - 0.24.x: those three, DeepseekV2ForCausalLM, Qwen2MoeForCausalLM, GraniteMoeForCausalLM, quantized or not;
    - 0.25.x-0.28.x: every model that is not MoE, and the listed MoE architectures (0.25.0: DeepseekV2,
      Qwen2Moe, GraniteMoe; 0.26.0 adds Inkling and LongcatFlashNgram, 0.27.0 KimiK3, 0.28.0 DeepseekV4), except
      hybrid (0.27+: a hybrid of a listed architecture is kept) and attention-free models.
  Features V2 does not support (`_get_v2_model_runner_unsupported_features`, 0.22.0-0.28.0: n-gram and some
  other drafters, sequence or prefill-context parallelism, prompt embeds, custom logits processors ...) send vLLM
  back to V1; kvplan plans none of those on the default path, and the plan's note says what it assumed
  (`graph_note`).

From 0.29.0 V2 is the default for every model (`config/vllm.py` 0.29.0 `use_v2_model_runner` L645-677) but a few
architectures on ROCm (ROCM_DEFAULT_MRV1_ARCHITECTURES, "unsupported by MRV2 or slower with MRV2 on AMD GPUs"):
DeepseekV32ForCausalLM and DeepseekV4ForCausalLM in 0.29.x (L71-73), GlmMoeDsaForCausalLM added in 0.30.0 (L73-75,
use_v2_model_runner L675-723) and 0.31.x (L75-77, L701-760; 0.31 yields to V2 where V1 cannot serve the config:
prefill-context parallelism, pipeline parallelism with async scheduling, dspark drafts, L3105-3135); 0.32.0 (L703-739)
and 0.33.0 (L731-767) drop the ROCm default: V2 everywhere. 0.30.0+ also forces V2 for HiSparse attention and
watermarking, neither planned by kvplan. The V2 runner's estimate stays the measured one of 0.29 through 0.33.0
(`gpu/cudagraph_utils.py` profile_cudagraph_memory, 0.33.0 L922-1030; 0.30.0 captures with profile_only=True, 0.32.0
outside the cumem pool, same figure), so kvplan keeps its estimate there too.
The platform changed as well: from 0.26.0 the estimate is profiled on `current_platform.is_cuda_alike()`, "ROCm is
included: #44825 moved the profiler to torch.accelerator.get_memory_info" (gpu_worker.py 0.26.0 L495-503, 0.28.0
L522-530, 0.33.0 L702-717; 0.25.0 L479 still `is_cuda()`), so an AMD GPU's budget loses it too from 0.26.0.
What else the V2 runner changes in the start-up budget (its profile run's sampler, its encoder profile, its non-torch
figure) is kvplan.engines.vllm.sampler's and overhead's; `runner_note` says which runner a plan assumed, and why.
A run that fell back prints it (`config/vllm.py` use_v2_model_runner, 0.22.0 L501-513 "Model runner v2 requires
Triton; using the v1 model runner instead." / "... does not yet support %s; ...", capitalised "Model Runner V2 ... V1"
from 0.24.0 L533-545, 0.25.0 L540-552, 0.29.0 L662-674, 0.33.0 L752-764): `kvplan check-log` reads that line
(kvplan.engines.logparse) and passes `model_runner=v1`, which every rule here takes as `fell_back`.
"""

from __future__ import annotations

from kvplan.engines.versions import dotted
from kvplan.hardware.facts import vendor_of
from kvplan.model.layers import ATTENTION_KINDS, Kind

V2_FROM = (0, 22, 0)  # the first release whose default runner can be V2
V2_MEASURES_FROM = (0, 29, 0)  # V2's profile_cudagraph_memory returns 0 before this
_DENSE_V2 = {(0, 22, 0): ("Qwen3ForCausalLM",),
             (0, 23, 0): ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM")}
_ANY_V2 = {
    (0, 24, 0): ("Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
                 "LlamaForCausalLM", "MistralForCausalLM"),
    (0, 25, 0): ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"),
    (0, 26, 0): ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                 "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"),
}
_ANY_V2[(0, 27, 0)] = (*_ANY_V2[(0, 26, 0)], "KimiK3ForConditionalGeneration")
_ANY_V2[(0, 28, 0)] = (*_ANY_V2[(0, 27, 0)], "DeepseekV4ForCausalLM")


def _listed(table: dict, v: tuple[int, ...]) -> tuple[str, ...] | None:
    """The architectures the release's table lists (the newest entry at or below v), None before the table."""
    keys = [k for k in table if k <= v]
    return table[max(keys)] if keys else None


def _quantized(model, weight_dtype: str | None) -> bool:
    return (weight_dtype or model.quantization.method) not in ("bf16", "fp16", "fp32")


def _moe(model) -> bool:
    return bool(model.params.num_experts and model.params.experts_per_token)


def v2_by_default(model, v: tuple[int, ...], weight_dtype: str | None = None, fell_back: bool = False) -> bool:
    """Whether vLLM's default model runner for this model is V2 in release v (before unsupported features); never
    where the run is known to have fallen back to V1 (`fell_back`: engine option model_runner=v1, what check-log
    passes on when the log prints vLLM's "...; using the V1 model runner instead")."""
    if v < V2_FROM or fell_back:
        return False
    arch = model.architecture
    if v < (0, 24, 0):
        return arch in _listed(_DENSE_V2, v) and not _moe(model) and not _quantized(model, weight_dtype)
    if v < (0, 25, 0):
        return arch in _ANY_V2[(0, 24, 0)]
    if v >= V2_MEASURES_FROM:
        return True  # (its estimate is no longer 0: the question stops mattering here)
    listed = arch in _listed(_ANY_V2, v)
    kinds = {getattr(la, "kind", None) for la in model.layers}
    hybrid = Kind.STATE in kinds or any(hasattr(la, "parts") for la in model.layers)
    if (hybrid and (v < (0, 27, 0) or not listed)) or not kinds & ATTENTION_KINDS:
        return False
    return listed or not _moe(model)


_ROCM_V1 = {(0, 29, 0): ("DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"),  # config/vllm.py 0.29.0 L71-73
            (0, 30, 0): ("DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM", "GlmMoeDsaForCausalLM"),  # 0.30.0 L73-75
            (0, 32, 0): ()}  # 0.32.0: no ROCm default any more


def runs_v2(model, v: tuple[int, ...], gpu=None, weight_dtype: str | None = None, fell_back: bool = False) -> bool:
    """Whether vLLM runs this model on its V2 runner by default (v2_by_default; from 0.29.0 every model, but the
    architectures ROCm keeps on V1 in 0.29-0.31)."""
    if not v2_by_default(model, v, weight_dtype, fell_back):
        return False
    return not (v >= V2_MEASURES_FROM and vendor_of(gpu) == "AMD" and model.architecture in _listed(_ROCM_V1, v))


V2_READ_BEFORE = (0, 34, 0)  # V2's profile run read in the 0.22.0-0.33.0 wheels; later releases priced as V1's


def priced_v2(model, v: tuple[int, ...], gpu=None, weight_dtype: str | None = None, fell_back: bool = False) -> bool:
    """Whether kvplan prices the V2 runner's own profile-run terms (sampler, encoder): V2 in a release it read."""
    return v < V2_READ_BEFORE and runs_v2(model, v, gpu, weight_dtype, fell_back)


def _why_v1(model, v: tuple[int, ...], weight_dtype: str | None) -> str:
    """Why the release's default for this model is the V1 runner, in the words of its rule."""
    if v < (0, 24, 0):
        return (f"V2 is its default only for {', '.join(_listed(_DENSE_V2, v))}, neither MoE nor quantized "
                "(config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES)")
    if v < (0, 25, 0):
        return f"V2 is its default only for {', '.join(_ANY_V2[(0, 24, 0)])}"
    if v >= V2_MEASURES_FROM:
        return (f"ROCm keeps {', '.join(_listed(_ROCM_V1, v))} on V1 (config/vllm.py "
                f"ROCM_DEFAULT_MRV1_ARCHITECTURES, 0.29-0.31" + ("; 0.31 picks V2 where V1 cannot serve, e.g. "
                "pipeline parallelism with async scheduling, L727-744)" if v >= (0, 31, 0) else ")"))
    return ("V2 is its default for models that are neither MoE outside its list, nor hybrid (0.27+: unless listed), "
            "nor attention-free (config/vllm.py _is_default_v2_model_runner_model)")


def runner_note(model, v: tuple[int, ...], gpu=None, weight_dtype: str | None = None,
                fell_back: bool = False) -> str | None:
    """The plan's line saying which model runner kvplan assumed (0.22.0+, where the default can be V2), and why."""
    if v < V2_FROM:
        return None
    release = dotted(v)
    if fell_back:
        return (f"model runner: V1, as stated (engine option model_runner=v1: vLLM {release} fell back from V2, "
                "its log says \"...; using the V1 model runner instead\"): V1's profile-run and CUDA-graph terms"
                f"{_v1_buffers(v)}")
    if not runs_v2(model, v, gpu, weight_dtype):
        return (f"model runner: V1 assumed, vLLM {release}'s default for {model.architecture}: "
                f"{_why_v1(model, v, weight_dtype)}{_v1_buffers(v)}")
    if v >= V2_READ_BEFORE:
        # as V1 in every term overhead_terms prices (priced_v2 is false): V1's input buffers in, V2's states out
        return (f"model runner: V2 assumed, vLLM's default since 0.29.0; kvplan read V2's profile run through 0.33.x "
                f"only, so {release}'s is priced as V1's (sampler, encoder, forward, non-torch){_v1_buffers(v)}; "
                "V2's own penalty and grammar states are not counted: an estimate")
    states = ("in the budget (the free-memory drop since start-up, 0.27+)" if v >= (0, 27, 0) else
              "outside the budget (weights + peak increase + non-torch, 0.22-0.26): they use the memory above it")
    return (f"model runner: V2 assumed, vLLM {release}'s default for {model.architecture} (VLLM_USE_V2_MODEL_RUNNER=0, "
            "or a feature V2 lacks, picks V1): its profile run's sampler is priced from V2's source; the forward "
            "pass and non-torch terms are V1's fits, an estimate for V2 (kvplan.engines.vllm.runner); its penalty "
            f"and grammar states (max_num_seqs x vocab x 4 B and 2 x that / 32) are {states}")


def _v1_buffers(v: tuple[int, ...]) -> str:
    """What a V1 plan's budget holds from 0.27.0 that it did not before: the runner's persistent input buffers and
    first block table (kvplan.engines.vllm.overhead.v1_buffer_bytes), said so the term is not a silent one."""
    if v < (0, 27, 0):
        return ""
    return ("; its persistent input buffers and first block table (tokens a step x hidden in the model dtype, "
            "max_num_seqs x context pages int32, ...) are in the budget (the free-memory drop since start-up, 0.27+)")


_ROCM_ESTIMATE_FROM = (0, 26, 0)  # gpu_worker.py 0.26.0 L495-503: is_cuda_alike(), "ROCm is included"


def estimate_subtracted(model, v: tuple[int, ...], gpu, eager: bool, weight_dtype: str | None = None,
                        fell_back: bool = False) -> bool:
    """Whether vLLM's budget loses a non-zero CUDA-graph estimate: 0.20.0+, graphs on, on NVIDIA (and AMD from
    0.26.0), and not the V2 runner of 0.22-0.28, whose estimate is 0."""
    vendors = ("NVIDIA", "", "UNKNOWN", *(("AMD",) if v >= _ROCM_ESTIMATE_FROM else ()))
    if v < (0, 20, 0) or eager or vendor_of(gpu) not in vendors:
        return False
    return not (v < V2_MEASURES_FROM and v2_by_default(model, v, weight_dtype, fell_back))


def graph_note(model, v: tuple[int, ...], gpu, eager: bool, weight_dtype: str | None = None,
               fell_back: bool = False) -> str | None:
    """The plan's line where the runner, not the graphs, decides the term: V2's zero estimate (0.22-0.28)."""
    if v < (0, 20, 0) or eager or v >= V2_MEASURES_FROM or not v2_by_default(model, v, weight_dtype, fell_back):
        return None
    return (f"vLLM {dotted(v)} runs {model.architecture} on its V2 model runner by default, whose "
            f"CUDA-graph estimate is 0: nothing subtracted (a drafter V2 lacks, n-gram among them, falls back to "
            f"V1, which subtracts its estimate)")
