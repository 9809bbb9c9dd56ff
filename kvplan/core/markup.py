"""Outside text (model, GPU and file names, fields of a log) made safe to print.

Two hazards: rich reads `[...]` in a table cell as markup (a GPU named "[/]" crashed `kvplan gpus`),
and a path with non-UTF-8 bytes reaches Python as lone surrogates that a strict UTF-8 stdout refuses.
`plain` is for every name put in a rich table or heading; `safe_stdout` makes stdout write such
bytes back as they were (so a printed `vllm serve '<path>'` still names the same folder).
"""

from __future__ import annotations

import sys
import unicodedata


def plain(text) -> str:
    """`text` as a literal in rich markup: brackets escaped, undecodable path bytes shown as \\xNN."""
    from rich.markup import escape

    return escape(readable(text))


def readable(text) -> str:
    """`text` as UTF-8 can carry it: undecodable path bytes (lone surrogates) shown as \\xNN. A model named
    after a folder whose name is not UTF-8 is named so, in tables and in files alike."""
    s = str(text)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "surrogateescape" if _only_escapes(s) else "replace").decode("utf-8", "backslashreplace")
    return s


def one_line(text) -> str:
    """`text` (readable) as one line that cannot drive a terminal: control characters (C0, DEL, C1: a newline, NUL,
    ESC starting a colour or clear-screen sequence, as a binary file's first line or a log field carries them), line
    and paragraph separators and bidirectional overrides shown as Python escapes (\\n, \\x00, \\x1b, \\u202e)."""
    return "".join(c if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") else repr(c)[1:-1]
                   for c in readable(text))


def _only_escapes(s: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in s)


def safe_stdout() -> None:
    """Let stdout carry path bytes that are not UTF-8 (as the shell gave them) instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors="surrogateescape")
            except (ValueError, OSError):  # a stream that cannot change its error handler keeps it
                pass
