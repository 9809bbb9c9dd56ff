"""vLLM's Marlin for dense GPTQ / AWQ / compressed-tensors WNA16 linears: a rank's shard zero-padded to a thread tile.

Why: Marlin's GEMM and repack need a rank's linear (N outputs, K inputs) to be (N % 64, K % 128) or (N % 128, K % 64).
From vLLM 0.24.0 MarlinLinearKernel no longer refuses a shard that fits neither (0.23.0 `model_executor/kernels/
linear/mixed_precision/marlin.py` can_implement L36-62, the strict check_marlin_supports_shape): it accepts it unless a
quantization group straddles the tensor-parallel cut (0.24.0 L70-83, 0.30.0 L58-70) and at weight prep zero-pads it
to the cheaper family, marlin_padded_nk (`quantization/utils/marlin_utils.py` 0.24.0-0.26.0 L220-242, 0.33.0
L222-244): (round_up(N, 64), round_up(K, lcm(128, g))) or (round_up(N, 128), round_up(K, lcm(64, g))), the smaller
product, g the group (1 at -1). The padded qweight, scales and zero points replace the checkpoint's (marlin.py 0.24.0
L108-215, 0.33.0 L90-178: marlin_pad_qweight, marlin_pad_scales over K / g scale rows, marlin_pad_dim on the bias).
GPTQ (AutoGPTQConfig's linear method), AWQ (AutoAWQConfig, which asks check_marlin_supports_layer with
allow_tile_padding=True, `auto_awq.py` 0.24.0 L310-327) and compressed-tensors' WNA16 scheme all pick their kernel
with choose_mp_linear_kernel (`kernels/linear/__init__.py`, 0.24.0 L359-369 and L649-713).

Which kernel takes a misaligned shard: the CUDA list is CutlassW4A8 (8-bit activations only), Machete (9.0; it needs
K % 64 and N % 128, a shape Marlin does not pad), AllSpark (0.24.0-0.30.0, 8.x, 8-bit GPTQ at group -1 without zero
points, K % 16 and N % 16: `allspark_utils.py` 0.26.0 L15-52, so no padding there), then Marlin from compute
capability 7.5 (marlin.py get_min_capability). From 0.32.0 Humming goes ahead of Marlin on compute capability 9.0
(`kernels/linear/__init__.py` 0.32.0 L411 prioritize_humming; its can_implement takes any shape, `mixed_precision/
humming.py` 0.32.0 L29-37), whose layout kvplan did not read: said, not counted. GPTQ act-order (g_idx) keeps the
strict check through 0.29.0 (marlin.py 0.24.0 L61-68) and is refused from 0.30.0 (kvplan.engines.vllm.gptq_order).

Counted: a rank's qkv (N = (heads / tp + 2 kv heads a rank) x head_dim, K = hidden), o (N = hidden, K = heads x
head_dim / tp), gate_up (N = 2 I / tp, or I / tp ungated) and down (N = hidden, K = I / tp; the shapes read by
kvplan.engines.marlin_shapes) in every plain-attention layer of the largest pipeline stage, a MoE model's dense MLPs
and shared experts included, where the parameter counts give those shapes exactly (a role that does not is left out
and said). A GPTQ checkpoint here is `sym: true` (Marlin's uint4b8 / uint8b128: no zero points; `sym: false` is
refused from 0.22.0, kvplan.engines.vllm.gptq_order); AWQ and asymmetric compressed-tensors carry zero points (b / 8 B
a padded entry). A bias, where a linear has one, is padded too (2 B a
padded column) and not counted. 4-bit compressed-tensors only: its 8-bit configs may quantize activations (W8A8, not
Marlin), which kvplan's spec does not tell apart.
"""

from __future__ import annotations

from math import lcm

from kvplan.core.intmath import round_up
from kvplan.engines.marlin_shapes import marlin_group, marlin_groups, rank_layer_shards
from kvplan.engines.vllm import gptq_order
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.planning.deploy import largest_stage
from kvplan.planning.plan_warnings import PlanWarning

PADS_FROM = (0, 24, 0)  # MarlinLinearKernel.can_implement accepts a misaligned shard (0.23.0: strict)
METHODS = ("gptq", "awq", "compressed-tensors")
MARLIN_CC = (7, 5)
HUMMING_FROM, HUMMING_CC = (0, 32, 0), (9, 0)
ALLSPARK_UNTIL, ALLSPARK_CC = (0, 31, 0), ((8, 0), (9, 0))  # AllSpark ahead of Marlin through 0.30.0, on 8.x


def padded_nk(n: int, k: int, group: int) -> tuple[int, int]:
    """marlin_padded_nk restated: the cheaper of the two thread-tile families, K kept a whole number of groups."""
    g = group if group > 0 else 1
    candidates = ((round_up(n, 64), round_up(k, lcm(128, g))), (round_up(n, 128), round_up(k, lcm(64, g))))
    return min(candidates, key=lambda nk: (nk[0] * nk[1], nk[0] + nk[1]))


def _applies(model, v: tuple) -> bool:
    """Whether vLLM `v` runs this checkpoint's dense linears through choose_mp_linear_kernel with padding allowed."""
    q = model.quantization
    bits_ok = q.method == "int4" or (q.method == "int8" and q.quant_method == "gptq")
    return (v >= PADS_FROM and q.quant_method in METHODS and bits_ok and not q.experts_only and marlin_groups(q)
            and not (q.act_order and v < gptq_order.FROM))  # act-order: strict through 0.29, then refused


def linear_bytes(model, n: int, k: int, full_k: int, cap, v: tuple) -> int:
    """Bytes Marlin's padding adds to one rank's linear of N outputs and K inputs (of `full_k`); 0 where it fits a
    tile, another kernel takes it (AllSpark), or a group straddles the cut (not Marlin: the layer falls back)."""
    q = model.quantization
    bits, group = (4 if q.method == "int4" else 8), marlin_group(q)
    if group > 0 and group < full_k and k % group:
        return 0
    if (bits == 8 and group == -1 and v < ALLSPARK_UNTIL and ALLSPARK_CC[0] <= cap < ALLSPARK_CC[1]
            and k % 16 == 0 and n % 16 == 0):
        return 0
    pn, pk = padded_nk(n, k, group)
    if (pn, pk) == (n, k):
        return 0
    rows = (lambda x: x // group) if group > 0 else (lambda x: 1)  # AWQ at -1 under tp: refused, awq_bits.check_tp
    extra_groups = rows(pk) * pn - rows(k) * n
    zeros = extra_groups * bits // 8 if _zero_points(model) else 0
    return (pn * pk - n * k) * bits // 8 + 2 * extra_groups + zeros


def _zero_points(model) -> bool:
    """AWQ: zero points; compressed-tensors: unless symmetric; GPTQ: none (sym: true, module docstring)."""
    q = model.quantization
    return q.quant_method == "awq" or (q.quant_method == "compressed-tensors" and not q.symmetric)


def _priced(model, dep, v: tuple, gpu, humming_first: bool = True):
    """(bytes a rank of the largest stage gains, roles left out) where Marlin pads on `gpu`; None where it does not
    run these linears (the release, method, GPU) or (unless not `humming_first`) Humming goes first."""
    cap = nvidia_capability(gpu)
    if not _applies(model, v) or cap is None or cap < MARLIN_CC or (humming_first and humming_ahead(v, cap)):
        return None
    shards = rank_layer_shards(model, dep.tp)
    if shards is None:
        return None
    layers, _, skipped = shards  # a layer's padding: its attention projections (where exact) and its dense/shared MLP
    per_layer = [sum(linear_bytes(model, x.n, x.k, x.full_k, cap, v) for x in layer) for layer in layers]
    return largest_stage(per_layer, dep), skipped


def humming_ahead(v: tuple, cap) -> bool:
    """Whether vLLM `v` tries Humming ahead of Marlin on compute capability `cap` (dense linears here, MoE experts in
    kvplan.engines.vllm.marlin_moe_pad)."""
    return v >= HUMMING_FROM and cap == HUMMING_CC


def padded_bytes(model, dep, v: tuple, gpu) -> int:
    """Bytes per rank Marlin's dense padding adds (module docstring), booked with the weights as loaded."""
    got = _priced(model, dep, v, gpu)
    return got[0] if got else 0


def note(model, dep, st) -> tuple:
    """The padding said where it is counted (its bytes, the roles left out), or where Humming may take the linears on
    9.0 and it is not."""
    cap = nvidia_capability(st.gpu)
    if not _applies(model, st.v) or cap is None or cap < MARLIN_CC:
        return ()
    if humming_ahead(st.v, cap):
        would = _priced(model, dep, st.v, st.gpu, humming_first=False)
        if not would or not would[0]:
            return ()
        return (PlanWarning(f"vLLM {st.version} tries Humming ahead of Marlin for GPTQ / AWQ / WNA16 linears on "
                            "compute capability 9.0 (its layout kvplan did not read); Marlin would zero-pad the "
                            "shards that fit neither tile (marlin_padded_nk) by {} per GPU: not counted",
                            (would[0],), ("MiB",)),)
    got = _priced(model, dep, st.v, st.gpu)
    if got is None:
        return ()
    b, skipped = got
    left = f"; the {', '.join(skipped)} projections' shapes do not follow exactly from the counts: not checked" \
        if skipped else ""
    if not b:
        text = (f"vLLM {st.version} zero-pads the GPTQ / AWQ / WNA16 shards that fit neither Marlin tile "
                f"(marlin_padded_nk): none among the projections read{left}")
        return (PlanWarning.literal(text),) if left else ()
    return (PlanWarning("vLLM " + st.version + " zero-pads the GPTQ / AWQ / WNA16 linears whose per-rank shard fits "
                        "neither Marlin tile (marlin_padded_nk): {} per GPU more weights, counted" + left,
                        (b,), ("MiB",)),)
