"""The load regime of each training corpus point: predicted against measured under the shipped coefficients
(in-sample), with the running cap the engine's rules admit, the tokens it holds, and where kvplan.speed.load puts
the point (B running, c in the system, rho_cap: an open loop's load at the cap; >= 1: overloaded). Training sources
only: no held-out point is read.

PYTHONPATH=$PWD .venv/bin/python benchmarks/speed_regime.py [SOURCE,SOURCE...] [--metric ttft] [--off 3]
[--buckets [--moe]]
(--off X: only points whose figure is off by more than X times either way).
`--buckets`: every reported figure's signed error (slow positive, for times and throughputs alike) by running-batch
bucket (B running: 1-8, 9-127, 128+; open loops and llama-bench apart), and each bucket's mean share of the
decode step by term (the shipped coefficients times kvplan.speed.model.decode_features at B); `--buckets --moe`: each
bucket split into MoE points (routed experts) and dense ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import mean, median

from kvplan.bench.running import running
from kvplan.engines.scheduler import resident_context
from kvplan.speed.corpus import in_training, read_corpus
from kvplan.speed.fit import build_all, settle
from kvplan.speed.bench_load import at_rate, decode_context
from kvplan.speed.load import RATE_METRICS, batch_and_mode
from kvplan.speed.model import coefficients, decode_features
from kvplan.speed.score import REPORTED
from kvplan.speed.terms import TERMS

BUCKETS = ((8, "B 1-8"), (127, "B 9-127"), (float("inf"), "B 128+"))  # (most running, label), ascending


def rows(sources: set | None, metrics: tuple) -> list[tuple]:
    """(built, prediction dict, B, c, tokens the cap holds, measured, metric) for every training point's `metrics`."""
    cases, _ = read_corpus(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speed")
    cases = [c for c in cases if in_training(c.source) and (not sources or c.source in sources)]
    built, _ = build_all(cases, running)
    out = []
    for b in built:
        wanted = [m for m in metrics if b.case.targets.get(m)]
        if not wanted:
            continue
        p = settle(b, coefficients(b.case.era))
        load = b.load
        batch, c, _ = batch_and_mode(load, p.get("e2el"), p.get("rho_cap"), p.get("outside"))
        ctx = resident_context(b.case.engine, b.case.version, load.isl, load.osl, None,
                               load.out_cv2 if load.drawn else None)
        out += [(b, p, batch, c, load.cap * ctx, b.case.targets[m], m) for m in wanted if m in p]
    return out


def bucket(load, batch: float) -> str:
    """A point's running-batch bucket: llama-bench's tests and open loops apart, else by B running (BUCKETS)."""
    if load.bench != "serve":
        return "llama-bench"
    if at_rate(load):
        return "open loop"
    return next(label for most, label in BUCKETS if batch <= most)


def slow(metric: str, pred: float, meas: float) -> float:
    """The signed error with slow positive: (pred - meas) / meas for a time, (meas - pred) / meas for a throughput."""
    e = (pred - meas) / meas
    return -e if metric in RATE_METRICS else e


def shares(built, batch: float) -> list[float]:
    """Each term's share of the point's decode step at B running under the shipped coefficients (TERMS order)."""
    load = built.load
    parts = [c * f for c, f in zip(coefficients(built.case.era), decode_features(built.shape, batch,
                                                                                 decode_context(load)))]
    total = sum(parts)
    return [p / total if total else 0.0 for p in parts]


def kind(built) -> str:
    """'MoE ' for a point whose model routes experts, 'dense ' otherwise (the `--moe` split's prefix)."""
    return "MoE " if built.shape.num_experts else "dense "


def buckets(found: list[tuple], moe: bool = False) -> list[str]:
    """One line a bucket: figures, median signed (slow +) and |error|, TPOT's, and the decode step's term shares;
    `moe`: each bucket as two lines, its MoE points' and its dense points' (`kind`)."""
    groups: dict = {}
    for b, p, batch, _c, _t, y, m in found:
        groups.setdefault((kind(b) if moe else "") + bucket(b.load, batch), []).append((b, batch, m, slow(m, p[m], y)))
    out = []
    labels = [lbl for _, lbl in BUCKETS] + ["open loop", "llama-bench"]
    for key in [pre + lbl for lbl in labels for pre in (("MoE ", "dense ") if moe else ("",))]:
        g = groups.get(key)
        if not g:
            continue
        errs, tpot = [e for *_, e in g], [(b, batch, e) for b, batch, m, e in g if m == "tpot"]
        line = (f"{key:<{18 if moe else 12}} n {len(g):5d}  signed {100 * median(errs):+6.1f}%  |e| "
                f"{100 * median(map(abs, errs)):5.1f}%")
        if tpot:
            share = [mean(col) for col in zip(*(shares(b, batch) for b, batch, _ in tpot))]
            terms = " ".join(f"{t} {100 * s:.0f}" for t, s in zip(TERMS, share) if s >= 0.005)
            line += f"  | TPOT n {len(tpot)} signed {100 * median(e for *_, e in tpot):+6.1f}%  step: {terms}"
        out.append(line)
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sources", nargs="?", default="")
    ap.add_argument("--metric", default="ttft")
    ap.add_argument("--off", type=float, default=0.0)
    ap.add_argument("--buckets", action="store_true")
    ap.add_argument("--moe", action="store_true")
    a = ap.parse_args(argv)
    sources = set(filter(None, a.sources.split(",")))
    if a.buckets:
        print("\n".join(buckets(rows(sources, REPORTED), a.moe)))
        return
    for b, p, batch, c, tokens, y, _m in rows(sources, (a.metric,)):
        ratio = p[a.metric] / y
        if a.off and 1 / a.off <= ratio <= a.off:
            continue
        ld, cs = b.load, b.case
        print(f"{cs.source[:34]:<34} {cs.era:<14} {cs.gpu:<11} tp{cs.tp} dp{cs.dp} isl {ld.isl:6.0f} osl {ld.osl:5.0f} "
              f"rate {ld.rate or '-'} conc {ld.concurrency or '-'} n {ld.num_prompts or '-'} | cap {ld.cap:7.1f} "
              f"({tokens / 1e3:8.1f}k tokens) chunk {ld.chunk} B {batch:7.1f} c {c:8.1f} rho_cap "
              f"{p.get('rho_cap', float('nan')):5.2f} | {a.metric} {p[a.metric]:9.4g} measured {y:9.4g} x{ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
