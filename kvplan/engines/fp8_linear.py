"""Block-FP8 checkpoints whose tensor-parallel dense linear shard the engine refuses: not a whole number of blocks.

A block-FP8 checkpoint (`quant_method: fp8` with `weight_block_size`, DeepSeek's and Qwen's 128 x 128) keeps one
scale per block_n x block_k tile of every quantized linear. When a layer is split over tensor-parallel ranks each
rank's share must be whole tiles, or its scales cannot be sharded with it. vLLM and SGLang check this as they build
each linear (routed experts: kvplan.engines.fp8_blocks), and raise:

* row-parallel layers (o_proj, down_proj), split by their input: "Weight input_size_per_partition = {K / tp} is not
  divisible by weight quantization block_k = {block_k}." where K / tp % block_k != 0;
* column-parallel layers (MLA's q_b_proj / q_proj and kv_b_proj), split by their output, and merged ones (qkv_proj,
  gate_up_proj: every part checked): "Weight output_partition_size = {N / tp} is not divisible by weight quantization
  block_n = {block_n}.".

vLLM: fp8.py `Fp8LinearMethod.create_weights` inline (0.7.3 wheel L170-193), as `validate_fp8_block_shape` from 0.11.0
(`quantization/utils/fp8_utils.py` 0.11.0 L750-782, 0.12.0 L994-1034, 0.33.0 L1296-1344). From 0.14.0 a merged column
layer (more than one output part: qkv_proj, gate_up_proj) any of whose parts is not whole blocks skips the check
(`ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch`, 0.14.0 `layers/linear.py` L290, L492, L524-543; 0.33.0
L289, L519, L562-581; not in 0.13.0; vllm-project/vllm#30836, merged 2025-12-19, for MiMo-V2-Flash, whose one 192-wide
KV head a rank, at tp 4 and replicated from tp 8, is not whole blocks), so only its row-parallel partner can refuse. The
"last part may be partial" exception of a merged layer applies only where it is not split (tp 1), never here.
SGLang: `Fp8LinearMethod.validate_block_quant_shapes` (0.5.23 wheel `layers/quantization/fp8.py` L569-610; the same
checks inline in 0.4.4.post3 L220-242 and 0.5.10 L300-338) checks every part of a merged layer in every release,
except where the model passes `skip_block_quant_check`: MiMo-V2's qkv_proj (0.5.10 `models/mimo_v2_flash.py`, 0.5.23
`models/mimo_v2.py` L724). TensorRT-LLM has no such check (`FP8BlockScalesLinearMethod.create_weights` sizes the
scales ceil(out / 128) x ceil(in / 128), NVIDIA/TensorRT-LLM@00bbf71e `_torch/modules/linear.py`): not refused here.

The widths a rank gets: attention heads / tp x head sizes (KV heads replicated where tp exceeds them, as
kv_heads_per_rank), the dense MLP's and shared experts' intermediate widths from the parameter counts (exact, or the
check is refused with the reason; a shared expert's count may hold its shared_expert_gate) / their split. Checked:
layers with head sizes (full, sliding, chunked attention), MLA's, and Gated DeltaNet layers (Qwen3-Next, Qwen3.5),
whose widths the config gives (K = key heads x key head size, V = value heads Hv x value head size): in_proj_qkvz
(SGLang: merged [K, K, V, V], 0.5.10 wheel `models/qwen3_next.py` L274, `models/qwen3_5.py` L348; 0.5.23 L361, L647),
in_proj_ba (SGLang merged [Hv, Hv], 0.5.23 `models/qwen3_5.py` L668, `qwen3_next.py` L177-179) and out_proj (row, V).
vLLM builds Qwen3-Next's in_proj_qkvz and in_proj_ba as one output each, 2K + 2V and 2Hv (ColumnParallelLinear,
0.13.0-0.16.0 `models/qwen3_next.py` L289-310 / L296-310; one-part MergedColumnParallelLinear in 0.27.0
`layers/mamba/gdn/qwen_gdn_linear_attn.py` L490-538, "gqa_interleaved_layout"), checked as any column layer, and
Qwen3.5's as merged parts (skipped from 0.14.0 where a part is not whole blocks). SGLang refuses Qwen3.5-397B-A17B-FP8's
in_proj_ba at tp 8, 64 / 8 = 8 ("Weight output_partition_size = 8 ...", sgl-project/sglang#19045, 2026-02-21). The
published FP8 checkpoints keep in_proj_ba (Qwen3-Next) or in_proj_b and in_proj_a (Qwen3.5) in 16 bits ("ba_proj
doesn't support blockwise fp8 quantization", vLLM 0.14.0 `models/qwen3_next.py` L303; sgl-project/sglang#23973,
2026-04-28): an engine builds a projection the exclusion list names in every layer unquantized, so it is not checked
(`kept_modules`, kvplan.readers.unquantized). A query gated per head (Qwen3-Next, Qwen3.5 `attn_output_gate`: the
layer's `output_gate`) makes qkv_proj's q part 2 x heads x head size (vLLM 0.33.0 wheel `models/qwen3_next.py`
L317-325: total_num_heads x (1 + attn_output_gate) query heads). Other recurrent mixers' projections (Mamba) are not
read, nor roles the checkpoint keeps in 16 bits.
DeepSeek-V4 (compressed attention layers): its shared expert is a tp-split gate_up / down pair checked as any (vLLM
0.20.0 `models/deepseek_v4.py` DeepseekV4MLP L69-101, 0.22.0 `models/deepseek_v4/nvidia/model.py` L68-100;
DeepSeek-V4-Pro at tp 16, 3072 / 16 = 192: "Weight input_size_per_partition = 192 is not divisible by weight
quantization block_k = 128.", vllm-project/vllm#42384, 2026-05-12) until vLLM pads it to whole blocks a rank (0.25.0
wheel `models/deepseek_v4/nvidia/model.py` DeepseekV4MLP L81-125, `_pad_shared_expert_weight` L1156-1166); its attention
projections and SGLang's DeepSeek-V4 are not read, so not checked. Nor are MLA layers whose spec lacks the head sizes.
kvplan checks `weight_block_size[0]` as both block_n and block_k (every block-FP8 checkpoint kvplan has read is square).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines.versions import parse_version
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import ChunkedLocal, FullAttention, MLALatent, SlidingWindow, kv_heads_per_rank
from kvplan.model.recurrent import RecurrentState
from kvplan.planning.deploy import stage_ranges, stages_or_one
from kvplan.readers.mlp_layout import dense_mlp_layers, exact_mlp_width, gated_mlp

ROW = "row"  # split by its input: block_k
COLUMN = "column"  # split by its output: block_n
MERGED = "merged"  # column, several outputs in one weight: every part checked (vLLM before 0.14.0, SGLang)
MERGED_SKIPPED = (0, 14, 0)  # vLLM: a merged layer with a part not whole blocks skips the check
V4_SHARED_PADDED = (0, 25, 0)  # vLLM: DeepSeek-V4's block-FP8 shared expert padded to whole blocks a rank
SGLANG_SKIPS_QKV = ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")  # skip_block_quant_check=True on qkv_proj
VLLM_ONE_PART_GDN = ("Qwen3NextForCausalLM",)  # vLLM's interleaved layout: in_proj_qkvz, in_proj_ba one part each


class Rule(NamedTuple):
    """What one engine release checks: its name and version (for the message), whether merged column layers are
    checked, whether the model's qkv_proj skips the check (SGLang's MiMo-V2), and whether DeepSeek-V4's shared experts
    are checked."""

    engine: str
    version: str
    merged: bool = True
    skip_qkv: bool = False
    v4_shared: bool = False  # DeepSeek-V4's shared experts checked (vLLM before 0.25.0 does not pad them)
    gdn_one_part: bool = False  # a Gated DeltaNet's in_proj_qkvz and in_proj_ba built as one output each (vLLM)


class Splits(NamedTuple):
    """Over how many ranks the attention projections, the dense MLPs and the shared experts are split; 0: not
    checked (the engine's split is not read)."""

    attention: int
    mlp: int
    shared: int


class Linear(NamedTuple):
    """One tensor-parallel linear: its name, how it splits, its whole widths (the input for a row-parallel layer,
    each output part for a column one) and over how many ranks; a merged layer's part names, and the checkpoint's
    KV heads where each rank holds a replica of one (tp above them: its K and V parts' widths are the replicas')."""

    name: str
    mode: str
    widths: tuple[int, ...]
    split: int
    parts: tuple[str, ...] = ()
    replicated: int = 0


def _attention(model, split: int, skip_qkv: bool, layers=None) -> list[Linear]:
    """The projections of each distinct attention layer (of `layers`, the model's where None): qkv_proj and o_proj
    of a layer with head sizes, MLA's q_b_proj (q_proj without a q LoRA), kv_b_proj and o_proj; other mixers' are
    not listed."""
    out, heads = [], model.num_attention_heads
    for layer in dict.fromkeys(model.layers if layers is None else layers):
        if isinstance(layer, MLALatent) and layer.qk_nope_head_dim and layer.v_head_dim:
            q_out = heads * (layer.qk_nope_head_dim + layer.qk_rope_head_dim)
            out += [Linear("q_b_proj" if layer.q_lora_rank else "q_proj", COLUMN, (q_out,), split),
                    Linear("kv_b_proj", COLUMN, (heads * (layer.qk_nope_head_dim + layer.v_head_dim),), split),
                    Linear("o_proj", ROW, (heads * layer.v_head_dim,), split)]
        elif isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):
            d, v = layer.head_dim, getattr(layer, "v_head_dim", 0) or layer.head_dim
            kv = kv_heads_per_rank(layer.num_kv_heads, split) * split  # replicated heads: one a rank
            gate = 2 if getattr(layer, "output_gate", False) else 1  # q and its gate (Qwen3-Next, Qwen3.5)
            copies = layer.num_kv_heads if kv > layer.num_kv_heads else 0
            if not skip_qkv:
                out.append(Linear("qkv_proj", MERGED, (gate * heads * d, kv * d, kv * v), split, ("q", "k", "v"),
                                  copies))
            out.append(Linear("o_proj", ROW, (heads * v,), split))
    return list(dict.fromkeys(out))


def _recurrent(model, split: int, one_part: bool, tp: int, layers=None) -> list[Linear]:
    """A Gated DeltaNet layer's in_proj_qkvz, in_proj_ba and out_proj (key dim K = key heads x key head size, value
    dim V = value heads Hv x value head size): one output each (2K + 2V, 2Hv) where `one_part`, else the merged parts
    (K, K, V, V) and (Hv, Hv); out_proj splits V by its input. Other recurrent mixers are not listed."""
    out = []
    for layer in dict.fromkeys(model.layers if layers is None else layers):
        if not isinstance(layer, RecurrentState) or layer.variant != "gated_deltanet":
            continue
        if not (layer.value_heads and layer.key_head_dim and layer.value_head_dim):
            raise KvplanError(f"{model.name}: its Gated DeltaNet projections' widths were not read (a model spec "
                              "from before they were), so kvplan cannot check the engine's FP8 block rule for "
                              f"{arg('tp')} {tp}; read the model from its config.json", EXIT_USAGE, param="tp",
                              value=tp)
        k, v, hv = layer.num_heads * layer.key_head_dim, layer.value_heads * layer.value_head_dim, layer.value_heads
        if one_part:
            out += [Linear("in_proj_qkvz", COLUMN, (2 * k + 2 * v,), split),
                    Linear("in_proj_ba", COLUMN, (2 * hv,), split)]
        else:
            out += [Linear("in_proj_qkvz", MERGED, (k, k, v, v), split, ("q", "k", "v", "z")),
                    Linear("in_proj_ba", MERGED, (hv, hv), split, ("b", "a"))]
        out.append(Linear("out_proj", ROW, (v,), split))
    return list(dict.fromkeys(out))


def _width(model, params: int, layers: int, what: str, tp: int, shared: bool = False) -> int:
    """One MLP's intermediate width (a shared expert's gate read where its count holds one), refused where the
    parameter counts give none exactly."""
    return exact_mlp_width(model, params, layers, what, tp, "check the engine's FP8 block rule for", shared)


def _mlp(model, width: int, split: int, what: str) -> list[Linear]:
    """gate_up_proj (merged; up_proj alone where the MLP is not gated) and down_proj of one MLP."""
    up = Linear(f"gate_up_proj of its {what}", MERGED, (width, width), split, ("gate", "up")) if gated_mlp(model) else \
        Linear(f"up_proj of its {what}", COLUMN, (width,), split)
    return [up, Linear(f"down_proj of its {what}", ROW, (width,), split)]


# a checked linear's checkpoint modules (kvplan.readers.unquantized.kept_modules's names; self_attn.<its name> where
# not listed: MLA's q_b_proj, q_proj, kv_b_proj): kept in 16 bits in every layer, it is built unquantized (vLLM and
# SGLang is_layer_skipped -> UnquantizedLinearMethod) and not checked
_MODULES = {"in_proj_qkvz": ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"),
            "in_proj_ba": ("linear_attn.in_proj_b", "linear_attn.in_proj_a"), "out_proj": ("linear_attn.out_proj",),
            "qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")}


def _mixer_linears(model, split: int, rule: Rule, tp: int, layers=None) -> list[Linear]:
    """The attention / mixer projections of `layers` (the model's where None) the rule reads, less those the
    exclusion list keeps in every layer (built unquantized): none where attention is kept as whole modules."""
    kept = {role for role, n in model.quantization.kept if n}
    plain = set(model.quantization.kept_modules)
    if "attention" in kept and not plain:  # kept as whole modules (not read by projection): not checked
        return []
    return [x for x in [*_attention(model, split, rule.skip_qkv, layers),
                        *_recurrent(model, split, rule.gdn_one_part, tp, layers)]
            if not set(_MODULES.get(x.name, (f"self_attn.{x.name}",))) <= plain]


def linears(model, splits: Splits, rule: Rule, tp: int) -> list[Linear]:
    """Every split linear the rule reads, in the order a decoder layer builds them (attention, then MLP); attention
    projections the exclusion list keeps in every layer are left out."""
    kept = {role for role, n in model.quantization.kept if n}
    out = _mixer_linears(model, splits.attention, rule, tp)
    p = model.params
    n_dense = dense_mlp_layers(model)
    if n_dense and "mlp" not in kept:
        out += _mlp(model, _width(model, p.mlp, n_dense, "dense MLP", tp), splits.mlp, "dense MLP layers")
    v4_skipped = has_compressed(model.layers) and not rule.v4_shared
    if p.shared_experts and p.num_moe_layers and splits.shared and "shared_experts" not in kept and not v4_skipped:
        shared = _width(model, p.shared_experts, p.num_moe_layers, "shared experts'", tp, shared=True)
        out += _mlp(model, shared, splits.shared, "shared experts")
    return [x for x in out if x.split > 1 and (x.mode != MERGED or rule.merged)]


def _message(model, rule: Rule, tp: int, lin: Linear, index: int) -> str:
    """The one-line refusal: the layer (and which part of a merged one), its width, the split, the block and the
    engine's own message; a K or V part of replicated heads says so, since its width a rank is a replica's."""
    block, whole = model.quantization.group_size, lin.widths[index]
    part = whole // lin.split
    dim, name = ("input", "Weight input_size_per_partition") if lin.mode == ROW else \
        ("output", "Weight output_partition_size")
    letter = "k" if lin.mode == ROW else "n"
    which = f"the {lin.parts[index]} part of the {lin.name}" if index < len(lin.parts) else f"the {lin.name}"
    if lin.replicated and index > 0:
        how = (f"holds a replica of one of the checkpoint's {lin.replicated} KV heads on each of {lin.split} ranks, "
               f"{part} wide each")
    else:
        how = f"splits its {whole}-wide {dim} over {lin.split} ranks, {whole} / {lin.split} = {part} each"
    return (f"{rule.engine} {rule.version} refuses {model.name} at {arg('tp')} {tp}: {which} {how}, not a multiple "
            f"of the checkpoint's {block} x {block} FP8 block (\"{name} = {part} is not divisible by weight "
            f"quantization block_{letter} = {block}.\")")


def check(model, splits: Splits, rule: Rule, tp: int) -> None:
    """A one-line refusal where the engine release (`rule`) refuses this block-FP8 checkpoint's dense linears at
    these splits (module docstring); nothing for any other checkpoint or where every shard is whole blocks."""
    q = model.quantization
    if q.quant_method != "fp8" or q.group_size <= 0 or q.experts_only or max(splits) <= 1:
        return
    for lin in linears(model, splits, rule, tp):
        for index, whole in enumerate(lin.widths):
            if whole % lin.split:
                raise KvplanError(f"{model.name} at {arg('tp')} {tp}: the {lin.name}'s {whole}-wide "
                                  f"{'input' if lin.mode == ROW else 'output'} does not split evenly over {lin.split} "
                                  "ranks", EXIT_USAGE, param="tp", value=tp)
            if (whole // lin.split) % q.group_size:
                raise KvplanError(_message(model, rule, tp, lin, index), EXIT_USAGE, param="tp", value=tp)


def check_vllm(model, dep, version: str) -> None:
    """vLLM's rule at `version`: attention, dense MLPs and shared experts over tp within a dp rank; merged layers
    checked before 0.14.0. Shared experts are not checked with sequence-parallel MoE (tp, dp above 1 and expert
    parallelism, where vLLM 0.33.0 builds DeepSeek's with disable_tp: `config/parallel.py` L768-785,
    `models/deepseek_v2.py` L255-276, L364-372)."""
    seq_parallel = dep.ep > 1 and dep.dp > 1 and dep.tp > 1
    v = parse_version(version)
    rule = Rule("vLLM", version, merged=v < MERGED_SKIPPED, v4_shared=v < V4_SHARED_PADDED,
                gdn_one_part=model.architecture in VLLM_ONE_PART_GDN)
    check(model, Splits(dep.tp, dep.tp, 0 if seq_parallel else dep.tp), rule, dep.tp)


def check_sglang(model, dep, version: str, tp_size: int, dense_tp: int) -> None:
    """SGLang's rule at `version`: attention over tp (the attention group under DP attention), dense MLPs over
    `dense_tp`, shared experts over SGLang's tp size (`tp_size`: tp x dp under DP attention; fused into the routed
    experts or not, the same shard) without expert parallelism, not checked with it (fused on some GPUs only)."""
    rule = Rule("SGLang", version, skip_qkv=model.architecture in SGLANG_SKIPS_QKV)
    check(model, Splits(dep.tp, dense_tp, tp_size if dep.ep == 1 else 0), rule, dep.tp)


def partial_scale_bytes(model, dep, version: tuple[int, ...]) -> int:
    """Bytes per rank vLLM (0.14.0+) holds in block scales beyond its 1/tp share where a merged attention / mixer
    projection's shard is not whole blocks (the layer it no longer refuses: MiMo-V2-Flash's qkv_proj at tp 4). The
    rank's scales are [cdiv(sum of its parts, block_n), cdiv(K, block_k)] (`create_fp8_scale_parameter`, 0.14.0
    wheel `quantization/utils/fp8_utils.py` L1483-1487, 0.23.0 L1213-1219, 0.33.0 L1415-1421), the checkpoint's
    [cdiv(sum of the parts, block), cdiv(K, block)] (kvplan.readers.block_scales) split 1/tp: a layer adds
    4 x cdiv(K, b) x (tp x rank rows - rows) / tp, floored, K the hidden size. Each layer of the largest pipeline
    stage counted. Left out: a layer whose K / V parts hold replicated heads (tp above the KV heads; their bytes are
    kvplan.planning.layout.replicated_kv_proj_bytes's, pooled), and merged MLPs (their down_proj, of the same
    width, is refused where gate_up is not whole blocks: kvplan.engines.fp8_linear.check)."""
    if version < MERGED_SKIPPED:
        return 0
    return _partial_rows(model, dep.tp, Rule("vLLM", "", gdn_one_part=model.architecture in VLLM_ONE_PART_GDN),
                         ranges=stage_ranges(model, dep))


def sglang_partial_scale_bytes(model, attn_tp: int, ranges: list[tuple[int, int]] | None = None) -> int:
    """The same partial rows under SGLang, where the one merged projection built unchecked is MiMo-V2's qkv_proj
    (`skip_block_quant_check=True`: 0.5.7 wheel `models/mimo_v2_flash.py` L387, 0.5.23 `models/mimo_v2.py` L724; every
    other merged layer with a part not whole blocks is refused, `check_sglang`). SGLang sizes a block-FP8 linear's
    scales as vLLM does, [cdiv(output_size_per_partition, block_n), cdiv(input_size_per_partition, block_k)]
    (`Fp8LinearMethod` create_weights, 0.5.7 wheel `layers/quantization/fp8.py` L308, 0.5.10 L401, 0.5.23 L678), so
    a rank of the attention group (`attn_tp`: --tp-size, or its attention share under DP attention) adds the same
    bytes: MiMo-V2-Flash at attention tp 4, 576 B a GPU. `ranges`: the pipeline stages (None: one)."""
    if model.architecture not in SGLANG_SKIPS_QKV:
        return 0
    return _partial_rows(model, attn_tp, Rule("SGLang", ""), only=("qkv_proj",), ranges=ranges)


def _partial_rows(model, tp: int, rule: Rule, only: tuple[str, ...] | None = None,
                  ranges: list[tuple[int, int]] | None = None) -> int:
    """The bytes `partial_scale_bytes` describes, over the merged mixer linears `rule` reads (those named in `only`
    where given), each layer of the largest stage of `ranges` (None: one) split `tp` ways."""
    q = model.quantization
    if q.quant_method != "fp8" or q.group_size <= 0 or q.experts_only or tp <= 1:
        return 0
    block, cols = q.group_size, cdiv(model.hidden_size, q.group_size)
    a, b = max(stages_or_one(model, ranges), key=lambda s: s[1] - s[0])
    total = 0
    for layer, n in Counter(model.layers[a:b]).items():
        for lin in _mixer_linears(model, tp, rule, tp, (layer,)):
            if (lin.mode != MERGED or lin.replicated or any(w % lin.split for w in lin.widths)
                    or (only is not None and lin.name not in only)):
                continue
            rows = cdiv(sum(w // lin.split for w in lin.widths), block)
            total += n * (4 * cols * (lin.split * rows - cdiv(sum(lin.widths), block)) // lin.split)
    return total
