"""A config.json dict read safely: the language model's part of it, typed getters that reject nonsense,
the bounds they check, the dtype.

Every reader (kvplan.readers.configs, the families, quantization, RoPE) reads keys through `Cfg`;
a missing key is `_Missing` (turned into one line by the caller), a malformed value one line naming it.
"""

from __future__ import annotations

import math

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg


LIMITS = {  # anything above these is a hostile or broken config, not a model
    "hidden_size": 1 << 20, "num_hidden_layers": 10_000, "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16, "head_dim": 1 << 14, "intermediate_size": 1 << 24,
    "vocab_size": 1 << 25, "window": 1 << 30, "experts": 1 << 16,
}


class Cfg:
    """A config dict with typed getters that collect what is missing and reject nonsense."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where

    def has(self, *names: str) -> bool:
        return any(self.data.get(n) is not None for n in names)

    def raw(self, *names: str, default=None):
        for n in names:
            if self.data.get(n) is not None:
                return self.data[n]
        return default

    def int(self, *names: str, default: int | None = None, limit: str | None = None, minimum: int = 1) -> int:
        value = self.raw(*names)
        if value is None:
            if default is None:
                raise _Missing(names)
            return default
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)):
            raise KvplanError(f"{self.where}: {names[0]} must be an integer, got {shown(value)}", EXIT_USAGE)
        value = int(value)
        cap = LIMITS.get(limit or names[0])
        if value < minimum or (cap is not None and value > cap):
            raise KvplanError(f"{self.where}: {names[0]} = {value} is out of range", EXIT_USAGE)
        return value

    def int_list(self, name: str) -> list[int]:
        """A list of non-negative integers (layer indices), empty when absent."""
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise KvplanError(f"{self.where}: {name} must be a list of layer indices, got {value!r:.60}", EXIT_USAGE)
        return value

    def bool(self, name: str, default: bool) -> bool:
        """JSON true/false (or 0/1); a string such as "false" is refused, not read as true."""
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
            return bool(value)
        raise KvplanError(f"{self.where}: {name} must be true or false, got {shown(value)}", EXIT_USAGE)


def shown(value) -> str:
    """A config value as its JSON spelling (Infinity, NaN), cut to 60 characters."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return f"{value!r:.60}"


class _Missing(Exception):
    def __init__(self, names):
        self.names = names


# The torch dtype names a config.json gives its weights in (transformers writes str(torch.dtype) less "torch."),
# as kvplan names them; any other value is refused, not read as bf16.
DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float": "fp32", "half": "fp16",
          "fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}  # and kvplan's own names, as a catalog entry writes them
DEFAULT_DTYPE = "bfloat16"  # a config that names no dtype: planned as bf16, and `dtype_note` says so
# An FP8 checkpoint's config may name its stored dtype (RedHatAI's Llama-4-Scout FP8-dynamic: "float8_e4m3fn"). No
# engine computes in it: vLLM's 'auto' takes the platform's first supported dtype instead, bf16 from compute
# capability 8.0, fp16 below (vllm 0.30.0 config/model.py _resolve_auto_dtype L2277-2318, "Falling back to").
FLOAT8 = frozenset({"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"})


def read_dtype(cfg: Cfg) -> str:
    raw = cfg.raw("torch_dtype", "dtype", default=DEFAULT_DTYPE)
    name = raw.lower().removeprefix("torch.") if isinstance(raw, str) else raw
    if name in FLOAT8:
        return "bf16"  # what vLLM falls back to (FLOAT8 above); dtype_note says so
    if name not in DTYPES:
        raise KvplanError(f"{cfg.where}: torch_dtype {shown(raw)} is not a dtype kvplan reads "
                          f"({', '.join(list(DTYPES)[:3])})", EXIT_USAGE)
    return DTYPES[name]


def dtype_note(cfg: Cfg) -> list[str]:
    """The assumption a config without torch_dtype (or dtype), or with an FP8 one, is planned under, as a note; none
    where it names a dtype engines compute in."""
    if cfg.has("torch_dtype", "dtype"):
        raw = cfg.raw("torch_dtype", "dtype", default=DEFAULT_DTYPE)
        if isinstance(raw, str) and raw.lower().removeprefix("torch.") in FLOAT8:
            return [f"config.json's torch_dtype {raw} is the stored FP8, no dtype an engine computes in: planned as "
                    f"bf16, as vLLM falls back to it from compute capability 8.0 (fp16 below; {arg('weight_dtype')} "
                    f"and {arg('kv_dtype')} to change)"]
        return []
    return [f"config.json names no torch_dtype: weights and the 'auto' KV cache planned as {DTYPES[DEFAULT_DTYPE]} "
            f"({arg('weight_dtype')} and {arg('kv_dtype')} to change)"]


# Keys whose JSON type every reader relies on: a config giving another (a string for a mapping, a number for a
# list) is broken, and was read as if the key were absent. None (null) stays "absent".
SHAPES = {"model_type": str, "architectures": list, "quantization_config": dict, "rope_scaling": dict,
          "rope_parameters": dict, "text_config": dict, "language_config": dict, "llm_config": dict,
          "vision_config": dict, "torch_dtype": str, "dtype": str}
_JSON_NAMES = {str: "a string", list: "a list", dict: "a mapping"}


def check_shapes(config: dict, where: str) -> None:
    """Refuse a config whose well-known keys (SHAPES) hold the wrong JSON type, naming the key."""
    for key, kind in SHAPES.items():
        value = config.get(key)
        if value is not None and not isinstance(value, kind):
            raise KvplanError(f"{where}: {key} must be {_JSON_NAMES[kind]}, got {shown(value)}", EXIT_USAGE)
    arch = config.get("architectures")
    if isinstance(arch, list) and not all(isinstance(a, str) for a in arch):
        raise KvplanError(f"{where}: architectures must be a list of class names, got {shown(arch)}", EXIT_USAGE)


def unwrap_text_config(config: dict) -> tuple[dict, bool]:
    """Multimodal configs (Gemma 3, Llama 4, Mistral 3, LLaVA) nest the language model.

    Returns the language model's config, with top-level keys it lacks filled in, and whether it
    was nested.
    """
    text = config.get("text_config") or config.get("language_config") or config.get("llm_config")
    if isinstance(text, dict) and text:
        merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
        merged.update(text)
        return merged, True
    return config, False
