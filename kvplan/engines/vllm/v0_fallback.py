"""vLLM 0.8.0-0.10.x's fall back to the V0 engine: which of a plan's settings make vLLM run V0, and why.

Why: from 0.8.0 `vllm serve` runs the V1 engine by default, but `EngineArgs.create_engine_config` first asks
`_is_v1_supported_oracle` (vllm/engine/arg_utils.py) and runs V0 where a setting is one V1 did not support yet
("... is not supported by the V1 Engine. Falling back to V0", `_raise_or_fallback`) or supported only
experimentally ("... is experimental on VLLM_USE_V1=1. Falling back to V0 Engine.", `_warn_or_fallback`).
VLLM_USE_V1=0 forces V0; VLLM_USE_V1=1 runs the experimental ones on V1 and refuses the unsupported ones.
0.11.0 removed V0 (its vllm/engine/llm_engine.py is `LLMEngine = V1LLMEngine`). kvplan plans V0's rules for a
plan the oracle sends to V0 (kvplan.engines.vllm.defaults) and prints this module's reason.

Read in every PyPI wheel from 0.8.0 to 0.10.2 (line numbers of `vllm/engine/arg_utils.py` unless named; the
table with all of them: docs/engines.md section 1.8). The settings kvplan expresses:
  * compute capability below 8.0 on CUDA: 0.8.0 L1474 ... 0.10.1 L1402; gone in 0.10.2.
  * --kv-cache-dtype other than auto: any, 0.8.0-0.8.1 (0.8.0 L1480); 0.8.2-0.9.2 only an fp8 cache on
    FlashAttention 3, i.e. on compute capability 9.x (0.8.2 L1561-1575, 0.9.2 L1366-1382;
    attention/utils/fa_utils.py `flash_attn_supports_fp8`, FA3 where major == 9), and from 0.9.0 anything on ROCm
    (0.9.0 L1264); 0.10.0-0.10.1 `CudaPlatform.is_kv_cache_dtype_supported`: 10.0, or fp8 on 9.x (0.10.1
    platforms/cuda.py L498-510), ROCm all (platforms/rocm.py L462-463); 0.10.2 also any MLA model (its default
    FlashMLA / CUTLASS_MLA take fp8: platforms/cuda.py L522-561).
  * --dtype float32: 0.8.0-0.9.1 (V1_SUPPORTED_DTYPES, 0.8.0 L1498, 0.9.1 L1341).
  * bitsandbytes or GGUF weights: 0.8.0-0.8.5 (V1_UNSUPPORTED_QUANT, 0.8.0 L1505, 0.8.5 L1389).
  * an architecture vLLM marks SupportsV0Only (`model_config.is_v1_compatible`, 0.8.0 L1519): V0_ONLY below.
  * a model with recurrent state (`has_inner_state`, "Mamba", experimental): 0.9.2 L1404, 0.10.0 L1377, 0.10.1 L1430.
  * LoRA (experimental): 0.8.0 L1586, 0.8.2 L1685; V1 from 0.8.3.
  * pipeline parallel: experimental in 0.8.0-0.8.2 (0.8.0 L1590); 0.8.3-0.9.0 only with the Ray executor
    (0.8.5 L1478-1482; 0.9.0 L1378-1384 does not list the default backend, None: L283-285); V1 from 0.9.1.
  * ngram speculative decoding (experimental): 0.8.0 L1594 ... 0.8.5 L1485; V1 from 0.9.0 (L1325-1345).
  * a GPU that is not CUDA (ROCm), experimental: 0.8.0 L1598 ... 0.8.5 L1493, 0.9.0 L1387, 0.9.1 L1444; from 0.9.2
    `default_v1`, which ROCm's `supports_v1` answers True (0.9.2 L1492, platforms/rocm.py L397-399).
Assumed (kvplan cannot tell): VLLM_USE_V1 unset (engine option use_v1 sets it), VLLM_ATTENTION_BACKEND and
VLLM_FLASH_ATTN_VERSION unset, the default executor backend, and none of the oracle's other flags (scheduler
steps, preemption mode, prompt adapters, CPU weight offload, guided-decoding backends, OTLP, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import dotted
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.layers import has_mla
from kvplan.model.recurrent import recurrent_states

V1_DEFAULT = (0, 8, 0)  # the first release whose default engine is V1
V0_REMOVED = (0, 11, 0)  # the first release without V0

# architecture -> (first, last) release that marks its model class SupportsV0Only (the wheels' model_executor/models;
# FalconMamba is vLLM's MambaForCausalLM, models/registry.py)
V0_ONLY = {
    "BambaForCausalLM": ((0, 8, 0), (0, 9, 1)),  # bamba.py 0.8.0 L367, 0.9.1 L413
    "BloomForCausalLM": ((0, 8, 0), (0, 10, 1)),  # bloom.py 0.8.0 L282, 0.10.1 L316
    "FalconH1ForCausalLM": ((0, 9, 0), (0, 9, 1)),  # falcon_h1.py 0.9.0 L485
    "FalconMambaForCausalLM": ((0, 8, 0), (0, 10, 0)),  # as MambaForCausalLM
    "Gemma3ForConditionalGeneration": ((0, 8, 0), (0, 8, 0)),  # gemma3_mm.py 0.8.0 L376
    "GlmForCausalLM": ((0, 8, 0), (0, 8, 4)),  # glm.py L10
    "GraniteMoeHybridForCausalLM": ((0, 9, 0), (0, 9, 1)),  # granitemoehybrid.py 0.9.0 L456
    "JambaForCausalLM": ((0, 8, 0), (0, 10, 0)),  # jamba.py 0.8.0 L362, 0.10.0 L363
    "MambaForCausalLM": ((0, 8, 0), (0, 10, 0)),  # mamba.py 0.8.0 L158, 0.10.0 L179
    "Mamba2ForCausalLM": ((0, 8, 0), (0, 9, 1)),  # mamba2.py 0.8.0 L178
    "MiniMaxText01ForCausalLM": ((0, 8, 3), (0, 10, 0)),  # minimax_text_01.py 0.8.3 L960, 0.10.0 L1005
    "MllamaForConditionalGeneration": ((0, 8, 0), (0, 10, 2)),  # mllama.py 0.8.0 L1149, 0.10.2 L1273
    "NemotronHForCausalLM": ((0, 9, 1), (0, 9, 1)),  # nemotron_h.py 0.9.1 L439
    "Phi4FlashForCausalLM": ((0, 10, 0), (0, 10, 2)),  # phi4flash.py 0.10.0 L601
    "Phi4MMForCausalLM": ((0, 8, 0), (0, 8, 4)),  # phi4mm.py L1436
    "Plamo2ForCausalLM": ((0, 8, 5), (0, 10, 1)),  # plamo2.py 0.8.5 L583, 0.10.1 L703
    "Zamba2ForCausalLM": ((0, 8, 0), (0, 9, 1)),  # zamba2.py 0.8.0 L781
}


@dataclass(frozen=True)
class Fallback:
    """Why the oracle picks V0; `experimental`: a `_warn_or_fallback` feature, which VLLM_USE_V1=1 runs on V1
    (else `_raise_or_fallback`: VLLM_USE_V1=1 refuses it)."""
    reason: str
    experimental: bool = False


def _kv_on_v1(v, model, gpu, kv: str) -> bool:
    """Whether release `v`'s oracle keeps a non-auto `kv` cache dtype on V1 on `gpu` (module docstring)."""
    if v < (0, 8, 2):
        return False
    if vendor_of(gpu) == "AMD":
        return v >= (0, 9, 0)
    cap = capability_of(gpu) or (0, 0)
    fa3_fp8 = kv.startswith("fp8") and cap[0] == 9
    if v < (0, 10, 0):
        return fa3_fp8
    mla = v >= (0, 10, 2) and has_mla(model.layers)
    return mla or cap == (10, 0) or fa3_fp8


def _unsupported(v, model, gpu, pp: int, kv: str | None, weight_dtype: str | None) -> str:
    """The first `_raise_or_fallback` setting of the plan's (module docstring), in words; "" where none."""
    cap = capability_of(gpu)
    first, last = V0_ONLY.get(model.architecture, (None, None))
    checks = (
        (vendor_of(gpu) == "NVIDIA" and cap is not None and cap[0] < 8 and v < (0, 10, 2),
         f"compute capability {cap[0]}.{cap[1]} < 8.0" if cap else ""),
        (kv not in (None, "auto") and not _kv_on_v1(v, model, gpu, kv or ""),
         f"a {kv} KV cache (kv-cache-dtype) on this GPU"),
        (weight_dtype == "fp32" and v < (0, 9, 2), "float32 weights (dtype float32)"),
        ((weight_dtype == "nf4" or bool(getattr(model, "gguf_file", None))) and v < (0, 9, 0),
         "bitsandbytes or GGUF weights"),
        (first is not None and first <= v[:3] <= last, f"the architecture {model.architecture} (SupportsV0Only)"),
        (pp > 1 and (0, 8, 3) <= v < (0, 9, 1), "pipeline parallel without the Ray executor"),
    )
    return next((why for hit, why in checks if hit), "")


def _experimental(v, model, gpu, pp: int, lora) -> str:
    """The first `_warn_or_fallback` setting of the plan's (module docstring), in words; "" where none."""
    spec = getattr(model, "speculative", None)
    checks = (
        ((0, 9, 2) <= v < (0, 10, 2) and bool(recurrent_states(model.layers)), "a model with recurrent state (Mamba)"),
        (lora is not None and v < (0, 8, 3), "LoRA"),
        (pp > 1 and v < (0, 8, 3), "pipeline parallel"),
        (spec is not None and spec.method == "ngram" and v < (0, 9, 0), "ngram speculative decoding"),
        (vendor_of(gpu) == "AMD" and v < (0, 9, 2), "a ROCm GPU (not CUDA)"),
    )
    return next((why for hit, why in checks if hit), "")


def fallback(v: tuple[int, ...], model, gpu, pp: int, kv: str | None, weight_dtype: str | None,
             lora) -> Fallback | None:
    """Why release `v` runs this plan on V0 by default (None: it runs V1, or `v` is not a 0.8.0-0.10.x release)."""
    if not V1_DEFAULT <= v < V0_REMOVED:
        return None
    why = _unsupported(v, model, gpu, pp, kv, weight_dtype)
    if why:
        return Fallback(why)
    why = _experimental(v, model, gpu, pp, lora)
    return Fallback(why, experimental=True) if why else None


def runs_v1(v: tuple[int, ...], found: Fallback | None, use_v1: bool | None) -> bool:
    """Whether release `v` runs the V1 engine, given the oracle's `found` fallback and VLLM_USE_V1 (`use_v1`,
    engine option use_v1; None: unset). A refusal where vLLM refuses (VLLM_USE_V1=1 with an unsupported setting)
    or where kvplan does not plan the asked engine (V1 before 0.8.0, V0 from 0.11.0)."""
    if use_v1 is None:
        return v >= V1_DEFAULT and found is None
    if use_v1 and v < V1_DEFAULT:
        _refuse(f"vLLM {dotted(v)}'s V1 (VLLM_USE_V1=1 before 0.8.0) is not modelled", use_v1)
    if not use_v1 and v >= V0_REMOVED:
        _refuse(f"vLLM {dotted(v)} has no V0 engine (removed in 0.11.0: vllm/engine/llm_engine.py is "
                "LLMEngine = V1LLMEngine)", use_v1)
    if use_v1 and found is not None and not found.experimental:
        _refuse(f"vLLM {dotted(v)} with VLLM_USE_V1=1 refuses {found.reason} (_raise_or_fallback: "
                "NotImplementedError)", use_v1)
    return use_v1


def _refuse(text: str, use_v1: bool):
    raise KvplanError(f"{arg('engine_opts')} use_v1={str(use_v1).lower()}: {text}", EXIT_USAGE,
                      param="engine_opts", value={"use_v1": use_v1})


def note(v: tuple[int, ...], found: Fallback | None, use_v1: bool | None, v1: bool, gpu, mla: bool) -> str:
    """The plan's line saying which engine a 0.8.0-0.10.x release runs and why ("" for other releases); `mla`: the
    model has MLA attention."""
    if not V1_DEFAULT <= v < V0_REMOVED:
        return ""
    vendor = vendor_of(gpu)
    if use_v1 is None and found is None and vendor not in ("NVIDIA", "AMD"):
        return (f"vLLM {dotted(v)}: the V1 engine assumed on a GPU of vendor {vendor or 'unknown'} (the wheels' "
                "oracle reads CUDA and ROCm only; another platform's plugin decides); use_v1=false plans V0")
    release = f"vLLM {dotted(v)}"
    unread = "" if v1 or not mla else (
        "; V0's MLA backend of 0.8-0.10 is not read: no absorbed decode weights booked (0.7.x's), and its step "
        "times are the calibrated ones, which 0.7.x's V0 MLA runs took 1.8-3.2x longer than")
    if use_v1 is not None:
        return f"{release} runs {'V1' if v1 else 'V0'}: VLLM_USE_V1={int(use_v1)} (engine option use_v1){unread}"
    if found is not None:
        kind = "experimental on V1" if found.experimental else "not supported by V1"
        return (f"{release} falls back to the V0 engine: {found.reason} is {kind} (EngineArgs._is_v1_supported_oracle, "
                f"docs/engines.md section 1.8); kvplan plans V0's rules{unread}")
    return (f"{release} runs the V1 engine for these settings (assumed: VLLM_USE_V1, VLLM_ATTENTION_BACKEND unset, "
            "the default executor, no other flag the oracle sends to V0; use_v1=false plans V0)")
