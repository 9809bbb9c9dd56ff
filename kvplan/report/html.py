"""A sweep as one self-contained HTML page: charts (plotly.js embedded, no CDN) and the full table.

The page works offline: plotly.js is inlined from the installed plotly package, and a
Content-Security-Policy forbids every network fetch. Every string that came from a user or a
model config is escaped: html.escape for the page and table, and the chart data is JSON with
`<`, `>`, `&` written as \\u003c, \\u003e, \\u0026 so no name can close the <script> element it
sits in; plotly renders a few HTML-like tags in labels, so chart labels are entity-escaped too.
plotly is imported here only, and only when a report is written.
"""

from __future__ import annotations

import html
import json

from kvplan.core.errors import arg
from kvplan.core.units import human_tokens, plural
from kvplan.report.html_assets import RENDER as _RENDER, STYLE as _STYLE, page_head

GIB = 2**30
MAX_TABLE_ROWS = 2000
MEMORY_BARS = 30  # deployments in the memory chart
LINES = 12  # deployments in the per-context charts

# (header, row key, how to show it); the table keeps the raw value in data-v for sorting.
TABLE = [
    ("#", "rank", "int"), ("model", "model", "text"), ("GPU", "gpu", "text"), ("GPUs", "gpus", "int"),
    ("tp", "tp", "int"), ("pp", "pp", "int"), ("context", "context", "tokens"), ("batch", "batch", "int"),
    ("weights", "weight_dtype", "text"), ("KV", "kv_dtype", "text"), ("fits", "fits", "bool"),
    ("cost/h", "cost_per_hour", "money"), ("cost/user-h", "cost_per_concurrent_user_hour", "money4"),
    ("max concurrency", "max_concurrency", "int"), ("max context", "max_context", "int"),
    ("context limit", "context_limit", "int"), ("binds", "binds", "text"),
    ("KV pool tokens (deployment)", "kv_pool_tokens_per_deployment", "int"),
    ("tokens requests use", "request_tokens_at_context", "int"),
    ("weights GiB/GPU", "weight_bytes_per_gpu", "gib"), ("overhead GiB/GPU", "overhead_bytes_per_gpu", "gib"),
    ("KV cache GiB/GPU", "kv_memory_bytes_per_gpu", "gib"),
    ("KV/sequence GiB/GPU", "kv_bytes_per_sequence_per_gpu", "gib"),
    ("request slots GiB/GPU (above the budget)", "above_budget_bytes_per_gpu", "gib"),
    ("decode tok/s (batch, calibrated)", "decode_tokens_per_second_calibrated", "float1"),
    ("decode tok/s (batch, roofline bound)", "decode_tokens_per_second", "float1"),
    ("price/GPU-h", "price_per_gpu_hour", "money"),
]
CALIBRATED_KEY = "decode_tokens_per_second_calibrated"  # left out of the table and chart with --speed roofline
ABOVE_KEY = "above_budget_bytes_per_gpu"  # shown where a plan has it (SGLang's request slots, the only one priced)
# Distinct colours for the lines and bars of one chart (Kelly's colours of maximum contrast, white and
# black left out, most distinct first); plotly's default ten repeat after ten deployments.
COLOURS = ["#0067a5", "#f38400", "#008856", "#be0032", "#875692", "#a1caf1", "#f3c300", "#848482", "#e68fac",
           "#882d17", "#8db600", "#604e97", "#c2b280", "#f99379", "#b3446c", "#dcd300", "#654522", "#2b3d26"]


def safe_json(data) -> str:
    """JSON that can sit inside <script>: no `<`, `>` or `&` survives as itself."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _label(text) -> str:
    """A chart label: plotly reads `<b>`, `<a href>`... in labels and decodes &lt; &gt; &amp;."""
    return html.escape(str(text), quote=False)


# a column kind that is a plain number: its format (thousands separated, so many decimals)
_NUMBER = {"int": ",", "float1": ",.1f", "float2": ",.2f", "float3": ",.3f", "money": ",.2f", "money4": ",.4f"}


def _show(value, kind: str) -> str:
    if value is None:
        return "–"
    if kind in _NUMBER:
        return format(value, _NUMBER[kind])
    if kind == "tokens":
        return human_tokens(value)
    if kind == "bool":
        return "yes" if value else "no"
    if kind == "gib":
        return f"{value / GIB:,.2f}"
    return str(value)


def deployment_key(row: dict) -> tuple:
    return (row["model"], row["gpu"], row["tp"], row["pp"], row["kv_dtype"], row["weight_dtype"])


def _short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def deployment_label(row: dict, with_weights: bool, with_model: bool = True) -> str:
    """A chart label; long model names are cut (the table below has them whole)."""
    d = (f"{row['gpus']}" if row["pp"] == 1 and row.get("dp", 1) == 1
         else f"{row['gpus']} (tp {row['tp']} × pp {row['pp']}"
         + (f" × dp {row['dp']}" if row.get("dp", 1) > 1 else "") + ")")
    label = f"{_short(row['model'])} · " if with_model else ""
    label += f"{row['gpu']} ×{d} · KV {row['kv_dtype']}"
    return label + (f" · W {row['weight_dtype']}" if with_weights else "")


OUTSIDE = "outside the budget"
# TensorRT-LLM's pool is a share of the free memory after weights and overhead (free_gpu_memory_fraction, 0.9): the
# rest is inside its budget, left free by that fraction, not outside a utilisation it does not have (issue 22)
LEFT_FREE = "left free (1 − free fraction)"
STATES = "state pool"  # recurrent-state slots allocated up front (plan_to_dict's state_pool_bytes_per_gpu)
# what the engine allocates above its budget once the pool is sized, out of what is outside it (plan_to_dict's
# above_budget_bytes_per_gpu: SGLang's request-slot pool, the text memory table's "above it: request slots" row)
ABOVE = "request slots (above the budget)"


def _memory_figure(deployments: list[list[dict]], label: dict, base: dict, of: str) -> dict:
    """The stacked bars of memory per GPU (weights, overhead, KV cache, free) of the best deployments."""
    mem = deployments[:MEMORY_BARS][::-1]  # best at the top of a horizontal bar chart
    # A deployment whose weights and overhead exceed the GPU is marked, and the axis ends past the largest
    # GPU, not at its ~625 GiB bar (issue 25: DeepSeek-V3 on 1 GPU stretched the chart with no mark).
    names = [label[deployment_key(v[0])] + ("" if any(r["fits"] for r in v) else " ✗ does not fit") for v in mem]
    # "outside the budget": 1 − utilisation, what the engine leaves alone; not the terminal's "free" (KV cache
    # left after batch × context)
    # an engine's recurrent-state pool (SGLang's hybrids) is its own bar out of the KV cache
    parts = {"weights": [], "overhead": [], STATES: [], "KV cache": [], LEFT_FREE: [], ABOVE: [], OUTSIDE: []}
    for v in mem:
        r = v[0]
        w, o, kv = r["weight_bytes_per_gpu"], r["overhead_bytes_per_gpu"], max(r["kv_memory_bytes_per_gpu"], 0)
        states = min(r.get("state_pool_bytes_per_gpu", 0), kv)
        rest = max(r["usable_memory_bytes_per_gpu"] - w - o - kv, 0)
        # where the engine keeps a share of what is left (kv_share < 1), what its budget holds past the pool is
        # that share's remainder; the rest of the GPU is outside the budget as elsewhere
        left = 0 if r.get("kv_share", 1.0) == 1 else min(rest, max(r["budget_bytes_per_gpu"] - w - o - kv, 0))
        above = r.get(ABOVE_KEY, 0)  # drawn whole: a pool larger than the room runs past the GPU's memory
        for part, value in zip(parts, (w, o, states, kv - states, left, above, max(rest - left - above, 0))):
            parts[part].append(round(value / GIB, 3))
    for part in (STATES, LEFT_FREE, ABOVE, OUTSIDE):  # a part no bar has is not in the legend (a whole-GPU budget)
        if not any(parts[part]):
            del parts[part]
    axis_end = max((v[0]["usable_memory_bytes_per_gpu"] for v in mem), default=0) * 1.1 / GIB
    colours = {"weights": "#4c78a8", "overhead": "#f58518", STATES: "#b279a2", "KV cache": "#54a24b",
               LEFT_FREE: "#e0d8cf", ABOVE: "#9d755d", OUTSIDE: "#bab0ac"}
    return {
        "data": [{"type": "bar", "orientation": "h", "name": part, "y": names, "x": xs,
                  "marker": {"color": colours[part]}, "hovertemplate": "%{x:.2f} GiB<extra>" + part + "</extra>"}
                 for part, xs in parts.items()],
        "layout": {**base, "barmode": "stack", "title": {"text": "Memory per GPU (GiB)" + of},
                   "xaxis": {"title": {"text": "GiB per GPU (a bar past the GPU's memory is cut at the edge)"},
                             "range": [0, round(axis_end, 1)]} if axis_end else {"title": {"text": "GiB per GPU"}},
                   "yaxis": {"automargin": True},
                   "legend": {"orientation": "v", "traceorder": "normal"},
                   "height": max(320, 26 * len(mem) + 120)},
    }


def _figures(rows: list[dict], currency: str, model: str = "", calibrated: bool = False) -> dict:
    """Plain plotly figure dicts (data + layout); labels entity-escaped for plotly's text renderer."""
    with_weights = len({r["weight_dtype"] for r in rows}) > 1
    order: dict[tuple, list[dict]] = {}
    for r in rows:  # ranked rows: first appearance = best deployment first
        order.setdefault(deployment_key(r), []).append(r)
    deployments = list(order.values())
    of = f" · {_label(_short(model))}" if model else ""  # each chart names its model
    with_model = len({r["model"] for r in rows}) > 1  # a chart of one model need not repeat its name
    label = {k: _label(deployment_label(v[0], with_weights, with_model)) for k, v in order.items()}
    contexts = sorted({r["context"] for r in rows})
    ctx_labels = [human_tokens(c) for c in contexts]
    base = {"margin": {"l": 60, "r": 20, "t": 50, "b": 60}, "colorway": COLOURS,
            "font": {"family": "system-ui, sans-serif", "size": 12}}
    below = {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0}

    memory = _memory_figure(deployments, label, base, of)

    def per_context(key: str, chart: str, only=lambda r: True, top=LINES) -> list[dict]:
        traces = []
        for v in deployments:
            by_ctx = {r["context"]: r for r in v if only(r)}
            if not by_ctx:
                continue
            ys = [by_ctx[c][key] if c in by_ctx else None for c in contexts]
            trace = {"type": chart, "name": label[deployment_key(v[0])], "x": ctx_labels, "y": ys}
            if chart == "scatter":
                trace["mode"] = "lines+markers"
            traces.append(trace)
            if len(traces) == top:
                break
        return traces

    xaxis = {"title": {"text": "context (tokens)"}, "type": "category"}

    def chart(traces: list[dict], title: str, ytitle: str, **extra) -> dict:
        # the legend goes below the plot so long names do not squeeze it; room for one line per trace
        height = 380 + 20 * len(traces)
        layout = {**base, "title": {"text": title + of}, "xaxis": xaxis, "yaxis": {"title": {"text": ytitle}},
                  "legend": below, "height": height, **extra}
        layout["margin"] = {**base["margin"], "b": 80 + 20 * len(traces)}
        return {"data": traces, "layout": layout}

    figs = {
        "memory": memory,
        # a context past the model's limit is no point (a gap), not a line down to 0 requests that reads as memory
        "concurrency": chart(per_context("max_concurrency", "scatter", only=lambda r: r["binds"] != "context limit"),
                             "Max concurrent requests per deployment", "requests"),
        "decode": chart(per_context(CALIBRATED_KEY, "bar"), "Decode tokens/s (calibrated, whole batch)",
                        "tokens/s", barmode="group") if calibrated else
        chart(per_context("decode_tokens_per_second", "bar"), "Decode tokens/s (roofline, whole batch)",
              "tokens/s", barmode="group"),
    }
    cost = per_context("cost_per_concurrent_user_hour", "bar",
                       only=lambda r: r["fits"] and r["cost_per_concurrent_user_hour"] is not None)
    if cost:
        figs["cost"] = chart(cost, f"Cost per concurrent user per hour ({_label(currency)})",
                             f"{_label(currency)} per user-hour", barmode="group")
    return figs


# Columns `sweep --workload` adds (kvplan.simulator.capacity.SIM_COLUMNS), shown when the rows have them.
SIM_TABLE = [
    ("sim running", "sim_mean_running", "float1"), ("sim req/s", "sim_requests_per_s", "float2"),
    ("sim TTFT p99 s", "sim_ttft_p99_s", "float3"), ("sim TPOT p99 s", "sim_tpot_p99_s", "float3"),
    ("sim % in SLA", "sim_pct_meeting_slo", "float1"), ("sim KV waste %", "sim_kv_waste_pct", "float1"),
    ("sim preemptions", "sim_preemptions", "int"),
]


def _table(rows: list[dict], calibrated: bool = False) -> str:
    above = any(r.get(ABOVE_KEY) for r in rows)  # the request-slot column only where a plan has the pool
    columns = [c for c in TABLE if (calibrated or c[1] != CALIBRATED_KEY) and (above or c[1] != ABOVE_KEY)]
    columns += SIM_TABLE if rows and "sim_mean_running" in rows[0] else []
    head = "".join(f'<th data-k="{"t" if kind == "text" else "n"}">{_esc(h)}</th>' for h, _, kind in columns)
    body = []
    for r in rows:
        cells = []
        for _, key, kind in columns:
            v = r.get(key)
            sort = "" if v is None else (_esc(v) if kind == "text"
                                         else ("1" if v is True else "0" if v is False else repr(v)))
            cls = ' class="no"' if kind == "bool" and v is False else ""
            cells.append(f'<td data-v="{sort}"{cls}>{_esc(_show(v, kind))}</td>')
        body.append(f'<tr data-model="{_esc(r["model"])}" data-ctx="{r["context"]}">' + "".join(cells) + "</tr>")
    return f'<table id="plans"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


HEADLINE = [  # (header, key, kind)
    ("model", "model", "text"), ("context", "context", "tokens"), ("cheapest that fits", "deployment", "text"),
    ("cost/h", "cost_per_hour", "money"), ("per user-h", "cost_per_concurrent_user_hour", "money4"),
    ("per 1M output tokens", "cost_per_million_output_tokens", "money"), ("users at once", "max_concurrency", "int"),
    ("headroom", "headroom", "times"), ("tok/s when full", "decode_tokens_per_second_full", "float1"),
]


def _headline_table(heads: list[dict]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h, _, _ in HEADLINE)
    body = []
    for h in heads:
        if h.get("gpu"):
            d = f"{h['gpus']}" if h["pp"] == 1 else f"{h['gpus']} (tp {h['tp']} × pp {h['pp']})"
            h = {**h, "deployment": f"{h['gpu']} × {d}, KV {h['kv_dtype']}"}
        else:
            h = {**h, "deployment": h.get("why") or f"nothing fits {h['batch']:,} request(s) of this context"}
        cells = []
        for _, key, kind in HEADLINE:
            v = h.get(key)
            text = f"{v:,.1f}×" if kind == "times" and v is not None else _show(v, kind)
            cls = ' class="no"' if key == "deployment" and not h["fits"] else ""
            cells.append(f"<td{cls}>{_esc(text)}</td>")
        body.append(f'<tr data-model="{_esc(h["model"])}" data-ctx="{h["context"]}">' + "".join(cells) + "</tr>")
    return f'<table id="headline"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _filters(rows: list[dict]) -> str:
    models = list(dict.fromkeys(r["model"] for r in rows))
    contexts = sorted({r["context"] for r in rows})

    def select(ident: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = '<option value="">all</option>' + "".join(f'<option value="{_esc(v)}">{_esc(t)}</option>'
                                                         for v, t in options)
        return f'<label>{_esc(label)} <select id="{ident}">{opts}</select></label> '
    return ('<p class="filters">' + select("f-model", "model", [(m, m) for m in models])
            + select("f-ctx", "context", [(str(c), human_tokens(c)) for c in contexts]) + "</p>")


SECTIONS = [
    ("memory", "Memory budget per deployment",
     "Per GPU: weights, overhead (an estimate unless given), the KV cache the rest leaves (an engine's recurrent-state "
     "pool, SGLang's for hybrid models, its own bar out of it), and memory "
     "outside the engine's budget (1 − GPU memory utilisation; the terminal's \"free\" is something else: "
     "the KV cache left after batch × context). Where the engine's pool is a share of the free memory "
     "(TensorRT-LLM's free_gpu_memory_fraction), what the share leaves inside its budget is a bar of its own, "
     "left free. What the engine allocates above its budget once the pool is sized (SGLang's request-slot pool) is "
     "drawn out of the memory outside it, whole, so a pool larger than that room runs past the GPU's memory. "
     "A deployment whose weights do not fit is marked ✗; the axis "
     "ends just past the largest GPU. Best-ranked deployments first."),
    ("concurrency", "Max concurrency against context",
     "Requests of each context that fit at once in the KV cache, per deployment; a context past the model's "
     "limit has no point."),
    ("cost", "Cost per concurrent user",
     "Price per GPU-hour × GPUs ÷ max concurrency, for deployments that fit and have a price."),
    ("decode", "Decode speed", "Tokens/s of the whole batch, from the bandwidth roofline."),
]


def decode_note(speed_label: str | None) -> str:
    """The decode chart's caption: which step-time model, its held-out error band, and the roofline's place."""
    if speed_label is None:
        return f"Tokens/s of the whole batch, from the bandwidth roofline ({arg('speed')} roofline): an upper bound."
    return (f"Tokens/s of the whole batch, {speed_label}. The table's roofline column is an upper bound on "
            "tokens/s: engines run slower.")


def render_html(rows: list[dict], *, title: str = "kvplan sweep", summary: list[str] = (),
                skipped: list[str] = (), currency: str = "price units", total: int | None = None,
                max_rows: int = MAX_TABLE_ROWS, headlines: list[dict] | None = None,
                speed_label: str | None = None) -> str:
    """The page for ranked sweep rows (kvplan.report.export.sweep_rows). `summary` and `skipped` are lines
    of plain text (escaped here); `total` is the number of plans when `rows` is a leading slice;
    `headlines` (kvplan.compare.procurement.headlines) open the page: the answer per model × context.
    `speed_label`: the calibrated step-time model and its held-out band (kvplan.cli.speed_flags); given,
    the decode chart and a table column show the calibrated tok/s, the roofline's column as a bound;
    None: the roofline alone. Charts come one set per model, so no chart mixes models."""
    from plotly.offline import get_plotlyjs

    plotly_js = get_plotlyjs().replace("</script", "<\\/script")  # cannot occur today; never let it close the tag
    models = list(dict.fromkeys(r["model"] for r in rows))
    figs, parts = {}, []
    for i, model in enumerate(models):
        mine = [r for r in rows if r["model"] == model]
        for name, fig in _figures(mine, currency, model, speed_label is not None).items():
            figs[f"{name}-{i}"] = fig
        parts.append(f'<section data-model="{_esc(model)}"><h2>{_esc(model)}</h2>')
        for name, heading, note in SECTIONS:
            note = decode_note(speed_label) if name == "decode" else note
            parts.append(f"<h3>{_esc(heading)}</h3><p class=\"meta\">{_esc(note)}</p>")
            if f"{name}-{i}" in figs:
                parts.append(f'<div class="chart" id="chart-{name}-{i}"></div>')
            else:
                parts.append(f'<p class="meta">No prices: pass <code>{arg("prices")} FILE</code> (a YAML of '
                             '<code>gpu: price per GPU-hour</code>) to see costs.</p>')
        parts.append("</section>")
    total = len(rows) if total is None else total
    shown = rows[:max_rows]
    table_note = f"{len(shown):,} of {plural(total, 'plan')}, best first; click a header to sort."
    if len(shown) < total:
        table_note += " The CSV and JSON outputs hold every plan."
    head_html = ""
    if headlines:
        priced = any(h.get("priced") for h in headlines)
        how = (f"the lowest cost per hour ({_esc(currency)}) among those that fit" if priced else
               f"the fewest GPUs among those that fit (no prices given: pass {arg('prices')} FILE for costs)")
        head_html = ("<h2>The answer</h2><p class=\"meta\">For each model and context: the deployment that "
                     f"holds the requests asked for at " + how + ". Per 1M output tokens: cost per hour ÷ the "
                     "decode tokens per hour of every request it holds at once (bandwidth roofline). Headroom: "
                     "requests it holds ÷ requests asked.</p>" + _headline_table(headlines))
    skipped_html = ""
    if skipped:
        skipped_html = ("<h2>Skipped deployments</h2><ul>"
                        + "".join(f"<li>{_esc(s)}</li>" for s in skipped) + "</ul>")
    return "".join([
        page_head(title, _STYLE),
        f"<script>{plotly_js}</script></head><body>",
        f"<h1>{_esc(title)}</h1>",
        "".join(f'<p class="meta">{_esc(line)}</p>' for line in summary),
        '<div id="errors"></div>',
        _filters(rows),
        head_html,
        *parts,
        f"<h2>All plans</h2><p class=\"meta\">{_esc(table_note)}</p>",
        _table(shown, speed_label is not None),
        skipped_html,
        f'<script type="application/json" id="kvplan-figures">{safe_json(figs)}</script>',
        f"<script>{_RENDER}</script>",
        "</body></html>\n",
    ])
