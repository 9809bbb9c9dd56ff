"""vLLM's Marlin MoE for GPTQ / AWQ / WNA16 experts: a rank's expert width padded to lcm(64, group) when repacked.

Why: Marlin's MoE kernel needs the intermediate size a rank holds, N, to be a multiple of 64 (gate-up 2N % 128, down
N % 64). From vLLM 0.25.0 (AWQ and GPTQ) the experts' method no longer falls back to MoeWNA16 for such a shard: it
asks check_moe_marlin_supports_layer with allow_tile_padding=True (auto_awq.py 0.25.0 L321-344, 0.33.0 L323-346;
auto_gptq.py 0.25.0-0.29.0 L246-248 `allow_tile_padding=not self.desc_act`, 0.30.0 L244, L479, 0.33.0 L242, L478
True; GPTQ with act-order keeps the strict test, N % max(64, group) == 0, through 0.29.0 and is refused from 0.30.0,
kvplan.engines.vllm.gptq_order; the padded prep, `oracle/int_wna16.py` 0.25.0 L514 _process_weights_marlin, reached
for AutoGPTQConfig at L1110-1130), which takes any hidden % 128 == 0 with a group of -1, 32, 64 or 128 that divides N
(`quantization/utils/marlin_utils.py` 0.25.0 L355-387, 0.33.0 L359-387); and the weight prep zero-pads N to
P = round_up(N, lcm(64, group)) (marlin_moe_padded_intermediate, 0.25.0-0.30.0 L333-345, 0.33.0 L335-353), the
padded tensors replacing the checkpoint's (`fused_moe/oracle/int_wna16.py` 0.33.0 _process_weights_marlin
L649-667 and _process_awq_weights_marlin L799-817; 0.25.0 L514, L713): w13's qweight, scales and zero points gain
2(P - N) columns a shard, w2's qweight P - N rows, w2's scales and zero points (P - N) / group rows (none at group
-1), a w13 bias 2(P - N). So a rank holds, a MoE layer, E experts x (b / 8 x H x 3(P - N) + 2 B x 2(P - N) x
groups(H) + b / 8 x 2(P - N) x groups(H) + (2 B + b / 8) x H x (P - N) / group) more, b the bits, groups(H) H / group
(1 at -1). A group of 64 or 128 that divides N leaves nothing to pad (N is then a multiple of 64): the padding meets
group 32 or -1. GPTQ's zero points are padded from 0.27.0 only: 0.25.0-0.26.x's GPTQ experts method does not hand
w13_qzeros / w2_qzeros to convert_to_wna16_moe_kernel_format (auto_gptq.py 0.25.0 and 0.26.0 L661-674), so the prep
pads none and the checkpoint's stay as loaded; 0.27.0 passes them (L717-718, int32, padded at `int_wna16.py` 0.27.0
L621-626), sym or not (kept either way).

Compressed-tensors' 4-bit WNA16 experts (pack-quantized) pad the same way from 0.30.0
(`compressed_tensors_moe/compressed_tensors_moe_wna16.py` 0.30.0 L104-126, 0.33.0 L102-124: allow_tile_padding=True,
the prep through _process_weights_marlin); in 0.25.0-0.29.x only without activation ordering
(`compressed_tensors_moe.py` 0.25.0 L98-107, `not is_actorder`; 0.29.0 wna16.py L109-129), a key kvplan does not
read: said, not counted. Its 8-bit configs may quantize activations (W8A8, another method) and are left alone.

Which kernel: the WNA16 MoE oracle tries FLASHINFER_TRTLLM first, which takes neither GPTQ nor AWQ (GPTQ's weight key
is kInt4StaticGroupScale at every group, auto_gptq.py 0.25.0 L477-482; AWQ's kInt4Static, not kInt4Static32, 0.25.0
`experts/trtllm_mxint4_moe.py` L63-67; from 0.30.0 both pass may_have_bias=True, refused: int_wna16.py 0.30.0
L146-147). A symmetric compressed-tensors checkpoint at 4 bits and group 32 has kInt4Static32
(compressed_tensors_moe_wna16.py 0.30.0 L83-101), which FlashInfer's TRT-LLM MxInt4 experts take on the compute
capability 10.x family (trtllm_mxint4_moe.py 0.30.0 L46-56 is_device_capability_family(100), L63-67) where its
routing method, activation and FlashInfer build allow (L70-111, not read here): there nothing is counted and a note
says why. Otherwise Marlin on CUDA from compute capability 7.5 (`experts/marlin_moe.py`
_supports_current_device, 0.25.0 L601-603, 0.33.0 L592-594). From 0.32.0 Humming goes ahead of Marlin on
compute capability 9.0 (`quantization/utils/humming/priority.py` 0.32.0 L11, 0.33.0 L11; humming-kernels a required
dependency of the wheel), whose support for these weight keys (its gemm-type preference) and layout kvplan did not
read: not counted there, said in a plan note. 0.25.0-0.26.0's
Marlin refuses a model that applies the router weight on its input (Llama 4; marlin_utils.py 0.25.0 L374-387), which
then runs MoeWNA16: none. Under expert parallelism a rank keeps cdiv(E, ep) whole experts (N the whole width).
The loader's transient copies (the transposes before the repack) are not counted; what is counted is the padded
tensors the rank keeps.
"""

from __future__ import annotations

from math import lcm

from kvplan.core.intmath import cdiv, round_up
from kvplan.engines.fp8_blocks import exact_expert_width
from kvplan.engines.marlin_shapes import marlin_group, marlin_groups
from kvplan.engines.vllm import gptq_order
from kvplan.engines.vllm.marlin_dense_pad import humming_ahead  # Humming ahead of Marlin on 9.0 from 0.32.0
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan_warnings import PlanWarning
from kvplan.readers.mlp_layout import most_moe_layers

PADS_FROM = {"awq": (0, 25, 0), "gptq": (0, 25, 0), "compressed-tensors": (0, 30, 0)}  # allow_tile_padding
GPTQ_ZEROS_FROM = (0, 27, 0)  # GPTQ's experts pass their qzeros to the Marlin prep (padded) from here
CT_ACTORDER_FROM = (0, 25, 0)  # compressed-tensors pads from here unless actorder group / dynamic (unread) until 0.30.0
TRTLLM_GROUP, TRTLLM_MAJOR = 32, 10  # kInt4Static32 on the compute capability 10.x family
TILE = 64  # N % 64 == 0: Marlin MoE's thread tile
MARLIN_CC = (7, 5)  # MarlinExperts._supports_current_device
ROUTER_ON_INPUT_UNTIL = (0, 27, 0)  # 0.25.0-0.26.0: Marlin refuses apply_router_weight_on_input
ROUTER_ON_INPUT = ("Llama4ForConditionalGeneration", "Llama4ForCausalLM")


def _shard(model, dep, v: tuple) -> tuple[int, int, int, int] | None:
    """(N, P, experts a rank holds, group) where vLLM `v` takes this GPTQ / AWQ MoE layer on Marlin with a padded
    width (P > N), the GPU aside; None otherwise."""
    q, p = model.quantization, model.params
    since = PADS_FROM.get(q.quant_method)
    bits_ok = q.method == "int4" or (q.method == "int8" and q.quant_method != "compressed-tensors")
    if since is None or v < since or not bits_ok or not p.num_experts or q.experts_method:
        return None
    if q.act_order and v < gptq_order.FROM:  # GPTQ act-order: the strict test, then refused (gptq_order)
        return None
    if q.kept_of("experts") >= p.experts or (v < ROUTER_ON_INPUT_UNTIL and model.architecture in ROUTER_ON_INPUT):
        return None
    group = marlin_group(q)
    width = exact_expert_width(model)
    if not marlin_groups(q) or not width or model.hidden_size % 128:
        return None
    split = dep.tp * dep.dp
    n, experts = (width, cdiv(p.num_experts, dep.ep)) if dep.ep > 1 else (width // split, p.num_experts)
    if dep.ep == 1 and width % split or group > 0 and n % group:
        return None  # an uneven split, or a group across the shard: MoeWNA16 (or refused), no padding
    padded = round_up(n, lcm(TILE, max(group, 1)))
    return (n, padded, experts, group) if padded > n else None


def layer_bytes(model, n: int, padded: int, experts: int, group: int, zeros_padded: bool = True) -> int:
    """Bytes one MoE layer's padding adds on a rank (module docstring): qweights at b / 8 B a weight, fp16 scales,
    packed zero points (b / 8 B each) where `zeros_padded` (GPTQ's from 0.27.0) and stored, a w13 bias
    where the checkpoint has expert biases."""
    bits, hidden, d = (4 if model.quantization.method == "int4" else 8), model.hidden_size, padded - n
    rows13 = hidden // group if group > 0 else 1  # w13's scale / zero rows: groups along its input
    rows2 = d // group if group > 0 else 0  # w2's added scale / zero rows (none at group -1)
    qweight = 3 * hidden * d * bits // 8  # w13: 2d columns of H inputs; w2: d rows of H outputs
    scales = 2 * (rows13 * 2 * d + rows2 * hidden)
    zeros = (rows13 * 2 * d + rows2 * hidden) * bits // 8 if zeros_padded and not model.quantization.symmetric else 0
    bias = 2 * 2 * d if model.params.expert_biases else 0
    return experts * (qweight + scales + zeros + bias)


def padded_bytes(model, dep, v: tuple, gpu) -> int:
    """Bytes per rank the padding adds on the pipeline stage holding the most MoE layers (ffn_kinds' layout:
    DeepSeek's dense layers first), where Marlin runs the experts: an NVIDIA GPU of 7.5+, not Humming's 9.0 from
    0.32.0."""
    got, cap = _shard(model, dep, v), nvidia_capability(gpu)
    if got is None or cap is None or cap < MARLIN_CC or humming_ahead(v, cap) or _trtllm(model, cap):
        return 0
    zeros = model.quantization.quant_method != "gptq" or v >= GPTQ_ZEROS_FROM  # module docstring
    return layer_bytes(model, *got, zeros) * most_moe_layers(model, stage_ranges(model, dep))


def _trtllm(model, cap: tuple) -> bool:
    """Whether FlashInfer's TRT-LLM MxInt4 experts may go ahead of Marlin: a symmetric compressed-tensors checkpoint
    at 4 bits and group 32 (kInt4Static32) on the 10.x family (module docstring)."""
    q = model.quantization
    return (q.quant_method == "compressed-tensors" and q.symmetric and q.method == "int4" and not q.per_row
            and q.group_size == TRTLLM_GROUP and cap[0] == TRTLLM_MAJOR)


def _ct_actorder_note(model, dep, st) -> tuple:
    """Compressed-tensors experts at 0.25.0-0.29.x: padded unless the checkpoint orders activations (unread)."""
    q = model.quantization
    if q.quant_method != "compressed-tensors" or not CT_ACTORDER_FROM <= st.v < PADS_FROM["compressed-tensors"]:
        return ()
    got = _shard(model, dep, PADS_FROM["compressed-tensors"])
    if got is None:
        return ()
    return (PlanWarning.literal(f"vLLM {st.version} pads compressed-tensors WNA16 experts' per-rank width {got[0]} -> "
                                f"{got[1]} for Marlin unless the checkpoint's actorder is group or dynamic, which "
                                "kvplan does not read: not counted"),)


def note(model, dep, st) -> tuple:
    """The padding said: counted with its bytes per GPU, or (Humming on 9.0) why not."""
    got, cap = _shard(model, dep, st.v), nvidia_capability(st.gpu)
    if cap is None or cap < MARLIN_CC:
        return ()
    if got is None:
        return _ct_actorder_note(model, dep, st)
    n, padded, _, group = got
    what = f"GPTQ / AWQ / WNA16 experts' per-rank width {n} -> {padded} (lcm(64, group {group}))"
    if _trtllm(model, cap):
        return (PlanWarning.literal(f"vLLM {st.version} tries FlashInfer's TRT-LLM MxInt4 experts ahead of Marlin for "
                                    "a symmetric group-32 WNA16 checkpoint on compute capability 10.x (routing, "
                                    "activation and FlashInfer build not read; its layout not read); Marlin would "
                                    f"pad the {what}: not counted"),)
    if humming_ahead(st.v, cap):
        return (PlanWarning.literal(f"vLLM {st.version} tries Humming ahead of Marlin on compute capability 9.0 "
                                    "(whether it takes these experts, and its layout, kvplan did not read); Marlin "
                                    f"would pad the {what}: not counted"),)
    return (PlanWarning(f"vLLM {st.version} pads the {what} as Marlin MoE repacks them "
                        "(marlin_moe_padded_intermediate): {} per GPU more weights, counted",
                        (padded_bytes(model, dep, st.v, st.gpu),), ("MiB",)),)
