"""A finished sweep written out: its ranked rows to --output files (CSV, JSON, HTML), stdout and the terminal table.

Split from kvplan/cli/sweep.py (which checks the inputs, runs the sweep and its simulations and prints the summary):
everything here reads a `SweepResult` and writes, nothing plans. Rows stream one at a time to CSV and JSON, so the
outputs add one row's memory to the plans' (issue 25); every file is written atomically. plotly is imported only
inside render_html, when an .html output is asked for.
"""

from dataclasses import asdict
import sys

from kvplan.cli._common import markup_safe, table
from kvplan.cli.speed_flags import speed_band, speed_notes
from kvplan.compare.procurement import headlines
from kvplan.compare.sweep import RANKING
from kvplan.core.files import atomic_write_all
from kvplan.core.units import human_tokens, plural
from kvplan.report.export import iter_sweep_rows, write_csv, write_json_document
from kvplan.report.html import render_html


def _write_json(result, rows, prices, stream, front=None) -> None:
    """The JSON document, a row at a time (rows may be made one at a time); `front`: the serving front end the
    simulated requests crossed (kvplan.simulator.frontend.FrontEnd.meta), where --workload ran any."""
    head = {"engine": result.engine, "ranking": RANKING, "decode_speed": result.speed,
            "decode_speed_band": speed_band(result.speed, result.engine_name), "plans_count": len(result.plans),
            "fits_count": sum(p.fits for p in result.plans), "skipped_plans": result.skipped_plans,
            "skipped": [asdict(s) for s in result.skipped], "currency": prices.currency or None,
            "prices_per_gpu_hour": result.prices}
    if front is not None:
        head["sim_front_end"] = front
    write_json_document(head, rows, stream)


def ranked_rows(result, sims, limit=None) -> list[dict]:
    """The ranked rows, with the simulated columns of each plan when there are any."""
    return list(_stream(result, sims, limit))


def _stream(result, sims, limit=None):
    """The ranked rows made one at a time, for files and stdout: a row is written and dropped, so the
    outputs add one row's memory to the plans', not a second copy of every plan (issue 25)."""
    rows = iter_sweep_rows(result, limit)
    if sims is None:
        yield from rows
        return
    for row, sim in zip(rows, sims):
        row.update(sim)
        yield row


def write_files(result, files, title: str, summary: list[str], prices, gpus=(), sims=None, front=None) -> None:
    """Every --output, all written or none (kvplan.core.files.atomic_write_all)."""
    if not files:
        return

    def content(fmt):
        if fmt == ".csv":
            return lambda stream: write_csv(_stream(result, sims), stream)
        if fmt == ".json":
            return lambda stream: _write_json(result, _stream(result, sims), prices, stream, front)
        return render_html(ranked_rows(result, sims), title=title, summary=summary,  # the charts read every row
                           skipped=skipped_lines(result), currency=prices.unit,
                           speed_label=_html_speed_label(result), headlines=headlines(result, gpus))

    atomic_write_all((path, content(fmt), "" if fmt == ".csv" else None) for path, fmt in files)


def _html_speed_label(result) -> str | None:
    """The HTML's decode chart label: the calibrated model with its held-out band; None: the roofline only."""
    if result.speed != "calibrated":
        return None
    return speed_notes("calibrated", result.engine_name, "", "")[0].removeprefix("step times: ")


def write_stdout(result, fmt: str, prices, sims=None, front=None) -> None:
    rows = _stream(result, sims)
    if fmt == "csv":
        write_csv(rows, sys.stdout)
    else:
        _write_json(result, rows, prices, sys.stdout, front)


def skipped_lines(result) -> list[str]:
    """A line a skipped deployment; the GPUs it stands for named where they are not all the sweep's (a node-size
    group, kvplan.compare.sweep.node_groups, or the GPUs an engine refused), the first three and how many more."""
    return [f"{s.model}: {s.gpus} GPU{'s' if s.gpus > 1 else ''} (tp {s.tp} × pp {s.pp}){_on(s, result)} skipped, "
            f"{s.reason} ({plural(s.plans, 'plan')})" for s in result.skipped]


def _on(skip, result) -> str:
    keys = skip.profiles
    if not keys or set(keys) >= set(result.gpus):
        return ""
    return f" on {', '.join(keys[:3])}" + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def sweep_table(result, rows: list[dict], currency: str):
    priced = any(r["price_per_gpu_hour"] is not None for r in rows)
    weights = len({r["weight_dtype"] for r in rows}) > 1
    kv_dtypes = {r["kv_dtype"] for r in rows}
    kv = len(kv_dtypes) > 1  # one cache dtype for every row: said once in the title, not in a column
    # "users": the max concurrency at the row's context (requests held at once), as the HTML names it.
    # Rows come best first (the rank is in --json/--csv); no "#" column, so names stay whole in 80 columns.
    cols = ["model", "GPU", "GPUs", "ctx"] + (["KV"] if kv else []) + (["weights"] if weights else [])
    tiers = [k[len("offload_"):-len("_contexts")] for k in (rows[0] if rows else {}) if k.endswith("_contexts")
             and k.startswith("offload_")]
    cal = result.speed == "calibrated"  # tok/s calibrated, the roofline bound beside it; else the roofline alone
    cols += (["fits", "users", "tok/s"] + (["roofline"] if cal else []) + (["host ctx"] if tiers else [])
             + ([f"{currency}/user-h"] if priced else []))
    title = (f"Best {len(rows)} of {plural(len(result.plans), 'plan')}"
             + ("" if kv or not rows else f" · KV {kv_dtypes.pop()}")
             + (" · tok/s calibrated, roofline a bound" if cal else " · tok/s roofline"))
    t = table(cols, right=tuple(c for c in cols if c not in ("model", "GPU", "KV", "weights", "fits")),
              whole=("KV", "weights", "fits") + (() if kv or weights else ("model", "GPU")), title=title,
              optional=("roofline", "tok/s", "host ctx"), drop_first=("roofline",))
    for r in rows:
        gpus = (str(r["gpus"]) if r["pp"] == 1 and r.get("dp", 1) == 1
                else f"{r['gpus']} ({r['tp']}×{r['pp']}" + (f"×{r['dp']}dp" if r.get("dp", 1) > 1 else "") + ")")
        cells = [markup_safe(r["model"]), r["gpu"], gpus, human_tokens(r["context"])]
        cells += [r["kv_dtype"]] if kv else []
        cells += [r["weight_dtype"]] if weights else []
        cells += ["[green]yes[/]" if r["fits"]
                  else ("[red]limit[/]" if r.get("binds") == "context limit" else "[red]no[/]"),
                  f"{r['max_concurrency']:,}",
                  _tps(r["decode_tokens_per_second_calibrated" if cal else "decode_tokens_per_second"], r["fits"])]
        cells += [_tps(r["decode_tokens_per_second"], r["fits"])] if cal else []
        if tiers:  # full-length contexts every offload tier holds together ("–": not sized, see offload_refused)
            held = [r[f"offload_{t}_contexts"] for t in tiers]
            cells += ["–" if None in held else f"{sum(held):,}"]
        if priced:
            cpu = r["cost_per_concurrent_user_hour"]
            cells += ["–" if cpu is None else f"{cpu:,.4f}"]
        t.add_row(*cells)
    return t


def _tps(value, fits: bool) -> str:
    """A decode tok/s cell: "–" for a plan that does not fit (no speed) or one not priced."""
    return f"{value:,.0f}" if fits and value is not None else "–"