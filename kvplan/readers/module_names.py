"""A model's linear modules by the names its checkpoint (and vLLM) gives them, with each attention projection's size.

What an exclusion list's entries are matched against (kvplan.readers.unquantized: a `re:` entry tested with
`re.match` against each module's name, a projection kept by its exact parameters) and what ModelOpt's lists are
read against for SGLang (kvplan.readers.modelopt_sglang): `model.layers.N.self_attn.q_proj`, `...mlp.gate_proj` of
the dense layers, `...mlp.experts.E.gate_proj` and `...mlp.shared_experts.gate_proj` of the MoE layers, under the
text model's prefixes, and a Gated DeltaNet layer's `linear_attn` projections. Split from kvplan.readers.unquantized
(round 37) so that file keeps to reading the list; the names and sizes are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.layers import MLALatent
from kvplan.readers.params import _UNGATED, _is_moe_layer
from kvplan.readers.states import output_gated

GDN = "linear_attn"  # a Gated DeltaNet layer's attention module (Qwen3-Next, Qwen3.5)


@dataclass(frozen=True)
class ModuleNames:
    """A model's linear modules by the names its checkpoint (and vLLM) gives them, for `re:` entries."""

    attention: tuple[tuple[str, ...], ...]  # per layer: its attention projections ((): no attention there)
    mlp: tuple[str, ...]  # one dense MLP's (and one expert's) projections
    dense: frozenset  # layers with a dense MLP
    moe: frozenset  # layers with routed experts
    num_experts: int = 0
    shared: bool = False  # MoE layers hold shared experts
    block: str = "mlp"  # the MoE block's module (Mixtral: block_sparse_moe)
    prefixes: tuple[str, ...] = ("model.layers.", "model.language_model.layers.", "language_model.model.layers.")
    sizes: tuple = ()  # per layer: {attention projection: parameters}, for an exclusion that keeps some of them
    mixers: tuple[str, ...] = ()  # per layer: its attention module's name (self_attn; linear_attn: Gated DeltaNet)


def module_names(cfg, model_type: str, params, layers) -> ModuleNames:
    """The linear modules of a model read from `cfg` (kvplan.readers.params's layout of dense and MoE layers)."""
    attention, sizes, mixers = [], [], []
    for layer in layers:
        layer = getattr(layer, "attention", layer)
        sizes.append(_projection_sizes(cfg, model_type, layer))
        attention.append(tuple(sizes[-1]))
        mixers.append(GDN if getattr(layer, "variant", "") == "gated_deltanet" else "self_attn")
    moe = frozenset(i for i in range(len(layers)) if params.num_experts and _is_moe_layer(cfg, model_type, i))
    dense = frozenset(range(len(layers))) - moe if params.mlp else frozenset()
    mixtral = model_type in ("mixtral", "minimax", "minimax_m2")
    mlp = ("w1", "w2", "w3") if mixtral else ("gate_proj", "up_proj", "down_proj")
    if model_type in _UNGATED:
        mlp = ("fc1", "fc2")
    return ModuleNames(tuple(attention), mlp, dense, moe, params.num_experts, bool(params.shared_experts),
                       "block_sparse_moe" if mixtral else "mlp", sizes=tuple(sizes), mixers=tuple(mixers))


def _projection_sizes(cfg, model_type: str, layer) -> dict[str, int]:
    """{projection: parameters} of one layer's attention, as kvplan.readers.params._attention_params counts them
    (MLA: q_a / q_b or q, kv_a_proj_with_mqa, kv_b, o; a Gated DeltaNet's _gdn_sizes; else q (doubled where the
    output is gated), k, v, o)."""
    if getattr(layer, "variant", "") == "gated_deltanet" and layer.value_heads:
        return _gdn_sizes(cfg.int("hidden_size"), layer)
    h, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads", default=0, minimum=0)
    if isinstance(layer, MLALatent):
        nope, v = cfg.int("qk_nope_head_dim", limit="head_dim"), cfg.int("v_head_dim", limit="head_dim")
        q_rank, qk = cfg.int("q_lora_rank", default=0, minimum=0), heads * (nope + layer.qk_rope_head_dim)
        q = {"q_a_proj": h * q_rank, "q_b_proj": q_rank * qk} if q_rank else {"q_proj": h * qk}
        return {**q, "kv_a_proj_with_mqa": h * (layer.kv_lora_rank + layer.qk_rope_head_dim),
                "kv_b_proj": layer.kv_lora_rank * heads * (nope + v), "o_proj": heads * v * h}
    if hasattr(layer, "head_dim") and hasattr(layer, "num_kv_heads"):
        d, kv = layer.head_dim, layer.num_kv_heads
        gate = 2 if output_gated(cfg, model_type) else 1
        return {"q_proj": h * heads * d * gate, "k_proj": h * kv * d, "v_proj": h * kv * d, "o_proj": heads * d * h}
    return {}


def _gdn_sizes(h: int, layer) -> dict[str, int]:
    """{projection: parameters} of one Gated DeltaNet layer (kvplan.readers.params._recurrent_params's linear count):
    key dim K = key heads x key head size, value dim V = value heads Hv x value head size; in_proj_qkv h x (2K + V),
    in_proj_z h x V, in_proj_b and in_proj_a h x Hv each, out_proj V x h (transformers' Qwen3NextGatedDeltaNet:
    in_proj_qkvz 2K + 2V and in_proj_ba 2Hv outputs)."""
    k, v = layer.num_heads * layer.key_head_dim, layer.value_heads * layer.value_head_dim
    return {"in_proj_qkv": h * (2 * k + v), "in_proj_z": h * v, "in_proj_b": h * layer.value_heads,
            "in_proj_a": h * layer.value_heads, "out_proj": v * h}
