"""What each SGLang rank holds: DP attention, --moe-dense-tp-size, --enable-dp-lm-head and shared-expert fusion.

Read in the SGLang wheels 0.5.3, 0.5.13 and 0.5.23 (python/sglang/srt/...; docs/engines.md 9.2). SGLang's
--tp-size T counts every rank; under DP attention (--dp-size D --enable-dp-attention) attention runs over
attn_tp = T // D ranks. kvplan's Deployment(tp, dp) is attn_tp = tp, T = tp x dp.

  * dense MLPs (the first layers of DeepSeek, GLM-4.5, ...): `DeepseekV2MLP(parallel_group="replicated" if
    is_dense_ffn_fully_dp() else "tp")` (0.5.23 `models/deepseek_v2.py` L2664-2676), `is_dense_ffn_fully_dp()`
    is `moe_dense_tp_size == 1` (`layers/layer_boundary/layout.py` L83-84): over all T ranks, or whole with
    --moe-dense-tp-size 1; the only values are None, 1 and T (`arg_groups/validation_hook.py` L207-211).
  * LM head: `ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)` (`models/deepseek_v2.py` L3290-3297): over
    T ranks, or over the attn_tp group with --enable-dp-lm-head, which needs DP attention
    (`arg_groups/overrides.py` L1421-1426).
  * embedding under DP attention: whole (0.5.3 `VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled())`);
    over the attn_tp group from 0.5.13 (`get_embedding_tp_kwargs`: `use_attn_tp_group=is_dp_attention_enabled()`,
    `layers/vocab_parallel_embedding.py` L166-185).
  * shared experts: a "tp" MLP over T ranks (`models/deepseek_v2.py` L863-897) unless fused into the routed experts
    (--disable-shared-experts-fusion off): then each rank's MoE holds `routed / ep + 1` experts of width
    `intermediate / moe_tp`, moe_tp = T / ep (`layers/moe/fused_moe_triton/layer.py` L396-432), so under expert
    parallelism every rank holds the whole shared expert. Fusion is SGLang's choice
    (`shared_experts_fusion_disable_reason`, L3325-3393; 0.5.13 `determine_num_fused_shared_experts`
    L2591-2650): DeepseekV3ForCausalLM with 256 routed experts and one shared, on NVIDIA capability >= 8.0 or
    AMD gfx942+; under expert parallelism only on AMD gfx942+ (MI300X, MI325X, MI355X) from 0.5.13, never in
    0.5.3; --enforce-shared-experts-fusion (from 0.5.13) skips the checks. With ep = 1 the fused expert is split
    over T exactly as the unfused one, so fusion moves per-rank bytes only under expert parallelism.
  * pipeline stages: --pp-size from 0.4.6.post2 (`server_args.py` L656, the models' `get_pp_indices` calls; wheels
    0.4.0, 0.4.3.post4, 0.4.5.post3, 0.4.6 and 0.4.6.post1 read: no such flag, `srt/distributed/utils.py`
    get_pp_indices defined and never called). A pp > 1 before it is refused (`check_pp`).
"""

from __future__ import annotations

from kvplan.engines.base import opt_bool, opt_int, parse_version
from kvplan.engines.versions import dotted, release_post
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.planning.layout import Placement

PP_FROM = ((0, 4, 6), 2)  # (release, post): 0.4.6.post2, the first with --pp-size (module docstring)

OPTS = ("moe_dense_tp_size", "enable_dp_lm_head", "disable_shared_experts_fusion", "enforce_shared_experts_fusion",
        "enable_mixed_chunk")  # the last: the scheduler's (kvplan.engines.scheduler.prefill_first), no memory read
# Model files that read --moe-dense-tp-size for their dense layers (0.5.23 `models/`: deepseek_v2.py, glm4_moe.py,
# bailing_moe.py, ernie4.py, mimo_v2.py, minimax_m3.py, ...), by the architecture names they serve.
DENSE_TP_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeForCausalLM", "BailingMoeForCausalLM",
                  "BailingMoeV2ForCausalLM", "Ernie4_5_MoeForCausalLM", "MiMoV2FlashForCausalLM")


def _fusable_gpu(gpu) -> bool:
    """SGLang's GPU test for the fusion: NVIDIA compute capability >= 8.0, AMD gfx942+ ((9, 4) as torch reports
    it on ROCm: MI300X, MI325X, MI355X). A profile without compute_capability: the assumed one (a plan warning)."""
    vendor, cap = vendor_of(gpu), capability_of(gpu)
    if cap is None:
        return False
    return cap >= (9, 4) if vendor == "AMD" else vendor == "NVIDIA" and cap >= (8, 0)


def _fusion_without_gpu(model, opts: dict, version: str) -> bool | None:
    """True or False where the model and the options decide the fusion; None where SGLang's GPU test does."""
    p = model.params
    if not p.shared_experts or not model.architecture.startswith("Deepseek"):
        return False
    if opt_bool(opts, "disable_shared_experts_fusion", False):
        return False
    if opt_bool(opts, "enforce_shared_experts_fusion", False):
        if parse_version(version) < (0, 5, 13):
            raise KvplanError(f"--enforce-shared-experts-fusion is not in SGLang {version} (read from 0.5.13)",
                              EXIT_USAGE)
        return True
    if model.architecture != "DeepseekV3ForCausalLM" or p.num_experts != 256:
        return False
    return None


def reads_capability(model, opts: dict, version: str) -> bool:
    """Whether this plan's fusion depends on the GPU's compute capability."""
    return _fusion_without_gpu(model, opts, version) is None


def shared_experts_fused(model, gpu, dep, opts: dict, version: str, ep: int) -> bool:
    """Whether SGLang fuses the shared expert into the routed experts for this deployment."""
    decided = _fusion_without_gpu(model, opts, version)
    if decided is not None:
        return decided
    if not _fusable_gpu(gpu):
        return False
    if ep > 1:
        return parse_version(version) >= (0, 5, 13) and vendor_of(gpu) == "AMD"
    return True


def dense_split(opts: dict, tp_size: int) -> int:
    """Over how many ranks SGLang splits the dense MLPs: none (whole on every rank) under moe_dense_tp_size 1, else
    its tp size (tp x dp under DP attention)."""
    return 1 if opt_int(opts, "moe_dense_tp_size", 0) == 1 else tp_size


def placement(model, gpu, dep, opts: dict, version: str, dpa: bool):
    """The kvplan.planning.layout.Placement of one SGLang rank (module docstring), or a one-line error for options
    SGLang refuses or that kvplan has not read for this model."""
    tp_size = dep.tp * dep.dp if dpa else dep.tp
    dense_tp = opt_int(opts, "moe_dense_tp_size", 0) or None
    if dense_tp is not None:
        if dense_tp not in (1, tp_size):
            raise KvplanError(f"moe_dense_tp_size={dense_tp}: SGLang only supports None, 1, or tp_size ({tp_size})",
                              EXIT_USAGE)
        if model.params.mlp and model.architecture not in DENSE_TP_ARCHS:
            raise KvplanError(f"moe_dense_tp_size: kvplan has not read whether SGLang's model for "
                              f"{model.architecture or model.name} honours it", EXIT_USAGE)
    dp_head = opt_bool(opts, "enable_dp_lm_head", False)
    if dp_head and not dpa:
        raise KvplanError(f"enable_dp_lm_head requires DP attention ({arg('dp')} above 1 on a MoE model)", EXIT_USAGE,
                          param="engine_opts", value={"enable_dp_lm_head": opts.get("enable_dp_lm_head")})
    fused = shared_experts_fused(model, gpu, dep, opts, version, dep.ep)
    if dpa:
        embedding = dep.tp if parse_version(version) >= (0, 5, 13) else 1
    else:
        embedding = dep.tp
    return Placement(
        attention=dep.tp,
        mlp=dense_split(opts, tp_size),
        experts=dep.tp * dep.dp,
        embedding=embedding,
        head=dep.tp if dp_head else tp_size,
        shared=max(1, tp_size // dep.ep) if fused else tp_size,
    )


def serve_flags(opts: dict) -> list[str]:
    """The launch_server flags for the options above that differ from SGLang's defaults."""
    args = []
    dense_tp = opt_int(opts, "moe_dense_tp_size", 0)
    if dense_tp:
        args += ["--moe-dense-tp-size", str(dense_tp)]
    for key, flag in (("enable_dp_lm_head", "--enable-dp-lm-head"),
                      ("disable_shared_experts_fusion", "--disable-shared-experts-fusion"),
                      ("enforce_shared_experts_fusion", "--enforce-shared-experts-fusion"),
                      ("enable_mixed_chunk", "--enable-mixed-chunk")):
        if opt_bool(opts, key, False):
            args.append(flag)
    return args


def check_pp(version: str, pp: int) -> None:
    """A one-line refusal of pipeline stages in a release without them (PP_FROM)."""
    if pp > 1 and release_post(version) < PP_FROM:
        raise KvplanError(f"{arg('pp')} {pp} with {arg('engine')} sglang {version}: SGLang has no pipeline "
                          f"parallelism before {dotted(*PP_FROM)} (its server arguments have no pp_size); give "
                          f"{arg('engine_version')} {dotted(*PP_FROM)} or later", EXIT_USAGE, param="pp", value=pp)
