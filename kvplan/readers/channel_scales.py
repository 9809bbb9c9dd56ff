"""Per-feature tensors of a quantized checkpoint's linears, counted from its config: GPTQ's g_idx (4 B per input
feature, `Quantization.index_bytes`) and a channel-wise checkpoint's fp32 scales (one per output feature,
`Quantization.channel_scales`), by the WeightBytes part each rank holds them in. kvplan.readers.quantization reads which
checkpoints have them."""

from __future__ import annotations

from kvplan.model.layers import MLALatent
from kvplan.readers.params import _UNGATED, _is_moe_layer, shared_expert_width


def _linear_sizes(cfg) -> tuple[int, int, int, int, int, str]:
    """The sizes a per-feature count over the quantized linears reads: hidden, MLP width, expert width, experts,
    attention heads, and the model_type that lays out dense and MoE layers."""
    width = cfg.int("intermediate_size", default=0, minimum=0)
    return (cfg.int("hidden_size"), width, cfg.int("moe_intermediate_size", default=width, minimum=0),
            cfg.int("num_experts", "num_local_experts", "n_routed_experts", default=0, minimum=0),
            cfg.int("num_attention_heads", default=0, minimum=0), str(cfg.raw("model_type") or ""))


def g_idx_bytes(cfg, layers) -> int:
    """Bytes of GPTQ's g_idx tensors: 4 per input feature of each quantized linear layer (q, k, v and the
    MLP's gate and up read the hidden size, o the attention width, down the MLP width; each expert alike)."""
    if not layers:
        return 0
    h, width, expert, experts, heads, model_type = _linear_sizes(cfg)
    total = 0
    for i, layer in enumerate(layers):
        d = getattr(getattr(layer, "attention", layer), "head_dim", 0)
        moe = experts and _is_moe_layer(cfg, model_type, i)  # kvplan.readers.params' layout of dense and MoE layers
        total += (3 * h + heads * d if d else 0) + (experts * (2 * h + expert) if moe else 2 * h + width)
    return 4 * total


def channel_parts(cfg, layers, params, experts: bool = True) -> dict[str, tuple[int, int]]:
    """Output features of the quantized linears by role, as (column-parallel, row-parallel): one fp32 scale each in a
    channel-wise checkpoint. Column-parallel outputs (q, k, v; gate, up) are split across ranks; a row-parallel
    layer (o, down) holds its whole output on every rank (an ungated MLP has one column projection, fc1, not gate and
    up). Routed experts' are (E x (2 x I + hidden), 0), or none where the engine loads the experts without channel
    scales (`experts` False); shared experts' come from their width (kvplan.readers.params.shared_expert_width). MLA
    layers count their projections (_mla_outputs); state layers (Mamba, linear attention) count their MLP only: their
    projections' scales (in_proj's and out_proj's outputs, a few tens of thousands a layer) are left out."""
    h, width, expert, num_experts, heads, model_type = _linear_sizes(cfg)
    att = mlp = (0, 0)
    routed = moe_layers = 0
    mats = 1 if model_type in _UNGATED else 2  # column-parallel MLP projections: gate and up, or one fc1
    for i, layer in enumerate(layers):
        a = getattr(layer, "attention", layer)
        d, kv = getattr(a, "head_dim", 0), getattr(a, "num_kv_heads", 0)
        if isinstance(a, MLALatent):
            column, whole = _mla_outputs(cfg, a, heads)
            att = (att[0] + column, att[1] + whole + h)
        elif d and kv:  # a gated q (Qwen3-Next, Qwen3.5) is q and its gate: 2 x heads rows (vLLM's QKVParallelLinear
            q = heads * (2 if getattr(a, "output_gate", False) else 1)  # total_num_heads x (1 + attn_output_gate))
            att = (att[0] + (q + 2 * kv) * d, att[1] + h)
        if num_experts and _is_moe_layer(cfg, model_type, i):
            routed, moe_layers = routed + num_experts * (mats * expert + h), moe_layers + 1
        elif width:
            mlp = (mlp[0] + mats * width, mlp[1] + h)
    shared = shared_expert_width(cfg, model_type, expert)[0] * mats
    return {"attention": att, "mlp": mlp, "experts": (routed if experts else 0, 0),
            "shared_experts": (shared * moe_layers, h * moe_layers) if shared else (0, 0)}


def _mla_outputs(cfg, layer, heads: int) -> tuple[int, int]:
    """(column-parallel, replicated) outputs of an MLA layer's projections but o: q_b (or q) and kv_b split across
    ranks, the fused q_a + kv_a (or kv_a alone, without a q LoRA) on every rank (vLLM deepseek_v2.py
    DeepseekV2MLAAttention, 0.11.0 wheel L877-916: MergedColumnParallelLinear(disable_tp=True), ReplicatedLinear,
    ColumnParallelLinear)."""
    nope, v = cfg.int("qk_nope_head_dim", limit="head_dim"), cfg.int("v_head_dim", limit="head_dim")
    q_rank = cfg.int("q_lora_rank", default=0, minimum=0)
    column = heads * (nope + layer.qk_rope_head_dim) + heads * (nope + v)
    return column, q_rank + layer.kv_lora_rank + layer.qk_rope_head_dim


def channel_scales(parts: dict, kept=(), params=None) -> tuple[int, ...]:
    """Bytes of channel-wise weights' fp32 scales, one per output feature of each quantized linear, as (sharded,
    replicated, experts), less the modules the exclusion list keeps in 16 bits (a role's scales in the share of its
    parameters kept: exact where whole layers of alike layers are kept, the only partial exclusions
    kvplan.readers.unquantized reads besides single attention projections); () where there are none.

    vLLM allocates them in CompressedTensorsW8A8Int8 and CompressedTensorsW8A8Fp8 / W8A16Fp8 (strategy channel:
    weight_scale (sum(output_partition_sizes), 1) float32; int8: 0.8.0 wheel L67-70, 0.12.0 L78-84; fp8: 0.11.0
    utils/fp8_utils.py create_fp8_scale_parameter L804-808, 0.33.0 L1406-1411), FBGEMMFp8LinearMethod (0.11.0
    fbgemm_fp8.py L114-115, 0.33.0 L133-134) and ModelOpt FP8_PER_CHANNEL_PER_TOKEN (0.19.0 modelopt.py L583-584);
    the compressed-tensors MoE methods' w13_weight_scale (E, 2 x I, 1) and w2_weight_scale (E, hidden, 1) float32
    (int8 0.12.0 compressed_tensors_moe.py L1331-1341; fp8 0.11.0 L626-637, 0.33.0
    compressed_tensors_moe_w8a8_fp8.py L188-202)."""
    kept = dict(kept)
    totals = [0, 0, 0]
    for role, (column, row) in parts.items():
        whole = getattr(params, role, 0) - (params.expert_biases if role == "experts" else 0) if params else 0
        left = whole - min(kept.get(role, 0), whole)
        column, row = (column * left // whole, row * left // whole) if kept.get(role) and whole else (column, row)
        totals[2 if role == "experts" else 0] += column
        totals[1] += row
    return tuple(4 * t for t in totals) if any(totals) else ()
