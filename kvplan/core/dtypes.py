"""Element types of caches and weights, as engines spell them, and their exact byte sizes.

A cache element type is a block of `block_elems` values stored in `block_bytes` bytes. Plain
types are blocks of one (bf16: 1 value in 2 bytes); llama.cpp's quantized cache types carry a
per-block scale, so q8_0 is 32 values in 34 bytes. Sizes stay exact integers that way.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.intmath import cdiv


@dataclass(frozen=True)
class DType:
    name: str
    block_elems: int
    block_bytes: int

    def bytes_for(self, elements: int) -> int:
        """Bytes that `elements` values occupy (whole blocks; rows of cache are block multiples)."""
        blocks = cdiv(elements, self.block_elems)
        return blocks * self.block_bytes

    @property
    def bytes_per_element(self) -> float:
        return self.block_bytes / self.block_elems

    @property
    def one_byte(self) -> bool:
        """One byte a value, unblocked: an fp8 (or int8) cache, the only one DeepSeek-V4's pools take."""
        return self.block_elems == 1 and self.block_bytes == 1


FP32 = DType("fp32", 1, 4)
BF16 = DType("bf16", 1, 2)
FP16 = DType("fp16", 1, 2)
FP8 = DType("fp8", 1, 1)
INT8 = DType("int8", 1, 1)

# Cache element types. Block sizes of the llama.cpp types are ggml's (ggml/src/ggml-common.h:
# block_q8_0 = 32 int8 + one fp16 scale = 34 bytes; q4_0 = 16 + 2 = 18; q4_1 = 16 + 2 + 2 = 20;
# q5_0 = 16 + 4 + 2 = 22; q5_1 = 16 + 4 + 2 + 2 = 24; iq4_nl = 16 + 2 = 18).
KV_DTYPES: dict[str, DType] = {
    "fp32": FP32, "bf16": BF16, "fp16": FP16, "fp8": FP8, "int8": INT8,
    "q8_0": DType("q8_0", 32, 34),
    "q4_0": DType("q4_0", 32, 18),
    "q4_1": DType("q4_1", 32, 20),
    "q5_0": DType("q5_0", 32, 22),
    "q5_1": DType("q5_1", 32, 24),
    "iq4_nl": DType("iq4_nl", 32, 18),
}

# Spellings engines and configs use, mapped to the names above.
_ALIASES = {
    "float32": "fp32", "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "fp8_inc": "fp8", "fp8_ds_mla": "fp8", "e4m3": "fp8",
    "q8": "q8_0",
}

# GGUF weight types (llama.cpp): (values per block, bytes per block), so bits per weight are exact:
# block bytes x 8 / block values. From the block structs and their static_asserts in ggml-org/llama.cpp
# ggml/src/ggml-common.h (QK_K = 256):
#   q4_0 d + qs[16] = 18 B / 32 (4.5 bpw); q4_1 d, m + qs[16] = 20 / 32 (5.0); q5_0 d + qh[4] + qs[16] = 22 / 32
#   (5.5); q5_1 = 24 / 32 (6.0); q8_0 d + qs[32] = 34 / 32 (8.5); iq4_nl d + qs[16] = 18 / 32 (4.5);
#   q2_K scales[16] + qs[64] + d, dmin = 84 / 256 (2.625); q3_K hmask[32] + qs[64] + scales[12] + d = 110 / 256
#   (3.4375); q4_K d, dmin + scales[12] + qs[128] = 144 / 256 (4.5); q5_K 4 + 12 + qh[32] + qs[128] = 176 / 256
#   (5.5); q6_K ql[128] + qh[64] + scales[16] + d = 210 / 256 (6.5625); iq4_xs d + scales_h + scales_l[4] +
#   qs[128] = 136 / 256 (4.25); iq3_s d + qs[64] + qh[8] + signs[32] + scales[4] = 110 / 256 (3.4375);
#   iq3_xxs d + qs[96] = 98 / 256 (3.0625); iq2_s d + qs[64] + qh[8] + scales[8] = 82 / 256 (2.5625);
#   iq2_xs d + qs[32 x u16] + scales[8] = 74 / 256 (2.3125); iq2_xxs d + qs[32 x u16] = 66 / 256 (2.0625);
#   iq1_m qs[32] + qh[16] + scales[8] = 56 / 256 (1.75); iq1_s d + qs[32] + qh[8 x u16] = 50 / 256 (1.5625).
GGUF_TYPES: dict[str, tuple[int, int]] = {
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34), "iq4_nl": (32, 18),
    "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
    "iq4_xs": (256, 136), "iq3_s": (256, 110), "iq3_xxs": (256, 98), "iq2_s": (256, 82), "iq2_xs": (256, 74),
    "iq2_xxs": (256, 66), "iq1_m": (256, 56), "iq1_s": (256, 50),
}
# Every ggml tensor type a GGUF file may name, by its id in the file: (name, values per block, bytes per block). The ids
# are ggml's `enum ggml_type` (ggml-org/ggml@d99724f2 include/ggml.h; docs/gguf.md lists the same); a tensor row of
# n values takes n / block x block bytes (ggml_row_size over type_traits' blck_size and type_size, src/ggml.c), the
# block sizes those of GGUF_TYPES above and, for the rest, their static_asserts in src/ggml-common.h: q8_1 2 halves +
# qs[32] = 36 / 32; q8_K float d + qs[256] + bsums[16 x i16] = 292 / 256; tq1_0 d + qh[4] + qs[48] = 54 / 256;
# tq2_0 d + qs[64] = 66 / 256; mxfp4 e + qs[16] = 17 / 32; nvfp4 scales[4] + qs[32] = 36 / 64; q1_0 d + qs[16] =
# 18 / 128; q2_0 d + qs[16] = 18 / 64. Ids 4, 5 and 31-33, 36-38 are types ggml removed from GGUF files.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 24: ("i8", 1, 1), 25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8),
    28: ("f64", 1, 8), 30: ("bf16", 1, 2), 9: ("q8_1", 32, 36), 15: ("q8_k", 256, 292), 34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66), 39: ("mxfp4", 32, 17), 40: ("nvfp4", 64, 36), 41: ("q1_0", 128, 18),
    42: ("q2_0", 64, 18),
    **{i: (n, *GGUF_TYPES[n]) for i, n in {
        2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k",
        14: "q6_k", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl", 21: "iq3_s", 22: "iq2_s",
        23: "iq4_xs", 29: "iq1_m"}.items()},
}

# The _K_M files are mixes, not one type. The k-quants PR (ggml-org/llama.cpp#1684) defines them:
# Q4_K_M "uses GGML_TYPE_Q6_K for half of the attention.wv and feed_forward.w2 tensors, else
# GGML_TYPE_Q4_K"; Q5_K_M the same over Q5_K; Q3_K_M "uses GGML_TYPE_Q4_K for the attention.wv,
# attention.wo, and feed_forward.w2 tensors, else GGML_TYPE_Q3_K"; output.weight is Q6_K in all
# three (llama_tensor_get_type, src/llama-quant.cpp). Which tensors those are differs per model, so
# kvplan counts a mix at the whole-file bits per weight llama.cpp measured for Llama-3.1-8B
# (tools/quantize/README.md: Q3_K_M 3.9960, Q4_K_M 4.8944, Q5_K_M 5.7036), as (bits x 10^4).
GGUF_MIXES: dict[str, tuple[int, str]] = {
    "q3_k_m": (39960, "Q3_K, with Q4_K for attn_v, attn_output and ffn_down, Q6_K output"),
    "q4_k_m": (48944, "Q4_K, with Q6_K for half the attn_v and ffn_down tensors and the output"),
    "q5_k_m": (57036, "Q5_K, with Q6_K for half the attn_v and ffn_down tensors and the output"),
}

# Weight element types, bits per stored weight of a quantized linear layer (before group scales).
# nf4: bitsandbytes' 4-bit NormalFloat as vLLM and SGLang quantize a 16-bit checkpoint while loading it
# (--quantization bitsandbytes; kvplan.model.weights.BNB_NF4)
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4", "nf4", *GGUF_TYPES, *GGUF_MIXES)
_WEIGHT_ALIASES = {
    **{k: v for k, v in _ALIASES.items() if v in ("fp32", "bf16", "fp16", "fp8")},
    "awq": "int4", "gptq": "int4", "w4a16": "int4", "q4": "int4", "int4_awq": "int4",
    "w8a8": "int8", "w8a16": "int8", "bitsandbytes": "nf4", "bnb": "nf4", "bnb_nf4": "nf4",
}


def canonical_kv_dtype(name: str, model_dtype: str = "bf16") -> DType:
    """`bf16`, `bfloat16`, `fp8_e4m3`, `q8_0`, `auto` (= the model's own dtype) -> DType."""
    key = str(name).strip().lower()
    if key == "auto":
        key = model_dtype
    key = _ALIASES.get(key, key)
    if key not in KV_DTYPES:
        choices = ", ".join(["auto", *KV_DTYPES])
        raise KvplanError(f"unknown KV cache dtype {name!r}; choose one of: {choices}", EXIT_USAGE, param="kv_dtype",
                          value=name, allowed=("auto", *KV_DTYPES))
    return KV_DTYPES[key]


def canonical_weight_dtype(name: str) -> str:
    """`bfloat16` -> `bf16`, `awq` -> `int4`, ... or a one-line error."""
    key = str(name).strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    if key not in WEIGHT_DTYPES:
        raise KvplanError(f"unknown weight dtype {name!r}; choose one of: {', '.join(WEIGHT_DTYPES[:9])} (or awq, "
                          f"gptq, bitsandbytes), or a GGUF type: {', '.join([*GGUF_MIXES, *GGUF_TYPES])}", EXIT_USAGE,
                          param="weight_dtype", value=name, allowed=tuple(WEIGHT_DTYPES))
    return key


def gguf_bits_per_weight(name: str) -> float | None:
    """Bits per weight of a GGUF type (exact) or mix (llama.cpp's measured whole-file figure), else None."""
    if name in GGUF_TYPES:
        elems, nbytes = GGUF_TYPES[name]
        return nbytes * 8 / elems
    if name in GGUF_MIXES:
        return GGUF_MIXES[name][0] / 10**4
    return None
