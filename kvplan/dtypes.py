"""Element types of caches and weights, as engines spell them, and their exact byte sizes.

A cache element type is a block of `block_elems` values stored in `block_bytes` bytes. Plain
types are blocks of one (bf16: 1 value in 2 bytes); llama.cpp's quantized cache types carry a
per-block scale, so q8_0 is 32 values in 34 bytes. Sizes stay exact integers that way.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import EXIT_USAGE, KvplanError


@dataclass(frozen=True)
class DType:
    name: str
    block_elems: int
    block_bytes: int

    def bytes_for(self, elements: int) -> int:
        """Bytes that `elements` values occupy (whole blocks; rows of cache are block multiples)."""
        blocks = -(-elements // self.block_elems)
        return blocks * self.block_bytes

    @property
    def bytes_per_element(self) -> float:
        return self.block_bytes / self.block_elems


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

# Weight element types, bits per stored weight of a quantized linear layer (before group scales).
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4")
_WEIGHT_ALIASES = {
    **{k: v for k, v in _ALIASES.items() if v in ("fp32", "bf16", "fp16", "fp8")},
    "awq": "int4", "gptq": "int4", "w4a16": "int4", "q4": "int4", "int4_awq": "int4",
    "w8a8": "int8", "w8a16": "int8",
}


def canonical_kv_dtype(name: str, model_dtype: str = "bf16") -> DType:
    """`bf16`, `bfloat16`, `fp8_e4m3`, `q8_0`, `auto` (= the model's own dtype) -> DType."""
    key = str(name).strip().lower()
    if key == "auto":
        key = model_dtype
    key = _ALIASES.get(key, key)
    if key not in KV_DTYPES:
        choices = ", ".join(["auto", *KV_DTYPES])
        raise KvplanError(f"unknown KV cache dtype {name!r}; choose one of: {choices}", EXIT_USAGE)
    return KV_DTYPES[key]


def canonical_weight_dtype(name: str) -> str:
    """`bfloat16` -> `bf16`, `awq` -> `int4`, ... or a one-line error."""
    key = str(name).strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    if key not in WEIGHT_DTYPES:
        raise KvplanError(
            f"unknown weight dtype {name!r}; choose one of: {', '.join(WEIGHT_DTYPES)} (or awq, gptq)", EXIT_USAGE
        )
    return key
