"""Signed errors of kvplan against every engine log fixture: one row per checked quantity.

Run by hand: `.venv/bin/python benchmarks/engine_errors.py`. For each log in tests/fixtures/logs it
prints what the engine printed, kvplan's figure and the signed difference (kvplan - engine): weights vs
"model loading took", available KV vs the reported budget, tokens and concurrency vs the reported
ones (ranges where the engine's printed budget is rounded), K/V sizes for SGLang and llama.cpp.
The fixtures' `#kvplan:` header says what the source issue stated beside the log (model, GPU).
TensorRT-LLM's logs are the corpus's (tests/fixtures/logs/corpus, engine trtllm): each is checked with its
index record's model, GPU, release, tp and weight format (stated or inferred), and one kvplan cannot check (the
TensorRT-engine runtime's, a model not stated with nothing model-free to check) says why in one row.
Nothing here is a pass/fail tolerance; the tests hold those.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.core.errors import KvplanError  # noqa: E402
from kvplan.sources.catalog import require_in_catalog  # noqa: E402
from kvplan.hardware.gpus import find_gpu  # noqa: E402
from kvplan.engines.logparse import fixture_meta, parse_log  # noqa: E402
from kvplan.engines.reconcile import reconcile  # noqa: E402
from kvplan.engines.trtllm.reconcile import reconcile_trtllm  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "logs"


def run(path: Path):
    text = path.read_text()
    meta = fixture_meta(text)
    rec = parse_log(text)
    model = require_in_catalog(meta["model"]) if "model" in meta else None
    gpu = find_gpu(meta["gpu"]) if "gpu" in meta else None
    return reconcile(rec, model, gpu, meta.get("version"), meta.get("kv_dtype"),
                     int(meta["tp"]) if "tp" in meta else None)


def trtllm_runs():
    """(name, Reconciliation or the one-line reason it is not checked) for the corpus's TensorRT-LLM logs."""
    corpus = FIXTURES / "corpus"
    for rec in yaml.safe_load((corpus / "index.yaml").read_text()):
        if rec.get("engine") != "trtllm":
            continue
        log = parse_log((corpus / rec["log"]).read_text())
        model = require_in_catalog(rec["kvplan_model"]) if rec.get("kvplan_model") else None
        key = rec.get("gpu") or rec.get("gpu_inferred")
        try:
            yield rec["id"], reconcile_trtllm(log, model, find_gpu(key) if key else None,
                                              rec.get("version") or rec.get("version_inferred"), None, rec.get("tp"),
                                              weight_dtype=rec.get("weights"))
        except KvplanError as exc:
            yield rec["id"], exc.message


def main() -> None:
    rows = []
    runs = [(path.stem, run(path)) for path in sorted(FIXTURES.glob("*.log"))] + list(trtllm_runs())
    for name, res in runs:
        if isinstance(res, str):
            rows.append((name, "not checked", "", "", res, "", ""))
            continue
        for r in res.rows:
            err = "" if r.error is None else f"{r.error * 100:+.2f}%"
            verdict = "" if r.ok is None else ("ok" if r.ok else "DIFFERS")
            rows.append((name, r.quantity, r.reported, r.predicted, r.diff, err, verdict))
    widths = [max(len(str(x[i])) for x in rows + [HEAD]) for i in range(len(HEAD))]
    for row in [HEAD, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


HEAD = ("log", "quantity", "engine", "kvplan", "difference", "signed error", "verdict")

if __name__ == "__main__":
    main()
