"""`vllm bench serve --save-result` / benchmarks/benchmark_serving.py `--save-result`: one JSON object.

Keys as vllm-project/vllm@v0.10.1:vllm/benchmarks/serve.py writes them (`date`, `backend` or
`endpoint_type`, `model_id`, `num_prompts`, `request_rate` ("inf" as text), `max_concurrency`,
`burstiness` (the gaps' gamma shape, 1 = Poisson), `completed`, `total_input_tokens`, `total_output_tokens`, the
throughputs, `<stat>_<metric>_ms`), plus any `--metadata KEY=VALUE` pairs the user added at the top level (a `gpu`,
`tp`, ... we read as stated). Input and output lengths are the run's means (totals over completed requests): the JSON
keeps no dataset flags.
"""

from __future__ import annotations

from kvplan.bench import numbers
from kvplan.bench.result import BenchRun, Settings
from kvplan.bench.serving import endpoint_of_backend, engine_of_backend, saved_metrics

KEYS = ("completed", "total_input_tokens", "total_output_tokens", "mean_ttft_ms")  # all present: this format


def matches(doc) -> bool:
    return isinstance(doc, dict) and all(k in doc for k in KEYS) and "mean_e2e_latency_ms" not in doc


def parse(doc: dict) -> list[BenchRun]:
    done = doc.get("completed")
    model = doc.get("model_id")
    if not model and isinstance(doc.get("model_ids"), list) and doc["model_ids"]:
        model = doc["model_ids"][0]
    settings = Settings(
        model=numbers.text(model) or numbers.text(doc.get("model")),
        engine=engine_of_backend(doc.get("backend") or doc.get("endpoint_type")),
        endpoint=endpoint_of_backend(doc.get("backend") or doc.get("endpoint_type")),
        gpu_name=numbers.text(doc.get("gpu")), tp=numbers.count(doc.get("tp")),
        isl=numbers.mean_length(doc.get("total_input_tokens"), done),
        osl=numbers.mean_length(doc.get("total_output_tokens"), done), lengths="mean of the run",
        concurrency=numbers.count(doc.get("max_concurrency")), request_rate=numbers.rate(doc.get("request_rate")),
        burstiness=numbers.figure(doc.get("burstiness")),
        num_prompts=numbers.count(doc.get("num_prompts")) or numbers.count(done))
    return [BenchRun("vllm-json", "the run", settings, saved_metrics(doc))]
