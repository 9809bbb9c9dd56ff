"""The RoPE cos/sin tables an engine builds at start-up, in elements (rows x rotary dim), from config.json.

vLLM precomputes one table per distinct rotary embedding (get_rope caches instances, so every layer
of one kind shares it) as a buffer of the model's dtype, built on the GPU with the model, so it
counts in "Model loading took" (vllm/model_executor/layers/rotary_embedding/base.py, RotaryEmbedding
.__init__: `_compute_cos_sin_cache()` is [max_position_embeddings, rotary_dim] (cos and sin halves),
then `.to(dtype)`; linear_scaling_rope.py: max_position x factor rows; yarn_scaling_rope.py and
deepseek_scaling_rope.py: original_max_position_embeddings x factor rows). Llama 4 Scout's 10M
positions x 128 make 2.5 GiB per rank; Llama 3.1's 131,072 x 128, 32 MiB.

Counted: the default, llama3, linear, dynamic, yarn and deepseek_yarn tables, plus Gemma 3's local
table (rope_local_base_freq). Other scalings (longrope, mrope, ...) are counted as one table of
max_position_embeddings rows, a floor. Families without RoPE have none.

No clamp: vLLM builds exactly `torch.arange(rows)` (base.py `_compute_cos_sin_cache`; linear_scaling_rope.py
`max_position_embeddings * scaling_factor`; yarn_scaling_rope.py `original_max_position * scaling_factor`)
with no bound of its own, so kvplan counts the same rows. A table is one row per position, so a config
whose table has more rows than the config reader accepts as positions (kvplan.readers.cfg.LIMITS["window"],
2^30, the bound on max_position_embeddings itself) is refused as hostile or broken, as is a non-finite
value; it is never clamped to a made-up size.

`read_rope_scaling` keeps what the engines' context-limit rules read from the same keys (type, factor,
original positions; kvplan.engines.context): one dict, or transformers 5's per-layer-type dict of them
(`rope_parameters`: {"full_attention": {...}, "sliding_attention": {...}}), read as vLLM reads it
(v0.33.0 vllm/config/model.py `_get_and_verify_max_len`: the factor of the last scaled entry).
"""

from __future__ import annotations

import math

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.spec import RopeScaling
from kvplan.readers.cfg import LIMITS

_NO_ROPE = {"gpt2", "gpt_bigcode", "bloom", "mpt", "mamba", "falcon_mamba", "mamba2", "jamba", "nemotron_h", "opt"}
_FP32_TABLES = {"gpt_oss"}  # vLLM models/gpt_oss.py OAIAttention: get_rope(..., dtype=torch.float32)
_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _num(value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0.0
    if isinstance(value, float) and not math.isfinite(value):
        raise KvplanError(f"config: a RoPE value is {value!r}, not a finite number", EXIT_USAGE)
    return float(value) if value > 0 else 0.0


def _factor(value) -> float:
    """A rope_scaling factor: 1 where none is given. One that is not a positive number is refused, not read as 1:
    vLLM multiplies the context limit by it (`_get_and_verify_max_len`), so 0 or -4 would make no context at all."""
    if value is None:
        return 1.0
    if isinstance(value, float) and not math.isfinite(value):
        return _num(value)  # refused as every RoPE value that is not finite
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise KvplanError(f"config: rope_scaling factor {str(value)[:40]!r} is not a positive number", EXIT_USAGE)
    return float(value)


def rope_cache_elems(data: dict, model_type: str, head_dim: int) -> int:
    """Elements of the cos/sin tables of the language model config `data` (0 when it has no RoPE)."""
    if model_type in _NO_ROPE or data.get("position_embedding_type") in ("absolute", "learned", "none", "alibi"):
        return 0
    if data.get("alibi") is True:
        return 0
    max_pos = _num(data.get("max_position_embeddings"))
    scaling = data.get("rope_scaling") or data.get("rope_parameters") or {}
    scaling = scaling if isinstance(scaling, dict) else {}
    # Qwen3-Next / Qwen3.5 rotate a quarter of each head by default (their config classes' default)
    partial = (_num(data.get("partial_rotary_factor")) or _num(scaling.get("partial_rotary_factor"))
               or _num(data.get("rotary_pct")) or (0.25 if model_type.startswith(("qwen3_next", "qwen3_5")) else 1.0))
    rotary = _num(data.get("qk_rope_head_dim")) or head_dim * min(partial, 1.0)
    if not max_pos or not rotary:
        return 0
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    factor = _factor(scaling.get("factor"))
    rows = max_pos
    if kind in ("linear", "dynamic"):
        rows = max_pos * factor
    elif kind in ("yarn", "deepseek_yarn"):
        rows = (_num(scaling.get("original_max_position_embeddings")) or max_pos) * factor
    if rows > LIMITS["window"] or rotary > LIMITS["head_dim"]:
        raise KvplanError(f"config: a RoPE table of {rows:.4g} positions x {rotary:g} (max_position_embeddings x "
                          f"rope_scaling factor) is out of range (at most {LIMITS['window']:,} positions)", EXIT_USAGE)
    total = int(rows) * int(rotary)
    if model_type in ("gemma3", "gemma3_text") and data.get("rope_local_base_freq") is not None:
        total += int(max_pos) * int(rotary)  # the sliding layers' own table (base 10,000, no scaling)
    return total


def rope_table_bytes(model, fp32: bool = False) -> int:
    """Bytes of a model's RoPE tables on one rank: its elements in the model's dtype, or in fp32 for
    the families whose vLLM model file asks for an fp32 table, or for every family where the engine
    keeps them in fp32 (`fp32`: SGLang on CUDA, kvplan.engines.sglang.loaded)."""
    elems = getattr(model, "rope_cache_elems", 0)
    return elems * (4 if fp32 or model.family in _FP32_TABLES else _DTYPE_BYTES.get(model.dtype, 2))


def read_rope_scaling(data: dict, model_type: str = "") -> RopeScaling | None:
    """The config's RoPE scaling as the context-limit rules read it (None: the config has none). Gemma 3's
    positions already count its factor (vLLM's model config: a model_type containing "gemma3" is not scaled)."""
    raw = data.get("rope_scaling") or data.get("rope_parameters")
    if not isinstance(raw, dict):
        return None
    entries = [v for v in raw.values() if isinstance(v, dict)] if raw and all(
        isinstance(v, dict) for v in raw.values()) else [raw]
    kind, factor, original = "default", 1.0, 0
    for entry in entries:  # nested per layer type: the last entry with a scaling wins (vLLM's loop)
        this = str(entry.get("rope_type") or entry.get("type") or "default")
        if "factor" in entry or kind == "default":
            kind = this
        if "factor" in entry:
            factor = _factor(entry.get("factor"))
        if entry.get("original_max_position_embeddings") is not None:
            original = int(_num(entry.get("original_max_position_embeddings")))
    if factor * max(original, _num(data.get("max_position_embeddings")), 1) > LIMITS["window"]:
        raise KvplanError(f"config: rope_scaling factor {factor:.4g} makes a context past {LIMITS['window']:,} "
                          "positions (a hostile or broken config)", EXIT_USAGE)
    return RopeScaling(kind, factor, min(original, LIMITS["window"]),
                       int(min(_num(data.get("original_max_position_embeddings")), LIMITS["window"])),
                       "gemma3" in model_type)
