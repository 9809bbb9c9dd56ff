"""The weight format a log check plans with: the one given, else the checkpoint's own, else the one the log states.

Issue 22: `check-log` on a quantized checkpoint it could not infer priced the weights as bf16 without a word (a
vLLM Qwen2.5-7B W8A8 log: weights +75%, its CUDA-graph row without the W8A8 surcharge). The engines state their
quantization in the start-up log (vLLM's engine-config line `quantization=...`, SGLang's `ServerArgs(...,
quantization=...)`); the method is mapped to a weight format by the same aliases `--weight-dtype` takes
(kvplan.core.dtypes.canonical_weight_dtype: awq and gptq are 4-bit), never by a second table. A method whose bits
only the checkpoint's quantization_config says (compressed-tensors, modelopt, quark, ...) is named in a note, not
guessed. A checkpoint kvplan reads that is itself quantized wins over the log, and a disagreement is said.
"""

from __future__ import annotations

import re

from kvplan.core.dtypes import canonical_weight_dtype
from kvplan.core.errors import KvplanError, arg

# vLLM's kernel variants of one checkpoint format (its quantization registry: "awq_marlin", "gptq_marlin",
# "gptq_bitblas", ...): the suffix names the kernel, not the format
_KERNEL_SUFFIXES = ("_marlin", "_bitblas")
# The words of a checkpoint's name read as its format (the quantized aliases --weight-dtype takes)
_NAME_WORDS = ("fp8", "awq", "gptq", "w8a8", "w8a16", "w4a16", "int8", "int4", "nvfp4", "mxfp4")


def stated_format(method: str, bits: int | None = None) -> str | None:
    """The weight format a stated quantization method implies, by `--weight-dtype`'s own aliases (AWQ and GPTQ 4-bit
    unless the log prints `bits=8`); None where the method alone does not fix the bits (the checkpoint's
    quantization_config does)."""
    key = method.strip().lower()
    for suffix in _KERNEL_SUFFIXES:
        key = key.removesuffix(suffix)
    try:
        fmt = canonical_weight_dtype(key)
    except KvplanError:
        return None
    return f"int{bits}" if fmt in ("int4", "int8") and bits in (4, 8) else fmt


def log_weight_dtype(model, stated: str | None, given: str | None, name_hint: str | None, notes: list,
                     bits: int | None = None) -> str | None:
    """The Request's weight_dtype for a log check (None: the checkpoint's own format), each choice said in `notes`.

    `given` (--weight-dtype) always wins; else a quantized checkpoint's own format, cross-checked with the log's
    statement; else the format the log states; else the model name's hint (`-FP8`, `-AWQ`, `-GPTQ`)."""
    own = model.quantization.method
    quantized = own != model.dtype
    if given is not None:
        wdt = canonical_weight_dtype(given)
        said = f"; the log states quantization={stated}" if stated else ""
        notes.append(f"weights counted as {wdt}, as given ({arg('weight_dtype')}){said}")
        return wdt
    if stated is not None and stated.lower() == "none":  # the engine's resolved method: it served no quantization
        return None
    if stated:
        fmt = stated_format(stated, bits)
        if quantized:
            if fmt is not None and fmt != own:
                notes.append(f"the log states quantization={stated} ({fmt}) but {model.name}'s quantization_config "
                             f"is {own}: weights counted as {own}, the checkpoint's (pass {arg('weight_dtype')} to "
                             "override)")
            return None
        if fmt is None:
            return _unsized(model, stated, name_hint, notes)
        if fmt != own:
            notes.append(f"weights counted as {fmt}: the log states quantization={stated}")
            return fmt
        return None
    return _from_name(model, name_hint, notes) if not quantized else None


def _unsized(model, stated: str, hint: str | None, notes: list) -> str | None:
    """A stated method whose bits only the checkpoint says (compressed-tensors, ...): the model name's format where
    it names one, else the model's own format, either way said."""
    why = f"the log states quantization={stated}, whose bits only the checkpoint's quantization_config says"
    wdt = _name_format(hint)
    if wdt is not None:
        notes.append(f"{why}; weights counted as {wdt}, the format its name {hint} names (pass "
                     f"{arg('weight_dtype')} or the checkpoint as {arg('model')} to check it)")
        return wdt if wdt != model.quantization.method else None
    notes.append(f"{why}: weights counted as {model.quantization.method}, {model.name}'s own format, not the served "
                 f"one; pass {arg('weight_dtype')} (int8 for W8A8, int4 for W4A16, fp8) or the checkpoint as "
                 f"{arg('model')}")
    return None


def _name_format(hint: str | None) -> str | None:
    """The quantized format a checkpoint's name spells as one of its words (`-FP8`, `-AWQ`, `.w8a8`, `-W4A16`), by
    `--weight-dtype`'s aliases; None where it spells none."""
    last = (hint or "").rstrip("/").rsplit("/", 1)[-1].lower()
    for word in re.split(r"[-._]", last):
        fmt = stated_format(word) if word in _NAME_WORDS else None
        if fmt is not None:
            return fmt
    return None


def _from_name(model, hint: str | None, notes: list) -> str | None:
    """A log that states no quantization: the format its model name spells, as check-log always read it."""
    wdt = _name_format(hint)
    if wdt and model.quantization.method != wdt:
        notes.append(f"the log's checkpoint {hint} is {wdt} by its name: weights counted as {wdt} (pass "
                     f"{arg('weight_dtype')} to override)")
        return wdt
    return None
