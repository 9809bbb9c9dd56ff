"""Figures from a benchmark file read safely: finite, in range, or None (a bad figure is dropped, not trusted).

A file is outside input: a metric that is text, NaN, negative or absurd is left out of the comparison
rather than crashing or printing nonsense; a setting likewise (a count past `MAX_COUNT`). A command that reads
inside `noting_refusals()` gets the values `figure` refused, so it can say what it left out. A CSV file's rows are
read by `csv_rows` (any line ending; what the csv module refuses, one line).
"""

from __future__ import annotations

import csv
import io
import math
from contextlib import contextmanager
from contextvars import ContextVar

from kvplan.core.errors import EXIT_USAGE, KvplanError

_REFUSED: ContextVar[list | None] = ContextVar("refused", default=None)

MAX_COUNT = 10**9  # requests, tokens, GPUs, concurrency: past this a setting is not believed
MAX_FIGURE = 1e15  # milliseconds or tokens/s past this are not a measurement


@contextmanager
def noting_refusals():
    """While active, the values the file gave that `figure` refused (short reprs), in the order met."""
    seen: list = []
    token = _REFUSED.set(seen)
    try:
        yield seen
    finally:
        _REFUSED.reset(token)


def figure(value, scale: float = 1.0) -> float | None:
    """A non-negative finite number (times `scale`), from a number or numeric text; else None (noted, where a
    `noting_refusals` is active, unless the value was absent: None or blank text)."""
    x = _figure(value, scale)
    refused = _REFUSED.get()
    if x is None and refused is not None and value is not None and not (isinstance(value, str) and not value.strip()):
        refused.append(repr(value)[:40])
    return x


def _figure(value, scale: float) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        if not text or len(text) > 40:
            return None
        try:
            value = float(text)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or abs(value) > MAX_FIGURE:  # 10**400 from JSON: float() would overflow
        return None
    x = float(value)
    if not math.isfinite(x) or x < 0:  # NaN passes the abs() guard above
        return None
    return x * scale


def count(value) -> int | None:
    """A whole count in [1, MAX_COUNT] (an integral float or numeric text too); else None."""
    x = figure(value)
    if x is None or x < 1 or x > MAX_COUNT or x != int(x):
        return None
    return int(x)


def rate(value) -> float | None:
    """Requests/s: a positive figure, or inf ("inf", float inf); else None."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, float) and value == math.inf:
        return math.inf
    x = figure(value)
    return x if x else None


def mean_length(total, n) -> int | None:
    """A mean length from a run's totals (tokens / requests), rounded; None if either is missing."""
    t, k = figure(total), count(n)
    if t is None or not k:
        return None
    return count(round(t / k)) if t >= k else None


def text(value, limit: int = 200) -> str | None:
    """A short one-line string, or None (control characters dropped; markup is the printer's business)."""
    if not isinstance(value, str):
        return None
    s = "".join(ch for ch in value if ch.isprintable()).strip()
    return s[:limit] or None


def csv_rows(text: str, what: str) -> list[list[str]]:
    """The rows of a CSV file's `text`, any line ending (an old Mac's lone CR too: universal newlines); a file the
    csv module cannot read (a field past its 128 KiB limit) is a one-line KvplanError naming `what`."""
    try:
        return list(csv.reader(io.StringIO(text, newline=None)))
    except csv.Error as exc:
        raise KvplanError(f"{what}: not a CSV kvplan reads ({str(exc)[:80]})", EXIT_USAGE) from None
