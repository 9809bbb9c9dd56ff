"""trtllm-bench's printed report (`trtllm-bench ... throughput` / `latency`): `= SECTION` blocks of `Label: value`.

Labels as NVIDIA/TensorRT-LLM@04276b44:docs/source/performance/perf-benchmarking.md shows them:
`Model:`, `TensorRT-LLM Version:`, `Quantization:`, `KV Cache Dtype:`, `TP Size:`, `Max Runtime Batch
Size:`, `Max Runtime Tokens:`, `Number of requests:`, `Number of concurrent requests:`, `Average Input
Length (tokens):`, `Average Output Length (tokens):`, `Request Throughput (req/sec):`, `Total Output
Throughput (tokens/sec):` (older: `Token Throughput (tokens/sec):`), `Per User Output Throughput
(tokens/sec/user):`, `Total Token Throughput (tokens/sec):`, `Average request latency (ms):`, and the
`[Latency] P50 :` lines (newer releases print `TensorRT LLM Version:`). The benchmark submits every request
at once (offline): rate inf.

`--report_json FILE` writes the same figures as JSON (NVIDIA/TensorRT-LLM@0249976575050d2c624a5f285683c66de311a3b7:
tensorrt_llm/bench/dataclasses/reporting.py, `get_statistics_dict`): `engine` (`model`, `version`, `quantization`,
`kv_cache_dtype`), `machine.name`, `world_info` (`tp_size`, `max_batch_size`, `max_num_tokens`), `request_info`
(`num_requests`, `avg_input_length`, `avg_output_length`), `performance` (`request_throughput_req_s`,
`system_output_throughput_tok_s`, `system_total_throughput_tok_s`, `output_throughput_per_user_tok_s`,
`avg_request_latency_ms`, `request_latency_percentiles_ms`) and, when streaming, `streaming_metrics`
(`avg_ttft_ms`, `avg_tpot_ms`, `ttft_percentiles`, `tpot_percentiles`, each `{"average", "p50", "p99", ...}` in ms).
"""

from __future__ import annotations

import math
import re

from kvplan.bench import numbers
from kvplan.bench.result import BenchRun, Settings, Stat

MARK = "= PERFORMANCE OVERVIEW"
_LINE = re.compile(r"^\s*(\[Latency\] [A-Z0-9]+|[A-Za-z][A-Za-z0-9 ()/.+-]{0,60}?)\s*:\s*(\S{1,60})\s*$")


def matches(text: str) -> bool:
    return MARK in text


def _fields(text: str) -> dict:
    out = {}
    for line in text.splitlines()[:20000]:
        m = _LINE.match(line[:200])
        if m:
            out.setdefault(m.group(1).strip(), m.group(2))
    return out


# the text report's "Scheduling Policy:      Guaranteed No Evict" (a value with spaces, which _LINE does not take)
_POLICY = re.compile(r"^\s*Scheduling Policy\s*:\s*([A-Za-z][A-Za-z _-]{0,40}?)\s*$", re.M)


def _policy(text: str) -> str | None:
    """The capacity scheduler policy a text report prints, as the engine's option spells it ("guaranteed_no_evict")."""
    m = _POLICY.search(text[:1_000_000])
    return "_".join(m.group(1).lower().replace("-", " ").split()) if m else None


def _dtype(value) -> str | None:
    v = numbers.text(value, 20)
    return None if v is None or v.lower() in ("none", "null") else v.lower()


def parse(text: str) -> list[BenchRun]:
    f = _fields(text)
    g = lambda *labels: next((f[x] for x in labels if x in f), None)  # noqa: E731
    out_rate = numbers.figure(g("Total Output Throughput (tokens/sec)"))
    settings = Settings(
        model=numbers.text(g("Model", "Model Name")), engine="trtllm",
        engine_version=numbers.text(g("TensorRT-LLM Version", "TensorRT LLM Version"), 40),
        tp=numbers.count(g("TP Size")), weight_dtype=_dtype(g("Quantization")), kv_dtype=_dtype(g("KV Cache Dtype")),
        isl=numbers.count(round(numbers.figure(g("Average Input Length (tokens)")) or 0)),
        osl=numbers.count(round(numbers.figure(g("Average Output Length (tokens)")) or 0)),
        lengths="the dataset's means",
        request_rate=math.inf, num_prompts=numbers.count(g("Number of requests")),
        max_batch=numbers.count(g("Max Runtime Batch Size")), max_tokens=numbers.count(g("Max Runtime Tokens")),
        scheduler_policy=_policy(text))
    metrics = {}
    for name, value in (("request_throughput", g("Request Throughput (req/sec)")),
                        ("output_throughput", out_rate if out_rate is not None else None),
                        ("total_throughput", g("Total Token Throughput (tokens/sec)")),
                        ("per_user_output_throughput", g("Per User Output Throughput (tokens/sec/user)"))):
        v = numbers.figure(value)
        if v is not None:
            metrics[name] = Stat(mean=v)
    if out_rate is None and numbers.figure(g("Token Throughput (tokens/sec)")) is not None:
        # trtllm-bench 0.17 printed output tokens/s as "Token Throughput" (= output tokens / total latency)
        metrics["output_throughput"] = Stat(mean=numbers.figure(g("Token Throughput (tokens/sec)")))
    e2e = Stat(numbers.figure(g("Average request latency (ms)", "[Latency] AVERAGE"), 1e-3),
               numbers.figure(g("[Latency] P50"), 1e-3), numbers.figure(g("[Latency] P99"), 1e-3))
    if e2e.items():
        metrics["e2el"] = e2e
    return [BenchRun("trtllm-bench", "the run", settings, metrics)]


# ---- --report_json ------------------------------------------------------------------------------------
def matches_json(doc) -> bool:
    perf = doc.get("performance") if isinstance(doc, dict) else None
    return isinstance(perf, dict) and ("request_throughput_req_s" in perf or "system_output_throughput_tok_s" in perf)


def _d(doc, key) -> dict:
    v = doc.get(key)
    return v if isinstance(v, dict) else {}


def _pct_ms(obj, avg=None) -> Stat | None:
    obj = obj if isinstance(obj, dict) else {}
    s = Stat(numbers.figure(obj.get("average", avg), 1e-3), numbers.figure(obj.get("p50"), 1e-3),
             numbers.figure(obj.get("p99"), 1e-3))
    return s if s.items() else None


def parse_json(doc: dict) -> list[BenchRun]:
    eng, world, req, perf, stream = (_d(doc, k) for k in ("engine", "world_info", "request_info", "performance",
                                                          "streaming_metrics"))
    data = _d(doc, "dataset")
    settings = Settings(
        model=numbers.text(eng.get("model")), engine="trtllm", engine_version=numbers.text(eng.get("version"), 40),
        gpu_name=numbers.text(_d(doc, "machine").get("name")), tp=numbers.count(world.get("tp_size")),
        weight_dtype=_dtype(eng.get("quantization")), kv_dtype=_dtype(eng.get("kv_cache_dtype")),
        isl=numbers.count(round(numbers.figure(req.get("avg_input_length") or data.get("avg_isl")) or 0)),
        osl=numbers.count(round(numbers.figure(req.get("avg_output_length") or data.get("avg_osl")) or 0)),
        lengths="the dataset's means", request_rate=math.inf, num_prompts=numbers.count(req.get("num_requests")),
        max_batch=numbers.count(world.get("max_batch_size")), max_tokens=numbers.count(world.get("max_num_tokens")))
    metrics = {}
    for name, key in (("request_throughput", "request_throughput_req_s"),
                      ("output_throughput", "system_output_throughput_tok_s"),
                      ("total_throughput", "system_total_throughput_tok_s"),
                      ("per_user_output_throughput", "output_throughput_per_user_tok_s")):
        v = numbers.figure(perf.get(key))
        if v is not None:
            metrics[name] = Stat(mean=v)
    for name, stat in (("e2el", _pct_ms(perf.get("request_latency_percentiles_ms"),
                                        perf.get("avg_request_latency_ms"))),
                       ("ttft", _pct_ms(stream.get("ttft_percentiles"), stream.get("avg_ttft_ms"))),
                       ("tpot", _pct_ms(stream.get("tpot_percentiles"), stream.get("avg_tpot_ms")))):
        if stat is not None:
            metrics[name] = stat
    return [BenchRun("trtllm-bench", "the run", settings, metrics)]
