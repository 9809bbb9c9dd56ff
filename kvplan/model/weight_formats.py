"""The bytes a count of linear weights takes in each storage format kvplan plans: 16/32-bit floats, fp8 and int8 (with
block scales), int4 groups (AWQ, GPTQ, bitsandbytes NF4), MXFP4, NVFP4, and GGUF's ggml blocks and _K_M mixes, with the
GGUF types llama.cpp gives a file's token embedding and output head.

Kept apart from `weights.py` because it is pure format arithmetic: it knows nothing of a model's roles, which
`weights.weight_bytes` applies it to.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.dtypes import GGUF_MIXES, GGUF_TYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.intmath import cdiv

PLAIN_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}  # bytes per element of an unquantized dtype


class BlockShape(NamedTuple):
    """Linear tensors of one shape in a block-quantized checkpoint: the WeightBytes part they are in (sharded,
    replicated, experts), their output rows and input columns, and how many the model has
    (kvplan.readers.block_scales)."""

    part: str
    rows: int
    cols: int
    count: int


def linear_bytes(params: int, method: str, group_size: int = 0, zeros: bool = True, scale_bytes: int = 2,
                 input_groups: bool = False) -> int:
    """Bytes of `params` linear weights stored as `method`, scales included.

    * fp8 / int8: one byte each, plus an fp32 scale per group_size x group_size block of the pooled count when
      the checkpoint uses block scales (DeepSeek-V3: weight_block_size [128, 128]); a checkpoint whose tensors'
      shapes were read counts them tensor by tensor instead (block_linear_bytes).
    * int8 in input groups (`input_groups`: 8-bit GPTQ, AutoRound, AWQ): one byte each, plus per group of
      `group_size` input values of each output one fp16 scale and one packed 8-bit zero point: 1 + 3 / 128 bytes a
      weight at group 128, where an fp32 scale per 128 x 128 block would be 1 + 4 / 16,384. The quantizer's own
      tensors (AutoGPTQ/AutoGPTQ@058fd80a auto_gptq/nn_modules/qlinear/qlinear_cuda.py QuantLinear.__init__):
      qweight int32 [K / (32 / bits), N], qzeros int32 [K / g, N / (32 / bits)], scales fp16 [K / g, N], g_idx
      int32 [K] (GPTQ's, counted apart: Quantization.index_bytes); vLLM loads the same shapes (0.19.0 gptq.py
      GPTQLinearMethod.create_weights L283-347, 0.33.0 auto_gptq.py AutoGPTQLinearMethod L376-429, no g_idx).
    * int4 (AWQ, GPTQ): half a byte each, plus per group of `group_size` (default 128) input
      values one fp16 scale and one packed 4-bit zero point: 0.5 + 2.5 / 128 bytes per weight; a
      symmetric scheme (`zeros=False`: compressed-tensors `symmetric: true`) stores no zero point:
      0.5 + 2 / group bytes (Kimi-K2-Thinking, group 32: 0.5625 B per expert weight); bitsandbytes NF4 has
      an fp32 absmax per 64 (`scale_bytes` 4: 0.5625 B), a uint8 one with double quantization (1: 0.515625 B).
    * mxfp4 (OCP microscaling): 32 four-bit values share one 8-bit exponent: 17 / 32 bytes each.
    * nvfp4 (NVIDIA ModelOpt / compressed-tensors nvfp4-pack-quantized): 16 four-bit e2m1 values share
      one fp8 e4m3 scale: 9 / 16 bytes each (vLLM modelopt.py ModelOptNvFp4LinearMethod.create_weights:
      weight uint8 [N, K/2], weight_scale fp8 [N, K/16]; the per-tensor fp32 scales are a few bytes).
    * GGUF types (q4_0, q6_k, iq4_xs, ...): whole ggml blocks; _K_M mixes at their measured bits per
      weight (kvplan.core.dtypes.GGUF_TYPES and GGUF_MIXES).
    """
    if method in PLAIN_BYTES:
        return params * PLAIN_BYTES[method]
    if method in ("fp8", "int8") and input_groups:
        g = group_size or 128
        return params + (params // g) * (scale_bytes + (1 if zeros else 0))
    if method in ("fp8", "int8"):
        scales = cdiv(params, group_size * group_size) * 4 if group_size else 0
        return params + scales
    if method == "int4":
        g = group_size or 128
        return params // 2 + (params // g) * (2 * scale_bytes + (1 if zeros else 0)) // 2
    if method == "mxfp4":
        return params * 17 // 32
    if method == "nvfp4":
        return params * 9 // 16

    if method in GGUF_TYPES:  # whole blocks (kvplan.core.dtypes gives each type's block from ggml-common.h)
        elems, nbytes = GGUF_TYPES[method]
        return cdiv(params, elems) * nbytes
    if method in GGUF_MIXES:  # a _K_M mix at llama.cpp's measured bits per weight (x 10^4)
        return cdiv(params * GGUF_MIXES[method][0], 80_000)
    raise KvplanError(f"unknown weight dtype {method!r}", EXIT_USAGE)


def block_linear_bytes(params: int, method: str, block: int, shapes) -> int:
    """`params` fp8 / int8 weights with block scales counted tensor by tensor: one byte a weight and an fp32 scale for
    each cdiv(rows, block) x cdiv(cols, block) tile of every tensor in `shapes` (a tile only partly filled takes a
    whole scale: the engines' allocation, kvplan.readers.block_scales), pooled over any parameters beyond those
    tensors (an MTP module added for speculative decoding). Pooled throughout (linear_bytes) where `shapes` is
    empty or holds more parameters than `params` (a spec whose counts were replaced: an MTP module alone, a model
    cut to its first layers), which the shapes do not describe."""
    covered = shape_params(shapes)
    if not shapes or method not in ("fp8", "int8") or block <= 0 or covered > params:
        return linear_bytes(params, method, block)
    return params + 4 * (scale_count(shapes, block) + cdiv(params - covered, block * block))


# a per-row checkpoint's row-parallel tensors (o, down): their weights in the sharded part, their scales whole a rank
ROW_PARALLEL = "row_parallel"


def row_linear_bytes(params: int, method: str, shapes) -> int:
    """`params` 4- or 8-bit GPTQ / AWQ weights at `group_size: -1`, one fp16 scale and one packed zero point per output
    row of each tensor in `shapes` (N rows: 2N + N x bits / 8 bytes; AutoGPTQ's QuantLinear scales [cdiv(K, K), N] and
    qzeros int32 [1, N x bits / 32]), pooled at groups of 128 over any parameters beyond those tensors
    (linear_bytes), and pooled throughout where the shapes hold more than `params` (block_linear_bytes' rule)."""
    covered = shape_params(shapes)
    if not shapes or method not in ("int4", "int8") or covered > params:
        return linear_bytes(params, method, 128, input_groups=method == "int8")
    rest = linear_bytes(params - covered, method, 128, input_groups=method == "int8")
    return (covered // 2 if method == "int4" else covered) + row_scale_bytes(shapes, method) + rest


def row_scale_bytes(shapes, method: str) -> int:
    """The per-row scales and zero points of `shapes`: 2.5 B a row at 4 bits, 3 B at 8."""
    rows = row_count(shapes)
    return rows * 5 // 2 if method == "int4" else rows * 3


def shape_params(shapes) -> int:
    """The weights `shapes` hold: what a part's parameter count must reach for its shapes to stand for it."""
    return sum(s.rows * s.cols * s.count for s in shapes)


def row_count(shapes) -> int:
    """The output rows of `shapes`: a per-row checkpoint's scales (one a row, each with its zero point)."""
    return sum(s.rows * s.count for s in shapes)


def scale_count(shapes, block: int) -> int:
    """The fp32 block scales of `shapes`: cdiv(N, block) x cdiv(K, block) a tensor."""
    return sum(s.count * cdiv(s.rows, block) * cdiv(s.cols, block) for s in shapes)


def gguf_methods() -> set:
    """Every GGUF weight dtype, block type or _K_M mix: a file that quantizes its embeddings and output too."""
    return {*GGUF_TYPES, *GGUF_MIXES}


def gguf_edges(method: str) -> tuple[str, str]:
    """GGUF types of token_embd and output.weight for a file of `method` (llama_tensor_get_type,
    src/llama-quant.cpp): token_embd keeps the file's base type (a _K_M mix's K type), output.weight
    is Q6_K, except Q8_0 files (kept Q8_0) and the 1-2 bit IQ files (Q5_K)."""
    base = {"q3_k_m": "q3_k", "q4_k_m": "q4_k", "q5_k_m": "q5_k"}.get(method, method)
    if method == "q8_0":
        return base, "q8_0"
    if method in ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs"):
        return base, "q5_k"
    return base, "q6_k"
