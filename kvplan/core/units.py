"""Parsing what people type (128k, 80GiB, 0.9) into integers, and labelling bytes at the edge.

Inside kvplan every size is an integer number of bytes and every length an integer number of
tokens; units exist only here. GiB is 2^30 bytes and GB is 10^9 bytes, and the labels say which.
"""

from __future__ import annotations

import math

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg

# Context lengths: "k" and "K" are both binary (128k = 131072) because every engine and model
# card uses them that way for context windows; "M" likewise (1M = 1048576).
_TOKEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2}
_TOKEN_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")

MAX_TOKENS = 1 << 30  # a billion-token context is absurd for any model kvplan knows

_BYTE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
# One-letter suffixes as vLLM's size flags read them (human_readable_int, vllm/engine/arg_utils.py
# 0.11.0): upper case binary, lower case decimal. `--kv-cache-memory 28G` is 28 GiB, `28g` 28 GB.
_LETTER_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _shown(text) -> str:
    """What the user gave, quoted as an error repeats it: 40 characters at most (a hostile input is not echoed
    whole)."""
    if not isinstance(text, str):  # the Python API's numbers, as given
        return repr(text)
    return repr(text[:40]) + ("..." if len(text) > 40 else "")


def parse_tokens(text: str | int, what: str = "context") -> int:
    """`128k` -> 131072, `1M` -> 1048576, `32768` -> 32768. Positive and sane, or a one-line error
    naming the input `what` (a keyword: kvplan.core.errors.arg)."""
    if isinstance(text, int):
        value = text
    else:
        m = _TOKEN_RE.match(str(text))
        if not m:
            raise KvplanError(f"{arg(what)} {_shown(text)} is not a token count (try 32768, 32k, 128K or 1M)",
                              EXIT_USAGE, param=what, value=text)
        number, suffix = m.groups()
        scaled = float(number) * _TOKEN_SUFFIX[suffix.lower()]
        if scaled > MAX_TOKENS:  # before int(): 5,000 nines are float infinity
            raise KvplanError(f"{arg(what)} {_shown(text)} is absurd (more than {MAX_TOKENS:,} tokens)",
                              EXIT_USAGE, param=what, value=text)
        if scaled != int(scaled):
            raise KvplanError(f"{arg(what)} {_shown(text)} is not a whole number of tokens",
                              EXIT_USAGE, param=what, value=text)
        value = int(scaled)
    if value <= 0:
        raise KvplanError(f"{arg(what)} must be a positive number of tokens, got {_shown(text)}",
                          EXIT_USAGE, param=what, value=text)
    if value > MAX_TOKENS:
        raise KvplanError(f"{arg(what)} {_shown(text)} is absurd (more than {MAX_TOKENS:,} tokens)",
                          EXIT_USAGE, param=what, value=text)
    return value


def parse_token_list(text: str, what: str = "context") -> list[int]:
    """`8k,32k,128k` -> [8192, 32768, 131072]; a context given twice (`8k,8192`) is planned once."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise KvplanError(f"{arg(what)} list {_shown(text)} is empty", EXIT_USAGE, param=what, value=text)
    return list(dict.fromkeys(parse_tokens(t, what) for t in items))  # 32k,8k,8k: each once, in order given


def parses_as_size(text: str) -> bool:
    """Whether `text` reads as a size (`80GiB`, `28G`, `1024`)."""
    m = _BYTES_RE.match(text)
    return bool(m) and (_LETTER_UNITS.get(m.group(2)) or _BYTE_UNITS.get(m.group(2).lower())) is not None


def parse_bytes(text: str | int, what: str = "memory", allow_zero: bool = False) -> int:
    """`80GiB` -> 85899345920, `80GB` -> 80000000000, `1073741824` -> 1073741824.

    GiB/MiB/KiB/TiB are binary, GB/MB/KB/TB decimal; a bare letter follows vLLM's flags (`G` binary,
    `g` decimal). A plain number is a whole number of bytes.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _BYTES_RE.match(str(text))
        unit = m.group(2) if m else ""
        scale = _LETTER_UNITS.get(unit) or _BYTE_UNITS.get(unit.lower())
        if str(text).strip().startswith("-") and parses_as_size(str(text).strip()[1:]):  # -1GiB: a size, negated
            raise KvplanError(f"{arg(what)} must not be negative, got {_shown(text)}", EXIT_USAGE, param=what,
                              value=text)
        if not m or scale is None:
            raise KvplanError(f"{arg(what)} {_shown(text)} is not a size (try 80GiB, 80GB or a number of bytes)",
                              EXIT_USAGE, param=what, value=text)
        if scale == 1 and "." in m.group(1):
            raise KvplanError(f"{arg(what)} {_shown(text)}: a number of bytes must be whole (or give a unit: "
                              "1.5GiB)",
                              EXIT_USAGE, param=what, value=text)
        digits = m.group(1)
        # whole numbers stay integers (a byte count past 2**53 is exact); 400 digits are only absurd, never an
        # OverflowError (issue 25, --offload), and 5,000 never int()'s ValueError past its 4,300-digit limit
        whole = digits.split(".")[0].lstrip("0")
        number = (math.inf if len(whole) > 20 else int(whole or "0") * scale if "." not in digits
                  else float(digits) * scale)
        if number > 2**60:
            raise KvplanError(f"{arg(what)} {_shown(text)} is absurd (more than an "
                              "exbibyte)", EXIT_USAGE, param=what, value=text)
        value = int(number)
    if value < 0 or (value == 0 and not allow_zero):
        raise KvplanError(f"{arg(what)} must be a positive size, got {_shown(text)}", EXIT_USAGE, param=what,
                          value=text)
    if value > 2**60:
        raise KvplanError(f"{arg(what)} {_shown(text)} is absurd (more than an exbibyte)", EXIT_USAGE, param=what,
                          value=text)
    return value


def parse_fraction(text: str | float, what: str) -> float:
    """A fraction in (0, 1], such as a GPU memory utilisation of 0.9."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise KvplanError(f"{arg(what)} {_shown(text)} is not a number", EXIT_USAGE, param=what, value=text) from None
    if not 0 < value <= 1:
        raise KvplanError(f"{arg(what)} must be in (0, 1], got {_shown(text)}", EXIT_USAGE, param=what, value=text)
    return value


def gib(n: int) -> str:
    """Bytes as binary gibibytes, labelled GiB."""
    return f"{n / 2**30:,.2f} GiB"


def gb(n: int) -> str:
    """Bytes as decimal gigabytes, labelled GB."""
    return f"{n / 1e9:,.2f} GB"


def human_bytes(n: int) -> str:
    """Bytes in the largest binary unit that keeps the number readable (KiB/MiB/GiB/TiB)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,} B"


def human_tokens(n: int) -> str:
    """131072 -> '128k' when exact, else the plain number with separators."""
    if n >= 1024**2 and n % 1024**2 == 0:
        return f"{n // 1024**2}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"


def signed(value: float, spec: str = "+.0f") -> str:
    """`value` in a sign-forcing format `spec` ('+.0f', '+.2%', '+,.0f'), unsigned where it rounds to zero:
    '0%' and '0.00', never '-0%' (an error of -0.4% at no decimals) or '+0.00'."""
    text = format(value, spec)
    zero = text[:1] in ("+", "-") and not any(c in "123456789" for c in text)
    return text[1:] if zero else text


def plural(n: int, noun: str) -> str:
    """`1 plan`, `2 plans`, `1,024 requests`: a count with its noun, singular for one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
