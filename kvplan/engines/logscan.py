r"""How a start-up log's patterns are searched: each only in the lines that hold one of its required strings.

A log of 4 MiB is mostly request lines, and a pattern that starts with a lookbehind, an alternation or a class has no
literal prefix for `re` to skip to, so it stepped through every character: a hundred such passes cost about 0.25 s of
CPU a MiB. Each pattern's required strings (every match contains one of them: its longest literal run, or one per
branch of an alternation) are read once from the parsed pattern; `str.find` looks for them (about a millisecond a
MiB), and the regex runs only over the lines that hold one, each beside the same newlines as in the log, so every
match is one `re.search` / `re.findall` / `re.finditer` gives over the whole log, in the same order. That holds because
every log pattern matches within one line: nothing it consumes or looks at runs past the newline on either side (a
pattern must not use `\s`, `[^x]` or DOTALL's `.` to cross one: `[^\S\n]`, `[^x\n]`). A pattern whose requirement is
unknown (case-insensitive, no literal) or whose strings are found on over MAX_LINES lines is run over the whole log.
"""

from __future__ import annotations

import re
from functools import lru_cache

try:  # Python 3.11+ (the module re's own parser; sre_parse before, and deprecated after)
    from re import _constants as _c, _parser as _p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

MAX_LINES = 2000  # lines gathered for one pattern before the whole text is searched instead
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT} | ({_c.POSSESSIVE_REPEAT} if hasattr(_c, "POSSESSIVE_REPEAT") else set())


def _better(a: frozenset | None, b: frozenset | None) -> frozenset | None:
    """Of two sets of required strings, the one whose shortest string is longer (rarer in a log)."""
    if a is None or b is None:
        return a if b is None else b
    return a if min(map(len, a)) >= min(map(len, b)) else b


def _required(items) -> frozenset | None:
    """Strings one of which every match of the parsed sequence `items` contains; None where none is known."""
    best, run = None, []
    for op, av in list(items) + [(None, None)]:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            best, run = _better(best, frozenset(["".join(run)])), []
        sub = None
        if op is _c.SUBPATTERN and not av[1] & re.IGNORECASE:
            sub = _required(av[-1])
        elif op is _c.BRANCH:
            each = [_required(b) for b in av[1]]
            sub = None if None in each else frozenset().union(*each)
        elif op in _REPEATS and av[0] >= 1:
            sub = _required(av[2])
        best = _better(best, sub)
    return best


@lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> tuple[re.Pattern, tuple[str, ...]]:
    rx = re.compile(pattern, flags)
    parsed = _p.parse(pattern, flags)
    need = None if parsed.state.flags & re.IGNORECASE else _required(parsed)
    return rx, tuple(sorted(need)) if need and not any("\n" in s for s in need) else ()


def _lines(text: str, need: tuple[str, ...]) -> str | None:
    """The lines of `text` holding one of `need`, in order, each with the same neighbours as in `text` (a newline, or
    the text's start or end); None where there are none."""
    spans = set()
    for s in need:
        at = text.find(s)
        while at >= 0:
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            spans.add((text.rfind("\n", 0, at) + 1, end))
            if len(spans) > MAX_LINES:
                return text  # a string on many lines (a timestamp's "20"): the whole text, as fast
            at = text.find(s, end)
    if not spans:
        return None
    spans = sorted(spans)
    head, tail = "\n" if spans[0][0] else "", "\n" if spans[-1][1] < len(text) else ""
    return head + "\n".join(text[a:b] for a, b in spans) + tail


def _scope(pattern, flags: int, text: str) -> tuple[re.Pattern, str | None]:
    """The compiled pattern and the part of `text` it can match in: the lines holding one of its required strings
    (None: no line does, so it cannot match), or all of `text` where they are unknown."""
    if isinstance(pattern, re.Pattern):
        pattern, flags = pattern.pattern, pattern.flags
    rx, need = _compiled(pattern, flags)
    return rx, _lines(text, need) if need else text


def search(pattern, text: str, flags: int = 0) -> re.Match | None:
    """The first match `re.search(pattern, text, flags)` gives, found in the lines it can match in (its groups are
    the same; its positions are not `text`'s)."""
    rx, part = _scope(pattern, flags, text)
    return rx.search(part) if part is not None else None


def findall(pattern, text: str, flags: int = 0) -> list:
    """`re.findall(pattern, text, flags)`, read in the lines it can match in."""
    rx, part = _scope(pattern, flags, text)
    return rx.findall(part) if part is not None else []


def finditer(pattern, text: str, flags: int = 0):
    """The matches of `re.finditer(pattern, text, flags)` (groups, not positions), read in the lines they can be in."""
    rx, part = _scope(pattern, flags, text)
    return rx.finditer(part) if part is not None else iter(())
