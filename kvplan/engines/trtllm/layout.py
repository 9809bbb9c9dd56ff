"""What each TensorRT-LLM rank holds under attention DP (`enable_attention_dp: true`, the PyTorch backend).

Read in NVIDIA/TensorRT-LLM (code index versions; docs/engines.md section 3):
  * the layout: TensorRT-LLM's `tensor_parallel_size` N counts every rank; with attention DP each of them is its own
    attention rank, `Mapping.dp_size` = tp_size (tensorrt_llm/mapping.py @ b35ac1b64368513d215c57d2ed01d62d910df8da,
    `MappingBase.dp_size`), so there is no attention tensor parallelism inside a DP rank. kvplan's Deployment(tp 1,
    dp N) is that layout; tp above 1 with dp is refused.
  * routed experts: split over the N ranks as moe_ep x moe_tp, whose product must be tp_size (`MappingBase.__init__`:
    "moe_tp_size * moe_ep_size * moe_cluster_size must equal to moe_world_size"); ep unset: moe_tp = N, ep 1
    (every expert split by width), ep N: N / ep whole experts a rank; 1/N of the experts' bytes a rank either way
    (kvplan's ep takes 1 or tp x dp, kvplan.planning.deploy.layout_problem; TensorRT-LLM's hybrid moe_tp x moe_ep,
    1 < ep < N, is not offered).
  * attention: replicated ("Data Parallelism (DP): All GEMM weights are replicated on every GPU. The KV-cache is
    partitioned", docs/source/features/parallel-strategy.md @ 65b31db1b401d3752b8ebe7c29093cbfb6af04b7, "Attention
    Module"); the attention module builds its projections at tp 1 under attention DP (`modules/attention.py`,
    `if mapping.enable_attention_dp: dp_size = tp_size; tp_size = 1`).
  * dense MLP layers and shared experts: whole ("If using attention DP, the MLP also uses DP instead of TP",
    `_torch/models/modeling_deepseekv3.py` @ a43cf9e363d5657061b5ce0e12f3d993a08d8158,
    `DeepseekV3DecoderLayer._compute_mlp_tp_size`; "the shared experts also use DP instead of TP",
    `Deepseekv3MoE._compute_shared_expert_tp_size`, shared_tp_size 1 when use_dp).
  * embedding and LM head: whole ("Attention DP doesn't work with embedding parallelization": tensor_parallel_mode
    None under attention DP, `_torch/modules/embedding.py` @ fbbc05dd1445fb8545148cfcb51b8e2bdcf28cfa, `LMHead`, the
    base of `Embedding`); `enable_lm_head_tp_in_adp` (default False; it "requires enable_attention_dp", mapping.py
    above) is not modelled.
  * KV cache: whole KV heads a rank (`KVCacheManager.__init__`: `tp_size = 1 if mapping.enable_attention_dp`, heads
    per layer ceil(H / tp_size); `get_cache_size_per_token` the same, `_torch/pyexecutor/resource_manager.py` @
    d2a5560abdadfbdf496ce057696103e0509a71ed), each rank its own pool from its own memory profile, and its own
    max_batch_size and max_num_tokens (NVIDIA's MLPerf harness: "max-bs applies per attention-rank",
    kvplan.speed.corpus.PER_RANK_LIMIT): the deployment holds dp x a rank's requests.
  * dense models: attention DP is the MoE layout ("FFN Module / Dense Models: Tensor Parallelism is supported for the
    FFN layers of dense models", parallel-strategy.md above); a dense model's dp ranks are independent replicas,
    which kvplan plans as one replica and `cheapest --replicas`.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.layout import Placement

# The group whose ranks a node must hold under attention DP: tensor_parallel_size counts every rank (the layout above),
# and the MoE collectives run over all of them (Engine.tp_group; docs/engines.md, "A tensor-parallel group across
# nodes").
NODE_GROUP = "TensorRT-LLM's tp group under attention DP (its tensor_parallel_size: every rank)"


def check_attention_dp(model, dep) -> None:
    """A one-line refusal for a dp layout TensorRT-LLM's attention DP does not run (the module's docstring)."""
    if dep.dp == 1:
        return
    if not model.params.num_experts:
        raise KvplanError(f"{arg('dp')} with {arg('engine')} trtllm on a dense model: TensorRT-LLM's attention DP is "
                          "its MoE layout (dense FFNs run tensor parallel); dp dense ranks are independent replicas: "
                          f"plan one with {arg('tp')} and use cheapest {arg('replicas')}", EXIT_USAGE, param="dp",
                          value=dep.dp)
    if dep.tp > 1:
        raise KvplanError(f"{arg('tp')} {dep.tp} with {arg('dp')} {dep.dp} and {arg('engine')} trtllm: under "
                          "enable_attention_dp every rank of tensor_parallel_size is its own attention rank "
                          f"(Mapping.dp_size = tp_size); plan {arg('tp')} 1 {arg('dp')} {dep.tp * dep.dp}",
                          EXIT_USAGE, param="tp", value=dep.tp)


def placement(dep) -> Placement:
    """A rank's Placement under attention DP: attention, dense MLPs, shared experts, embedding and LM head whole,
    the routed experts over every rank (tensor_parallel_size = dp)."""
    return Placement(attention=1, mlp=1, experts=dep.tp * dep.dp, embedding=1, head=1, shared=1)


def parallel_options(dep) -> dict:
    """The LLM API options (trtllm-serve / trtllm-bench `--extra_llm_api_options` YAML) that lay `dep` out."""
    opts = {"tensor_parallel_size": dep.tp * dep.dp}
    if dep.pp > 1:
        opts["pipeline_parallel_size"] = dep.pp
    if dep.dp > 1:
        opts["enable_attention_dp"] = True
    if dep.ep > 1:
        opts["moe_expert_parallel_size"] = dep.ep
    return opts
