"""SGLang's default attention backend by release, GPU and architecture, its page size, and aiter's fraction cut.

kvplan rounded every MLA pool to 64-token pages; SGLang's page follows the attention backend, which it picks by
release and GPU where `--attention-backend` is not given. Read in the wheels (sglang/srt/...):

* page_size's default is 1 (0.4.9 `page_size: int = 1`; 0.5.5 `server_args.py` `_handle_page_size` L1330-1332;
  0.5.23 `arg_groups/overrides.py` `_page_size_default`). A backend forces its own: flashmla 64, cutlass_mla 128,
  trtllm_mla 64 unless the page is 32 or 64, trtllm_mha 64 unless it is 16, 32 or 64 (0.4.9 `server_args.py`
  L358-368; 0.5.5 L1199-1251; 128 kept too from 0.5.17, `TRTLLM_MHA_128`). trtllm_mla and trtllm_mha raise on a GPU
  that is not compute capability 10.x
  ("only supported on Blackwell GPUs (SM100)", 0.5.5 L1220-1224, L1241-1245).
* The default MLA backend: fa3 on Hopper (CUDA >= 12.3), flashinfer on capability 10.x, aiter (16 or 128 KV heads) or
  triton on ROCm, triton elsewhere (0.4.9 `model_executor/model_runner.py` L386-403; 0.5.3 L535-549; 0.5.5
  `server_args.py` L1155-1175; 0.5.23 `arg_groups/model_override_base.py` get_default_attn_backend): none forces a
  page, so 1.
* From 0.5.4 a DeepSeek-family architecture without DSA on capability 10.x (`is_sm100_supported`: major 10, CUDA >=
  12.8) defaults to trtllm_mla, so page 64 (0.5.4 `server_args.py` L879-888, DeepseekV3ForCausalLM; 0.5.8
  L1104-1108 adds MistralLarge3ForCausalLM and PixtralForConditionalGeneration; 0.5.9 L1197-1203 adds
  KimiK25ForConditionalGeneration, also in 0.5.10-0.5.13; 0.5.23 `arg_groups/model_overrides/deepseek_v2.py`
  L37-50 and L177-188 adds LongcatFlash and Dots3Note). 0.5.3 has no such default. 0.5.14-0.5.22 were not read:
  planned with 0.5.13's list. The list is kvplan.speed.mlaform's `SM100_MLA`, which the speed model's prefill form
  reads too (the layer below this one), so the page and the step time follow one rule.
* DSA models (DeepSeek-V3.2, GLM-5: kvplan's IndexedMLA layers) run page 64 on CUDA whatever --page-size says (0.5.3
  `server_args.py` L820, "Setting page size to 64 for DeepSeek NSA"; 0.5.10 L1576-1582; 0.5.23 `deepseek_v2.py`
  L160-173, 64 x index_kpool); their pool is kvplan.engines.sglang.dsa's.
* A model without MLA (MHA/GQA, sliding windows too) on capability 10.x: from 0.5.6 SGLang's own default is
  trtllm_mha where no speculative decoding runs with a top-k above 1 (kvplan's SGLang plans none), so page 64
  unless 16, 32 or 64 is given (0.5.6.post1 `server_args.py` L1329-1358 "1.2 Use trtllm_mha for Blackwell" and
  L1436-1449; 0.5.7 L1535-1542; 0.5.9 L1804-1812; 0.5.10 `_get_default_attn_backend` L2217-2252; 0.5.14 L4407-4446;
  0.5.23 `arg_groups/model_override_base.py` get_default_attn_backend L277-325). 0.5.5 has no such default (L1130-1160:
  flashinfer). 0.5.6.x tests `is_blackwell()` (compute capability 10 or 12, `utils/common.py` L220-223) and then
  raises for trtllm_mha off capability 10 (L1440-1443), so a default 0.5.6 run on capability 12 does not start:
  refused, naming a backend instead; 0.5.7 on test `is_sm100_supported()`. Before 0.5.6 some architectures already
  default to it on capability 10 (`MHA_ARCHS`): GptOssForCausalLM (0.5.3 L734-741; 0.5.3 is the oldest read, older
  releases planned as it), Olmo2ForCausalLM from 0.5.4 (L983-995), Llama4 from 0.5.5 (L999-1010; 0.5.4 has none).
  From 0.5.17 a model whose K and V rows differ in width (`has_asymmetric_kv`, MiMo-V2's 192 / 128) takes fa4
  instead, which on capability 10 forces page 128 whatever is given (0.5.17 `server_args.py` L5696-5701,
  `arg_groups/overrides.py` `_fa4_page_constraint` L2200-2218). Hybrids with recurrent layers (Qwen3-Next,
  Qwen3.5, Nemotron-H, ...) pick their own SM100 backend with the Mamba radix cache (0.5.10 L1914-2006): not read
  here, planned page 1 unless given, as before.
* aiter (ROCm) forces no page but cuts mem_fraction_static by 0.85 past 8,192 tokens of context from 0.4.7, the
  default backend's choice included (`aiter_cut`; AITER_FROM's comment has the sources).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import Kind, has_dsa, has_mla
from kvplan.engines.sglang.mamba import has_states
from kvplan.speed.mlaform import AITER_HEADS, architecture_default, mla_heads_per_rank

OPTS = ("attention_backend",)
# backends whose page kvplan reads: the page each forces (None: none forced), and the page sizes it keeps
FORCED = {"flashmla": (64, ()), "cutlass_mla": (128, ()), "trtllm_mla": (64, (32, 64)),
          "trtllm_mha": (64, (16, 32, 64)), "fa3": (None, ()), "flashinfer": (None, ()), "triton": (None, ()),
          "aiter": (None, ())}
# aiter (ROCm): no page of its own; SGLang scales mem_fraction_static by 0.85 under it where the server's context
# (--context-length, else the model's) exceeds 8,192 tokens (sgl-project/sglang#6564, merged 2025-05-24; kept by
# #37242, merged 2026-08-31). Read in the wheels: `if server_args.attention_backend == "aiter": if
# self.model_config.context_len > 8192: self.mem_fraction_static *= 0.85`, 0.4.7 `model_executor/model_runner.py`
# L423-425 (first: 0.4.6.post5 has none), 0.4.9 L470-472, 0.5.3 L600-602, 0.5.4 L646-648; `server_args.py` 0.5.5
# L1270-1272 through 0.5.14 L4662-4664; 0.5.23 `arg_groups/attention_hook.py` L245-269. The test follows the default
# backend's choice (0.5.3 picks it in model_specific_adjustment before the test; 0.5.23 runs _attention_backend_default
# first, L120), so a default aiter is cut too, and an explicit fraction is cut as well (0.5.23 keeps it only under
# SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION, off by default: environ.py L1065-1072).
AITER, AITER_FROM, AITER_CONTEXT, AITER_SCALE = "aiter", (0, 4, 7), 8192, 0.85
# ROCm's default (0.4.9 model_runner.py L369-400, 0.5.3 L517-546, 0.5.23 model_override_base.py L306-346): aiter for a
# model without MLA; for MLA, aiter where get_num_kv_heads(tp_size) (the config's num_key_value_heads // --tp-size) is
# 16 or 128 (kvplan.speed.mlaform.AITER_HEADS, which the speed model reads too), else triton. Architectures whose own
# rule picks triton on ROCm: (name, first release, first release no more): GptOss (0.5.3 server_args.py L734-741
# through 0.5.9; aiter from 0.5.10 L1704-1705, 0.5.23 gpt_oss.py L38-39), Olmo2 from 0.5.4 (L983-996; 0.5.23
# olmo2.py L24-30), Gemma 4 from its first release (below). DSA models take nsa / dsa and are not cut. 0.5.23's other
# model_overrides/*.py (MiniMax-M3, MiniCPM, Qwen3-VL, ...) are not read for ROCm: planned with the general default.
# Gemma 4 runs triton off compute capability 10.x whatever the platform, so never aiter and never the 0.85 cut:
# "default_attention_backend = "trtllm_mha" if is_sm100_supported() else "triton"" set where no backend is named,
# before the aiter test reads the resolved backend (0.5.16 wheel `srt/arg_groups/overrides.py` L704-720, aiter test
# `srt/server_args.py` L5041-5042; 0.5.13.post1 `server_args.py` L2365-2386, run in _handle_model_specific_adjustments
# before _handle_attention_backend_compatibility's test at L3018-3020; 0.5.23 `arg_groups/model_overrides/gemma4.py`
# L17-44). 0.5.11 and 0.5.12 set triton for Gemma4ForConditionalGeneration only (`server_args.py` L2087-2090,
# L2224-2227); 0.5.13 adds Gemma4ForCausalLM and Gemma4UnifiedForConditionalGeneration. A named backend outside
# ("trtllm_mha", "triton", ...) SGLang refuses ("Gemma4 only supports trtllm_mha, triton, or intel_xpu attention
# backend", 0.5.13.post1 L2395-2402, 0.5.16 L4706-4714): GEMMA4_BACKENDS.
GEMMA4_FROM = {"Gemma4ForConditionalGeneration": (0,), "Gemma4ForCausalLM": (0, 5, 13),
               "Gemma4UnifiedForConditionalGeneration": (0, 5, 13)}
GEMMA4_BACKENDS = ("trtllm_mha", "triton")  # of FORCED's names, those SGLang's Gemma 4 assertion accepts
GEMMA4_SM100 = (0, 5, 13)  # Gemma 4's trtllm_mha on capability 10.x, and its backend assertion: triton before
ROCM_TRITON = (("GptOssForCausalLM", (0,), (0, 5, 10)), ("Olmo2ForCausalLM", (0, 5, 4), None),
               *((arch, first, None) for arch, first in GEMMA4_FROM.items()))
SM100_ONLY = ("trtllm_mla", "trtllm_mha")
DSA_PAGE = 64
# the backend a DSA model runs under when none is named, and its first release: "nsa" (0.5.8 server_args.py L1112
# `self.attention_backend = "nsa"`, choices L124; 0.5.12 L1817, L152), renamed "dsa" in 0.5.13 with "nsa" kept as its
# deprecated alias (0.5.13 server_args.py ATTENTION_BACKEND_CHOICES L175-176; 0.5.23 arg_groups/choices.py L74-75,
# set where none is named: model_overrides/deepseek_v2.py L102-104). A name outside the choices is argparse's error
# (0.5.23 arg_groups/fields/exec_.py L211, choices=ATTENTION_BACKEND_CHOICES); a named other backend SGLang keeps, and
# what the DSA pool is under it is not read: both refused (_check_dsa_backend)
DSA_BACKENDS = (("nsa", (0, 5, 8)), ("dsa", (0, 5, 13)))
# a model without MLA on capability 10.x (module docstring): (first release, architectures) defaulting to trtllm_mha,
# each entry extending the one before; every such model from MHA_ALL; 0.5.6.x's test that takes capability 12 too
MHA_ARCHS = (((0,), ("GptOssForCausalLM",)), ((0, 5, 4), ("Olmo2ForCausalLM",)),
             ((0, 5, 5), ("Llama4ForConditionalGeneration",)))
MHA_ALL, MHA_ANY_BLACKWELL = (0, 5, 6), ((0, 5, 6), (0, 5, 7))
FA4_ASYMMETRIC, FA4_PAGE = (0, 5, 17), 128  # K/V rows of two widths: fa4, page 128 on capability 10.x
# trtllm_mha keeps a page of 128 too from 0.5.17 (`arg_groups/overrides.py` L2092; 0.5.23 L1174-1187; 0.5.16 L1739 not)
TRTLLM_MHA_128 = (0, 5, 17)


def sm100(gpu) -> bool:
    """An NVIDIA GPU of compute capability 10.x (SGLang's `is_sm100_supported`, the CUDA version aside)."""
    cap = capability_of(gpu)
    return vendor_of(gpu) == "NVIDIA" and cap is not None and cap[0] == 10


def trtllm_mla_default(model, version: str) -> bool:
    """Whether `version` defaults this architecture to trtllm_mla on capability 10.x (module docstring): the table
    the speed model's prefill form reads too (kvplan.speed.mlaform.SM100_MLA), one list for both."""
    own = architecture_default("sglang", version, getattr(model, "architecture", None))
    return own is not None and own[1] == "trtllm_mla"


def reads_capability(model, opts: dict, version: str) -> bool:
    """Whether this plan's page depends on the GPU's compute capability (a default trtllm_mla or trtllm_mha)."""
    mla = has_mla(model.layers) and not has_dsa(model.layers) and trtllm_mla_default(model, version)
    return not opts.get("attention_backend") and (mla or _mha_default(model, version))


def _mha_default(model, version: str) -> bool:
    """Whether `version` defaults this model without MLA to trtllm_mha on capability 10.x (module docstring)."""
    if has_mla(model.layers) or not any(la.kind in (Kind.FULL, Kind.SLIDING, Kind.CHUNKED) for la in model.layers):
        return False
    if has_states(model):
        return False  # a hybrid: its own SM100 backend, not read
    return parse_version(version) >= MHA_ALL or _own_mha_rule(model, version)


def _own_mha_rule(model, version: str) -> bool:
    """Whether this architecture picks its backend itself at `version` (MHA_ARCHS: trtllm_mha on capability 10.x, a
    backend of its own elsewhere, so SGLang's general default never runs for it)."""
    v = parse_version(version)
    return getattr(model, "architecture", None) in [a for first, names in MHA_ARCHS if v >= first for a in names]


def _asymmetric(model) -> bool:
    return any(getattr(layer, "v_head_dim", 0) not in (0, getattr(layer, "head_dim", 0)) for layer in model.layers)


def _mha_backend(model, gpu, version: str) -> tuple[str | None, str]:
    """(trtllm_mha or fa4, why) where SGLang `version` defaults this model without MLA to one on `gpu`, else
    (None, ""); a default 0.5.6.x run on capability 12 refused, as SGLang raises there."""
    if not _mha_default(model, version) or (_gemma4(model, version) and parse_version(version) < GEMMA4_SM100):
        return None, ""  # 0.5.11-0.5.12 run Gemma 4 under triton on every GPU (GEMMA4_FROM's comment)
    v, cap = parse_version(version), capability_of(gpu)
    nvidia = vendor_of(gpu) == "NVIDIA"
    if (nvidia and cap is not None and cap[0] == 12 and MHA_ANY_BLACKWELL[0] <= v < MHA_ANY_BLACKWELL[1]
            and not _own_mha_rule(model, version)):
        raise KvplanError(f"SGLang {version} defaults a model without MLA to trtllm_mha on compute capability 10 or 12 "
                          "(server_args.py is_blackwell) and then refuses it off 10 (\"TRTLLM MHA backend is only "
                          "supported on Blackwell GPUs (SM100)\"): it does not start here; name the backend with "
                          f"{arg('engine_opts')} attention_backend=flashinfer or triton, or plan 0.5.7 or later",
                          EXIT_USAGE, param="engine_opts", value="attention_backend")
    if not sm100(gpu):
        return None, ""
    if v >= FA4_ASYMMETRIC and _asymmetric(model):
        return "fa4", (f"SGLang {version} defaults a model whose K and V widths differ to fa4 on compute capability "
                       f"10.x (server_args.py has_asymmetric_kv), which runs {FA4_PAGE}-token pages whatever the page "
                       "given (_fa4_page_constraint)")
    rule = f"its own rule for {model.architecture}" if _own_mha_rule(model, version) else \
        "its default for a model without MLA"
    return "trtllm_mha", (f"SGLang {version} defaults {model.architecture or 'this model'} to trtllm_mha on compute "
                          f"capability 10.x (server_args.py, {rule})")


def _gemma4(model, version: str) -> bool:
    """Whether SGLang `version` applies its own Gemma 4 backend rule to this architecture (GEMMA4_FROM)."""
    first = GEMMA4_FROM.get(getattr(model, "architecture", None) or "")
    return first is not None and parse_version(version) >= first


def backend(model, gpu, version: str, opts: dict) -> tuple[str | None, str]:
    """(the backend whose page rule applies, why): the one `attention_backend` names, else SGLang's default for the
    model (None where it forces no page)."""
    named = opts.get("attention_backend")
    if named is not None:  # an empty value is refused too, not read as no backend named
        if named == AITER and not _rocm(gpu):
            raise KvplanError(f"attention_backend={named}: SGLang runs it on ROCm (AMD GPUs) only", EXIT_USAGE,
                              param="engine_opts", value=named)
        if named not in FORCED:
            raise KvplanError(f"attention_backend={named}: kvplan reads the page of {', '.join(sorted(FORCED))} only",
                              EXIT_USAGE, param="engine_opts", value=named, allowed=tuple(sorted(FORCED)))
        if named in SM100_ONLY and not sm100(gpu):
            raise KvplanError(f"attention_backend={named}: SGLang runs it on compute capability 10.x only "
                              "(server_args.py: \"only supported on Blackwell GPUs (SM100)\")", EXIT_USAGE,
                              param="engine_opts", value=named)
        if named not in GEMMA4_BACKENDS and _gemma4(model, version) and parse_version(version) >= GEMMA4_SM100:
            raise KvplanError(f"attention_backend={named}: SGLang {version} runs Gemma 4 under "
                              f"{' or '.join(GEMMA4_BACKENDS)} only (server_args.py: \"Gemma4 only supports "
                              "trtllm_mha, triton, or intel_xpu attention backend\")", EXIT_USAGE,
                              param="engine_opts", value=named, allowed=GEMMA4_BACKENDS)
        return named, f"attention_backend={named}"
    if not has_mla(model.layers):
        return _mha_backend(model, gpu, version)
    if has_dsa(model.layers):
        return None, ""
    if sm100(gpu) and trtllm_mla_default(model, version):
        return "trtllm_mla", (f"SGLang {version} defaults {model.architecture} to trtllm_mla on compute capability "
                              "10.x (server_args.py: \"Use trtllm_mla as attention backend on sm100\")")
    return None, ""


def _check_dsa_backend(named: str | None, version: str) -> None:
    """A one-line refusal where `attention_backend` names a backend other than the DSA one SGLang `version` runs a
    DSA model under (DSA_BACKENDS): a name outside its choices argparse refuses, and another backend SGLang keeps
    but kvplan has not read the DSA pool under."""
    if named is None:
        return
    v = parse_version(version)
    allowed = tuple(name for name, first in DSA_BACKENDS if v >= first)
    if named not in allowed:
        raise KvplanError(f"attention_backend={named}: kvplan plans SGLang {version}'s DeepSeek Sparse Attention pool "
                          f"under its own backend only ({' or '.join(allowed)}, what it picks when none is named)",
                          EXIT_USAGE, param="engine_opts", value=named, allowed=allowed)


def page_size(model, gpu, version: str, opts: dict, given: int | None) -> tuple[int, str]:
    """(SGLang's page size, why where a backend or DSA forces it): `given` is --page-size where set."""
    # set whatever --page-size says (0.5.10 server_args.py L1576-1582; 0.5.23 deepseek_v2.py L160-173)
    if has_dsa(model.layers):
        _check_dsa_backend(opts.get("attention_backend"), version)
        return DSA_PAGE, ("" if given in (None, DSA_PAGE) else f"SGLang sets page_size {DSA_PAGE} for DeepSeek Sparse "
                          f"Attention on CUDA whatever page_size is given ({given})")
    name, why = backend(model, gpu, version, opts)
    if name == "fa4":
        return FA4_PAGE, why
    forced, keeps = FORCED.get(name, (None, ())) if name else (None, ())
    if name == "trtllm_mha" and parse_version(version) >= TRTLLM_MHA_128:
        keeps = (*keeps, 128)
    if forced is None or (given is not None and given in keeps):
        return (1 if given is None else given), ""
    return forced, f"{why}, which runs {forced}-token pages"


def _rocm(gpu) -> bool:
    return vendor_of(gpu) == "AMD"


def _rocm_default(model, version: str, tp_size: int) -> tuple[bool, str]:
    """(whether SGLang `version` defaults this model to aiter on ROCm, why), or raises where kvplan has not read the
    model kind's backend there (AITER_HEADS, ROCM_TRITON)."""
    v = parse_version(version)
    if has_dsa(model.layers):
        return False, ""
    if has_states(model) or \
            has_compressed(model.layers):
        raise KvplanError(f"SGLang {version} on ROCm: kvplan has not read the default attention backend of a model "
                          "with recurrent or compressed layers there, and under aiter SGLang cuts mem_fraction_static "
                          f"by {AITER_SCALE} past {AITER_CONTEXT:,} tokens of context; name it with "
                          f"{arg('engine_opts')} attention_backend=aiter or triton", EXIT_USAGE,
                          param="engine_opts", value="attention_backend")
    if has_mla(model.layers):  # the config's KV heads over the whole --tp-size (DP attention's too), as the speed side
        kv, heads = model.mla_kv_heads or model.num_attention_heads, mla_heads_per_rank(model, tp_size)
        return heads in AITER_HEADS, (f"SGLang {version} defaults an MLA model with {heads} KV heads per rank "
                                      f"to aiter on ROCm (16 or 128: the config's {kv} num_key_value_heads over "
                                      f"SGLang's tp_size {tp_size}, get_num_kv_heads)")
    arch = getattr(model, "architecture", None)
    if any(arch == name and v >= first and (until is None or v < until) for name, first, until in ROCM_TRITON):
        return False, ""
    return True, f"SGLang {version} defaults a model without MLA to aiter on ROCm"


def _own_triton(model, gpu, version: str) -> str:
    """Said where an architecture's own rule runs it under triton on ROCm (ROCM_TRITON), so the fraction is not cut
    where the general default (aiter) would have cut it; "" elsewhere."""
    arch, v = getattr(model, "architecture", None), parse_version(version)
    if not _rocm(gpu) or not any(arch == name and v >= first and (until is None or v < until)
                                 for name, first, until in ROCM_TRITON):
        return ""
    return (f"SGLang {version} runs {arch} under triton on ROCm (its own rule), not aiter, so it does not cut the "
            f"fraction by {AITER_SCALE} past {AITER_CONTEXT:,} tokens")


def aiter_cut(model, gpu, version: str, opts: dict, tp_size: int, context: int) -> tuple[float, str]:
    """(the factor SGLang applies to mem_fraction_static under aiter, why; 1.0 and "" where none): 0.85 from 0.4.7
    where aiter runs (named, or ROCm's default) and the server's context exceeds 8,192 tokens (AITER_FROM)."""
    if parse_version(version) < AITER_FROM or context <= AITER_CONTEXT:
        return 1.0, ""
    named = opts.get("attention_backend")
    if named is not None:
        on, why = named == AITER, f"attention_backend={named}"
    elif _rocm(gpu):
        on, why = _rocm_default(model, version, tp_size)
    else:
        return 1.0, ""
    if not on:
        return 1.0, _own_triton(model, gpu, version) if named is None else ""
    return AITER_SCALE, (f"{why}, and past {AITER_CONTEXT:,} tokens of context ({context:,}) SGLang scales "
                         f"mem_fraction_static by {AITER_SCALE} under aiter (sgl-project/sglang#6564; "
                         "model_runner.py / server_args.py: context_len > 8192)")
