"""`kvplan check-bench FILE`: a benchmark's measured figures beside kvplan's prediction for the same setting.

Thin: read the file (size-capped) into runs (kvplan.bench.detect), resolve each run's setting from the
file and the flags and predict it (kvplan.cli.bench_predict: simulate's own model), set them side by
side with the efficiency each roofline term implies (kvplan.bench.compare), render.
"""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.bench.compare import efficiencies, rows
from kvplan.bench.numbers import MAX_FIGURE, noting_refusals
from kvplan.core.units import signed
from kvplan.bench.detect import FORMATS, MAX_BYTES, read_runs
from kvplan.bench.result import METRICS, TIME_METRICS
from kvplan.cli._common import (
    HwOpt, JsonOpt, KvDtypeOpt, WeightDtypeOpt, check_range, cli_errors, markup_safe, print_result, read_capped_text,
    stderr, table,
)
from kvplan.cli.bench_predict import predict, resolve

UNITS = {m: "s" if m in TIME_METRICS else ("requests/s" if m == "request_throughput" else "tokens/s") for m in METRICS}
MAX_CHECKED = 20  # runs of one file checked (a llama-bench sweep can hold hundreds)
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E latency", "output_throughput": "output tok/s",
          "total_throughput": "total tok/s", "request_throughput": "requests/s",
          "per_user_output_throughput": "tok/s per user", "pp_tok_s": "pp tok/s", "tg_tok_s": "tg tok/s"}


def register(app: typer.Typer) -> None:
    app.command("check-bench")(check_bench)


@cli_errors
def check_bench(
    file: Annotated[Path, typer.Argument(
        help="A benchmark result: vllm bench serve / benchmark_serving JSON or printed result, SGLang bench_serving "
        "JSONL or result, genai-perf / AIPerf JSON or CSV, llama-bench json/jsonl/csv/md, trtllm-bench report.")],
    model: Annotated[Optional[str], typer.Option(
        "--model", "-m", help="The model (default: the catalog entry the file's model name matches).")] = None,
    gpu: Annotated[Optional[str], typer.Option(
        "--gpu", "-g", help="The GPU (default: the profile whose device name the file prints).")] = None,
    tp: Annotated[Optional[int],
                  typer.Option("--tp", help="Tensor-parallel size (default: the file's, else 1).")] = None,
    engine: Annotated[Optional[str], typer.Option(
        "--engine", help="The engine measured: vllm, sglang, trtllm, llama.cpp (default: the file's, else kvplan's own "
        "rules).")] = None,
    input_len: Annotated[Optional[int],
                         typer.Option("--input-len", help="Prompt tokens per request (default: the file's).")] = None,
    output_len: Annotated[Optional[int],
                          typer.Option("--output-len", help="Output tokens per request (default: the file's).")] = None,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    hw_profiles: HwOpt = None,
    as_json: JsonOpt = False,
):
    """Put each figure a benchmark measured beside kvplan's prediction for that setting, with the error and the
    efficiency (bandwidth, FLOP/s) the measurement implies."""
    for name, value in (("--tp", tp), ("--input-len", input_len), ("--output-len", output_len)):
        if value is not None:
            check_range(name, value, 1, 1 << 24)
    with noting_refusals() as refused:
        runs = read_runs(read_capped_text(file, MAX_BYTES, "a benchmark result"), markup_safe(str(file)))
    if refused:
        stderr(f"note: {len(refused):,} value(s) in the file are not numbers kvplan believes (text, NaN, negative or "
               f"past {MAX_FIGURE:.0e}) and were left out: {', '.join(markup_safe(v) for v in refused[:5])}"
               + (" ..." if len(refused) > 5 else ""))
    if len(runs) > MAX_CHECKED:
        stderr(f"note: the file holds {len(runs):,} runs; the first {MAX_CHECKED} are checked")
    results = []
    for run in runs[:MAX_CHECKED]:
        if input_len or output_len:
            run = run.with_settings(isl=input_len or run.settings.isl, osl=output_len or run.settings.osl)
        results.append(_check(run, model, gpu, tp, engine, kv_dtype, weight_dtype, hw_profiles))
    data = {"file": str(file), "format": runs[0].tool, "format_name": FORMATS[runs[0].tool], "runs": results}
    print_result(as_json, data, lambda console: _render(console, results))


def _check(run, model, gpu, tp, engine, kv_dtype, weight_dtype, hw_profiles) -> dict:
    r = resolve(run, model, gpu, tp, engine, kv_dtype, weight_dtype, hw_profiles)
    predicted, sim, notes = predict(run, r, hw_profiles)
    s = run.settings
    said = r.assumed + notes
    for line in said:
        stderr(f"{run.label}: {line}" if run.label != "the run" else line)
    return {
        "run": run.label, "tool": run.tool, "model": r.model, "gpu": r.gpu.key, "tp": r.tp, "replicas": r.replicas,
        "engine": r.engine, "input_len": s.isl, "output_len": s.osl, "lengths": s.lengths, "concurrency": s.concurrency,
        "request_rate": None if s.request_rate is None
        else (str(s.request_rate) if s.request_rate == float("inf") else s.request_rate),
        "burstiness": s.burstiness, "requests": s.num_prompts, "assumed": said,
        "rows": [{**row.__dict__, "unit": UNITS[row.metric]} for row in rows(run.metrics, predicted)],
        "efficiency": [{"term": t, "achieved": a, "datasheet": d, "unit": u, "pct": 100.0 * a / d if d else None,
                        "benchmark": m, "pct_of_benchmark": 100.0 * a / m if m else None}
                       for t, a, d, m, u in efficiencies(run, sim, r.gpu, r.weight_dtype, r.replicas)],
    }


def _fmt(metric: str, value) -> str:
    if value is None:
        return "–"
    if metric in TIME_METRICS:
        return f"{value * 1e3:,.1f} ms" if value < 10 else f"{value:,.2f} s"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:,.1f} {prefix}{unit}"
    return f"{value:,.0f} {unit}"


def _pct(pct: float | None) -> str:
    return "–" if pct is None else f"{pct:.0f}%" if pct >= 9.5 else f"{pct:.1f}%"


def _render(console, results) -> None:
    for res in results:
        rate = res["request_rate"]  # "inf" (JSON's spelling): every request sent at once, not "inf req/s"
        load = (f"concurrency {res['concurrency']}" if res["concurrency"] else
                f"{rate:,g} req/s" if rate and rate != "inf" else
                f"{res['requests'] or 1:,} request{'s' if (res['requests'] or 1) > 1 else ''} at once")
        console.print(f"[bold]{markup_safe(res['run'])}[/] · {markup_safe(res['model'])} on {res['tp']} × {res['gpu']}"
                      + (f" × {res['replicas']} replicas" if res["replicas"] > 1 else ""))
        console.print(f"  in {res['input_len'] or '–'} / out {res['output_len'] or '–'} tokens · {load}")
        t = table(["metric", "stat", "measured", "kvplan", "error", "kvplan is"],
                  right=("measured", "kvplan", "error"))
        for row in res["rows"]:
            err = "–" if row["error_pct"] is None else f"{signed(row['error_pct'])}%"
            side = "" if row["optimistic"] is None else ("optimistic" if row["optimistic"] else "pessimistic")
            t.add_row(LABELS.get(row["metric"], row["metric"]), row["stat"], _fmt(row["metric"], row["measured"]),
                      _fmt(row["metric"], row["predicted"]), err, side)
        console.print(t)
        if res["efficiency"]:
            e = table(["implied by the measurement", "achieved", "datasheet", "%", "benchmark", "% of it"],
                      right=("achieved", "datasheet", "%", "benchmark", "% of it"))
            for x in res["efficiency"]:
                bench = x["benchmark"]
                e.add_row(x["term"], _si(x["achieved"], x["unit"]), _si(x["datasheet"], x["unit"]), _pct(x["pct"]),
                          "–" if bench is None else _si(bench, x["unit"]), _pct(x["pct_of_benchmark"]))
            console.print(e)

