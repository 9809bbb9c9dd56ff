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

vLLM: fp8.py `Fp8LinearMethod.create_weights` inline (0.7.3 wheel L170-193), as `validate_fp8_block_shape` from
0.11.0 (`quantization/utils/fp8_utils.py` 0.11.0 L750-782, 0.12.0 L994-1034, 0.33.0 L1296-1344). From 0.14.0 a
merged column layer (more than one output part: qkv_proj, gate_up_proj) any of whose parts is not whole blocks skips
the check (`ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch`, 0.14.0 `layers/linear.py` L290, L492,
L524-543; 0.33.0 L289, L519, L562-581; not in 0.13.0; vllm-project/vllm#30836, merged 2025-12-19, for MiMo-V2-Flash,
whose one replicated 192-wide KV head a rank is not whole blocks), so only its row-parallel partner can refuse. The
"last part may be partial" exception of a merged layer applies only where it is not split (tp 1), never here.
SGLang: `Fp8LinearMethod.validate_block_quant_shapes` (0.5.23 wheel `layers/quantization/fp8.py` L569-610; the same
checks inline in 0.4.4.post3 L220-242 and 0.5.10 L300-338) checks every part of a merged layer in every release,
except where the model passes `skip_block_quant_check`: MiMo-V2's qkv_proj (0.5.10 `models/mimo_v2_flash.py`, 0.5.23
`models/mimo_v2.py` L724). TensorRT-LLM has no such check (`FP8BlockScalesLinearMethod.create_weights` sizes the
scales ceil(out / 128) x ceil(in / 128), NVIDIA/TensorRT-LLM@00bbf71e `_torch/modules/linear.py`): not refused here.

The widths a rank gets: attention heads / tp x head sizes (KV heads replicated where tp exceeds them, as
kv_heads_per_rank), the dense MLP's and shared experts' intermediate widths from the parameter counts (exact, or the
check is refused with the reason) / their split. Checked: layers with head sizes (full, sliding, chunked attention)
and MLA's; other mixers' projections (recurrent states) are not read, nor roles the checkpoint keeps in 16 bits.
DeepSeek-V4 (compressed attention layers): its shared expert is a tp-split gate_up / down pair checked as any (vLLM
0.20.0 `models/deepseek_v4.py` DeepseekV4MLP L69-101, 0.22.0 `models/deepseek_v4/nvidia/model.py` L68-100; DeepSeek-V4-Pro
at tp 16, 3072 / 16 = 192: "Weight input_size_per_partition = 192 is not divisible by weight quantization block_k =
128.", vllm-project/vllm#42384, 2026-05-12) until vLLM pads it to whole blocks a rank (0.25.0 wheel
`models/deepseek_v4/nvidia/model.py` DeepseekV4MLP L81-125, `_pad_shared_expert_weight` L1156-1166); its attention
projections and SGLang's DeepSeek-V4 are not read, so not checked. Nor are MLA layers whose spec lacks the head
sizes. kvplan checks `weight_block_size[0]` as both block_n and block_k (every block-FP8 checkpoint kvplan has read
is square).
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version
from kvplan.model.compressed import has_compressed
from kvplan.model.layers import ChunkedLocal, FullAttention, MLALatent, SlidingWindow, kv_heads_per_rank
from kvplan.readers.mlp_layout import ffn_kinds, gated_mlp

ROW = "row"  # split by its input: block_k
COLUMN = "column"  # split by its output: block_n
MERGED = "merged"  # column, several outputs in one weight: every part checked (vLLM before 0.14.0, SGLang)
MERGED_SKIPPED = (0, 14, 0)  # vLLM: a merged layer with a part not whole blocks skips the check
V4_SHARED_PADDED = (0, 25, 0)  # vLLM: DeepSeek-V4's block-FP8 shared expert padded to whole blocks a rank
SGLANG_SKIPS_QKV = ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")  # skip_block_quant_check=True on qkv_proj


class Rule(NamedTuple):
    """What one engine release checks: its name and version (for the message), whether merged column layers are
    checked, whether the model's qkv_proj skips the check (SGLang's MiMo-V2), and whether DeepSeek-V4's shared experts
    are checked."""

    engine: str
    version: str
    merged: bool = True
    skip_qkv: bool = False
    v4_shared: bool = False  # DeepSeek-V4's shared experts checked (vLLM before 0.25.0 does not pad them)


class Splits(NamedTuple):
    """Over how many ranks the attention projections, the dense MLPs and the shared experts are split; 0: not
    checked (the engine's split is not read)."""

    attention: int
    mlp: int
    shared: int


class Linear(NamedTuple):
    """One tensor-parallel linear: its name, how it splits, its whole widths (the input for a row-parallel layer,
    each output part for a column one) and over how many ranks."""

    name: str
    mode: str
    widths: tuple[int, ...]
    split: int


def _attention(model, split: int, skip_qkv: bool) -> list[Linear]:
    """The projections of each distinct attention layer: qkv_proj and o_proj of a layer with head sizes, MLA's
    q_b_proj (q_proj without a q LoRA), kv_b_proj and o_proj; other mixers' are not listed."""
    out, heads = [], model.num_attention_heads
    for layer in dict.fromkeys(model.layers):
        if isinstance(layer, MLALatent) and layer.qk_nope_head_dim and layer.v_head_dim:
            q_out = heads * (layer.qk_nope_head_dim + layer.qk_rope_head_dim)
            out += [Linear("q_b_proj" if layer.q_lora_rank else "q_proj", COLUMN, (q_out,), split),
                    Linear("kv_b_proj", COLUMN, (heads * (layer.qk_nope_head_dim + layer.v_head_dim),), split),
                    Linear("o_proj", ROW, (heads * layer.v_head_dim,), split)]
        elif isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):
            d, v = layer.head_dim, getattr(layer, "v_head_dim", 0) or layer.head_dim
            kv = kv_heads_per_rank(layer.num_kv_heads, split) * split  # replicated heads: one a rank
            if not skip_qkv:
                out.append(Linear("qkv_proj", MERGED, (heads * d, kv * d, kv * v), split))
            out.append(Linear("o_proj", ROW, (heads * v,), split))
    return list(dict.fromkeys(out))


def _width(model, params: int, layers: int, what: str, tp: int) -> int:
    """One MLP's intermediate width from its parameter count over `layers` layers (gated: three matrices)."""
    per = layers * (3 if gated_mlp(model) else 2) * model.hidden_size
    if params % per:
        raise KvplanError(f"{model.name}: its {what} width does not follow exactly from its parameter counts, so "
                          f"kvplan cannot check the engine's FP8 block rule for {arg('tp')} {tp}", EXIT_USAGE,
                          param="tp", value=tp)
    return params // per


def _mlp(model, width: int, split: int, what: str) -> list[Linear]:
    """gate_up_proj (merged; up_proj alone where the MLP is not gated) and down_proj of one MLP."""
    up = Linear(f"gate_up_proj of its {what}", MERGED, (width, width), split) if gated_mlp(model) else \
        Linear(f"up_proj of its {what}", COLUMN, (width,), split)
    return [up, Linear(f"down_proj of its {what}", ROW, (width,), split)]


def linears(model, splits: Splits, rule: Rule, tp: int) -> list[Linear]:
    """Every split linear the rule reads, in the order a decoder layer builds them (attention, then MLP)."""
    kept = {role for role, n in model.quantization.kept if n}
    out = _attention(model, splits.attention, rule.skip_qkv) if "attention" not in kept else []
    p = model.params
    n_dense = ffn_kinds(model, model.num_layers).count("dense") if p.mlp else 0
    if n_dense and "mlp" not in kept:
        out += _mlp(model, _width(model, p.mlp, n_dense, "dense MLP", tp), splits.mlp, "dense MLP layers")
    v4_skipped = has_compressed(model.layers) and not rule.v4_shared
    if p.shared_experts and p.num_moe_layers and splits.shared and "shared_experts" not in kept and not v4_skipped:
        shared = _width(model, p.shared_experts, p.num_moe_layers, "shared experts'", tp)
        out += _mlp(model, shared, splits.shared, "shared experts")
    return [x for x in out if x.split > 1 and (x.mode != MERGED or rule.merged)]


def _message(model, rule: Rule, tp: int, lin: Linear, whole: int) -> str:
    """The one-line refusal: the layer, its width, the split, the block and the engine's own message."""
    block, part = model.quantization.group_size, whole // lin.split
    dim, name = ("input", "Weight input_size_per_partition") if lin.mode == ROW else \
        ("output", "Weight output_partition_size")
    letter = "k" if lin.mode == ROW else "n"
    return (f"{rule.engine} {rule.version} refuses {model.name} at {arg('tp')} {tp}: the {lin.name} splits its "
            f"{whole}-wide {dim} over {lin.split} ranks, {whole} / {lin.split} = {part} each, not a multiple of the "
            f"checkpoint's {block} x {block} FP8 block (\"{name} = {part} is not divisible by weight quantization "
            f"block_{letter} = {block}.\")")


def check(model, splits: Splits, rule: Rule, tp: int) -> None:
    """A one-line refusal where the engine release (`rule`) refuses this block-FP8 checkpoint's dense linears at
    these splits (module docstring); nothing for any other checkpoint or where every shard is whole blocks."""
    q = model.quantization
    if q.quant_method != "fp8" or q.group_size <= 0 or q.experts_only or max(splits) <= 1:
        return
    for lin in linears(model, splits, rule, tp):
        for whole in lin.widths:
            if whole % lin.split:
                raise KvplanError(f"{model.name} at {arg('tp')} {tp}: the {lin.name}'s {whole}-wide "
                                  f"{'input' if lin.mode == ROW else 'output'} does not split evenly over {lin.split} "
                                  "ranks", EXIT_USAGE, param="tp", value=tp)
            if (whole // lin.split) % q.group_size:
                raise KvplanError(_message(model, rule, tp, lin, whole), EXIT_USAGE, param="tp", value=tp)


def check_vllm(model, dep, version: str) -> None:
    """vLLM's rule at `version`: attention, dense MLPs and shared experts over tp within a dp rank; merged layers
    checked before 0.14.0. Shared experts are not checked with sequence-parallel MoE (tp, dp above 1 and expert
    parallelism, where vLLM 0.33.0 builds DeepSeek's with disable_tp: `config/parallel.py` L768-785,
    `models/deepseek_v2.py` L255-276, L364-372)."""
    seq_parallel = dep.ep > 1 and dep.dp > 1 and dep.tp > 1
    v = parse_version(version)
    rule = Rule("vLLM", version, merged=v < MERGED_SKIPPED, v4_shared=v < V4_SHARED_PADDED)
    check(model, Splits(dep.tp, dep.tp, 0 if seq_parallel else dep.tp), rule, dep.tp)


def check_sglang(model, dep, version: str, tp_size: int, dense_tp: int) -> None:
    """SGLang's rule at `version`: attention over tp (the attention group under DP attention), dense MLPs over
    `dense_tp`, shared experts over SGLang's tp size (`tp_size`: tp x dp under DP attention; fused into the routed
    experts or not, the same shard) without expert parallelism, not checked with it (fused on some GPUs only)."""
    rule = Rule("SGLang", version, skip_qkv=model.architecture in SGLANG_SKIPS_QKV)
    check(model, Splits(dep.tp, dense_tp, tp_size if dep.ep == 1 else 0), rule, dep.tp)
