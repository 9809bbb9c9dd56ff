"""SGLang memory terms kvplan does not price, said as a plan's assumptions where a release has them: the token pool
re-sized after CUDA-graph capture, and FlashInfer's all-reduce fusion workspace (PyPI wheels read, round 42).

* Post-capture KV sizing (`post_capture_resize_kv_pool`, from 0.5.16; 0.5.15.post1 has none): with
  SGLANG_ENABLE_POST_CAPTURE_KV_SIZING set (`EnvBool(False)` in every release read: 0.5.16 `environ.py` L337, 0.5.18,
  0.5.20, 0.5.22, 0.5.23 L640) and its conditions met (CUDA, no MLA backend, dcp 1, no DP attention, CUDA graphs on
  for both phases, not DeepSeek-V4: 0.5.16 `server_args.py` post_capture_kv_sizing_planned L4105-4140, 0.5.23
  `arg_groups/overrides.py` L1791-1862), the default mem_fraction_static leaves out the CUDA-graph reserve, and after
  capture (0.5.16 `managers/scheduler.py` L856-858) the pool is re-sized to the free memory then measured less
  pre_model_load_memory x (1 - mem_fraction_static), capped at the count sized before capture (0.5.23
  `model_executor/model_runner_components/kv_pool_runtime.py` compute_post_capture_kv_resize L59-150): what capture
  took, measured at start-up, comes off #tokens. kvplan plans the default (off), where its #tokens is exact.
* FlashInfer's all-reduce fusion (`--enable-flashinfer-allreduce-fusion` from 0.4.9, off): on by default for
  GptOssForCausalLM on capability 10.x without DP attention in 0.5.3 (`server_args.py` L750-755; the releases up to
  0.5.15.post1 are planned by 0.5.3's rule, not read), and from 0.5.16 for a list of architectures (FUSION below) on
  capability 9.x or 10.x at tp > 1 without DP attention, on one node or 10.x, with no MoE all-to-all (0.5.16
  `arg_groups/overrides.py` L1515-1555, 0.5.18 L1961-2001, 0.5.20 L1000-1046, 0.5.23 L929-999, which also picks
  CuTeDSL's for MiMo-V2 on 10.x). Its workspace (`layers/flashinfer_comm_fusion.py`, 0.5.23 L253-317: a buffer of
  tp x max_token_num x hidden x 2 B, flags and three Lamport buffers of up to tp x max_token_num x hidden x 2 B, each
  rounded to 2 MiB and then to the driver's allocation and multicast granularity; max_token_num 2,048, one workspace
  for the attention group and one for the MoE group) is created by the graph runners' warm-up, after the pool
  (0.5.23 `model_executor/runner/base_runner.py` L329-333): the budget does not see it, so #tokens stays exact, and
  the 1 - mem_fraction_static headroom must hold it. Its size rests on the FlashInfer build and the driver's
  granularity, not on SGLang's source: not priced, said where SGLang turns it on.
"""

from __future__ import annotations

from kvplan.engines.base import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.layers import has_mla
from kvplan.planning.plan_warnings import PlanWarning

POST_CAPTURE_FROM = (0, 5, 16)
GPT_OSS_FROM = (0, 5, 3)
_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GptOssForCausalLM", "GlmMoeDsaForCausalLM",
          "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "MistralLarge3ForCausalLM", "Qwen3MoeForCausalLM",
          "Qwen3VLMoeForConditionalGeneration", "Qwen3NextForCausalLM", "KimiK25ForConditionalGeneration",
          "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
          "Qwen3_5ForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")
# release -> the architectures its auto-enable reads (the newest row at or below a release applies)
FUSION = (((0, 5, 23), frozenset(_ARCHS) | {"DeepseekV4ForCausalLM", "NemotronH_Omni_Reasoning_V3",
                                             "Qwen4ExpForConditionalGeneration", "MiMoV2FlashForCausalLM"}),
          ((0, 5, 20), frozenset(_ARCHS) | {"DeepseekV4ForCausalLM", "NemotronH_Omni_Reasoning_V3",
                                             "Qwen4ExpForConditionalGeneration"}),
          ((0, 5, 18), frozenset(_ARCHS) | {"DeepseekV4ForCausalLM"}),
          ((0, 5, 16), frozenset(_ARCHS)))


def fusion_on(model, gpu, tp_size: int, dp_attention: bool, version: str) -> bool:
    """Whether SGLang `version` turns FlashInfer's all-reduce fusion on by itself for this model and GPU."""
    cap, v = capability_of(gpu), parse_version(version)
    if vendor_of(gpu) != "NVIDIA" or cap is None or tp_size < 2 or dp_attention or v < GPT_OSS_FROM:
        return False
    if v < POST_CAPTURE_FROM:
        return model.architecture == "GptOssForCausalLM" and cap[0] == 10
    archs = next(a for since, a in FUSION if v >= since)
    if model.architecture == "MiMoV2FlashForCausalLM":  # CuTeDSL's: 10.x, bf16, tp 2, 4, 8 or 16 (SUPPORTED_TP_SIZES)
        return model.architecture in archs and cap[0] == 10 and model.dtype == "bf16" and tp_size in (2, 4, 8, 16)
    return model.architecture in archs and cap[0] in (9, 10)


def warnings(model, gpu, tp_size: int, dp_attention: bool, version: str) -> tuple[PlanWarning, ...]:
    """The unpriced terms' assumptions for a plan (module docstring): post-capture KV sizing off, where the release
    has it and the model could use it; FlashInfer's fusion workspace outside the budget, where SGLang turns it on."""
    out = []
    v = parse_version(version)
    mla = has_mla(model.layers)
    if v >= POST_CAPTURE_FROM and vendor_of(gpu) == "NVIDIA" and not mla and not dp_attention:
        out.append(PlanWarning.literal(
            f"SGLang {version}'s post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) assumed off, its "
            "default: set, SGLang re-sizes the token pool after CUDA-graph capture to the memory then free, which "
            "kvplan does not price"))
    if fusion_on(model, gpu, tp_size, dp_attention, version):
        out.append(PlanWarning.literal(
            f"SGLang {version} turns FlashInfer's all-reduce fusion on for {model.architecture} here: its workspace "
            "(tp x 2,048 tokens x hidden size, four buffers a group, rounded by FlashInfer and the driver) is "
            "allocated after the pool, in the 1 - mem_fraction_static headroom, and not priced (the #tokens do "
            "not move)"))
    return tuple(out)
