"""A model's weight bytes by role (`weight_bytes`), in its checkpoint's own format or as a weight dtype asked for,
and what such a dtype assumes (`own_format`, `assumed_int4_group`, `override_note`). Split from kvplan/model/spec.py
(round 45); the arithmetic unchanged.
"""

from __future__ import annotations

from kvplan.model.spec import ModelSpec, Quantization, WeightBytes
from kvplan.model.weight_formats import (PLAIN_BYTES, ROW_PARALLEL, block_linear_bytes, gguf_edges, gguf_methods,
                                         linear_bytes, row_linear_bytes, row_scale_bytes, shape_params)


def weight_bytes(spec: ModelSpec, weight_dtype: str | None = None) -> WeightBytes:
    """Weight bytes of `spec` stored in its own format, or as `weight_dtype` when overridden.

    Only linear layers are quantized; embeddings, the LM head, norms and routers stay in the
    checkpoint's 16-bit type, which is how AWQ, GPTQ, FP8 and MXFP4 checkpoints ship. A draft model
    served beside it (`spec.draft`) adds its own weights, in its own format, role by role.
    """
    own = _own_weight_bytes(spec, weight_dtype)
    if spec.draft is None:
        return own
    d = weight_bytes(spec.draft)
    return WeightBytes(own.sharded + d.sharded, own.replicated + d.replicated, own.experts + d.experts,
                       own.embedding + d.embedding, own.lm_head + d.lm_head, own.vision + d.vision,
                       own.vision_replicated + d.vision_replicated)


def own_format(spec: ModelSpec, weight_dtype: str | None) -> bool:
    """Whether a weight dtype asked for is the checkpoint's own format (None, or the same method): then the
    checkpoint's group size, zero points, exclusion list and exact bytes stand, never a default group."""
    return weight_dtype is None or weight_dtype == spec.quantization.method


# The int4 group size kvplan plans with where no config states one (weight_dtype int4 on a checkpoint of another
# format, a 16-bit one included): 128 groups with a 4-bit zero point and an fp16 scale each, the AWQ/GPTQ tools'
# common default. AutoAWQ's AwqConfig (casper-hansen/AutoAWQ, awq/models/_config.py): `zero_point: bool =
# field(default=True)`, `q_group_size: int = field(default=128)`, `w_bit: int = field(default=4)`.


INT4_GROUP = 128


# bitsandbytes' NF4 as vLLM and SGLang quantize a 16-bit checkpoint while loading it (--quantization bitsandbytes):
# `quantize_4bit(loaded_weight, compress_statistics=True, quant_type="nf4")` with bitsandbytes' default blocksize 64
# (vllm 0.8.0 wheel, vllm/model_executor/model_loader/loader.py L1045-1049,
# BitsAndBytesModelLoader._unquantized_generator;
# sglang 0.5.23 wheel, sglang/srt/model_loader/loader.py L2854-2855, the same call): two weights a byte and, with
# compress_statistics (double quantization), a uint8 absmax per 64; the fp32 absmax of every 256 of those (4 B per
# 16,384 weights) and each tensor's 256-entry code table are left out, as for a bitsandbytes checkpoint
# (kvplan.readers.quantization). Every linear layer of the decoder; embeddings, LM head and norms stay 16-bit.


BNB_NF4 = Quantization("int4", 64, symmetric=True, scale_bytes=1)


def assumed_int4_group(spec: ModelSpec, weight_dtype: str | None) -> int:
    """The int4 group size a weight dtype plans `spec` with although its checkpoint does not state it (INT4_GROUP);
    0 when nothing is assumed (not int4, or int4 that is the checkpoint's own format, whose group stands)."""
    return INT4_GROUP if weight_dtype == "int4" and not own_format(spec, weight_dtype) else 0


def override_note(spec: ModelSpec, weight_dtype: str | None) -> str | None:
    """What a weight dtype that is not a quantized checkpoint's own format replaces, and the int4 group it plans with
    on any checkpoint that states none (None when it is the same format, or when a 16-bit checkpoint is planned in a
    format with nothing assumed: engines quantize 16-bit weights as they load)."""
    q = spec.quantization
    group = assumed_int4_group(spec, weight_dtype)
    planned = f" group {group}" if group else ""
    if own_format(spec, weight_dtype) or (q.method in PLAIN_BYTES and not group):
        return None
    if q.method in PLAIN_BYTES:  # a 16-bit checkpoint is any format's source: only the group is assumed
        return f"{weight_dtype}{planned}"
    own = f" group {q.group_size}" if q.group_size else ""
    return f"{weight_dtype}{planned}, not the checkpoint's {q.method}{own}"


def _own_weight_bytes(spec: ModelSpec, weight_dtype: str | None) -> WeightBytes:
    f = spec.file_weights  # the file's own bytes by role, while they are still the checkpoint's (nothing rescaled it)
    if f is not None and own_format(spec, weight_dtype) and f.total == spec.checkpoint_bytes:
        return f
    p = spec.params
    base = spec.dtype if spec.dtype in PLAIN_BYTES else "bf16"
    if own_format(spec, weight_dtype):
        q = spec.quantization
    elif weight_dtype in PLAIN_BYTES:
        q = Quantization(weight_dtype)
        base = weight_dtype
    elif weight_dtype == "nf4":
        q = BNB_NF4
    else:
        q = Quantization(weight_dtype, assumed_int4_group(spec, weight_dtype))
    plain = PLAIN_BYTES[base]
    dense_method = base if q.experts_only else q.method
    # parameters the exclusion list keeps in the model dtype (an MLA model's replicated down-projections
    # are part of its attention: kept in the same proportion)
    ka, km, ks, ke = (q.kept_of(r) for r in ("attention", "mlp", "shared_experts", "experts"))
    ke = min(ke, p.experts - p.expert_biases)
    kr = p.replicated * ka // p.attention if p.attention else 0
    kept_sharded = ka - kr + km + ks
    shardable = p.attention + p.mlp + p.shared_experts - p.replicated - kept_sharded
    embedding, lm_head = p.embedding * plain, p.lm_head * plain
    if q.method in gguf_methods():  # a GGUF file quantizes the embeddings and the output too
        emb_type, head_type = gguf_edges(q.method)
        # a tied table is quantized as the output head is ("for arches that share the same tensor between the
        # token embeddings and the output, we quantize the token embeddings with the quantization of the output
        # tensor", llama.cpp src/llama-quant.cpp llama_tensor_get_type, `!qs.has_output`)
        emb_type = emb_type if p.lm_head else head_type
        embedding, lm_head = linear_bytes(p.embedding, emb_type), linear_bytes(p.lm_head, head_type)
    cs, cr, ce = q.channel_scales or (0, 0, 0)
    whole = _row_parallel(shardable, dense_method, q)
    return WeightBytes(
        sharded=_linear(shardable, dense_method, q, "sharded") - whole + kept_sharded * plain + q.index_bytes + cs,
        replicated=(_linear(p.replicated - kr, dense_method, q, "replicated")
                    + (p.router + p.other + kr) * plain + cr + whole),
        experts=(_linear(p.experts - p.expert_biases - ke, q.experts_method or q.method, q, "experts")
                 + (p.expert_biases + ke) * plain + ce),
        embedding=embedding,
        lm_head=lm_head,
        vision=p.vision * plain,  # quantized checkpoints keep the vision tower in 16 bits
        vision_replicated=p.vision_replicated * plain,
    )


def _linear(n: int, method: str, q: Quantization, part: str) -> int:
    """`n` linear parameters of one WeightBytes part as `method`; a block-quantized checkpoint's own format with its
    tensors' shapes read counts its scales tensor by tensor (weight_formats.block_linear_bytes), a per-row one its
    rows (row_linear_bytes: the sharded part's row-parallel tensors too, whose scales _row_parallel moves)."""
    if method == q.method and q.per_row and q.block_shapes:
        parts = _SHARDED_ROWS if part == "sharded" else (part,)
        return row_linear_bytes(n, method, [s for s in q.block_shapes if s.part in parts])
    if method == q.method and q.block_shapes:
        return block_linear_bytes(n, method, q.group_size, [s for s in q.block_shapes if s.part == part])
    return linear_bytes(n, method, q.group_size, *q.group_format)


# the shapes whose parameters the sharded part holds in a per-row checkpoint: its own and the row-parallel tensors'


_SHARDED_ROWS = ("sharded", ROW_PARALLEL)


def _row_parallel(n: int, method: str, q: Quantization) -> int:
    """The per-row scales and zeros of the row-parallel tensors (o, down, out_proj) of the sharded part's `n`
    parameters: the weights split over tp by input, each rank holding all N rows' scales. vLLM 0.11.2 wheel
    quantization/gptq.py L264-281 (group -1: scale_and_zero_size = input_size // input_size = 1, no input dim: not
    split), utils/marlin_utils.py L252-258 (marlin_repeat_scales_on_all_ranks: channelwise and row-parallel); 0 where
    the shapes were not read or do not stand for `n` (row_linear_bytes pools them)."""
    shapes = [s for s in q.block_shapes if s.part in _SHARDED_ROWS]
    if method != q.method or not q.per_row or not shapes or shape_params(shapes) > n:
        return 0
    return row_scale_bytes([s for s in shapes if s.part == ROW_PARALLEL], method)
