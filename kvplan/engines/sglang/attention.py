"""SGLang's attention backend for an MLA model, by release, GPU and architecture, and the page size it forces.

kvplan rounded every MLA pool to 64-token pages; SGLang's page follows the attention backend, which it picks by
release and GPU where `--attention-backend` is not given. Read in the wheels (sglang/srt/...):

* page_size's default is 1 (0.4.9 `page_size: int = 1`; 0.5.5 `server_args.py` `_handle_page_size` L1330-1332;
  0.5.23 `arg_groups/overrides.py` `_page_size_default`). A backend forces its own: flashmla 64, cutlass_mla 128,
  trtllm_mla 64 unless the page is 32 or 64, trtllm_mha 64 unless it is 16, 32 or 64 (0.4.9 `server_args.py`
  L358-368; 0.5.5 L1199-1251). trtllm_mla and trtllm_mha raise on a GPU that is not compute capability 10.x
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
  planned with 0.5.13's list.
* DSA models (DeepSeek-V3.2, GLM-5: kvplan's IndexedMLA layers) run page 64 on CUDA (0.5.3 `server_args.py`
  L820, "Setting page size to 64 for DeepSeek NSA"; 0.5.23 `deepseek_v2.py` L160-173, 64 x index_kpool).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.base import parse_version
from kvplan.hardware.facts import capability_of
from kvplan.model.layers import IndexedMLA, Kind

OPTS = ("attention_backend",)
# backends whose page kvplan reads: the page each forces (None: none forced), and the page sizes it keeps
FORCED = {"flashmla": (64, ()), "cutlass_mla": (128, ()), "trtllm_mla": (64, (32, 64)),
          "trtllm_mha": (64, (16, 32, 64)), "fa3": (None, ()), "flashinfer": (None, ()), "triton": (None, ()),
          "aiter": (None, ())}
SM100_ONLY = ("trtllm_mla", "trtllm_mha")
DSA_PAGE = 64
# (first release, architectures) defaulting to trtllm_mla on capability 10.x; each entry extends the one before
TRTLLM_MLA_ARCHS = (((0, 5, 4), ("DeepseekV3ForCausalLM",)),
                    ((0, 5, 8), ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")),
                    ((0, 5, 9), ("KimiK25ForConditionalGeneration",)),
                    ((0, 5, 23), ("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")))


def _mla(model) -> bool:
    return any(layer.kind == Kind.MLA for layer in model.layers)


def _sm100(gpu) -> bool:
    cap = capability_of(gpu)
    return str(getattr(gpu, "vendor", "")).upper() == "NVIDIA" and cap is not None and cap[0] == 10


def trtllm_mla_default(model, version: str) -> bool:
    """Whether `version` defaults this architecture to trtllm_mla on capability 10.x (module docstring)."""
    v = parse_version(version)
    archs = [a for first, names in TRTLLM_MLA_ARCHS if v >= first for a in names]
    return getattr(model, "architecture", None) in archs


def reads_capability(model, opts: dict, version: str) -> bool:
    """Whether this plan's page depends on the GPU's compute capability (a default trtllm_mla)."""
    return (not opts.get("attention_backend") and _mla(model) and not _dsa(model)
            and trtllm_mla_default(model, version))


def _dsa(model) -> bool:
    return any(isinstance(layer, IndexedMLA) for layer in model.layers)


def backend(model, gpu, version: str, opts: dict) -> tuple[str | None, str]:
    """(the backend whose page rule applies, why): the one `attention_backend` names, else SGLang's default for an
    MLA model (None where it forces no page, or for a model without MLA)."""
    named = opts.get("attention_backend")
    if named:
        if named not in FORCED:
            raise KvplanError(f"attention_backend={named}: kvplan reads the page of {', '.join(sorted(FORCED))} only",
                              EXIT_USAGE, param="engine_opts", value=named, allowed=tuple(sorted(FORCED)))
        if named in SM100_ONLY and not _sm100(gpu):
            raise KvplanError(f"attention_backend={named}: SGLang runs it on compute capability 10.x only "
                              "(server_args.py: \"only supported on Blackwell GPUs (SM100)\")", EXIT_USAGE,
                              param="engine_opts", value=named)
        return named, f"attention_backend={named}"
    if not _mla(model) or _dsa(model):
        return None, ""
    if _sm100(gpu) and trtllm_mla_default(model, version):
        return "trtllm_mla", (f"SGLang {version} defaults {model.architecture} to trtllm_mla on compute capability "
                              "10.x (server_args.py: \"Use trtllm_mla as attention backend on sm100\")")
    return None, ""


def page_size(model, gpu, version: str, opts: dict, given: int | None) -> tuple[int, str]:
    """(SGLang's page size, why where a backend or DSA forces it): `given` is --page-size where set."""
    if _dsa(model):
        return (DSA_PAGE if given is None else given), ""
    name, why = backend(model, gpu, version, opts)
    forced, keeps = FORCED.get(name, (None, ())) if name else (None, ())
    if forced is None or (given is not None and given in keeps):
        return (1 if given is None else given), ""
    return forced, f"{why}, which runs {forced}-token pages"
