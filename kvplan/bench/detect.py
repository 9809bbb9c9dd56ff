"""A benchmark result file's format, told by its content (never its name), and its runs.

`read_runs(text)` tries the JSON formats (one document, then one per line), then the text ones; a
file none of them matches is refused with one short line naming the tools. Every parser reads
outside input: sizes are capped here and in each parser, numbers go through `numbers`.
"""

from __future__ import annotations

import json

from kvplan.bench import aiperf, llamabench, serving, sglang, trtllm, vllm
from kvplan.bench.result import BenchRun
from kvplan.core.errors import EXIT_USAGE, KvplanError

MAX_BYTES = 32 * 2**20
MAX_RUNS = 200
MAX_LINES = 100_000
FORMATS = {
    "vllm-json": "vllm bench serve / benchmark_serving.py saved result (JSON)",
    "vllm-report": "vllm bench serve / benchmark_serving.py printed result",
    "sglang-jsonl": "SGLang bench_serving output file (JSONL)",
    "sglang-report": "SGLang bench_serving printed result",
    "aiperf-json": "genai-perf / AIPerf profile_export JSON",
    "aiperf-csv": "genai-perf / AIPerf profile_export CSV",
    "llama-bench": "llama-bench -o json, jsonl, csv or md",
    "trtllm-bench": "trtllm-bench printed report or report JSON",
}


def _json(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _first(readers, found) -> list[BenchRun] | None:
    """The runs of the first reader whose test takes `found` (a JSON document or the file's text), in order."""
    return next((parse(found) for matches, parse in readers if matches(found)), None)


def _from_doc(doc) -> list[BenchRun] | None:
    return _first(((vllm.matches, vllm.parse), (sglang.matches, lambda d: [sglang.parse_line(d, "the run")]),
                   (aiperf.matches_json, aiperf.parse_json), (llamabench.matches_json, llamabench.parse_rows),
                   (trtllm.matches_json, trtllm.parse_json)), doc)


def _every(matches):
    """A test of numbered JSON lines ((line, document), ...): there are some, and `matches` takes every one."""
    return lambda docs: bool(docs) and all(matches(d) for _, d in docs)


def _from_lines(text: str) -> list[BenchRun] | None:
    docs = [(k, _json(ln)) for k, ln in enumerate(text.splitlines()[:MAX_LINES], 1) if ln.strip()]
    docs = [(k, d) for k, d in docs if isinstance(d, dict)]
    return _first(((_every(sglang.matches), lambda ds: [sglang.parse_line(d, f"line {k}") for k, d in ds]),
                   (_every(llamabench.matches_row), lambda ds: llamabench.parse_rows([d for _, d in ds]))), docs)


def _serving_report(text: str) -> list[BenchRun]:
    """The one run of a printed vllm / SGLang serving report."""
    fields = serving.report_lines(text)
    sgl = "Backend" in fields or "Mean E2E Latency (ms)" in fields
    settings = serving.report_settings(text, fields)
    return [BenchRun("sglang-report" if sgl else "vllm-report", "the run", settings, serving.report_metrics(fields))]


def _from_text(text: str) -> list[BenchRun] | None:
    return _first(((trtllm.matches, trtllm.parse), (lambda t: serving.REPORT_MARK in t, _serving_report),
                   (aiperf.matches_csv, aiperf.parse_csv), (llamabench.matches_csv, llamabench.parse_csv),
                   (llamabench.matches_md, llamabench.parse_md)), text)


def read_runs(text: str, where: str = "the file") -> list[BenchRun]:
    """Every run `text` holds (a benchmark result in one of FORMATS), or a one-line KvplanError."""
    if len(text) > MAX_BYTES:
        raise KvplanError(f"{where}: larger than {MAX_BYTES // 2**20} MiB; not a benchmark result", EXIT_USAGE)
    doc = _json(text) if text.lstrip()[:1] in ("{", "[") else None
    runs = _from_doc(doc) if doc is not None else None
    if runs is None:
        runs = _from_lines(text) if text.lstrip()[:1] in ("{", "[") else None
    if runs is None:
        runs = _from_text(text)
    if runs is None:
        # the formats by tool, not FORMATS' eight descriptions: one short line (the command's help lists the files)
        raise KvplanError(f"{where}: not a benchmark result kvplan reads (vLLM, SGLang, AIPerf, llama-bench, "
                          "trtllm-bench; see check-bench's help)", EXIT_USAGE)
    runs = [r for r in runs if r.metrics][:MAX_RUNS]
    if not runs:
        raise KvplanError(f"{where}: a benchmark result with no figure kvplan can read (every metric missing or "
                          "not a number)", EXIT_USAGE)
    return runs


