"""Round 46: check-log's parsing searches each pattern only in the lines that can hold it (kvplan.engines.logscan).

Before, a hundred-odd regex passes ran over the whole log (about 0.25 s of CPU a MiB, most patterns without a literal
prefix for `re` to skip to). Each check here compares against `re` itself over the whole text, never against figures
the code under test produced.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.engines import logscan
from kvplan.engines.logparse import parse_log

LOGS = Path(__file__).parent / "fixtures" / "logs"
FIXTURES = sorted(LOGS.glob("*.log")) + sorted((LOGS / "corpus").glob("*.log"))[::10]
REQUEST = 'INFO:     127.0.0.1:40312 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _with_requests(text: str, every: int = 1, n: int = 3) -> str:
    """The log with `n` request lines after every `every` lines: what a running server appends."""
    out = []
    for i, line in enumerate(text.split("\n")):
        out.append(line)
        if i % every == 0:
            out.extend([REQUEST] * n)
    return "\n".join(out)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_request_lines_between_change_no_parsed_figure(path):
    # the same start-up lines with request lines between them, and 3,000 after (past logscan.MAX_LINES' 2,000 lines
    # for a string on every line): the record is the bare log's
    text = path.read_text(encoding="utf-8")
    padded = _with_requests(text) + "\n" + "\n".join([REQUEST] * 3000)
    try:
        want = repr(parse_log(text))
    except Exception as exc:  # a fixture the parser refuses is refused the same way padded
        want = f"{type(exc).__name__}: {exc}"
    try:
        got = repr(parse_log(padded))
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    assert got == want


def test_every_pattern_finds_what_re_finds(monkeypatch):
    # every pattern the parsers search with (recorded while they parse the fixtures), over each fixture and over
    # texts built to sit a match at a line's edge: the same first match's groups and the same findall as `re`
    seen = set()
    scope = logscan._scope

    def record(pattern, flags, text):
        seen.add((pattern.pattern, pattern.flags) if isinstance(pattern, re.Pattern) else (pattern, flags))
        return scope(pattern, flags, text)

    monkeypatch.setattr(logscan, "_scope", record)
    texts = [p.read_text(encoding="utf-8") for p in FIXTURES]
    for t in texts:
        try:
            parse_log(t)
        except Exception:
            pass
    assert len(seen) > 80  # the parsers' patterns were all seen (a hundred-odd)
    edges = [t.replace("\n", "\n" + REQUEST + "\n") for t in texts[:6]] + ["\n".join(texts), "".join(texts)]
    for pattern, flags in seen:
        rx = re.compile(pattern, flags)
        for t in texts + edges:
            m, ours = rx.search(t), logscan.search(pattern, t, flags)
            assert (m and m.groups()) == (ours and ours.groups()), (pattern, t[:80])
            assert rx.findall(t) == logscan.findall(pattern, t, flags), pattern


@pytest.mark.parametrize("pattern, need", [
    (r"Model loading took (\d+) GiB|Loading model weights took (\d+) GB",
     {"Model loading took ", "Loading model weights took "}),
    (r"(?<![\d.,])(\d{1,30}) tokens", {" tokens"}),
    (r"(?:abc|de)+fghi", {"fghi"}),
    (r"(?:abc|de)+f", {"abc", "de"}),
    (r"x(?:ab|)yz", {"yz"}),  # an empty branch gives no string: the runs around it still do
])
def test_required_strings(pattern, need):
    # every match holds one of them; of two sets, the one whose shortest string is longer
    assert set(logscan._compiled(pattern, 0)[1]) == need


def test_case_insensitive_and_literal_free_patterns_run_over_the_whole_log():
    assert logscan._compiled(r"model runner", re.I)[1] == ()
    assert logscan._compiled(r"\d+", 0)[1] == ()
    assert logscan.search(r"MODEL", "a\nmodel\n", re.I).group() == "model"


def test_padding_is_not_searched(monkeypatch):
    # 20,000 request lines after a real start-up log: no pattern whose strings the request lines lack reads them
    # (before: every pattern ran over all of them)
    text = (LOGS / "vllm_v0_llama31_8b_rtx3090_29k.log").read_text(encoding="utf-8")
    padded = text + "\n" + "\n".join([REQUEST] * 20_000)
    sizes = []
    scope = logscan._scope

    def record(pattern, flags, text):
        rx, part = scope(pattern, flags, text)
        sizes.append(len(part or ""))
        return rx, part

    monkeypatch.setattr(logscan, "_scope", record)
    parse_log(padded)
    whole = sum(1 for n in sizes if n >= len(padded))
    assert len(sizes) > 50 and whole <= 4, whole  # the patterns with no literal (a `\d+`-led one, re.I's)
