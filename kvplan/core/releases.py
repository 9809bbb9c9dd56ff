"""An engine's version string read as the release it runs (`release_of`), in PEP 440's order: the one reading the
speed layer (kvplan.speed.eras) and the engines (kvplan.engines.versions) share.

A development build sorts before the release it leads to (PEP 440's ordering: X.Y.Z.devN and X.Y.ZrcN.devM are
both below X.Y.ZrcN and X.Y.Z). vLLM numbers its builds with setuptools-scm's default scheme (guess-next-dev:
the last tag's final number plus one, then ".dev" and the commits since), so "0.20.1rc1.dev16" is 16 commits past
the v0.20.1rc0 tag, on the way to 0.20.1, and a change first shipped in 0.20.1 may not be in it: the corpus's
club3090-46 log (0.20.1rc1.dev16) prints the tokens line of 0.20.0 and before, not 0.20.1's (docs/budget.md,
round 40). Such a build is read as the release before; a release candidate without ".dev" (TRT-LLM's and
SGLang's numbered pre-releases) keeps its release's number, and a ".postN.devM" build follows X.Y.Z.
"""

from __future__ import annotations

import re

DEV_BEFORE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:(?:a|b|rc)\d+)?\.?dev\d*")
SERIES_END = 999  # "the last release of that series", where the release before X.Y.0 is not known
NUMBERED = re.compile(r"\s*[vV]?\d+\.\d+")  # a release number, not a name (llama.cpp's b5062, a nightly tag)


def release_of(text) -> tuple[int, ...] | None:
    """'0.11.0' -> (0, 11, 0); '0.4.3.post4' -> (0, 4, 3); 'v0.20.1rc1' -> (0, 20, 1); a development build, the
    release before it: '0.20.1rc1.dev16' -> (0, 20, 0), '0.15.0rc2.dev46' -> (0, 14, 999), below 0.15.0; None where
    the text does not start with a release number ('b5062', 'nightly-dev', None)."""
    if text is None or not NUMBERED.match(str(text)):
        return None
    base = stripped(text)
    v = release_part(base)
    dev = DEV_BEFORE.fullmatch(base)
    return before(v) if dev and tuple(map(int, dev.groups())) == v else v


def stripped(text) -> str:
    """A version as PEP 440 compares it: no 'v', no local '+...' part, lower case ('V0.20.1RC1+cu1' -> '0.20.1rc1')."""
    return str(text).strip().lstrip("vV").split("+")[0].lower()


def release_part(base: str) -> tuple[int, ...]:
    """The release a version names, its pre-, post- or dev-release suffix dropped: '0.20.1rc1.dev16' -> (0, 20, 1)."""
    return tuple(int(n) for n in re.findall(r"\d+", base.split("rc")[0].split(".post")[0].split(".dev")[0])[:3])


def before(v: tuple[int, ...]) -> tuple[int, ...]:
    """The release before `v`: (0, 20, 1) -> (0, 20, 0); (0, 15, 0) -> (0, 14, SERIES_END); (0, 0, 0) itself."""
    for i in range(len(v) - 1, -1, -1):
        if v[i]:
            return v[:i] + (v[i] - 1,) + (SERIES_END,) * (len(v) - i - 1)
    return v
