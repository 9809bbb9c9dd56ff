"""Recency weights of the speed fit: a figure of an older release pulls its engine's current coefficient set less
than one of the newest release, since a prediction is always for the engine's current release (kvplan.speed.eras).

Where HALF_LIFE names an engine, a figure's weight in the fit halves every HALF_LIFE months that its release's date
lies before the newest such date of its coefficient set (the fitted cases' newest). A release's date is the earliest
date of a fitted run of it (the engine's release number, kvplan.core.releases.release_of: "0.7.3.dev138" is 0.7.2,
the release before it), or the run's own date where that is earlier: a run cannot predate its release, while a
source's date is when it was published, which may be long after (a 2026 table of vLLM 0.7.3 runs). A run that states
no release is aged by its own date; an undated run of a release no dated run states weighs 1, as does every figure of
an older era (eras.ERAS), whose set no prediction of today's release reads, and of an engine HALF_LIFE does not name.
"""

from __future__ import annotations

from kvplan.core.releases import release_of
from kvplan.speed.eras import ERAS

# Months over which a figure's weight halves, per engine. vLLM's, 4, was chosen on the training CV (docs/speed.md,
# "The recency paragraph", issue 21): 4, 8 and 16 months tried on vLLM's sets, and 4 and 8 (and 16 on all but the
# release-aged rule) on every engine's; SGLang's current era holds two months of releases (its older ones are
# their own era), and weighting TensorRT-LLM's or llama.cpp's figures by age, or SGLang's older era's, worsened
# their CV.
HALF_LIFE = {"vllm": 4.0}
OLDER = frozenset(e.key for eras in ERAS.values() for e in eras)


def months(date) -> float | None:
    """A YYYY-MM-DD date as months since year 0 (a day as 1/30 of a month), or None (no date, or not one)."""
    d = str(date or "")
    try:
        return int(d[:4]) * 12 + int(d[5:7]) - 1 + (int(d[8:10]) - 1) / 30.0
    except ValueError:
        return None


def weights(cases) -> list[float]:
    """Each case's recency weight among these fitted cases, in their order (1 where HALF_LIFE gives none)."""
    first: dict = {}
    for c in cases:
        rel, t = release_of(c.version), months(c.date)
        if rel is not None and t is not None:
            first[c.engine, rel] = min(first.get((c.engine, rel), t), t)
    dated = [_dated(c, first) for c in cases]
    newest: dict = {}
    for c, t in zip(cases, dated):
        if t is not None:
            newest[c.era] = max(newest.get(c.era, t), t)
    return [1.0 if t is None else 0.5 ** ((newest[c.era] - t) / HALF_LIFE[c.engine]) for c, t in zip(cases, dated)]


def _dated(c, first: dict) -> float | None:
    """A case's release date in months (its own date where earlier), or None where it is not aged."""
    if c.engine not in HALF_LIFE or c.era in OLDER:
        return None
    own, rel = months(c.date), release_of(c.version)
    of_release = first.get((c.engine, rel)) if rel is not None else None
    if of_release is None:
        return own
    return of_release if own is None else min(own, of_release)
