"""A simulation's results as files: one JSON document, a CSV time series, a self-contained HTML page.

The HTML page embeds plotly.js (no network; the same Content-Security-Policy and escaping as
the sweep report, kvplan.html_report) and shows the time series: KV memory reserved, written and
cached against the pool, requests running and waiting, tokens per second, preemptions.
"""

from __future__ import annotations

import html

GIB = 2**30
STEP_MODEL_NOTE = ("Step time is a roofline model (max of bytes read / bandwidth and FLOPs / peak, per pipeline "
                   "stage), not a measurement: real engines are slower, so latencies here are lower bounds.")


def document(summary: dict, meta: dict, series: list, columns: list[str]) -> dict:
    """The JSON document: what was simulated (meta), the figures (summary), the time series."""
    return {"meta": meta, "summary": summary, "series": {"columns": columns, "rows": [list(r) for r in series]}}


def write_series_csv(stream, series: list, columns: list[str]) -> None:
    import csv

    w = csv.writer(stream, lineterminator="\n")
    w.writerow(columns)
    w.writerows(series)


def _figures(series: list, budget: int) -> dict:
    t = [r[0] for r in series]
    base = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "font": {"family": "system-ui, sans-serif", "size": 12},
            "xaxis": {"title": {"text": "time (s)"}}, "legend": {"orientation": "h", "y": -0.2}}
    gib = lambda i: [round(r[i] / GIB, 4) for r in series]  # noqa: E731
    kv = {"data": [
        {"type": "scatter", "mode": "lines", "name": "reserved", "x": t, "y": gib(3)},
        {"type": "scatter", "mode": "lines", "name": "written (token states)", "x": t, "y": gib(4)},
        {"type": "scatter", "mode": "lines", "name": "cached prefixes, idle", "x": t, "y": gib(5)},
        {"type": "scatter", "mode": "lines", "name": "KV pool", "x": [t[0], t[-1]] if t else [],
         "y": [round(budget / GIB, 4)] * (2 if t else 0), "line": {"dash": "dash"}},
    ], "layout": {**base, "title": {"text": "KV memory per GPU (GiB)"}, "yaxis": {"title": {"text": "GiB"}}}}
    reqs = {"data": [
        {"type": "scatter", "mode": "lines", "name": "running", "x": t, "y": [r[1] for r in series]},
        {"type": "scatter", "mode": "lines", "name": "waiting", "x": t, "y": [r[2] for r in series]},
    ], "layout": {**base, "title": {"text": "Requests"}, "yaxis": {"title": {"text": "requests"}}}}
    speed = {"data": [{"type": "scatter", "mode": "lines", "name": "tokens/s", "x": t, "y": [r[7] for r in series]}],
             "layout": {**base, "title": {"text": "Tokens per second (prefill + decode)"},
                        "yaxis": {"title": {"text": "tokens/s"}}}}
    pre = {"data": [{"type": "scatter", "mode": "lines", "name": "preemptions", "x": t, "y": [r[6] for r in series]}],
           "layout": {**base, "title": {"text": "Preemptions (cumulative)"}, "yaxis": {"title": {"text": "count"}}}}
    return {"kv": kv, "requests": reqs, "speed": speed, "preemptions": pre}


def summary_lines(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for the terminal and the page."""
    r, kv, lat, thr = summary["requests"], summary["kv"], summary["latency_s"], summary["throughput"]
    conc, good = summary["concurrency"], summary["goodput"]

    def ms(d):
        return "–" if d["p50"] is None else f"{d['p50'] * 1e3:,.0f} / {d['p90'] * 1e3:,.0f} / {d['p99'] * 1e3:,.0f} ms"

    rejected = sum(r["rejected"].values())
    return [
        ("requests", f"{r['completed']:,} completed of {r['arrived']:,}" + (f", {rejected:,} rejected" if rejected else "")),
        ("sustained concurrency", f"{conc['mean_running']:,.1f} running on average (max {conc['max_running']:,}), "
                                  f"{conc['mean_waiting']:,.1f} waiting"),
        ("throughput", f"{thr['requests_per_s']:,.2f} req/s, {thr['output_tokens_per_s']:,.0f} output tokens/s"),
        ("TTFT p50 / p90 / p99", ms(lat["ttft"])),
        ("TPOT p50 / p90 / p99", ms(lat["tpot"])),
        ("latency p50 / p90 / p99", ms(lat["e2e"])),
        (f"goodput (TTFT ≤ {good['slo_ttft_s']:g} s, TPOT ≤ {good['slo_tpot_s'] * 1e3:g} ms)",
         f"{good['requests_per_s']:,.2f} req/s ({good['pct_meeting_slo']:.1f}% of requests)"),
        ("KV pool per GPU", f"{kv['budget_bytes'] / GIB:,.2f} GiB, {kv['mean_occupancy_pct']:.1f}% reserved on average"),
        ("KV waste", f"{kv['waste_pct']:.1f}% of reserved memory never written (time average)"),
        ("preemptions", f"{r['preemptions']:,} ({r['preempted_requests']:,} requests)"),
        ("prefix cache", f"{summary['prefix_cache']['hit_rate_pct']:.1f}% of prompt tokens from cache"
         if summary["prefix_cache"].get("prefix_cache") else "off"),
    ]


_STYLE = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px;margin:0 0 4px}"
          "p.meta{color:#555;margin:2px 0}.chart{width:100%;min-height:340px}"
          "table{border-collapse:collapse;font-size:13px;margin:12px 0}td{border-bottom:1px solid #ddd;padding:3px 8px}"
          "#errors{color:#b00;white-space:pre-wrap}")
_RENDER = """
(function () {
  var figs = JSON.parse(document.getElementById('kvplan-figures').textContent);
  Object.keys(figs).forEach(function (name) {
    var el = document.getElementById('chart-' + name);
    if (el) { Plotly.newPlot(el, figs[name].data, figs[name].layout, {responsive: true, displaylogo: false}); }
  });
})();
"""


def render_html(summary: dict, meta: dict, series: list, title: str = "kvplan simulate") -> str:
    from plotly.offline import get_plotlyjs

    from kvplan.html_report import _BOOT, _CSP, safe_json

    esc = lambda x: html.escape(str(x), quote=True)  # noqa: E731
    plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    figs = _figures(series, summary["kv"]["budget_bytes"])
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in summary_lines(summary))
    described = "".join(f'<p class="meta">{esc(k)}: {esc(v)}</p>' for k, v in meta.items() if not isinstance(v, (dict, list)))
    charts = "".join(f'<div class="chart" id="chart-{name}"></div>' for name in figs)
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style><script>{_BOOT}</script>",
        f"<script>{plotly_js}</script></head><body><h1>{esc(title)}</h1>", described,
        f'<p class="meta">{esc(STEP_MODEL_NOTE)}</p><div id="errors"></div><table>{rows}</table>', charts,
        f'<script type="application/json" id="kvplan-figures">{safe_json(figs)}</script>',
        f"<script>{_RENDER}</script></body></html>\n",
    ])
