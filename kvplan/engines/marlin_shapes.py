"""The shapes of a rank's dense linears that a Marlin rule is tested on: (N outputs, K inputs) of qkv, o, gate_up, down.

Why here: vLLM pads a shard that fits no Marlin thread tile (kvplan.engines.vllm.marlin_dense_pad) and SGLang's
GPTQ Marlin repack refuses it (kvplan.engines.sglang.gptq_marlin); both test the same per-rank shapes, read once.

A rank's qkv is N = (heads / tp + 2 x its KV heads) x head_dim, K = hidden; o is N = hidden, K = heads x head_dim /
tp; gate_up N = 2 I / tp (I / tp ungated), K = hidden; down N = hidden, K = I / tp; for every plain-attention layer,
a MoE model's dense MLPs and shared experts included, where the parameter counts give those shapes exactly (a role that
does not is left out and named, for the caller to say). And the group sizes Marlin takes (`marlin_group`,
`marlin_groups`), which every Marlin rule of both engines asks first.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.model.layers import Kind, kv_heads_per_rank
from kvplan.readers.mlp_layout import ffn_kinds, gated_mlp, mlp_width

_PLAIN = (Kind.FULL, Kind.SLIDING, Kind.CHUNKED)
# MARLIN_SUPPORTED_GROUP_SIZES, -1 a group a whole row: vLLM's dense Marlin (0.22.0 marlin_utils.py L31), its MoE
# Marlin (check_moe_marlin_supports_config's supports_group_size) and SGLang's GPTQ Marlin list the same sizes
MARLIN_GROUPS = (-1, 32, 64, 128)


def marlin_group(q) -> int:
    """The checkpoint's group size as Marlin reads it: -1 where one group is a whole row (`group_size: -1`,
    Quantization.per_row), else `group_size`."""
    return -1 if q.per_row else q.group_size


def marlin_groups(q) -> bool:
    """Whether Marlin takes the checkpoint's groups (MARLIN_GROUPS)."""
    return marlin_group(q) in MARLIN_GROUPS


class Shard(NamedTuple):
    """One rank's linear: its name, N outputs, K inputs, and the whole input it is cut from (`full_k`)."""

    name: str
    n: int
    k: int
    full_k: int


def mlp_widths(model, tp: int) -> tuple[dict, list[str]]:
    """{'dense' | 'moe': a rank's (gate_up N, down K)} for the MLPs the counts give exactly, and the roles left out."""
    p, skipped, out = model.params, [], {}
    kinds = ffn_kinds(model, model.num_layers)
    roles = (("dense", p.mlp, kinds.count("dense"), "mlp", False),
             ("moe", p.shared_experts, p.num_moe_layers if p.num_experts else 0, "shared_experts", True))
    for kind, params, layers, role, shared in roles:
        if not params or not layers or model.quantization.kept_of(role):
            if params and layers and model.quantization.kept_of(role) < params:
                skipped.append(role.replace("_", " "))
            continue
        width = mlp_width(model, params, layers, shared=shared)
        if not width or width % tp or (kind == "dense" and not p.num_experts and width != model.intermediate_size):
            skipped.append(role.replace("_", " "))
            continue
        out[kind] = ((2 if gated_mlp(model) else 1) * width // tp, width // tp)
    return out, skipped


def attention_exact(model) -> bool:
    """Whether the attention count is the plain q / k / v / o shapes of the model's layers (all plain attention)."""
    layers = [la for la in model.layers if la.kind in _PLAIN and hasattr(la, "head_dim")]  # not Falcon-H1's hybrid
    if len(layers) != len(model.layers) or not layers:
        return False
    h, heads = model.hidden_size, model.num_attention_heads
    total = sum(h * (heads * la.head_dim + 2 * la.num_kv_heads * la.head_dim) + heads * la.head_dim * h
                for la in layers)
    return total == model.params.attention and not model.quantization.kept_of("attention")


def rank_shapes(model, tp: int):
    """(a rank's MLP widths, whether the attention shapes are exact, the roles left out) at `tp`, or None where the
    attention heads do not divide by tp (no rank shape to read)."""
    if model.num_attention_heads % tp:
        return None
    mlps, skipped = mlp_widths(model, tp)
    attention = attention_exact(model)
    if not attention and model.params.attention and model.quantization.kept_of("attention") < model.params.attention:
        skipped.insert(0, "attention")
    return mlps, attention, skipped


def layer_shards(model, layer, ffn: str, tp: int, mlps: dict, attention: bool) -> list[Shard]:
    """One layer's shards on a rank: its attention projections (where `attention`, exact) and its MLP (`ffn`, dense
    or moe: the shared experts) where `mlps` gives it."""
    h, out = model.hidden_size, []
    if attention:
        q_width = model.num_attention_heads * layer.head_dim
        qkv_n = (model.num_attention_heads // tp + 2 * kv_heads_per_rank(layer.num_kv_heads, tp)) * layer.head_dim
        out += [Shard("qkv_proj", qkv_n, h, h), Shard("o_proj", h, q_width // tp, q_width)]
    if ffn in mlps:
        up_n, down_k = mlps[ffn]
        out += [Shard("gate_up_proj" if gated_mlp(model) else "up_proj", up_n, h, h),
                Shard("down_proj", h, down_k, down_k * tp)]
    return out


def rank_layer_shards(model, tp: int):
    """(per layer, its shards on a rank; the layers' ffn kinds; the roles left out), or None where rank_shapes is:
    what a Marlin or W4A8 rule prices layer by layer (kvplan.engines.vllm.marlin_dense_pad, marlin_fp8, w4a8)."""
    shapes = rank_shapes(model, tp)
    if shapes is None:
        return None
    mlps, attention, skipped = shapes
    kinds = ffn_kinds(model, model.num_layers)
    return [layer_shards(model, la, kinds[i], tp, mlps, attention) for i, la in enumerate(model.layers)], kinds, skipped
