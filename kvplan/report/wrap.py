"""Lines for people fitted to the tables' width: every note, warning and summary line kvplan prints on stderr.

A terminal left to wrap a 400-character note cuts it anywhere ("131,0" / "72 tokens"); a pipe or a log file keeps it
as one line no one reads. `fitted` breaks a line between words at the width rich gives kvplan's tables (the
terminal's, 80 in a pipe, $COLUMNS where set), never inside a word (a figure, a name, a path, a flag), a figure kept
with its unit ("40.00 GiB", "40.00 GiB/GPU") and a flag with its number ("--tp 8"); a continuation is indented two
columns past its line's own indent, so it reads as one note. A word longer than the width keeps a line of its own,
whole.
KVPLAN_WRAP=0 leaves every line whole (a script that reads notes line by line; the test suite's default).
"""

from __future__ import annotations

import os
import re
import textwrap

from kvplan.core.flags import FALSE_WORDS

PIPE_WIDTH = 80  # rich's width where no terminal is attached and $COLUMNS is unset
CONTINUATION = "  "  # a wrapped line's continuations start this far past its own indent
_GLUE = "\ue000"  # a space no break may take (a private-use character: never in kvplan's or a user's text)
_UNIT = r"(?:[KMGT]i?B|B|[KMGT]B/s|TFLOP/s|ms|us|µs|s|%)(?:/\w+)?(?![\w/])"  # a unit per something too: GiB/GPU
_KEPT = re.compile(rf"(?<=\d) (?={_UNIT})|(?<![\w-])(--[a-z][a-z0-9-]*) (?=\d)")


def terminal_width() -> int:
    """The width rich's Console gives a table (rich.console.Console.size, restated so a `--json` run need not import
    rich): $COLUMNS where it is a number, else the size of the first of stdin, stdout and stderr that is a terminal,
    else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
        return width or PIPE_WIDTH
    return PIPE_WIDTH


def _glued(match: re.Match) -> str:
    return f"{match.group(1)}{_GLUE}" if match.group(1) else _GLUE


def fitted(text: str, width: int | None = None) -> str:
    """`text`, each of its lines within `width` columns (default: terminal_width) where its words allow, broken only
    at spaces that neither join a figure to its unit nor a flag to its number; continuations indented by
    CONTINUATION past the line's own indent. A line that fits is returned as it is, and every line under
    KVPLAN_WRAP=0."""
    if os.environ.get("KVPLAN_WRAP", "").strip().lower() in FALSE_WORDS:
        return text
    width = max(width or terminal_width(), 20)
    return "\n".join(_fitted_line(line, width) for line in text.split("\n"))


def _fitted_line(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    body = line.lstrip(" ")
    lead = line[: len(line) - len(body)]
    pieces = textwrap.wrap(_KEPT.sub(_glued, body), width, initial_indent=lead, subsequent_indent=lead + CONTINUATION,
                           break_long_words=False, break_on_hyphens=False)
    return "\n".join(piece.replace(_GLUE, " ") for piece in pieces) if pieces else line
