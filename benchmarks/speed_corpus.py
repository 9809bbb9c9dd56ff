"""How far kvplan's speed figures are from published measurements, held out by source.

`.venv/bin/python benchmarks/speed_corpus.py [--markdown] [--loso] [--train-cv | --spread [--eras=ERA,...]]
[CORPUS_DIR]`

Reads the corpus (tests/fixtures/speed), builds each point's deployment, and scores the shipped
coefficients (kvplan/speed/coefficients.json) on the held-out sources only (the split rule is in that
file): per metric, per engine and per GPU, the median signed and absolute error, the share within
20%, the share optimistic by more than 20% (a time predicted >20% low, a throughput >20% high), and
the old roofline's figures on the same points. `--markdown` prints the README's table; `--loso`
adds leave-one-source-out (each source scored by coefficients fitted on every other source of its
engine: several minutes on one core). `--train-cv` prints only leave-one-source-out *within the
training sources* (each training source scored by coefficients fitted on the other training sources
of its engine; no held-out point is read): the yardstick for choosing the model's structure. `--eras=sglang,vllm`
limits it to those coefficient sets' folds (each still fitted on every era it is fitted with: its figures are the
full run's, in a fraction of the time; the all-figures line is then theirs only). `--spread` prints how stable each
coefficient set is: its coefficients fitted on every training source of the sets fitted with it and once with each
of its own training sources left out (the training CV's folds), per term the full fit, the folds' minimum, median
and maximum, and the sources left out at the extremes; coefficients only, no figure's error, held out or not
(`--eras=`: those sets only; default every set).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from kvplan.bench.running import running
from kvplan.speed.corpus import in_training, read_corpus
from kvplan.speed.eras import fitted_with
from kvplan.speed.fit import build_all, errors, fit_engine, fit_era
from kvplan.speed.model import coefficients, shipped
from kvplan.speed.score import REPORTED, SCORED_APART, by_key, in_all, summary
from kvplan.speed.terms import TERMS

GOALS = {"tpot": "≤12% (≥75% within 20%)", "ttft": "≤20%", "e2el": "≤15%", "output_throughput": "≤15%"}
NAMES = {"tpot": "TPOT / ITL", "ttft": "TTFT", "e2el": "end-to-end", "output_throughput": "output tok/s",
         "pp_tok_s": "llama-bench pp", "tg_tok_s": "llama-bench tg", "total_throughput": "total tok/s (not in all)"}


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:+.0f}%" if x < 0 else f"{100 * x:.0f}%"


def score(built, coef_for) -> list:
    rows = []
    for era in sorted({b.case.era for b in built}):
        rows += errors([b for b in built if b.case.era == era], coef_for(era))
    return [r for r in rows if r[1] in REPORTED + SCORED_APART]


def loso(built, train_only: bool = False, eras: set | None = None) -> list:
    if train_only:
        built = [b for b in built if in_training(b.case.source)]
    rows = []
    # a source may hold several engines' runs (gpustack's tables, MLPerf): each era's points of it are
    # scored by that era's coefficients fitted without the source; `eras`: only those eras' folds
    for src, era in sorted({(b.case.source, b.case.era) for b in built if not eras or b.case.era in eras}):
        mine = [b for b in built if b.case.source == src and b.case.era == era]
        eng = mine[0].case.engine
        rest = [b for b in built if b.case.era in fitted_with(era) and b.case.source != src]
        if any(b.case.era == era for b in rest):
            rows += errors(mine, fit_era(era, rest))
        else:  # the era's only source (TensorRT-LLM 0.17): its engine's other sources stand in
            rows += errors(mine, fit_engine([b for b in built if b.case.engine == eng and b.case.source != src]))
    return [r for r in rows if r[1] in REPORTED + SCORED_APART]


def spread(built, era: str) -> list[str]:
    """Lines of `era`'s coefficients over its training folds (the module's `--spread`): per term the fit on every
    training source, then the leave-one-source-out folds' min / median / max and the sources whose fold gave them."""
    train = [b for b in built if in_training(b.case.source) and b.case.era in fitted_with(era)]
    full = fit_era(era, train)
    folds = {src: fit_era(era, [b for b in train if b.case.source != src])
             for src in sorted({b.case.source for b in train if b.case.era == era})}
    out = [f"{era}: {len(folds)} training sources, the fit on all of them and with each left out",
           f"  {'term':<8} {'all':>10} {'min':>10} {'median':>10} {'max':>10}  min / max left out"]
    for i, term in enumerate(TERMS):
        vals = sorted((c[i], src) for src, c in folds.items())
        if not vals or (full[i] == 0 and vals[-1][0] == 0):
            continue
        mid = statistics.median(v for v, _ in vals)
        ends = f"{vals[0][1]} / {vals[-1][1]}" if vals[0][0] != vals[-1][0] else "-"
        out.append(f"  {term:<8} {full[i]:>10.4g} {vals[0][0]:>10.4g} {mid:>10.4g} {vals[-1][0]:>10.4g}  {ends}")
    return out


def table(cal: list, roof: list) -> list[str]:
    out = ["| metric | n | median abs error | median signed | within 20% | optimistic >20% | goal | "
           "roofline median abs (signed) | roofline optimistic >20% |",
           "|---|---|---|---|---|---|---|---|---|"]
    c, r = by_key(cal, lambda b, m: m), by_key(roof, lambda b, m: m)
    c["all"], r["all"] = (summary([(m, p, y) for _, m, p, y in rows if in_all(m)]) for rows in (cal, roof))
    names, goals = {**NAMES, "all": "all figures"}, {**GOALS, "all": "optimistic ≤10%"}
    for m in (*REPORTED, "all", *SCORED_APART):  # total tok/s after the all-figures line it is not part of
        if not c.get(m, {}).get("n"):
            continue
        s, o = c[m], r.get(m, {})
        out.append(f"| {names[m]} | {s['n']} | {_pct(s['median_abs'])} | {_pct(s['median_signed'])} | "
                   f"{_pct(s['within_20'])} | {_pct(s['optimistic_20'])} | {goals.get(m, '')} | "
                   f"{_pct(o.get('median_abs'))} ({_pct(o.get('median_signed'))}) | {_pct(o.get('optimistic_20'))} |")
    return out


def breakdown(cal: list, key, title: str) -> list[str]:
    out = [f"{title}:"]
    for k, s in by_key(cal, key).items():
        out.append(f"  {str(k):<34} n {s['n']:>4}  median |e| {_pct(s['median_abs']):>5}  signed "
                   f"{_pct(s['median_signed']):>5}  within 20% {_pct(s['within_20']):>4}  optimistic "
                   f"{_pct(s['optimistic_20']):>4}")
    return out


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    folder = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speed"
    cases, skipped = read_corpus(folder)
    eras = next((set(a.split("=", 1)[1].split(",")) for a in argv if a.startswith("--eras=")), None)
    if eras and ("--train-cv" in argv or "--spread" in argv):  # build only what those eras' folds read: their
        # engines' points
        engines = {c.engine for c in cases if c.era in eras}
        cases = [c for c in cases if c.engine in engines]
    built, unplanned = build_all(cases, running)
    if "--spread" in argv:
        for era in sorted(eras or {b.case.era for b in built if in_training(b.case.source)}):
            print("\n".join(spread(built, era)))
        return 0
    if "--train-cv" in argv:
        rows = loso(built, train_only=True, eras=eras)
        print("leave one source out within the training sources (no held-out point read)"
              + (f", the folds of {', '.join(sorted(eras))} only:" if eras else ":"))
        mine = [b for b in built if in_training(b.case.source) and (not eras or b.case.era in eras)]
        print("\n".join(table(rows, score(mine, lambda eng: ()))))
        print("\n".join(breakdown(rows, lambda b, m: (b.case.era, m), "training CV, per engine (era) and metric")))
        return 0
    held = [b for b in built if not in_training(b.case.source)]
    cal = score(held, coefficients)
    roof = score(held, lambda eng: ())
    if "--markdown" in argv:
        print("\n".join(table(cal, roof)))
        return 0
    doc = shipped()
    print(f"corpus {folder}: {len(cases) + sum(skipped.values())} points, {len(built)} priced, "
          f"{len(held)} held out ({len(doc['corpus']['held_out_sources'])} sources); fit {doc.get('fit_date')}")
    print("skipped: " + ", ".join(f"{n} {why}" for why, n in sorted({**skipped, **unplanned}.items())))
    print("\n".join(table(cal, roof)))
    print("\n".join(breakdown(cal, lambda b, m: (b.case.era, m), "held out, per engine (era) and metric")))
    print("\n".join(breakdown(cal, lambda b, m: (b.case.gpu, m), "held out, per GPU and metric")))
    print("\n".join(breakdown(roof, lambda b, m: (b.case.engine, m), "the old roofline, held out, per engine")))
    if "--loso" in argv:
        rows = loso(built)
        print("leave one source out, every source:")
        print("\n".join(table(rows, score(built, lambda eng: ()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
