"""Signed errors of kvplan against every engine log fixture: one row per checked quantity.

Run by hand: `.venv/bin/python benchmarks/engine_errors.py`. For each log in tests/fixtures/logs it
prints what the engine printed, kvplan's figure and the signed difference (kvplan - engine): weights vs
"model loading took", available KV vs the reported budget, tokens and concurrency vs the reported
ones (ranges where the engine's printed budget is rounded), K/V sizes for SGLang and llama.cpp.
The fixtures' `#kvplan:` header says what the source issue stated beside the log (model, GPU).
Nothing here is a pass/fail tolerance; the tests hold those.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.sources.catalog import find_in_catalog  # noqa: E402
from kvplan.hardware.gpus import find_gpu  # noqa: E402
from kvplan.engines.logparse import fixture_meta, parse_log  # noqa: E402
from kvplan.engines.reconcile import reconcile  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "logs"


def run(path: Path):
    text = path.read_text()
    meta = fixture_meta(text)
    rec = parse_log(text)
    model = find_in_catalog(meta["model"]) if "model" in meta else None
    gpu = find_gpu(meta["gpu"]) if "gpu" in meta else None
    return reconcile(rec, model, gpu, meta.get("version"), meta.get("kv_dtype"), int(meta["tp"]) if "tp" in meta else None)


def main() -> None:
    rows = []
    for path in sorted(FIXTURES.glob("*.log")):
        res = run(path)
        for r in res.rows:
            err = "" if r.error is None else f"{r.error * 100:+.2f}%"
            verdict = "" if r.ok is None else ("ok" if r.ok else "DIFFERS")
            rows.append((path.stem, r.quantity, r.reported, r.predicted, r.diff, err, verdict))
    widths = [max(len(str(x[i])) for x in rows + [HEAD]) for i in range(len(HEAD))]
    for row in [HEAD, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


HEAD = ("log", "quantity", "engine", "kvplan", "difference", "signed error", "verdict")

if __name__ == "__main__":
    main()
