"""An engine's release read and checked: `parse_version` ('v0.20.1rc1' -> (0, 20, 1); a development build, the
release before it: kvplan.core.releases, the reading the speed layer shares), with its post number (`release_post`),
the note saying how a version that is not a plain release was read (`reading`), and the version to model within an
engine's range of numbered releases (`check_version`) or among its named eras (`check_version_name`).
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.releases import NUMBERED, SERIES_END, release_of, release_part, stripped


def parse_version(text: str) -> tuple[int, ...]:
    """'0.11.0' -> (0, 11, 0); 'v0.20.1rc1' -> (0, 20, 1); a development build, the release before it:
    '0.20.1rc1.dev16' -> (0, 20, 0) (kvplan.core.releases.release_of); text that is not a release number refused."""
    v = release_of(text)
    if not v:
        raise KvplanError(f"cannot read engine version {text!r} (expected e.g. 0.11.0)", EXIT_USAGE,
                          param="engine_version", value=text)
    return v


def release_post(version: str) -> tuple[tuple[int, ...], int]:
    """(release, post number) of a version, for a rule that starts at a post-release (SGLang's .postN builds):
    '0.4.6.post2' -> ((0, 4, 6), 2), '0.4.6' -> ((0, 4, 6), 0)."""
    post = re.search(r"\.post(\d+)", str(version))
    return parse_version(version), int(post.group(1)) if post else 0


def reading(engine: str, version: str | None) -> str | None:
    """The one-line note of how kvplan reads a version that is not a plain release (a development build, a
    release candidate, a post-release or a local build), so a user of one sees the release modelled; None for a
    plain X.Y.Z, for no version, and for a named era (llama.cpp's)."""
    if version is None or not NUMBERED.match(str(version)):
        return None
    v, stated = parse_version(version), str(version).strip()
    if stated.lstrip("vV") == dotted(v):
        return None
    release = dotted(release_part(stripped(stated)))
    if v != parse_version(release):
        return (f"{engine} {stated} is a development build made before release {release}: modelled as the release "
                f"before it ({dotted(v)}); a change first shipped in {release} is not assumed")
    return f"{engine} {stated} is read as release {dotted(v)} (its pre-release, post-release or build suffix dropped)"


def dotted(v: tuple[int, ...], post: int = 0) -> str:
    """A parsed release written back for a message: (0, 8, 5) -> '0.8.5' (parse_version keeps three parts, so a
    '.post' or 'rc' suffix is not shown); a series' unknown last release, (0, 14, 999) -> '0.14.x'; with `post`, the
    post-release release_post read: ((0, 4, 6), 2) -> '0.4.6.post2'."""
    return ".".join("x" if n == SERIES_END else str(n) for n in v) + (f".post{post}" if post else "")


def check_version(engine: str, version: str | None, known: tuple[str, ...], default: str) -> str:
    """The version to model: `version` if it is a readable release within the modelled range, else a
    one-line error. (An engine whose versions are names, not numbers, uses check_version_name.)"""
    if version is None:
        return default
    v = stated_version(version)
    parsed = parse_version(v)
    lo, hi = parse_version(known[0]), parse_version(known[-1])
    if not lo <= parsed <= hi + (999,):
        raise KvplanError(f"{engine} version {v} is outside the modelled range {known[0]} .. {known[-1]}", EXIT_USAGE,
                          param="engine_version", value=v, allowed=(known[0], known[-1]))
    return v


def check_version_name(engine: str, version: str | None, known: tuple[str, ...], default: str) -> str:
    """The version to model for an engine whose versions are names (llama.cpp's eras): one of `known`."""
    if version is None:
        return default
    v = stated_version(version)
    if v not in known:
        raise KvplanError(f"unknown {engine} version {v!r}; choose one of: {', '.join(known)}", EXIT_USAGE,
                          param="engine_version", value=v, allowed=known)
    return v


def stated_version(version: str) -> str:
    """The version as given, stripped; an empty one refused, for either kind of engine (and check-log's
    --engine-version, which an empty string would otherwise leave to the log's own release)."""
    v = str(version).strip()
    if not v:
        raise KvplanError(f"{arg('engine_version')} is empty", EXIT_USAGE, param="engine_version", value=version)
    return v
