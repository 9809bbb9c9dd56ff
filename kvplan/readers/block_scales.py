"""The shapes of a block-quantized checkpoint's linear tensors, whose block scales are counted tensor by tensor.

Why: a block-FP8 checkpoint (`weight_block_size` [128, 128]: DeepSeek-V3, Qwen's FP8 releases) keeps one fp32 scale
per block_n x block_k tile of each linear, and a tile only partly filled still takes a whole scale. Counted over a
role's pooled parameters (params / 128^2) the partial tiles are lost: Qwen3-Next's 64 x 2048 in_proj_ba is 16 scales
a layer, not 8. The engines allocate the scales per linear as they build it:

* vLLM: `create_fp8_scale_parameter` (0.33.0 wheel `quantization/utils/fp8_utils.py` L1412-1425) gives a
  block-quantized linear a [cdiv(sum(output_partition_sizes), block_n), cdiv(input_size_per_partition, block_k)]
  fp32 scale: a merged layer (qkv_proj, gate_up_proj, DeepSeek's fused_qkv_a_proj, a Gated DeltaNet's in_proj_qkvz
  and in_proj_ba) is tiled over its summed output, one tensor. `Fp8MoEMethod.create_weights` (0.33.0
  `quantization/fp8.py` L620-632) gives the routed experts w13 [E, 2 x cdiv(I, block_n), cdiv(hidden, block_k)]
  (gate and up tiled apart) and w2 [E, cdiv(hidden, block_n), cdiv(I, block_k)]. No scale dtype is set in 0.33.0
  (`is_scale_e8m0` is read by getattr with a False default, fp8.py L243, and set nowhere): 4 B a scale.
* SGLang: the same shapes: `Fp8LinearMethod.create_weights` a weight_scale_inv [cdiv(output_size_per_partition,
  block_n), cdiv(input_size_per_partition, block_k)] float32, `Fp8MoEMethod.create_weights` w13 [E, 2 x cdiv(I,
  block_n), cdiv(hidden, block_k)] and w2 [E, cdiv(hidden, block_n), cdiv(I, block_k)] (0.5.23 wheel
  `layers/quantization/fp8.py` L676-687, L1723-1741; uint8 only for an MXFP8 checkpoint).
* TensorRT-LLM: `FP8BlockScalesLinearMethod.create_weights` sizes ceil(out / 128) x ceil(in / 128) of the (merged)
  linear (NVIDIA/TensorRT-LLM@00bbf71e `_torch/modules/linear.py`), and
  `DeepSeekFP8BlockScalesFusedMoEMethod.create_weights` w3_w1_weight_scaling_factor [E, cdiv(I, 128) x 2,
  cdiv(hidden, 128)] (NVIDIA/TensorRT-LLM@a98a9061 `_torch/modules/fused_moe/quantization.py`).

At tp 1 the three agree, and agree with the checkpoint's own `*_scale_inv` tensors wherever a merged layer's parts
but the last are whole tiles (a part that is not is refused by vLLM before 0.14.0 and by SGLang:
kvplan.engines.fp8_linear). Under tensor parallelism each rank tiles its own shard; where every shard is whole tiles
(what vLLM and SGLang check) a rank holds exactly 1/tp of the scales counted here. A shard of partial tiles the
engine does not refuse (vLLM from 0.14.0 on a merged layer, TensorRT-LLM) holds a few more, not counted.

A GPTQ / AWQ / AutoRound checkpoint at `group_size: -1` stores one fp16 scale and one packed zero point per output
row of each linear (AutoGPTQ/AutoGPTQ@058fd80a auto_gptq/nn_modules/qlinear/qlinear_cuda.py QuantLinear.__init__: group
= K, scales [1, N], qzeros int32 [1, N x bits / 32]); vLLM loads those shapes (0.11.2 wheel quantization/gptq.py
L264-325, awq_marlin.py L288-335, gptq_marlin via marlin_utils.py L252-258). Its rows come from the same shapes, and
the row-parallel tensors (o, down, a Gated DeltaNet's out_proj) are kept apart: their inputs split over tp, their
scales whole on every rank. A routed expert's down projection keeps its rows in the experts part (split with them).

The shapes come from the spec (its layers' head sizes, MLA ranks and Gated DeltaNet widths; MLP and expert widths
exactly from the parameter counts, kvplan.readers.mlp_layout). A role whose tensors are not read here (Mamba mixers,
DeepSeek-V4's compressed attention, an MLP width the counts do not give exactly) keeps the pooled count for its
parameters (kvplan.model.weight_formats.block_linear_bytes), and the reader says so in a note.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from kvplan.model.layers import ChunkedLocal, FullAttention, IndexedMLA, MLALatent, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ModelSpec
from kvplan.model.weight_formats import ROW_PARALLEL, BlockShape
from kvplan.readers.mlp_layout import dense_mlp_layers, expert_width, gated_mlp, mlp_width

# one tensor: (the checkpoint modules it stands for, output rows N, input columns K, WeightBytes part)
_Tensor = tuple[tuple[str, ...], int, int, str]
SHARDED, REPLICATED, EXPERTS = "sharded", "replicated", "experts"
# split over tp by their inputs (RowParallelLinear): a per-row checkpoint's scales of these are whole on every rank
_ROW_SPLIT = ("o_proj", "down_proj", "out_proj")


def _mla(spec: ModelSpec, layer: MLALatent) -> list[_Tensor]:
    """An MLA layer's projections: q_a and kv_a fused (vLLM's and SGLang's fused_qkv_a_proj, replicated) or kv_a alone
    without a q LoRA, q_b or q, kv_b and o split over tp; a DSA indexer's wq_b and wk replicated."""
    h, heads, r, c = spec.hidden_size, spec.num_attention_heads, layer.q_lora_rank, layer.kv_lora_rank
    qk, rope = layer.qk_nope_head_dim + layer.qk_rope_head_dim, layer.qk_rope_head_dim
    out: list[_Tensor] = []
    if r:
        out += [(("self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa"), r + c + rope, h, REPLICATED),
                (("self_attn.q_b_proj",), heads * qk, r, SHARDED)]
    else:
        out += [(("self_attn.q_proj",), heads * qk, h, SHARDED),
                (("self_attn.kv_a_proj_with_mqa",), c + rope, h, REPLICATED)]
    out += [(("self_attn.kv_b_proj",), heads * (layer.qk_nope_head_dim + layer.v_head_dim), c, SHARDED),
            (("self_attn.o_proj",), h, heads * layer.v_head_dim, SHARDED)]
    if isinstance(layer, IndexedMLA) and layer.index_head_dim and layer.index_n_heads and r:
        out += [(("self_attn.indexer.wq_b",), layer.index_n_heads * layer.index_head_dim, r, REPLICATED),
                (("self_attn.indexer.wk",), layer.index_head_dim, h, REPLICATED)]
    return out


def _mixer(spec: ModelSpec, layer) -> list[_Tensor] | None:
    """One layer's quantizable mixer tensors, or None where they are not read here."""
    h, heads = spec.hidden_size, spec.num_attention_heads
    if isinstance(layer, MLALatent):
        return _mla(spec, layer) if layer.qk_nope_head_dim and layer.v_head_dim else None
    if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):
        d, kv = layer.head_dim, layer.num_kv_heads
        v = getattr(layer, "v_head_dim", 0) or d
        q = (2 if getattr(layer, "output_gate", False) else 1) * heads * d
        return [(("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), q + kv * d + kv * v, h, SHARDED),
                (("self_attn.o_proj",), h, heads * v, SHARDED)]
    if isinstance(layer, RecurrentState) and layer.variant == "gated_deltanet" and layer.value_heads:
        k, v = layer.num_heads * layer.key_head_dim, layer.value_heads * layer.value_head_dim
        return [(("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"), 2 * k + 2 * v, h, SHARDED),
                (("linear_attn.in_proj_b", "linear_attn.in_proj_a"), 2 * layer.value_heads, h, SHARDED),
                (("linear_attn.out_proj",), h, v, SHARDED)]
    return None


def mixer_params(spec: ModelSpec, layer) -> int | None:
    """One layer's mixer linear parameters, summed over the tensors `_mixer` reads for it; None where it reads none."""
    got = _mixer(spec, layer)
    return None if got is None else sum(n * k for _, n, k, _ in got)


def _mlp(spec: ModelSpec, width: int, name: str, part: str) -> list[_Tensor]:
    """An MLP of intermediate `width`: gate_up merged (the engines' one tensor) and down, or up and down ungated."""
    h = spec.hidden_size
    if gated_mlp(spec):
        return [((f"{name}.gate_proj", f"{name}.up_proj"), 2 * width, h, part),
                ((f"{name}.down_proj",), h, width, part)]
    return [((f"{name}.up_proj",), width, h, part), ((f"{name}.down_proj",), h, width, part)]


def _experts(spec: ModelSpec, width: int) -> list[_Tensor]:
    """One routed expert's tensors: gate and up tiled apart (w13 holds 2 x cdiv(I, block_n) rows), down."""
    h = spec.hidden_size
    ups = 2 if gated_mlp(spec) else 1
    return [(("experts",), width, h, EXPERTS)] * ups + [(("experts",), h, width, EXPERTS)]


# a role's tensors as units of alike layers: (one layer's tensors of the role, how many layers hold them)
_Units = list[tuple[tuple[_Tensor, ...], int]]


def _roles(spec: ModelSpec) -> dict[str, _Units]:
    """{role: its units} for the roles whose every quantizable tensor is read here."""
    p, roles = spec.params, {}
    mixers: _Units | None = []
    for layer, n in Counter(getattr(x, "attention", x) for x in spec.layers).items():
        got = _mixer(spec, layer)
        if got is None:
            mixers = None
            break
        mixers.append((tuple(got), n))
    if mixers is not None and p.attention:
        roles["attention"] = mixers
    dense = dense_mlp_layers(spec)
    width = mlp_width(spec, p.mlp, dense) if dense else 0
    if width:
        roles["mlp"] = [(tuple(_mlp(spec, width, "mlp", SHARDED)), dense)]
    shared = mlp_width(spec, p.shared_experts, p.num_moe_layers, shared=True) if p.shared_experts else 0
    if shared:
        unit = _mlp(spec, shared, "shared_expert", SHARDED)
        if p.shared_experts - p.num_moe_layers * (3 if gated_mlp(spec) else 2) * spec.hidden_size * shared:
            unit.append((("mlp.shared_expert_gate",), 1, spec.hidden_size, SHARDED))  # Qwen's, a layer
        roles["shared_experts"] = [(tuple(unit), p.num_moe_layers)]
    ew = expert_width(spec, exact=True)
    if ew:
        roles["experts"] = [(tuple(_experts(spec, ew)) * p.num_experts, p.num_moe_layers)]
    return roles


def _params(units: _Units) -> int:
    """The parameters the units hold: what a role's count must equal for its shapes to stand for it."""
    return sum(n * k * c for unit, c in units for (_, n, k, _) in unit)


def _less_kept(role: str, units: _Units, kept: int, modules: set) -> _Units | None:
    """The role's units without the tensors its exclusion list keeps in 16 bits: the attention projections kept in
    every layer (`kept_modules`), then a kept count that is one tensor name's in every layer (shared_expert_gate) or
    whole layers of one kind; None where the kept parameters are none of these (the role keeps the pooled count)."""
    if role == "attention" and modules:
        before = _params(units)
        units = [(tuple(t for t in unit if not set(t[0]) <= modules), c) for unit, c in units]
        kept -= before - _params(units)
    if not kept:
        return units
    for names in {t[0] for unit, _ in units for t in unit}:
        left = [(tuple(t for t in unit if t[0] != names), c) for unit, c in units]
        if _params(units) - _params(left) == kept:
            return left
    for i, (unit, c) in enumerate(units):
        one = _params([(unit, 1)])
        if one and kept % one == 0 and kept // one <= c:
            return [*units[:i], (unit, c - kept // one), *units[i + 1:]]
    return None


def block_shapes(spec: ModelSpec) -> tuple[tuple[BlockShape, ...], tuple[str, ...]]:
    """(the quantized linear tensors' shapes, merged by part, and notes on the roles not read here) for a
    block-quantized checkpoint (fp8 / int8 with a block size) or a per-row one (GPTQ / AWQ `group_size: -1`, its
    row-parallel tensors in a part of their own: weight_formats.ROW_PARALLEL); ((), ()) for any other format."""
    q = spec.quantization
    rows = q.per_row and q.method in ("int4", "int8") and not q.experts_only  # group_size -1: a scale per output row
    # GPTQ / AWQ 8-bit groups run along the input only (a scale per group of inputs of each output): not tiles
    if not rows and (q.method not in ("fp8", "int8") or q.group_size <= 0 or q.experts_only or q.input_groups):
        return (), ()
    roles, modules = _roles(spec), set(q.kept_modules)
    merged: Counter = Counter()
    unread = []
    quantized = {"attention": spec.params.attention, "mlp": spec.params.mlp,
                 "shared_experts": spec.params.shared_experts,
                 "experts": 0 if q.experts_method not in ("", q.method) else
                 spec.params.experts - spec.params.expert_biases}
    for role, total in quantized.items():
        units = roles.get(role)
        units = _less_kept(role, units, q.kept_of(role), modules) if units and _params(units) == total else None
        if units is None:
            unread += [role.replace("_", " ")] if total else []
            continue
        for unit, c in units:
            for names, n, k, part in unit:
                row_split = rows and part == SHARDED and names[-1].endswith(_ROW_SPLIT)
                merged[(ROW_PARALLEL if row_split else part, n, k)] += c
    shapes = tuple(BlockShape(part, n, k, c) for (part, n, k), c in sorted(merged.items()) if c)
    if not unread:
        return shapes, ()
    roles = " and ".join(unread)
    if rows:
        return shapes, (f"group_size -1 (one scale and zero per output row): the {roles} priced as groups of 128 "
                        "inputs, their scales and zeros overstated by up to 2.5 B (4-bit) or 3 B (8-bit) per 128 "
                        "weights: kvplan does not read those tensors' shapes",)
    return shapes, (f"block scales of the {roles} pooled over their parameters (params / {q.group_size}^2, partly "
                    "filled tiles not counted), not tensor by tensor: kvplan does not read those tensors' shapes",)


def with_block_shapes(spec: ModelSpec) -> ModelSpec:
    """`spec` with its block-quantized tensors' shapes (Quantization.block_shapes) and the note on the roles not read,
    as a config is read and as a catalog entry is (which stores neither); `spec` itself for any other format."""
    shapes, note = block_shapes(spec)
    q = spec.quantization
    if not shapes and not note:
        return spec
    notes = q.notes + tuple(n for n in note if n not in q.notes)
    # an engine's own reading of the exclusion list (Quantization.readings) keeps other tensors: shapes of its own
    readings = tuple((rule, r if isinstance(r, str) else
                      replace(r, block_shapes=block_shapes(replace(spec, quantization=r))[0])) for rule,
                      r in q.readings)
    return replace(spec, quantization=replace(q, block_shapes=shapes, notes=notes, readings=readings))
