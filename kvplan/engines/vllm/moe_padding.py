"""vLLM 0.33.0's unquantized MoE on FlashInfer TRT-LLM (compute capability 10.x): each rank's expert width rounded up.

Read in the 0.33.0 wheel (vllm/model_executor/layers/fused_moe/): on CUDA the 'auto' MoE backend for unquantized
(16-bit) experts tries FLASHINFER_TRTLLM first (oracle/unquantized.py L69-74), moved behind Triton on Hopper (L78-80)
and for gpt-oss's swigluoai (L92-94); its kernels run on compute capability 10.x only
(experts/trtllm_bf16_moe.py _supports_current_device L95-102, is_device_capability_family(100)) and up to 2,048
experts (L63). With that backend the layer allocates each rank's expert width rounded up to 128
(unquantized_round_up_hidden_size_and_intermediate_size, oracle/unquantized.py L385-397, called from
UnquantizedFusedMoEMethod.maybe_roundup_sizes, unquantized_fused_moe_method.py L131-146), so w13 [E, 2 x I', H] and
w2 [E, H, I'] hold I' - I/tp zero columns more a rank. Whether the backend is picked also depends on the model's
routing method (plain tensor parallelism uses TrtLlmBf16ExpertsMonolithic, which takes DeepSeekV3, Llama4,
Renormalize, RenormalizeNaive, SigmoidRenorm, MiniMax2 and Sigmoid routing, L244-270), which kvplan does not read: so
the bytes are said in a plan note, not counted. Other releases pad too (0.25.0: non-gated MoE only, 0.30.0: every
MoE, after loading, oracle/unquantized.py L282-300 / L347-355), with selection rules not read here: no note there.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.engines.fp8_blocks import exact_expert_width
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan_warnings import PlanWarning
from kvplan.readers.mlp_layout import gated_mlp, most_moe_layers

READ = (0, 33, 0)  # the release whose allocation-time rounding is read
ALIGN = 128  # round_up(intermediate_size, 128)
MAX_EXPERTS = 2048
SWIGLUOAI = ("GptOssForCausalLM",)  # swigluoai activation: FlashInfer moved behind Triton (L92-94)


def _unquantized_experts(model) -> bool:
    """Routed experts stored in 16 bits (no quantized experts format)."""
    q = model.quantization
    return model.params.experts > 0 and q.method in PLAIN_BYTES and not q.experts_method


def padded_bytes(model, dep, st) -> tuple[int, int, int]:
    """(I/tp, I', bytes per rank the padding adds on the largest pipeline stage) where vLLM 0.33.0 may pad, else
    (0, 0, 0): the MoE layers of the stage holding the most (readers.mlp_layout.most_moe_layers), bf16 / fp16 at 2 B."""
    v, gpu = getattr(st, "v", ()), getattr(st, "gpu", None)
    cap = nvidia_capability(gpu)
    p = model.params
    if v != READ or cap is None or cap[0] != 10 or not _unquantized_experts(model) or p.num_experts > MAX_EXPERTS:
        return 0, 0, 0
    if dep.ep > 1 or dep.dp > 1 or model.architecture in SWIGLUOAI:
        return 0, 0, 0
    width = exact_expert_width(model)
    if not width or width % dep.tp:
        return 0, 0, 0
    shard = width // dep.tp
    padded = round_up(shard, ALIGN)
    if padded == shard:
        return 0, 0, 0
    mats = 3 if gated_mlp(model) else 2  # w1, w3 (w13) and w2; w1 and w2 where the MLP is not gated
    per_layer = p.num_experts * mats * model.hidden_size * (padded - shard) * PLAIN_BYTES.get(model.dtype, 2)
    return shard, padded, per_layer * most_moe_layers(model, stage_ranges(model, dep))


def note(model, dep, st) -> tuple:
    """The padding said, with its bytes per GPU, where padded_bytes finds any."""
    shard, padded, extra = padded_bytes(model, dep, st)
    if not extra:
        return ()
    return (PlanWarning(f"vLLM 0.33.0 on compute capability 10.x runs unquantized MoE experts on FlashInfer TRT-LLM "
                        "where the model's routing method is one its kernel takes (the 'auto' backend's first "
                        f"choice), and rounds each rank's expert width up to {ALIGN} as it allocates them ({shard} -> "
                        f"{padded}): up to {{}} per GPU more weights, not counted (kvplan does not read the routing "
                        "method)", (extra,), ("MiB",)),)
