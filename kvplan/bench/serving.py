"""What `vllm bench serve` and SGLang's bench_serving share: `<stat>_<metric>_ms` keys and the printed report.

Both tools print a "Serving Benchmark Result" block of `Label (unit):  value` lines (vLLM:
vllm-project/vllm@v0.10.1:vllm/benchmarks/serve.py, benchmarks/benchmark_serving.py before it; SGLang:
sgl-project/sglang@v0.4.6:python/sglang/bench_serving.py) and save the same figures under keys such as
`mean_ttft_ms`, `median_tpot_ms`, `p99_itl_ms` (vLLM: `e2el`; SGLang: `e2e_latency`).
"""

from __future__ import annotations

import re

from kvplan.bench import numbers
from kvplan.bench.result import Settings, Stat

# A server the client's `backend` names (vllm bench serve --backend, bench_serving --backend); an
# OpenAI-compatible backend ("openai", "openai-chat") says nothing of the engine behind it.
BACKEND_ENGINES = {"vllm": "vllm", "vllm-chat": "vllm", "sglang": "sglang", "sglang-native": "sglang",
                   "sglang-oai": "sglang", "sglang-oai-chat": "sglang", "trt": "trtllm", "tensorrt-llm": "trtllm"}


# the clients that post to /v1/completions (vllm bench serve's and bench_serving's `--backend`)
COMPLETIONS_BACKENDS = {"openai": "completions", "vllm": "completions", "sglang-oai": "completions"}


def endpoint_of_backend(backend) -> str | None:
    """The OpenAI endpoint a client `backend` posts to: "chat" (openai-chat, vllm-chat, sglang-oai-chat: the
    /v1/chat/completions clients), "completions" (openai, vllm, sglang-oai), None for any other (SGLang's native
    /generate) or none stated."""
    b = (numbers.text(backend, 40) or "").lower()
    return "chat" if b.endswith("-chat") else COMPLETIONS_BACKENDS.get(b)


def engine_of_backend(backend) -> str | None:
    b = numbers.text(backend, 40)
    return BACKEND_ENGINES.get(b.lower()) if b else None


def ms_stats(d: dict, *names: str) -> Stat | None:
    """The mean/median/p99 of metric `names[0]` (or an alias) saved as `<stat>_<name>_ms`, in seconds."""
    for name in names:
        got = {s: numbers.figure(d.get(f"{s}_{name}_ms"), 1e-3) for s in ("mean", "median", "p99")}
        if any(v is not None for v in got.values()):
            return Stat(**got)
    return None


def saved_metrics(d: dict) -> dict:
    """The metrics of one saved result (a vLLM JSON or an SGLang JSONL line)."""
    out = {}
    for name, keys in (("ttft", ("ttft",)), ("tpot", ("tpot",)), ("itl", ("itl",)), ("e2el", ("e2el", "e2e_latency"))):
        s = ms_stats(d, *keys)
        if s is not None:
            out[name] = s
    for name, keys in (("output_throughput", ("output_throughput",)),
                       ("total_throughput", ("total_token_throughput", "total_throughput")),
                       ("request_throughput", ("request_throughput",))):
        v = next((x for x in (numbers.figure(d.get(k)) for k in keys) if x is not None), None)
        if v is not None:
            out[name] = Stat(mean=v)
    return out


# ---- the printed report ------------------------------------------------------------------------------
REPORT_MARK = "Serving Benchmark Result"
_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ()/.,'_-]{0,80}?)\s*:\s+(\S{1,40})\s*$")
_STAT_ROWS = {"ttft": ("TTFT",), "tpot": ("TPOT",), "itl": ("ITL",), "e2el": ("E2EL", "E2E Latency")}
_STAT_WORDS = {"Mean": "mean", "Median": "median", "P99": "p99"}
_RATES = {"Output token throughput (tok/s)": "output_throughput", "Total Token throughput (tok/s)": "total_throughput",
          "Total token throughput (tok/s)": "total_throughput", "Request throughput (req/s)": "request_throughput",
          "Total throughput (tok/s)": "total_throughput"}
# Settings the tools' own flags name, in a pasted command line or the Namespace(...) line they print.
_FLAG = re.compile(r"(?:--|\b(?=\w{1,40}=))(model|random[-_]input[-_]len|random[-_]output[-_]len|"
                   r"max[-_]concurrency|num[-_]prompts|"
                   r"request[-_]rate|tp|tp[-_]size|tensor[-_]parallel[-_]size)(?:=|\s+)'?([A-Za-z0-9_./:-]{1,200})")

_BEFORE = re.compile(r"^(Traffic request rate|Burstiness factor|Maximum request concurrency):[ \t]*(\S{1,40})(?:[ "
                     r"\t]+\([^)\n]{0,40}\))?[ \t]*$", re.M)


def report_lines(text: str) -> dict:
    """{label: value text} of the report block's `Label: value` lines (the last block, if several)."""
    start = text.rfind(REPORT_MARK)
    fields = {}
    for line in text[start:].splitlines()[1:200]:
        m = _LINE.match(line[:200])
        if m:
            fields[m.group(1).strip()] = m.group(2)
    return fields


def report_metrics(fields: dict) -> dict:
    out = {}
    for name, words in _STAT_ROWS.items():
        got = {}
        for word, stat in _STAT_WORDS.items():
            for w in words:
                v = numbers.figure(fields.get(f"{word} {w} (ms)"), 1e-3)
                if v is not None:
                    got[stat] = v
        if got:
            out[name] = Stat(**got)
    for label, name in _RATES.items():
        v = numbers.figure(fields.get(label))
        if v is not None:
            out[name] = Stat(mean=v)
    return out


def report_settings(text: str, fields: dict) -> Settings:
    """The load the report states (request counts and totals), with the flags a pasted command line or
    Namespace(...) line gives (the first of each)."""
    fields, flags = dict(fields), {}
    for m in _FLAG.finditer(text[:1_000_000]):
        flags.setdefault(m.group(1).replace("-", "_"), m.group(2))
    for m in _BEFORE.finditer(text[:1_000_000]):  # vLLM prints these above the block
        fields.setdefault(m.group(1), m.group(2))
    done = fields.get("Successful requests")
    conc = fields.get("Maximum request concurrency") or fields.get("Max request concurrency") \
        or fields.get("Max reqeuest concurrency") or flags.get("max_concurrency")
    rate = fields.get("Traffic request rate") or flags.get("request_rate")
    isl = numbers.count(flags.get("random_input_len"))
    osl = numbers.count(flags.get("random_output_len"))
    lengths = "the command's random lengths" if isl and osl else "mean of the run"
    tp = flags.get("tp") or flags.get("tp_size") or flags.get("tensor_parallel_size")
    return Settings(
        model=numbers.text(flags.get("model")), engine=engine_of_backend(fields.get("Backend")),
        endpoint=endpoint_of_backend(fields.get("Backend")),
        isl=isl or numbers.mean_length(fields.get("Total input tokens"), done),
        osl=osl or numbers.mean_length(fields.get("Total generated tokens"), done), lengths=lengths,
        concurrency=numbers.count(conc), request_rate=numbers.rate(rate),
        burstiness=numbers.figure(fields.get("Burstiness factor")),
        num_prompts=numbers.count(flags.get("num_prompts")) or numbers.count(done), tp=numbers.count(tp))
