"""genai-perf and AIPerf exports: `profile_export_genai_perf.json` / `profile_export_aiperf.json` and their CSVs.

JSON (ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md; genai-perf writes the same
shape): each metric an object `{"unit": "ms", "avg": .., "p50": .., "p99": ..}` under
`time_to_first_token`, `inter_token_latency`, `request_latency`, `output_token_throughput`,
`request_throughput`, ...; the run's settings under `input_config` (`endpoint.model_names`,
`loadgen.concurrency` / `request_rate`, `input.prompt.input_tokens.mean` / `output_tokens.mean`).
CSV: a `Metric,avg,min,max,p1,...,p99,std` block (`Time to First Token (ms)`, ...) and a
`Metric,Value` block (`Output Token Throughput (tokens/sec)`, ...); it states no settings.
"""

from __future__ import annotations


from kvplan.bench import numbers
from kvplan.bench.result import BenchRun, Settings, Stat

_UNITS = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "us": 1e-6, "ns": 1e-9}
_JSON = {"ttft": "time_to_first_token", "itl": "inter_token_latency", "e2el": "request_latency",
         "output_throughput": "output_token_throughput", "request_throughput": "request_throughput",
         "per_user_output_throughput": "output_token_throughput_per_user"}
_CSV = {"Time to First Token": "ttft", "Inter Token Latency": "itl", "Request Latency": "e2el",
        "Output Token Throughput": "output_throughput", "Request Throughput": "request_throughput",
        "Output Token Throughput Per User": "per_user_output_throughput"}


def matches_json(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("time_to_first_token"), dict) and \
        ("input_config" in doc or "request_latency" in doc)


def _stat(obj, time: bool) -> Stat | None:
    if not isinstance(obj, dict):
        return None
    scale = _UNITS.get(str(obj.get("unit", "ms")).strip().lower()) if time else 1.0
    if scale is None:
        return None
    s = Stat(numbers.figure(obj.get("avg"), scale), numbers.figure(obj.get("p50"), scale),
             numbers.figure(obj.get("p99"), scale))
    return s if s.items() else None


def _get(d, *path):
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def parse_json(doc: dict) -> list[BenchRun]:
    metrics = {}
    for name, key in _JSON.items():
        s = _stat(doc.get(key), name in ("ttft", "itl", "e2el"))
        if s is not None:
            metrics[name] = s
    cfg = doc.get("input_config") if isinstance(doc.get("input_config"), dict) else {}
    # AIPerf nests its settings; genai-perf keeps its CLI's names flat (model, concurrency, request_rate,
    # synthetic_input_tokens_mean, output_tokens_mean): both are read, AIPerf's first.
    names = _get(cfg, "endpoint", "model_names") or _get(cfg, "model_names") or _get(cfg, "model")
    n = numbers.count(_get(doc, "request_count", "avg"))
    isl = numbers.count(_get(cfg, "input", "prompt", "input_tokens", "mean")) or \
        numbers.count(cfg.get("synthetic_input_tokens_mean")) or numbers.mean_length(_get(doc, "total_isl", "avg"), n)
    osl = numbers.count(_get(cfg, "input", "prompt", "output_tokens",
                             "mean")) or numbers.count(cfg.get("output_tokens_mean"))
    osl_run = _get(doc, "output_sequence_length", "avg")
    settings = Settings(
        model=numbers.text(names[0]) if isinstance(names, list) and names else None,
        gpu_name=_telemetry_gpu(doc), isl=isl, osl=osl or numbers.count(round(numbers.figure(osl_run) or 0)),
        lengths="the requested means" if osl else "mean of the run",
        concurrency=numbers.count(_get(cfg, "loadgen", "concurrency") or cfg.get("concurrency")),
        request_rate=numbers.rate(_get(cfg, "loadgen", "request_rate") or cfg.get("request_rate")), num_prompts=n,
        endpoint=_endpoint(_get(cfg, "endpoint", "type") or cfg.get("endpoint_type")))
    return [BenchRun("aiperf-json", "the run", settings, metrics)]


def _endpoint(kind) -> str | None:
    """The endpoint type AIPerf states (`endpoint.type`; genai-perf's flat `endpoint_type`), where it is chat or
    completions."""
    k = (numbers.text(kind, 20) or "").lower()
    return k if k in ("chat", "completions") else None


def _telemetry_gpu(doc) -> str | None:
    endpoints = _get(doc, "telemetry_data", "endpoints")
    for ep in (endpoints.values() if isinstance(endpoints, dict) else ()):
        for g in (_get(ep, "gpus") or {}).values() if isinstance(_get(ep, "gpus"), dict) else ():
            return numbers.text(_get(g, "gpu_name"))
    return None


def matches_csv(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith("Metric,avg,") or (head.startswith("Metric,") and "Time to First Token" in text[:4000])


def parse_csv(text: str) -> list[BenchRun]:
    metrics, header = {}, None
    for row in numbers.csv_rows(text[:1_000_000], "genai-perf / AIPerf CSV"):
        if not row:
            header = None
            continue
        if row[0] == "Metric":
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        name, _, unit = row[0].partition(" (")
        key = _CSV.get(name.strip())
        if key is None:
            continue
        cells = dict(zip(header, row))
        scale = _UNITS.get(unit.rstrip(")").strip().lower(), 1.0) if key in ("ttft", "itl", "e2el") else 1.0
        if "Value" in cells:
            s = Stat(mean=numbers.figure(cells["Value"], scale))
        else:
            s = Stat(numbers.figure(cells.get("avg"), scale), numbers.figure(cells.get("p50"), scale),
                     numbers.figure(cells.get("p99"), scale))
        if s.items():
            metrics[key] = s
    return [BenchRun("aiperf-csv", "the run", Settings(), metrics)]
