"""SGLang `python -m sglang.bench_serving --output-file F.jsonl`: one JSON object per line, one line per run.

Keys as sgl-project/sglang@v0.4.6:python/sglang/bench_serving.py writes them: `backend` (the server
it drove), `dataset_name`, `request_rate`, `max_concurrency`, `random_input_len`/`random_output_len`
(the dataset flags, fixed lengths when `random_range_ratio` is 1), `completed`, the token totals, the
throughputs (`input_throughput`, `output_throughput`), `<stat>_e2e_latency_ms`, `<stat>_ttft_ms`,
`<stat>_tpot_ms`, `<stat>_itl_ms`. BentoML's llm-optimizer writes the same object under `results`, with
the server's flags under `config.server_args` (bentoml/llm-optimizer#21 shows one): both are read.
"""

from __future__ import annotations

from kvplan.bench import numbers
from kvplan.bench.result import BenchRun, Settings, Stat
from kvplan.bench.serving import endpoint_of_backend, engine_of_backend, saved_metrics


def matches(doc) -> bool:
    d = doc.get("results") if isinstance(doc, dict) and isinstance(doc.get("results"), dict) else doc
    return isinstance(d, dict) and "mean_ttft_ms" in d and ("mean_e2e_latency_ms" in d or "input_throughput" in d)


def _lengths(d: dict) -> tuple:
    done = d.get("completed")
    if d.get("dataset_name") == "random" and numbers.figure(d.get("random_range_ratio")) == 1.0:
        return (numbers.count(d.get("random_input_len")), numbers.count(d.get("random_output_len")),
                "fixed (range ratio 1)")
    return (numbers.mean_length(d.get("total_input_tokens"), done),
            numbers.mean_length(d.get("total_output_tokens"), done), "mean of the run")


def parse_line(doc: dict, label: str) -> BenchRun:
    d = doc["results"] if isinstance(doc.get("results"), dict) else doc
    server = (doc.get("config") or {}).get("server_args") if isinstance(doc.get("config"), dict) else None
    server = server if isinstance(server, dict) else {}
    isl, osl, how = _lengths(d)
    settings = Settings(
        model=numbers.text(d.get("model_id")) or numbers.text(d.get("model")),
        engine=engine_of_backend(d.get("backend")),
        endpoint=endpoint_of_backend(d.get("backend")),
        tp=numbers.count(server.get("tensor_parallel_size") or server.get("tp_size") or server.get("tp")),
        kv_dtype=numbers.text(server.get("kv_cache_dtype"), 20), max_batch=numbers.count(server.get("max_num_seqs")),
        max_tokens=numbers.count(server.get("max_num_batched_tokens")),
        isl=isl, osl=osl, lengths=how, concurrency=numbers.count(d.get("max_concurrency")),
        request_rate=numbers.rate(d.get("request_rate")), num_prompts=numbers.count(d.get("completed")))
    metrics = saved_metrics(d)
    v = numbers.figure(d.get("input_throughput"))
    if v is not None and "total_throughput" not in metrics and "output_throughput" in metrics:
        metrics["total_throughput"] = Stat(mean=v + metrics["output_throughput"].mean)
    return BenchRun("sglang-jsonl", label, settings, metrics)
