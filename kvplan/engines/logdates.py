"""A start-up log's own clock as evidence of the release that wrote it: the earliest dated timestamp the log prints,
and the newest of an engine's releases uploaded to PyPI by then (each engine's `releases.py` holds the dates).

A release cannot write a log before it is published, so a log stamped 2025-11-07 was written by a release
uploaded on or before that day: an upper bound, never a proof that the newest such release ran (an older one may
have). The timestamp carries no time zone; a local clock is at most 12 hours behind UTC (UTC-12 is the
westernmost zone), so releases uploaded up to 12 hours after the printed time still count.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from kvplan.engines.logscan import finditer
from kvplan.engines.versions import parse_version

SLACK = timedelta(hours=12)  # local clock -> the latest UTC it can be
MAX_STAMPS = 10_000  # timestamps read at most (the log is read once, linearly)
# A date with a time after it, as loggers print one: "2025-11-07 17:18:00" (ISO, Python's default asctime, a
# container runtime's prefix) or "11/07/2025-17:18:00" (TensorRT-LLM's Python logger, `[%m/%d/%Y-%H:%M:%S]`).
# Each starts with a literal ("20", the "/" before the year), so `re` skips to it rather than stepping through every
# character of a long log; what comes before is tested behind it: `(?<!\d20)` is "no digit before the year", the
# US form's lookbehind its month, day and "no digit or / before them".
_ISO = re.compile(r"(20(?<!\d20)\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d)")
_US = re.compile(r"/(?<=(?<![\d/])(\d\d)/(\d\d)/)(20\d\d)-(\d\d):(\d\d)")


def written(text: str) -> datetime | None:
    """The earliest dated timestamp in the log (local time, as printed), or None where it prints no year."""
    stamps = []
    for pattern, order in ((_ISO, (0, 1, 2)), (_US, (2, 0, 1))):
        for i, m in enumerate(finditer(pattern, text)):
            if i >= MAX_STAMPS:
                break
            g = m.groups()
            try:
                stamps.append(datetime(int(g[order[0]]), int(g[order[1]]), int(g[order[2]]), int(g[3]), int(g[4])))
            except ValueError:  # "2025-13-45 ...": not a date
                continue
    return min(stamps) if stamps else None


def released_by(releases: tuple[tuple[str, str], ...], when: datetime) -> tuple[str, str] | None:
    """(release, its upload date) of the newest of `releases` ((version, 'YYYY-MM-DDTHH:MM' UTC) pairs) uploaded
    by `when` + SLACK, or None where none was."""
    limit = when + SLACK
    out = [(v, d) for v, d in releases if datetime.fromisoformat(d) <= limit]
    return max(out, key=lambda r: (parse_version(r[0]), r[1])) if out else None  # a .post: the later upload


def bound_note(engine: str, when: datetime, release: tuple[str, str]) -> str:
    """How a log's timestamp bounds its release, for a check's notes."""
    return (f"its earliest timestamp ({when:%Y-%m-%d %H:%M}) bounds the release: {release[0]} (on PyPI "
            f"{release[1][:10]}) is the newest {engine} release uploaded by then")
