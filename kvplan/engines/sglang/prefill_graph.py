"""Which prefill CUDA graph SGLang keeps by default, by release, and why it turns one off: the decision the default
mem_fraction_static's graph reserve (kvplan.engines.sglang.piecewise) follows.

Read in the PyPI wheels 0.5.10-0.5.23 (`srt/server_args.py`; from 0.5.19 `srt/arg_groups/cuda_graph_hook.py`;
the architecture lists in `srt/configs/model_config.py`). The compatibility rules always run before the memory
settings that size the reserve (0.5.16 `server_args.py` L2950 then L2966; 0.5.23 `arg_groups/pipeline.py` L191 then
L218), so a graph they turn off reserves nothing and one they keep reserves its 8 MiB a size (1.5 GiB on MLA).

* 0.5.10-0.5.14: the torch.compile piecewise graph ("tc") is the default (0.5.13 `server_args.py`
  `_handle_piecewise_cuda_graph` L1342-1413; 0.5.14 `PhaseConfig(backend=Backend.TC_PIECEWISE)`).
* 0.5.15 on: the breakable graph on CUDA (`model_executor/cuda_graph_config.py` `default_prefill_backend`, 0.5.15
  L101, 0.5.23 L119-123); elsewhere tc until 0.5.21, which its non-CUDA rule turns off, and none from 0.5.22.
* 0.5.16-0.5.21: a VLM on the piecewise allow-list and not on the breakable one is moved to tc (0.5.16
  `server_args.py` `_apply_cuda_graph_compatibility` L3649-3679; 0.5.19 `cuda_graph_hook.py` L106-168); 0.5.22 and
  0.5.23 no longer do (0.5.23 L136-169).
* tc is turned off (0.5.13 L1342-1413, 0.5.19 `disable_tc_piecewise_cudagraph_if_incompatible` L169-260) under DP
  attention, pp > 1, off CUDA, for a VLM off the piecewise allow-list and for
  `piecewise_cuda_graph_disabled_model_archs`.
* breakable is turned off (`disable_breakable_cudagraph_if_incompatible`: 0.5.15 L3341-3385, 0.5.16 L3763-3816,
  0.5.17 L4452-4523, 0.5.18 L4666-4718, 0.5.19 L262-325, 0.5.20 L267-345, 0.5.21 L275-353, 0.5.22 L138-219,
  0.5.23 L170-257) for a VLM off the breakable allow-list and DeepSeek-V4 (all); for MLA and under DP attention in
  0.5.15-0.5.16; for MLA without DSA's indexer (`is_deepseek_dsa`: `index_topk`) and Nemotron-H in 0.5.17; for
  KDA hybrids from 0.5.20 (GLM-5 Next excepted from 0.5.22). From 0.5.17 DP attention keeps it. pp > 1 turns it off
  from 0.5.19 (`apply_cuda_graph_compatibility`, 0.5.19 L122-134): 0.5.15-0.5.18 have no pp rule for it.
* "A VLM" is SGLang's `is_multimodal` (kvplan.engines.sglang.multimodal.is_multimodal): a model whose vision tower
  kvplan counts, unless SGLang switches multimodal off by default for its architecture (`mm_disabled_models`:
  Gemma 3, Llama 4, ...; 0.5.23 `configs/model_config.py` L690-717) and --enable-multimodal is not given. Such a
  model's graph follows the text rules: Gemma-3-27B keeps the breakable graph at 0.5.23 (464 MiB on an H100).
Options kvplan does not plan (LoRA, MoE all-to-all backends, context parallelism, two-batch overlap, host-cache
offload, torch.compile) are not read; nor is 0.5.18's trtllm_mla exception to the tc move, which only an MLA
architecture on the piecewise list alone could meet (none in the catalog).
"""

from __future__ import annotations

from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.versions import parse_version
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import has_dsa, has_mla
from kvplan.hardware.facts import vendor_of

TC, BREAKABLE = "tc_piecewise", "breakable"
FROM = (0, 5, 10)  # piecewise graphs on by default (0.5.9: enable_piecewise_cuda_graph False)
BREAKABLE_FROM = (0, 5, 15)
TC_MOVE = ((0, 5, 16), (0, 5, 22))  # [from, until): piecewise-listed VLMs moved to tc
PP_OFF_BREAKABLE_FROM = (0, 5, 19)
DP_OFF_BREAKABLE_UNTIL = (0, 5, 17)
MLA_OFF_BREAKABLE_UNTIL = (0, 5, 17)  # all MLA in 0.5.15-0.5.16
ONLY_0517 = (0, 5, 17)  # MLA without DSA and Nemotron-H off in that release only
NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")  # `is_nemotron_h`
KDA_OFF_FROM = (0, 5, 20)
KDA_KEPT = {"Glm5NextForConditionalGeneration": (0, 5, 22)}

_DSV4 = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN")
_OFF_10 = ("DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeV2_5ForCausalLM",
           "LLaDAModelLM")
_OFF_13 = (*_DSV4, "Qwen3NextForCausalLM", "BailingMoeV2_5ForCausalLM", "LLaDAModelLM")
# `piecewise_cuda_graph_disabled_model_archs` (tc only), newest first: 0.5.10 L1352, 0.5.12 L1558, 0.5.13 L1579,
# 0.5.16 L1763, 0.5.20 L2181 (0.5.23 L2475 the same)
TC_OFF_ARCHS = (((0, 5, 20), frozenset(_OFF_13 + ("DeepseekV4ForCausalLMDSpark", "Glm5NextForConditionalGeneration"))),
                ((0, 5, 16), frozenset(_OFF_13 + ("DeepseekV4ForCausalLMDSpark",))),
                ((0, 5, 13), frozenset(_OFF_13)),
                ((0, 5, 12), frozenset(_OFF_10 + _DSV4)),
                ((0, 0, 0), frozenset(_OFF_10)))
_M3 = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
# `multimodal_piecewise_cuda_graph_supported_model_archs`: 0.5.14 L1725, 0.5.16 L1776, 0.5.19 L1973 (0.5.23 L2489)
PIECEWISE_VLMS = (((0, 5, 19), frozenset(("KimiK25ForConditionalGeneration", *_M3))),
                  ((0, 5, 16), frozenset(("Cohere2VisionForConditionalGeneration", "KimiK25ForConditionalGeneration",
                                          *_M3))),
                  ((0, 5, 14), frozenset(("Cohere2VisionForConditionalGeneration",))),
                  ((0, 0, 0), frozenset()))
_BCG_16 = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
_BCG_18 = (*_BCG_16, "InternS2MobiusForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
           "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration")
_BCG_19 = (*_BCG_18, "Cohere2VisionForConditionalGeneration", "PaddleOCRVLForConditionalGeneration")
_BCG_20 = (*_BCG_19, "Glm5NextForConditionalGeneration")
_BCG_22 = (*_BCG_20, "Qwen4ExpForConditionalGeneration", *_M3)
# `multimodal_breakable_cuda_graph_supported_model_archs`: 0.5.16 L1785, 0.5.18 L1921, 0.5.19 L1985,
# 0.5.20 L2207, 0.5.22 L2388, 0.5.23 L2501
BREAKABLE_VLMS = (((0, 5, 23), frozenset(_BCG_22 + ("MuseSparkForConditionalGeneration",))),
                  ((0, 5, 22), frozenset(_BCG_22)), ((0, 5, 20), frozenset(_BCG_20)),
                  ((0, 5, 19), frozenset(_BCG_19)), ((0, 5, 18), frozenset(_BCG_18)),
                  ((0, 5, 16), frozenset(_BCG_16)), ((0, 0, 0), frozenset()))


def _at(table, v) -> frozenset:
    """The set a release holds in a newest-first (since, set) table."""
    return next(archs for since, archs in table if v >= since)


def decide(model, gpu, dep, version: str, dp_attention: bool, enable_mm: bool = False) -> tuple[str | None, str]:
    """(the prefill graph SGLang at `version` keeps by default, or None; why), for this model and layout
    (`enable_mm`: --enable-multimodal given)."""
    v, arch = parse_version(version), getattr(model, "architecture", "") or ""
    if v < FROM:
        return None, f"SGLang {version} captures no piecewise prefill graph by default (from 0.5.10)"
    if vendor_of(gpu) != "NVIDIA":
        return None, "not CUDA"
    vlm = sglang_mm.is_multimodal(model, version, enable_mm)
    if v < BREAKABLE_FROM:
        return _tc(v, arch, vlm, dep, dp_attention)
    if dep.pp > 1 and v >= PP_OFF_BREAKABLE_FROM:
        return None, "pipeline parallelism"
    if vlm and TC_MOVE[0] <= v < TC_MOVE[1] and arch in _at(PIECEWISE_VLMS, v) - _at(BREAKABLE_VLMS, v):
        backend, why = _tc(v, arch, vlm, dep, dp_attention)
        return backend, why if backend is None else f"{arch} is on its piecewise allow-list alone"
    return _breakable(v, arch, vlm, model, dp_attention)


def _tc(v, arch: str, vlm: bool, dep, dp_attention: bool) -> tuple[str | None, str]:
    """The tc_piecewise graph's rules (those kvplan plans)."""
    if arch in _at(TC_OFF_ARCHS, v):
        return None, f"{arch} is on SGLang's piecewise-disabled list"
    if dp_attention:
        return None, "DP attention (tc_piecewise)"
    if dep.pp > 1:
        return None, "pipeline parallelism"
    if vlm and arch not in _at(PIECEWISE_VLMS, v):
        return None, "a multimodal model off SGLang's piecewise allow-list"
    return TC, f"{arch} is on its piecewise allow-list" if vlm else "its default"


def _breakable(v, arch: str, vlm: bool, model, dp_attention: bool) -> tuple[str | None, str]:
    """The breakable graph's rules (those kvplan plans)."""
    mla = has_mla(model.layers)
    dsa = has_dsa(model.layers)
    kda = any(getattr(layer, "variant", "") == "kda" for layer in model.layers)
    rules = (
        (mla and v < MLA_OFF_BREAKABLE_UNTIL, "MLA attention"),
        (mla and not dsa and v[:3] == ONLY_0517, "MLA attention without DSA's indexer"),
        (arch in NEMOTRON_H and v[:3] == ONLY_0517, "Nemotron-H"),
        (kda and v >= KDA_OFF_FROM and not v >= KDA_KEPT.get(arch, (999,)), "a KDA hybrid"),
        (has_compressed(model.layers) or arch.startswith("DeepseekV4"), "DeepSeek-V4"),
        (dp_attention and v < DP_OFF_BREAKABLE_UNTIL, "DP attention (breakable, before 0.5.17)"),
        (vlm and arch not in _at(BREAKABLE_VLMS, v), "a multimodal model off SGLang's breakable allow-list"),
    )
    for hit, why in rules:
        if hit:
            return None, why
    return BREAKABLE, f"{arch} is on its breakable allow-list" if vlm else "its default on CUDA"


def note(version: str, backend: str, mib: float, why: str) -> str:
    """The engine note: which prefill graph SGLang keeps and what its default fraction reserves for it."""
    if backend == "off":
        return (f"SGLang {version} turns its prefill CUDA graph off ({why}): the default fraction reserves "
                "nothing for it")
    return (f"SGLang {version} keeps its {backend} prefill CUDA graph ({why}): the default fraction reserves "
            f"{mib:,.0f} MiB for it (kvplan.engines.sglang.prefill_graph)")
