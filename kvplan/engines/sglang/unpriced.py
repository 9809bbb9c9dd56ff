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
* FlashInfer's all-reduce fusion (`--enable-flashinfer-allreduce-fusion` from 0.4.9, off): SGLang turns it on by
  itself where FUSION below says, read release by release in the PyPI wheels (`server_args.py` unless said; every rule
  also needs tp > 1, the workspace being made only then, `flashinfer_comm_fusion.py` ensure_workspace_initialized
  `world_size <= 1: return False`, 0.5.3 L105-107, and no DP attention): 0.5.3 GptOssForCausalLM on capability 10.x
  (L750-755); 0.5.4 DeepseekV3ForCausalLM too, on 10.x, unless its config is DSA (`not is_deepseek_nsa`, L879-895;
  gpt-oss L928-932); 0.5.5 gpt-oss on 10.x or 12.x (`is_blackwell_supported`, `utils/common.py` L201-206; L964-971),
  DeepSeek as in 0.5.4 (L899-915); 0.5.6 both on one node only, DeepSeek-V3 with or without DSA (L1027-1035,
  L1086-1093); 0.5.7 one list (DeepseekV3, GptOss, Glm4Moe, Qwen3Moe) on 9.x, 10.x or 12.x, one node, no MoE
  all-to-all, not an H20 (`"H20" in device_name and "H200" not in`, L1470-1493); 0.5.8 9.x or 10.x only, Glm4MoeLite
  added (L1600-1626); 0.5.9 KimiK25 (L1672-1697); 0.5.10 Qwen3.5 and its MoE (L2080-2110); 0.5.11 DeepseekV32,
  GlmMoeDsa, Qwen3Next (L2320-2353); 0.5.12 InternS2Preview (L2440-2468); 0.5.13 MistralLarge3, the H20 no longer left
  out (L2620-2651); 0.5.14 Qwen3VLMoe, NemotronH and its Puzzle, and more than one node on 10.x (L4294-4325; 0.5.15
  `arg_groups/overrides.py` L1350-1395, the same); 0.5.16 as 0.5.14 (`arg_groups/overrides.py` L1515-1555), 0.5.18
  DeepSeek-V4 (L1961-2001), 0.5.20 L1000-1046, 0.5.23 L929-999, which also picks CuTeDSL's for MiMo-V2 on 10.x; the
  node rule by release: `_nodes_allow`. Its workspace (`layers/flashinfer_comm_fusion.py`, 0.5.23 L253-317, and 0.5.11
  L191-249 the same: a buffer of tp x max_token_num x hidden x 2 B, flags and three Lamport buffers of up to tp x
  max_token_num x hidden x 2 B, each rounded to 2 MiB and then to the driver's allocation and multicast granularity;
  max_token_num 2,048 in every release, `layers/communicator.py` FUSE_ALLREDUCE_MAX_BATCH_SIZE, 0.5.3 L65, 0.5.14
  L160; one workspace for the attention group and one for the MoE group in 0.5.23) is created by the graph runners'
  warm-up, after the pool (0.5.23 `model_executor/runner/base_runner.py` L329-333): the budget does not see it, so
  #tokens stays exact, and the 1 - mem_fraction_static headroom must hold it. Its size rests on the FlashInfer build
  and the driver's granularity, not on SGLang's source: not priced, said where SGLang turns it on.
"""

from __future__ import annotations

from kvplan.engines.base import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.layers import has_dsa, has_mla
from kvplan.planning.deploy import node_size
from kvplan.planning.plan_warnings import PlanWarning

# The group whose ranks a node must hold under DP attention (--enable-dp-attention): SGLang's tp group, --tp-size,
# every rank (attention tp x dp). Its MoE and dense-MLP collectives and its custom all-reduce run over all of them;
# the attention group is only the tp_size // dp_size consecutive ranks of one dp rank (0.5.9 wheel
# `layers/dp_attention.py` compute_dp_attention_world_info L230-244), and a multi-node deployment must be that one
# tp group ("multi-node data parallel is not supported unless dp attention", `server_args.py` check_server_args
# L5143-5145; tp_size x pp_size divisible by nnodes, L5131-5134). kvplan's Deployment(tp, dp) is attention tp x dp.
NODE_GROUP = "SGLang's tp group under DP attention (its tp size: attention tp × dp)"

POST_CAPTURE_FROM = (0, 5, 16)
_V3, _OSS = "DeepseekV3ForCausalLM", "GptOssForCausalLM"
_LIST7 = frozenset({_V3, _OSS, "Glm4MoeForCausalLM", "Qwen3MoeForCausalLM"})
_LIST9 = _LIST7 | {"Glm4MoeLiteForCausalLM", "KimiK25ForConditionalGeneration"}  # Glm4MoeLite from 0.5.8
_LIST11 = _LIST9 | {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",  # these two from 0.5.10
                    "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "Qwen3NextForCausalLM"}
_LIST13 = _LIST11 | {"InternS2PreviewForConditionalGeneration", "MistralLarge3ForCausalLM"}  # InternS2 from 0.5.12
_ARCHS = _LIST13 | {"Qwen3VLMoeForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"}
_NEW = frozenset({"DeepseekV4ForCausalLM", "NemotronH_Omni_Reasoning_V3", "Qwen4ExpForConditionalGeneration"})


def _each(archs, majors=(9, 10)) -> dict:
    return dict.fromkeys(archs, majors)


# release -> ({architecture: capability majors} its auto-enable reads, whether it leaves the H20 out); the newest row
# at or below a release applies (module docstring). 0.5.4-0.5.5's DeepSeek-V3 without DSA: `_no_dsa`.
FUSION = (((0, 5, 23), _each(_ARCHS | _NEW | {"MiMoV2FlashForCausalLM"}), False),
          ((0, 5, 20), _each(_ARCHS | _NEW), False), ((0, 5, 18), _each(_ARCHS | {"DeepseekV4ForCausalLM"}), False),
          ((0, 5, 14), _each(_ARCHS), False), ((0, 5, 13), _each(_LIST13), False),
          ((0, 5, 12), _each(_LIST13 - {"MistralLarge3ForCausalLM"}), True), ((0, 5, 11), _each(_LIST11), True),
          ((0, 5, 10), _each(_LIST11 - {"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "Qwen3NextForCausalLM"}),
           True),
          ((0, 5, 9), _each(_LIST9), True), ((0, 5, 8), _each(_LIST9 - {"KimiK25ForConditionalGeneration"}), True),
          ((0, 5, 7), _each(_LIST7, (9, 10, 12)), True), ((0, 5, 5), {_V3: (10,), _OSS: (10, 12)}, False),
          ((0, 5, 4), {_V3: (10,), _OSS: (10,)}, False), ((0, 5, 3), {_OSS: (10,)}, False))
_NO_DSA = ((0, 5, 4), (0, 5, 6))  # [from, to): DeepseekV3ForCausalLM only where its config is not DSA
ONE_NODE, MULTI_NODE_10X = (0, 5, 6), (0, 5, 14)  # one node only from 0.5.6; more than one on 10.x from 0.5.14


def _nodes_allow(v: tuple, cap_major: int, spans: bool) -> bool:
    """Whether the release's node rule lets the fusion on for a tp group that `spans` nodes (module docstring): no
    rule before 0.5.6, one node only from it, more than one node on capability 10.x from 0.5.14."""
    return not spans or v < ONE_NODE or (v >= MULTI_NODE_10X and cap_major == 10)


def _is_h20(gpu) -> bool:
    """SGLang's `is_h20_device` (0.5.7-0.5.12 `server_args.py`): "H20" in torch's device name and "H200" not. The rule
    reads the name itself, no hardware fact: it stood for a FlashInfer build failure on SGLang's H20 CI machines
    (flashinfer-ai/flashinfer#2204, sgl-project/sglang#25027; dropped by sgl-project/sglang#26470), and the H20's
    capability, 9.0, is the H100's. So the profile's field is `device_name`, the name torch reports."""
    name = getattr(gpu, "device_name", None) or ""
    return "H20" in name and "H200" not in name


def fusion_on(model, gpu, tp_size: int, dp_attention: bool, version: str, spans: bool = False) -> bool:
    """Whether SGLang `version` turns FlashInfer's all-reduce fusion on by itself for this model and GPU, its tp group
    on one node or (`spans`) on several."""
    cap, v = capability_of(gpu), parse_version(version)
    if vendor_of(gpu) != "NVIDIA" or cap is None or tp_size < 2 or dp_attention or v < FUSION[-1][0]:
        return False
    if not _nodes_allow(v, cap[0], spans):
        return False
    archs, no_h20 = next((a, h) for since, a, h in FUSION if v >= since)
    if no_h20 and _is_h20(gpu):
        return False
    if _NO_DSA[0] <= v < _NO_DSA[1] and model.architecture == _V3 and has_dsa(model.layers):
        return False
    if model.architecture == "MiMoV2FlashForCausalLM":  # CuTeDSL's: 10.x, bf16, tp 2, 4, 8 or 16 (SUPPORTED_TP_SIZES)
        return model.architecture in archs and cap[0] == 10 and model.dtype == "bf16" and tp_size in (2, 4, 8, 16)
    return cap[0] in archs.get(model.architecture, ())


def warnings(model, gpu, tp_size: int, dp_attention: bool, version: str, dep=None) -> tuple[PlanWarning, ...]:
    """The unpriced terms' assumptions for a plan (module docstring): post-capture KV sizing off, where the release
    has it and the model could use it; FlashInfer's fusion workspace outside the budget, where SGLang turns it on (its
    tp group of `tp_size` on one node or on several: kvplan.planning.deploy.node_size of `dep`). The node check of
    the whole tp group under DP attention (NODE_GROUP) is the plan's, through the engine's tp_group."""
    out = []
    v = parse_version(version)
    mla = has_mla(model.layers)
    if v >= POST_CAPTURE_FROM and vendor_of(gpu) == "NVIDIA" and not mla and not dp_attention:
        out.append(PlanWarning.literal(
            f"SGLang {version}'s post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) assumed off, its "
            "default: set, SGLang re-sizes the token pool after CUDA-graph capture to the memory then free, which "
            "kvplan does not price", note=True))  # an assumption at the default, not a danger: a note
    if fusion_on(model, gpu, tp_size, dp_attention, version, tp_size > node_size(dep, gpu)):
        out.append(PlanWarning.literal(
            f"SGLang {version} turns FlashInfer's all-reduce fusion on for {model.architecture} here: its workspace "
            "(tp x 2,048 tokens x hidden size, four buffers a group, rounded by FlashInfer and the driver) is "
            "allocated after the pool, in the 1 - mem_fraction_static headroom, and not priced (the #tokens do "
            "not move)"))
    return tuple(out)
