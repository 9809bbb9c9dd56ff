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

from kvplan.units import human_tokens

GIB = 2**30
MAX_TABLE_ROWS = 2000
MEMORY_BARS = 30  # deployments in the memory chart
LINES = 12  # deployments in the per-context charts

_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:")

# (header, row key, how to show it); the table keeps the raw value in data-v for sorting.
TABLE = [
    ("#", "rank", "int"), ("model", "model", "text"), ("GPU", "gpu", "text"), ("GPUs", "gpus", "int"),
    ("tp", "tp", "int"), ("pp", "pp", "int"), ("context", "context", "tokens"), ("batch", "batch", "int"),
    ("weights", "weight_dtype", "text"), ("KV", "kv_dtype", "text"), ("fits", "fits", "bool"),
    ("max concurrency", "max_concurrency", "int"), ("max context", "max_context", "int"),
    ("weights GiB/GPU", "weight_bytes_per_gpu", "gib"), ("overhead GiB/GPU", "overhead_bytes_per_gpu", "gib"),
    ("KV cache GiB/GPU", "kv_memory_bytes_per_gpu", "gib"), ("KV/sequence GiB/GPU", "kv_bytes_per_sequence_per_gpu", "gib"),
    ("decode tok/s (batch)", "decode_tokens_per_second", "float1"),
    ("price/GPU-h", "price_per_gpu_hour", "money"), ("cost/h", "cost_per_hour", "money"),
    ("cost/user-h", "cost_per_concurrent_user_hour", "money4"),
]


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


def _show(value, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "int":
        return f"{value:,}"
    if kind == "tokens":
        return human_tokens(value)
    if kind == "bool":
        return "yes" if value else "no"
    if kind == "gib":
        return f"{value / GIB:,.2f}"
    if kind == "float1":
        return f"{value:,.1f}"
    if kind == "money":
        return f"{value:,.2f}"
    if kind == "money4":
        return f"{value:,.4f}"
    return str(value)


def deployment_key(row: dict) -> tuple:
    return (row["model"], row["gpu"], row["tp"], row["pp"], row["kv_dtype"], row["weight_dtype"])


def _short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def deployment_label(row: dict, with_weights: bool) -> str:
    """A chart label; long model names are cut (the table below has them whole)."""
    d = (f"{row['gpus']}" if row["pp"] == 1 and row.get("dp", 1) == 1
         else f"{row['gpus']} (tp {row['tp']} × pp {row['pp']}" + (f" × dp {row['dp']}" if row.get("dp", 1) > 1 else "") + ")")
    label = f"{_short(row['model'])} · {row['gpu']} ×{d} · KV {row['kv_dtype']}"
    return label + (f" · W {row['weight_dtype']}" if with_weights else "")


def _figures(rows: list[dict], currency: str) -> dict:
    """Plain plotly figure dicts (data + layout); labels entity-escaped for plotly's text renderer."""
    with_weights = len({r["weight_dtype"] for r in rows}) > 1
    order: dict[tuple, list[dict]] = {}
    for r in rows:  # ranked rows: first appearance = best deployment first
        order.setdefault(deployment_key(r), []).append(r)
    deployments = list(order.values())
    label = {k: _label(deployment_label(v[0], with_weights)) for k, v in order.items()}
    contexts = sorted({r["context"] for r in rows})
    ctx_labels = [human_tokens(c) for c in contexts]
    base = {"margin": {"l": 60, "r": 20, "t": 50, "b": 60},
            "font": {"family": "system-ui, sans-serif", "size": 12}}
    below = {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0}

    mem = deployments[:MEMORY_BARS][::-1]  # best at the top of a horizontal bar chart
    names = [label[deployment_key(v[0])] for v in mem]
    parts = {"weights": [], "overhead": [], "KV cache": [], "free": []}
    for v in mem:
        r = v[0]
        w, o, kv = r["weight_bytes_per_gpu"], r["overhead_bytes_per_gpu"], max(r["kv_memory_bytes_per_gpu"], 0)
        free = max(r["usable_memory_bytes_per_gpu"] - w - o - kv, 0)
        for part, value in zip(parts, (w, o, kv, free)):
            parts[part].append(round(value / GIB, 3))
    colours = {"weights": "#4c78a8", "overhead": "#f58518", "KV cache": "#54a24b", "free": "#bab0ac"}
    memory = {
        "data": [{"type": "bar", "orientation": "h", "name": part, "y": names, "x": xs,
                  "marker": {"color": colours[part]}, "hovertemplate": "%{x:.2f} GiB<extra>" + part + "</extra>"}
                 for part, xs in parts.items()],
        "layout": {**base, "barmode": "stack", "title": {"text": "Memory per GPU (GiB)"},
                   "xaxis": {"title": {"text": "GiB per GPU"}}, "yaxis": {"automargin": True},
                   "legend": {"orientation": "v", "traceorder": "normal"},
                   "height": max(320, 26 * len(mem) + 120)},
    }

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
        layout = {**base, "title": {"text": title}, "xaxis": xaxis, "yaxis": {"title": {"text": ytitle}},
                  "legend": below, "height": height, **extra}
        layout["margin"] = {**base["margin"], "b": 80 + 20 * len(traces)}
        return {"data": traces, "layout": layout}

    figs = {
        "memory": memory,
        "concurrency": chart(per_context("max_concurrency", "scatter"), "Max concurrent requests per deployment",
                             "requests"),
        "decode": chart(per_context("decode_tokens_per_second", "bar"), "Decode tokens/s (roofline, whole batch)",
                        "tokens/s", barmode="group"),
    }
    cost = per_context("cost_per_concurrent_user_hour", "bar",
                       only=lambda r: r["fits"] and r["cost_per_concurrent_user_hour"] is not None)
    if cost:
        figs["cost"] = chart(cost, f"Cost per concurrent user per hour ({_label(currency)})",
                             f"{_label(currency)} per user-hour", barmode="group")
    return figs


def _table(rows: list[dict]) -> str:
    head = "".join(f'<th data-k="{"t" if kind == "text" else "n"}">{_esc(h)}</th>' for h, _, kind in TABLE)
    body = []
    for r in rows:
        cells = []
        for _, key, kind in TABLE:
            v = r.get(key)
            sort = "" if v is None else (_esc(v) if kind == "text" else ("1" if v is True else "0" if v is False else repr(v)))
            cls = ' class="no"' if kind == "bool" and v is False else ""
            cells.append(f'<td data-v="{sort}"{cls}>{_esc(_show(v, kind))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="plans"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 6px}
p.meta{color:#555;margin:2px 0}
.chart{width:100%;min-height:320px}
table{border-collapse:collapse;font-size:12px;margin-top:8px}
th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}
td:nth-child(2),td:nth-child(3),td:nth-child(9),td:nth-child(10){text-align:left}
td.no{color:#b00}
#errors{color:#b00;white-space:pre-wrap}
"""

# Errors surface in the page (and the console): a report that half-rendered says so.
_BOOT = """
window.addEventListener('error', function (e) {
  document.getElementById('errors').textContent += 'error: ' + e.message + '\\n';
});
"""

_RENDER = """
(function () {
  var figs = JSON.parse(document.getElementById('kvplan-figures').textContent);
  var config = {responsive: true, displaylogo: false};
  Object.keys(figs).forEach(function (name) {
    var el = document.getElementById('chart-' + name);
    if (el) { Plotly.newPlot(el, figs[name].data, figs[name].layout, config); }
  });
  var table = document.getElementById('plans');
  if (!table) { return; }
  table.querySelectorAll('th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var text = th.getAttribute('data-k') === 't', dir = th.getAttribute('data-dir') === 'a' ? -1 : 1;
      th.setAttribute('data-dir', dir === 1 ? 'a' : 'd');
      rows.sort(function (a, b) {
        var x = a.cells[i].getAttribute('data-v'), y = b.cells[i].getAttribute('data-v');
        if (x === '' || y === '') { return (x === '') - (y === ''); }
        return dir * (text ? x.localeCompare(y) : parseFloat(x) - parseFloat(y));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""


def render_html(rows: list[dict], *, title: str = "kvplan sweep", summary: list[str] = (),
                skipped: list[str] = (), currency: str = "price units", total: int | None = None,
                max_rows: int = MAX_TABLE_ROWS) -> str:
    """The page for ranked sweep rows (kvplan.sweep.sweep_rows). `summary` and `skipped` are lines
    of plain text (escaped here); `total` is the number of plans when `rows` is a leading slice."""
    from plotly.offline import get_plotlyjs

    plotly_js = get_plotlyjs().replace("</script", "<\\/script")  # cannot occur today; never let it close the tag
    figs = _figures(rows, currency)
    total = len(rows) if total is None else total
    shown = rows[:max_rows]
    sections = [
        ("memory", "Memory budget per deployment",
         "Per GPU: weights, overhead (an estimate unless given), the KV cache the rest leaves, and memory "
         "outside the engine's budget (1 − GPU memory utilisation). Best-ranked deployments first."),
        ("concurrency", "Max concurrency against context",
         "Requests of each context that fit at once in the KV cache, per deployment."),
        ("cost", "Cost per concurrent user",
         "Price per GPU-hour × GPUs ÷ max concurrency, for deployments that fit and have a price."),
        ("decode", "Decode speed", "Tokens/s of the whole batch, from the bandwidth roofline."),
    ]
    parts = []
    for name, heading, note in sections:
        parts.append(f"<h2>{_esc(heading)}</h2><p class=\"meta\">{_esc(note)}</p>")
        if name in figs:
            parts.append(f'<div class="chart" id="chart-{name}"></div>')
        else:
            parts.append('<p class="meta">No prices: pass <code>--prices FILE</code> (a YAML of '
                         '<code>gpu: price per GPU-hour</code>) to see costs.</p>')
    table_note = f"{len(shown):,} of {total:,} plans, best first; click a header to sort."
    if len(shown) < total:
        table_note += " The CSV and JSON outputs hold every plan."
    skipped_html = ""
    if skipped:
        skipped_html = ("<h2>Skipped deployments</h2><ul>"
                        + "".join(f"<li>{_esc(s)}</li>" for s in skipped) + "</ul>")
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title><style>{_STYLE}</style>",
        f"<script>{_BOOT}</script>",
        f"<script>{plotly_js}</script></head><body>",
        f"<h1>{_esc(title)}</h1>",
        "".join(f'<p class="meta">{_esc(line)}</p>' for line in summary),
        '<div id="errors"></div>',
        *parts,
        f"<h2>All plans</h2><p class=\"meta\">{_esc(table_note)}</p>",
        _table(shown),
        skipped_html,
        f'<script type="application/json" id="kvplan-figures">{safe_json(figs)}</script>',
        f"<script>{_RENDER}</script>",
        "</body></html>\n",
    ])
