"""A simulation's results as files: one JSON document, a CSV time series, a self-contained HTML page.

Every output holds every run of the command (one, or the paged pool and the contiguous
reservations with --compare). The HTML page embeds plotly.js (no network; the same
Content-Security-Policy and escaping as the sweep report, kvplan.report.html) and plots the time
series: KV memory reserved and written against the pool, requests running and waiting, tokens
per second, preemptions.
"""

from __future__ import annotations

import csv
import html

from kvplan.core.units import plural
from kvplan.report.html import safe_json
from kvplan.report.html_assets import page_head
from kvplan.report.text import layer_span
from kvplan.simulator.results import SERIES_COLUMNS

GIB = 2**30
COLOURS = ("#4c78a8", "#e45756", "#f58518", "#54a24b", "#b279a2", "#9d755d")
STEP_MODEL_NOTE = ("Step time is a roofline model (per pipeline stage, the larger of bytes read / bandwidth and "
                   "FLOPs / peak dense FLOP/s), not a measurement: real engines are slower, so latencies are lower "
                   "bounds and throughput an upper bound.")


CALIBRATED_NOTE = ("Step times come from kvplan's {} model: the roofline's terms, each times a "
                   "coefficient fitted per engine on published measurements, not a measurement itself; "
                   "held-out TPOT median error {}.")


def step_note(meta: dict) -> str:
    """The sentence saying how the step times were made (the roofline's when meta says nothing)."""
    label = meta.get("step_time") or ""
    if not label.startswith("calibrated"):
        return STEP_MODEL_NOTE
    band = (meta.get("step_time_band") or {}).get("tpot") or {}
    err = f"{100 * band['median_abs']:.0f}% ({band['n']} points)" if band.get("n") else "not measured"
    return CALIBRATED_NOTE.format(label, err)


def document(meta: dict, runs: dict) -> dict:
    """The JSON document: what was simulated, then per run its figures and time series."""
    return {"meta": {**meta, "step_time": meta.get("step_time") or "roofline", "step_time_note": step_note(meta)},
            "runs": {name: {"summary": summary,
                            "series": {"columns": list(SERIES_COLUMNS), "rows": [list(r) for r in series]}}
                     for name, (summary, series) in runs.items()}}


def write_series_csv(stream, runs: dict) -> None:
    w = csv.writer(stream, lineterminator="\n")
    w.writerow(["run", *SERIES_COLUMNS])
    for name, (_, series) in runs.items():
        w.writerows([name, *row] for row in series)


def _drain(time: dict) -> str:
    """Why completions per second read below the arrival rate: the run goes on past the last arrival."""
    last, end = time.get("last_arrival_s"), time["makespan_s"]
    if not last or end - last < 0.05 * end:
        return ""
    return f" (arrivals end at {last:,.0f} s; then the queue drains)"


def _overload(summary: dict) -> list[tuple[str, str]]:
    """A 'load' line where requests arrived faster than the deployment served them: requests then pile up for as long
    as arrivals last, in the queue or, where memory admits them, in an ever larger running batch whose steps slow
    down; every latency figure reads that pile-up, not the engine (an open loop past its capacity)."""
    load = summary["load"]  # kvplan.simulator.results.load_of, as --json carries it
    if not load["overloaded"]:
        return []
    return [("load", f"overloaded: {load['arrived_per_s']:,.2f} req/s arrived, {load['served_per_s']:,.2f} req/s "
                     "served; requests pile up (waiting, or running more slowly) while arrivals last")]


def summary_lines(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for the terminal and the page."""
    r, kv, lat, thr = summary["requests"], summary["kv"], summary["latency_s"], summary["throughput"]
    conc, good = summary["concurrency"], summary["goodput"]

    def ms(d):
        if d["p50"] is None:
            return "–"
        if d["p99"] >= 10:
            return f"{d['p50']:,.1f} / {d['p90']:,.1f} / {d['p99']:,.1f} s"
        return f"{d['p50'] * 1e3:,.0f} / {d['p90'] * 1e3:,.0f} / {d['p99'] * 1e3:,.0f} ms"

    rejected = sum(r["rejected"].values())
    return [
        ("requests",
         f"{r['completed']:,} completed of {r['arrived'] + rejected:,}"
         + (f" ({rejected:,} rejected)" if rejected else "")),
        ("running (sustained)", f"{conc['mean_running']:,.1f} on average, {conc['max_running']:,} at most"),
        ("waiting", f"{conc['mean_waiting']:,.1f} on average"),
        *_overload(summary),
        ("throughput", f"{thr['requests_per_s']:,.2f} req/s, {thr['output_tokens_per_s']:,.0f} output tok/s "
                       f"over {summary['time']['makespan_s']:,.0f} s" + _drain(summary["time"])),
        ("TTFT p50/p90/p99", ms(lat["ttft"])),
        ("TPOT p50/p90/p99", ms(lat["tpot"])),
        ("latency p50/p90/p99", ms(lat["e2e"])),
        ("goodput", f"{good['requests_per_s']:,.2f} req/s ({good['pct_meeting_slo']:.1f}% meet TTFT ≤ "
                    f"{good['slo_ttft_s']:g} s, TPOT ≤ {good['slo_tpot_s'] * 1e3:g} ms)"),
        ("KV pool per GPU",
         f"{kv['budget_bytes'] / GIB:,.2f} GiB, {kv['mean_occupancy_pct']:.1f}% reserved on average"),
        ("KV waste", f"{kv['waste_pct']:.1f}% of reserved KV holds no token (time average)"),
        ("preemptions", f"{r['preemptions']:,} ({plural(r['preempted_requests'], 'request')})"),
        ("prefix cache", f"{summary['prefix_cache']['hit_rate_pct']:.1f}% of prompt tokens from cache"
         if summary["prefix_cache"].get("prefix_cache") else "off"),
    ] + _offload_lines(summary.get("offload") or {})


def _offload_lines(offload: dict) -> list[tuple[str, str]]:
    """One line per offload tier: its hit rate, occupancy and what its reloads cost."""
    out = []
    for x in offload.get("tiers", []):
        out.append((f"{x['tier']} tier", f"{x['hit_rate_pct']:.1f}% of prompt tokens, "
                    f"{x['mean_occupancy_pct']:.0f}% full ({x['capacity_bytes_per_gpu'] / GIB:,.1f} GiB per GPU)"))
    if out:
        out.append(("reloads", f"{offload['reload_s_total']:,.2f} s added to the TTFT of "
                               f"{plural(offload['requests_reloaded'], 'request')}"))
    return out


def _figures(runs: dict, budget: int, stage: str | None = None) -> dict:
    """The time-series charts; `stage`: under pipeline stages, the layers of the GPU the KV chart is (meta's
    kv_pool_stage), in its title."""
    base = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "font": {"family": "system-ui, sans-serif", "size": 12},
            "xaxis": {"title": {"text": "time (s)"}}, "legend": {"orientation": "h", "y": -0.25}}
    many = len(runs) > 1

    def line(name, what, series, col, scale=1.0, **extra):
        label = f"{name}: {what}" if many else what
        return {"type": "scatter", "mode": "lines", "name": html.escape(label, quote=False),
                "x": [r[0] for r in series], "y": [round(r[col] / scale, 4) for r in series], **extra}

    kv, reqs, speed, pre = [], [], [], []
    for k, (name, (_, series)) in enumerate(runs.items()):
        c = COLOURS[k % len(COLOURS)]  # one colour per run; the second quantity dotted
        solid, dotted = {"line": {"color": c}}, {"line": {"color": c, "dash": "dot"}}
        kv += [line(name, "reserved", series, 3, GIB, **solid), line(name, "written", series, 4, GIB, **dotted)]
        if any(r[5] for r in series):
            kv.append(line(name, "cached prefixes, idle", series, 5, GIB, line={"color": c, "dash": "dash"}))
        reqs += [line(name, "running", series, 1, **solid), line(name, "waiting", series, 2, **dotted)]
        speed.append(line(name, "tokens/s", series, 7, **solid))
        pre.append(line(name, "preemptions", series, 6, **solid))
    end = max((s[-1][0] for _, s in runs.values() if s), default=0)
    kv.append({"type": "scatter", "mode": "lines", "name": "KV pool", "x": [0, end], "y": [round(budget / GIB, 4)] * 2,
               "line": {"dash": "dash", "color": "#888"}})

    def fig(data, title, ytitle):
        return {"data": data, "layout": {**base, "title": {"text": title}, "yaxis": {"title": {"text": ytitle}}}}

    return {"kv": fig(kv, "KV memory per GPU" + (f" ({html.escape(stage)}, the stage that binds)" if stage else ""),
                      "GiB"), "requests": fig(reqs, "Requests", "requests"),
            "speed": fig(speed, "Tokens per second (prefill + decode)", "tokens/s"),
            "preemptions": fig(pre, "Preemptions (cumulative)", "preemptions")}


def _curve_figure(doc: dict) -> dict:
    """The trace's LRU hit-rate curve: prompt blocks hit against tier size, the knee and the GPU pool marked."""
    xs = [round(p[1] / GIB, 3) for p in doc["points"]]
    ys = [p[2] for p in doc["points"]]
    knee = doc["knee"]
    per_token = doc["points"][0][1] / doc["points"][0][0] if doc["points"] and doc["points"][0][0] else 0
    gpu = round(doc["gpu_pool_tokens"] * per_token / GIB, 3)
    data = [{"type": "scatter", "mode": "lines", "name": "LRU hit rate", "x": xs, "y": ys},
            {"type": "scatter", "mode": "markers", "name": "knee", "x": [round(knee["bytes"] / GIB, 3)],
             "y": [round(knee["hit_pct"], 3)], "marker": {"size": 10}},
            {"type": "scatter", "mode": "lines", "name": "GPU pool", "x": [gpu, gpu], "y": [0, max(ys or [0])],
             "line": {"dash": "dash", "color": "#888"}}]
    layout = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50},
              "title": {"text": "Hit rate against cache size (one pass, LRU)"},
              "xaxis": {"title": {"text": "cache size, whole deployment (GiB)"}, "type": "log"},
              "yaxis": {"title": {"text": "% of prompt blocks hit"}}, "legend": {"orientation": "h", "y": -0.25}}
    return {"data": data, "layout": layout}


_STYLE = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px;margin:0 0 4px}"
          "p.meta{color:#555;margin:2px 0}.chart{width:100%;min-height:360px}"
          "table{border-collapse:collapse;font-size:13px;margin:12px 0}th,td{border-bottom:1px solid #ddd;"
          "padding:3px 8px;text-align:left}#errors{color:#b00;white-space:pre-wrap}")
_RENDER = """
(function () {
  var figs = JSON.parse(document.getElementById('kvplan-figures').textContent);
  Object.keys(figs).forEach(function (name) {
    var el = document.getElementById('chart-' + name);
    if (el) { Plotly.newPlot(el, figs[name].data, figs[name].layout, {responsive: true, displaylogo: false}); }
  });
})();
"""


def pool_stage(plan) -> str:
    """Under pipeline stages, the layers of the stage whose GPU a simulated pool is (Plan.token_pool_stage: the
    binding stage, beside a state pool the one whose cell sized the token pool, as kvplan.simulator.adapter reads
    it), as "layers a-b"; "" with one stage."""
    stage = plan.token_pool_stage
    return f"layers {layer_span(stage.layers)}" if len(plan.stages) > 1 and stage is not None else ""


def _label(key: str) -> str:
    """A metadata key as a reader reads it: kv_pool_bytes_per_gpu -> "KV pool per GPU"."""
    words = (key[:-2] if key.endswith("_s") else key).replace("_bytes", "").split("_")
    text = " ".join({"kv": "KV", "gpu": "GPU", "gpus": "GPUs", "tp": "tp", "pp": "pp", "qps": "req/s",
                     "ttft": "TTFT", "tpot": "TPOT", "slo": "SLO", "per": "per"}.get(w, w) for w in words if w)
    return text[:1].upper() + text[1:]


def _shown(key: str, value) -> str:
    """A metadata value with its unit: bytes in GiB, seconds with an s, big counts with separators."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if "bytes" in key:
        return f"{value / GIB:,.2f} GiB ({value:,} bytes)"
    if key.endswith("_s"):
        return f"{value:g} s"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def render_html(meta: dict, runs: dict, title: str = "kvplan simulate") -> str:
    """The page: what was simulated, a table of every run's figures, the time-series charts."""
    from plotly.offline import get_plotlyjs

    esc = lambda x: html.escape(str(x), quote=True)  # noqa: E731
    plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    budget = next(iter(runs.values()))[0]["kv"]["budget_bytes"]
    figs = _figures(runs, budget, meta.get("kv_pool_stage"))
    if meta.get("hit_rate_curve"):
        figs["curve"] = _curve_figure(meta["hit_rate_curve"])
    lines = {name: summary_lines(summary) for name, (summary, _) in runs.items()}
    head = "<tr><th></th>" + "".join(f"<th>{esc(n)}</th>" for n in runs) + "</tr>"
    labels = [k for k, _ in next(iter(lines.values()))]
    body = "".join("<tr><td>" + esc(label) + "</td>"
                   + "".join(f"<td>{esc(dict(v)[label])}</td>" for v in lines.values())
                   + "</tr>" for label in labels)
    described = "".join(f'<p class="meta">{esc(_label(k))}: {esc(_shown(k, v))}</p>' for k, v in meta.items()
                        if not isinstance(v, (dict, list)) and v is not None)
    charts = "".join(f'<div class="chart" id="chart-{name}"></div>' for name in figs)
    return "".join([
        page_head(title, _STYLE),
        f"<script>{plotly_js}</script></head><body><h1>{esc(title)}</h1>", described,
        f'<p class="meta">{esc(step_note(meta))}</p><div id="errors"></div><table>{head}{body}</table>', charts,
        f'<script type="application/json" id="kvplan-figures">{safe_json(figs)}</script>',
        f"<script>{_RENDER}</script></body></html>\n",
    ])
