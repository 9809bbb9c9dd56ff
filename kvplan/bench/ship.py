"""Layer 11 of 14, bench: fit every engine's coefficients on the training split of the speed corpus and
write kvplan/speed/coefficients.json and, beside it, bands.json. It sits above the engines because each point's batch
cap and prefill chunk are its engine's own (kvplan.bench.running).

`python -m kvplan.bench.ship [CORPUS_DIR [YYYY-MM-DD [FILE]]]` (default: the repository's
tests/fixtures/speed, today, kvplan/speed/coefficients.json). The file holds the terms, the split
rule and which sources fell on each side, the fit date and each engine's coefficients. Each engine's
held-out error per metric (the band every calibrated figure is labelled with) goes to bands.json beside
FILE, apart, so that comparing two fits' coefficients (a diff of coefficients.json, as a structural
change is judged on the training CV) shows no held-out figure. Held-out points are scored, never fitted on.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from kvplan.core.files import atomic_write
from kvplan.core.releases import release_of
from kvplan.bench.running import running
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import TRAIN_SHARE, read_corpus
from kvplan.speed.eras import fitted_with, padded
from kvplan.speed.fit import build_all, errors, fit_era, split
from kvplan.speed.model import BANDS, DATA
from kvplan.speed.score import REPORTED, by_key
from kvplan.speed.terms import TERMS

SPLIT_RULE = (f"a source trains when int.from_bytes(sha256(source id)[:2], 'big') % 100 < {TRAIN_SHARE} "
              "(kvplan.speed.corpus.in_training); every point of a source falls on the same side")


def fit_all(folder: Path) -> dict:
    """The coefficients.json document for the corpus in `folder` (no date)."""
    cases, skipped = read_corpus(folder)
    built, unplanned = build_all(cases, running)
    for why, n in unplanned.items():
        skipped[why] = skipped.get(why, 0) + n
    train, held = split(built)
    engines = {}
    for eng in sorted({b.case.era for b in train}):
        tr = [b for b in train if b.case.era == eng]
        coef = fit_era(eng, [b for b in train if b.case.era in fitted_with(eng)])
        ho = [r for r in errors([b for b in held if b.case.era == eng], coef) if r[1] in REPORTED]
        engines[eng] = {
            "coefficients": {t: round(c, 12) for t, c in zip(TERMS, coef)},
            "train_cases": len(tr), "held_out_cases": sum(b.case.era == eng for b in held),
            "served": any(b.load.bench == "serve" for b in tr),  # any serving load, or only llama-bench's
            "held_out": by_key(ho, lambda b, m: m),  # split off into bands.json by `main`
        }
    return {
        "terms": list(TERMS), "split": SPLIT_RULE,
        "corpus": {"cases": len(built), "skipped": dict(sorted(skipped.items())),
                   "train_sources": sorted({b.case.source for b in train}),
                   "held_out_sources": sorted({b.case.source for b in held})},
        "coverage": {"gpus": sorted({b.case.gpu for b in train}), "engines": sorted({b.case.engine for b in train}),
                     "releases": _releases(train),
                     "families": sorted({_family(b.case.model) for b in train} - {""})},
        "engines": engines,
    }


def _releases(train) -> dict:
    """{engine: [the oldest, the newest release its training points state]} (a release outside is extrapolated)."""
    out: dict = {}
    for b in train:
        rel = release_of(b.case.version)
        if rel is not None:
            lo, hi = out.get(b.case.engine, (rel, rel))
            out[b.case.engine] = (min(lo, rel, key=padded), max(hi, rel, key=padded))
    return {e: [".".join(map(str, r)) for r in span] for e, span in sorted(out.items())}


def _family(model: str) -> str:
    spec = find_in_catalog(model)
    return spec.family if spec is not None else ""


def main(argv: list[str]) -> int:
    """argv: [CORPUS_DIR [DATE [OUT]]] (default: the repository's corpus, today, coefficients.json)."""
    if any(a.startswith("-") for a in argv) or len(argv) > 3:  # a help flag once read as a folder shipped an empty fit
        print("usage: python -m kvplan.bench.ship [CORPUS_DIR [DATE [OUT]]]", file=sys.stderr)
        return 0 if argv[0].lstrip("-") in ("h", "help") else 2  # asked for the usage: not an error
    root = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "speed"
    folder = Path(argv[0]) if argv else root
    out = Path(argv[2]) if len(argv) > 2 else DATA
    if not out.parent.is_dir():  # refused before the fit, not after it as a traceback from the write
        print(f"ship: {out.parent} is no folder; nothing written", file=sys.stderr)
        return 2
    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        print(f"ship: {folder} holds no speed corpus (*.yaml); nothing written", file=sys.stderr)
        return 2
    date = argv[1] if len(argv) > 1 else str(datetime.date.today())
    doc = {"fit_date": date, **fit_all(folder)}
    bands = {"fit_date": date, "engines": {e: entry.pop("held_out") for e, entry in doc["engines"].items()}}
    atomic_write(out, json.dumps(doc, indent=1) + "\n")
    atomic_write(out.with_name(BANDS.name), json.dumps(bands, indent=1) + "\n")
    print(f"wrote {out}: {doc['corpus']['cases']} cases, skipped {sum(doc['corpus']['skipped'].values())}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
