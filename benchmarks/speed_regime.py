"""The load regime of each training corpus point: predicted against measured under the shipped coefficients
(in-sample), with the running cap the engine's rules admit, the tokens it holds, and where kvplan.speed.load puts
the point (B running, c in the system, rho_cap: an open loop's load at the cap; >= 1: overloaded). Training sources
only: no held-out point is read.

PYTHONPATH=$PWD .venv/bin/python benchmarks/speed_regime.py [SOURCE,SOURCE...] [--metric ttft] [--off 3]
(--off X: only points whose figure is off by more than X times either way)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kvplan.bench.running import running
from kvplan.engines.scheduler import resident_context
from kvplan.speed.corpus import in_training, read_corpus
from kvplan.speed.fit import build_all, settle
from kvplan.speed.load import batch_and_mode
from kvplan.speed.model import coefficients


def rows(sources: set | None, metric: str) -> list[tuple]:
    """(built, prediction dict, B, c, tokens the cap holds, measured) for every training point with `metric`."""
    cases, _ = read_corpus(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speed")
    cases = [c for c in cases if in_training(c.source) and (not sources or c.source in sources)]
    built, _ = build_all(cases, running)
    out = []
    for b in built:
        y = b.case.targets.get(metric)
        if not y:
            continue
        p = settle(b, coefficients(b.case.era))
        if metric not in p:
            continue
        load = b.load
        batch, c, _ = batch_and_mode(load, p.get("e2el"), p.get("rho_cap"))
        ctx = resident_context(b.case.engine, b.case.version, load.isl, load.osl, None,
                               load.out_cv2 if load.drawn else None)
        out.append((b, p, batch, c, load.cap * ctx, y))
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sources", nargs="?", default="")
    ap.add_argument("--metric", default="ttft")
    ap.add_argument("--off", type=float, default=0.0)
    a = ap.parse_args(argv)
    for b, p, batch, c, tokens, y in rows(set(filter(None, a.sources.split(","))), a.metric):
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
