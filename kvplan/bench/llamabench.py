"""llama-bench results: `-o json` (an array), `-o jsonl` (one object a line), `-o csv`, `-o md` (the default table).

Fields as ggml-org/llama.cpp@08d0baac:tools/llama-bench/README.md shows them: `model_filename`,
`model_type`, `gpu_info`, `backends`, `build_commit`, `build_number`, `n_batch`, `n_ubatch`, `type_k`,
`flash_attn`, `n_prompt`, `n_gen`, `n_depth`, `avg_ts` (tokens/s, the mean of the repetitions). A row with `n_gen`
0 is a prompt-processing test (pp: `n_prompt` tokens in one batch), one with `n_prompt` 0 a generation
test (tg: `n_gen` tokens one at a time, after `n_depth` tokens already in the cache). The markdown
table keeps only model, backend, test (`pp512`, `tg128 @ d512`) and `t/s` (`mean ± sd`), plus the fields a run set
away from llama-bench's defaults: `flash_attn` as `fa` only then (ggml-org/llama.cpp@050fc7f3
tools/llama-bench/llama-bench.cpp, markdown_printer: `params.flash_attn != cmd_params_defaults.flash_attn`).
"""

from __future__ import annotations

import re

from kvplan.bench import numbers
from kvplan.bench.result import BenchRun, Settings, Stat
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.speed.ggml import micro_batch

MAX_ROWS = 1000
_REQUIRED = ("n_prompt", "n_gen", "avg_ts")


def matches_row(doc) -> bool:
    return isinstance(doc, dict) and all(k in doc for k in _REQUIRED)


def matches_json(doc) -> bool:
    return isinstance(doc, list) and bool(doc) and all(matches_row(d) for d in doc[:MAX_ROWS])


def matches_csv(text: str) -> bool:
    first = text.lstrip()[:4000].splitlines()[0] if text.strip() else ""
    return all(f in first for f in _REQUIRED) and first.count(",") >= 3


def _micro_batch(row: dict) -> int | None:
    """The tokens a step of the row's test takes: its `n_ubatch` clamped to its `n_batch`, as llama_context runs it
    (kvplan.speed.ggml.micro_batch; llama-bench prints the -ub asked, not the one run)."""
    ub = numbers.count(row.get("n_ubatch"))
    return micro_batch(ub, numbers.count(row.get("n_batch"))) if ub else ub


def _stated(value) -> str | None:
    """A row's `flash_attn` as it printed it: 0 / 1 / -1 (auto), true / false (JSON's bool), on / off / auto."""
    return numbers.text(str(value).lower(), 10) if isinstance(value, (str, int, bool)) else None


def _run(row: dict, label: str | None) -> BenchRun | None:
    pp, tg, depth = (numbers.figure(row.get(k)) for k in ("n_prompt", "n_gen", "n_depth"))
    rate = numbers.figure(row.get("avg_ts"))
    if pp is None or tg is None or (pp > 0) == (tg > 0):  # pp+tg tests (-pg) are left out
        return None
    metric = "pp_tok_s" if pp else "tg_tok_s"
    n = int(pp or tg)
    name = numbers.text(row.get("model_filename")) or numbers.text(row.get("model_type"))
    settings = Settings(
        model=name, engine="llama.cpp", engine_version=numbers.text(str(row.get("build_commit") or ""), 40),
        gpu_name=numbers.text(row.get("gpu_info")), gpus=1, tp=1, isl=int(pp) if pp else None,
        osl=int(tg) if tg else None,
        lengths="fixed", concurrency=1, num_prompts=1, kv_dtype=numbers.text(row.get("type_k"), 20),
        max_tokens=_micro_batch(row), depth=int(depth or 0), flash_attn=_stated(row.get("flash_attn")))
    tag = f"{'pp' if pp else 'tg'}{n}" + (f" @ d{int(depth)}" if depth else "")
    return BenchRun("llama-bench", label or tag, settings, {metric: Stat(mean=rate)} if rate is not None else {})


def parse_rows(rows) -> list[BenchRun]:
    out = [_run(r, None) for r in rows[:MAX_ROWS] if isinstance(r, dict)]
    return [r for r in out if r is not None]


def _csv_row(header: list, row: list, k: int) -> dict | None:
    """Row `k` of a CSV by its header's names; None for a blank line. llama-bench writes one value a column: its
    csv_printer prints test::get_fields() as the header and each test's get_values(), one list in one order
    (ggml-org/llama.cpp@0104b151 tools/llama-bench/llama-bench.cpp; its JSON printers assert the two sizes equal), so
    a row of another width was edited, and which of its values goes with which name cannot be told: refused."""
    if row and len(row) != len(header):
        raise KvplanError(f"llama-bench CSV row {k}: {len(row)} values under a header of {len(header)} columns; "
                          "llama-bench writes a value for every column, so the file was edited and its values cannot "
                          "be matched to their names (llama.cpp's README example names `repack` in its header, not in "
                          "its rows)", EXIT_USAGE)
    return dict(zip(header, row)) if row else None


def parse_csv(text: str) -> list[BenchRun]:
    rows = numbers.csv_rows(text[:8_000_000], "llama-bench CSV")
    if not rows:
        return []
    got = (_csv_row(rows[0], r, k) for k, r in enumerate(rows[1:MAX_ROWS + 1], 1))
    return parse_rows([d for d in got if d is not None])


_MD_TEST = re.compile(r"^(pp|tg)\s*(\d{1,9})(?:\s*@\s*d(\d{1,9}))?$")


def matches_md(text: str) -> bool:
    head = text.lstrip()[:2000]
    return head.startswith("|") and re.search(r"\|\s*test\s*\|", head) is not None and "t/s" in head


def parse_md(text: str) -> list[BenchRun]:
    lines = [ln for ln in text.splitlines()[:MAX_ROWS + 2] if ln.strip().startswith("|")]
    if len(lines) < 3:
        return []
    header = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in ln.strip().strip("|").split("|"))))
        m = _MD_TEST.match(cells.get("test", ""))
        if not m:
            continue
        kind, n, depth = m.group(1), int(m.group(2)), int(m.group(3) or 0)
        rows.append({"model_type": cells.get("model"), "n_prompt": n if kind == "pp" else 0,
                     "n_gen": n if kind == "tg" else 0, "n_depth": depth, "flash_attn": cells.get("fa"),
                     "avg_ts": cells.get("t/s", "").split("±")[0].strip()})
    return parse_rows(rows)
