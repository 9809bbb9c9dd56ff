"""Plans as rows for files (CSV and JSON): one plan, a sweep's ranked plans, cheapest's candidates.

One row per plan: the keys of kvplan.report.text.plan_to_dict (the same numbers `fit --json` prints),
plus rank and prices. The CSV carries exactly those values (bytes as integers, floats at full
precision) and adds a GiB column beside each memory figure people read, so a spreadsheet and a
script agree. Files are written by kvplan.core.files.atomic_write.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from typing import Iterable, Iterator

from kvplan.core.collector import collector_paused
from kvplan.report.text import plan_to_dict

GIB = 2**30

# Columns added to plan_to_dict's keys for a sweep or a cost ranking.
PRICE_KEYS = ("price_per_gpu_hour", "cost_per_hour", "cost_per_concurrent_user_hour")

# A GiB column (bytes / 2^30, rounded to 3 decimals) follows each of these byte columns in the CSV.
GIB_BESIDE = {
    "usable_memory_bytes_per_gpu": "usable_memory_gib_per_gpu",
    "budget_bytes_per_gpu": "budget_gib_per_gpu",
    "weight_bytes": "weight_gib",
    "weight_bytes_per_gpu": "weight_gib_per_gpu",
    "overhead_bytes_per_gpu": "overhead_gib_per_gpu",
    "kv_bytes_per_sequence": "kv_gib_per_sequence",
    "kv_bytes_per_sequence_per_gpu": "kv_gib_per_sequence_per_gpu",
    "kv_memory_bytes_per_gpu": "kv_memory_gib_per_gpu",
    "state_pool_bytes_per_gpu": "state_pool_gib_per_gpu",
    "token_pool_bytes_per_gpu": "token_pool_gib_per_gpu",
    "kv_used_bytes_per_gpu": "kv_used_gib_per_gpu",
    "free_bytes_per_gpu": "free_gib_per_gpu",
    "above_budget_bytes_per_gpu": "above_budget_gib_per_gpu",
}

# Spreadsheets run a cell that starts with one of these as a formula (CSV injection). Text cells
# (model names come from users' configs) that start so are prefixed with an apostrophe, which
# spreadsheets show as text; numbers are never touched (a negative free memory stays a number).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plan_row(plan, model, price: float | None = None, rank: int | None = None, step: float | None = None) -> dict:
    """plan_to_dict(plan, model) with rank first, the calibrated decode step beside the roofline's, and the
    price columns at the end.

    `step`: the plan's decode step under kvplan.speed's calibrated model (seconds; None: not priced, the
    three *_calibrated keys are null). The plan's own decode_* keys are the roofline's lower bound.

    cost_per_hour = price per GPU-hour x GPUs; cost_per_concurrent_user_hour = that / max
    concurrency at the plan's context (null when the deployment holds no sequence at all).
    """
    row = plan_to_dict(plan, model, nested=False, rank=rank)  # `fit --json` has layer_kinds, a table row not
    info = getattr(model, "speculative", None)  # nor the drafter's report: its --speculative spelling instead
    cal = max(1, plan.request.batch) / step if step else None
    row["decode_step_seconds_calibrated"] = step or None
    row["decode_tokens_per_second_calibrated"] = cal
    row["decode_tokens_per_second_per_request_calibrated"] = 1 / step if step else None
    row["speculative"] = info.flag() if info is not None else None
    cost = None if price is None else price * plan.deployment.gpus
    row["price_per_gpu_hour"] = price
    row["cost_per_hour"] = cost
    row["cost_per_concurrent_user_hour"] = (cost / plan.max_concurrency
                                            if cost is not None and plan.max_concurrency > 0 else None)
    return row


def sweep_rows(result, limit: int | None = None) -> list[dict]:
    """JSON-ready rows (kvplan.report.export.plan_row), rank 1 first."""
    with collector_paused():  # 100k dicts without cycles: nothing for the collector to find
        return list(iter_sweep_rows(result, limit))


def iter_sweep_rows(result, limit: int | None = None) -> Iterator[dict]:
    """sweep_rows one at a time: a file of a million plans is written without a million dicts at once."""
    plans = result.plans if limit is None else result.plans[:limit]
    for i, p in enumerate(plans, 1):
        yield plan_row(p, result.models[p.model], result.price(p), rank=i, step=result.calibrated_step(p))


def candidate_row(c, model, rank: int | None) -> dict:
    """JSON row: the plan's own fields (kvplan.report.export.plan_row) plus meets/why; or the invalid deployment."""
    if c.plan is None:
        row = {"rank": rank, "model": model.name, "gpu": c.gpu, "gpus": c.deployment.gpus, "tp": c.deployment.tp,
               "pp": c.deployment.pp, "price_per_gpu_hour": c.price_per_gpu_hour, "cost_per_hour": c.cost_per_hour}
    else:
        row = plan_row(c.plan, model, c.price_per_gpu_hour, rank=rank,  # the calibrated step at batch N
                       step=getattr(c, "step_seconds", None))
        if c.replicas > 1:  # the plan is one replica's; the deployment is all of them
            row.update(replicas=c.replicas, gpus_total=c.gpus, cost_per_hour=c.cost_per_hour,
                       max_concurrency_total=c.plan.max_concurrency * c.replicas)
    row.setdefault("replicas", c.replicas)
    row["meets"] = c.meets
    row["why"] = c.why
    return row


def csv_columns(keys: Iterable[str]) -> list[str]:
    """The CSV header for rows with these keys: each key, then its GiB column where there is one."""
    out = []
    for k in keys:
        out.append(k)
        if k in GIB_BESIDE:
            out.append(GIB_BESIDE[k])
    return out


# The keys of plan_row (with a rank), in order: the documented columns of `kvplan sweep --csv/--json`.
ROW_KEYS = (
    "rank", "model", "gpu", "gpus", "tp", "pp", "dp", "ep", "dcp", "context", "batch", "weight_dtype", "kv_dtype",
    "checkpoint_kv",
    "block_size",
    "gpu_memory_utilization", "usable_memory_bytes_per_gpu", "budget_bytes_per_gpu", "weight_bytes",
    "weight_bytes_per_gpu", "overhead_bytes_per_gpu", "overhead_is_estimate", "kv_share", "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_per_sequence_per_gpu",
    "state_bytes_per_sequence", "state_bytes_per_sequence_per_gpu", "kv_memory_bytes_per_gpu",
    "state_pool_bytes_per_gpu", "token_pool_bytes_per_gpu", "pooled_state_bytes_per_sequence_per_gpu",
    "kv_used_bytes_per_gpu", "free_bytes_per_gpu", "above_budget_bytes_per_gpu", "kv_cache_tokens",
    "kv_pool_tokens_per_deployment", "request_tokens_at_context", "max_concurrency", "max_context",
    "max_context_limited_by", "context_limit", "fits", "binds", "decode_step_seconds",
    "decode_tokens_per_second", "decode_tokens_per_second_per_request", "speculative", "warnings",
    "notes",
    "decode_step_seconds_calibrated", "decode_tokens_per_second_calibrated",
    "decode_tokens_per_second_per_request_calibrated", *PRICE_KEYS,
)
CSV_COLUMNS = tuple(csv_columns(ROW_KEYS))


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value  # csv writes repr(): floats round-trip exactly
    if isinstance(value, (list, tuple)):
        value = " | ".join(map(str, value))
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def write_csv(rows: Iterable[dict], stream, columns: Iterable[str] | None = None) -> None:
    """Rows as CSV (RFC 4180, CRLF line ends, UTF-8): a header line, then one line per row.

    Integers and floats are written as Python prints them (exact, round-trip); true/false for
    booleans; an empty cell for null; lists joined with " | ".
    """
    rows = iter(rows)  # a list, or rows made one at a time (iter_sweep_rows)
    first = next(rows, None)
    if columns is None:
        columns = csv_columns(first.keys()) if first is not None else CSV_COLUMNS
    columns = list(columns)
    rows = itertools.chain([first] if first is not None else [], rows)
    source = {gib: key for key, gib in GIB_BESIDE.items()}
    plan = [(source.get(c, c), c in source) for c in columns]
    writer = csv.writer(stream, lineterminator="\r\n")
    writer.writerow(columns)
    number = (int, float)
    writer.writerows(
        [round(row[k] / GIB, 3) if gib else (v if type(v) in number else _cell(v))
         for k, gib in plan for v in (row[k],)]
        for row in rows)


def write_json_document(head: dict, rows: Iterable[dict], stream, key: str = "plans") -> None:
    """json_document written to `stream` a row at a time (rows may be made one at a time)."""
    head_text = json.dumps(head, ensure_ascii=False, allow_nan=False, indent=1)
    stream.write(head_text[:-1].rstrip() + (",\n " if head else "") + f"{json.dumps(key)}: [")
    sep = "\n"
    for row in rows:
        stream.write(sep + json.dumps(row, ensure_ascii=False, allow_nan=False))
        sep = ",\n"
    stream.write(("\n]" if sep != "\n" else "]") + "\n}\n")


def json_document(head: dict, rows: Iterable[dict], key: str = "plans") -> str:
    """`head` with `key: rows` last, one row per line (compact rows keep 100k plans fast and diffable):
    write_json_document's text."""
    out = io.StringIO()
    write_json_document(head, rows, out, key)
    return out.getvalue()


def json_text(data) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


