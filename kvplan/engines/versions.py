"""An engine's release read and checked: `parse_version` ('v0.20.1rc1' -> (0, 20, 1)), and the version to model
within an engine's range of numbered releases (`check_version`) or among its named eras (`check_version_name`).
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg


def parse_version(text: str) -> tuple[int, ...]:
    """'0.11.0' -> (0, 11, 0); '0.4.3.post4' -> (0, 4, 3); 'v0.20.1rc1' -> (0, 20, 1)."""
    nums = re.findall(r"\d+", str(text).lstrip("vV").split("+")[0].split("rc")[0].split(".post")[0].split(".dev")[0])
    if not nums:
        raise KvplanError(f"cannot read engine version {text!r} (expected e.g. 0.11.0)", EXIT_USAGE,
                          param="engine_version", value=text)
    return tuple(int(n) for n in nums[:3])


def dotted(v: tuple[int, ...]) -> str:
    """A parsed release written back for a message: (0, 8, 5) -> '0.8.5' (parse_version keeps three parts, so a
    '.post' or 'rc' suffix is not shown)."""
    return ".".join(map(str, v))


def check_version(engine: str, version: str | None, known: tuple[str, ...], default: str) -> str:
    """The version to model: `version` if it is a readable release within the modelled range, else a
    one-line error. (An engine whose versions are names, not numbers, uses check_version_name.)"""
    if version is None:
        return default
    v = _stated(version)
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
    v = _stated(version)
    if v not in known:
        raise KvplanError(f"unknown {engine} version {v!r}; choose one of: {', '.join(known)}", EXIT_USAGE,
                          param="engine_version", value=v, allowed=known)
    return v


def _stated(version: str) -> str:
    """The version as given, stripped; an empty one refused, for either kind of engine."""
    v = str(version).strip()
    if not v:
        raise KvplanError(f"{arg('engine_version')} is empty", EXIT_USAGE, param="engine_version", value=version)
    return v
