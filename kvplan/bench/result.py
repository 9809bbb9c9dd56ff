"""What a benchmark result file states: its settings and its metrics, in kvplan's units.

Times are seconds, throughputs tokens (or requests) per second; a metric is a `Stat` with the
statistics the file gave (mean, median, p99), None where it gave none. Settings a file does not
state are None, never guessed: `kvplan check-bench` takes them from flags and says which it assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# Metric names, in the order a report shows them, with what each measures.
METRICS = {
    "ttft": "time to first token (s)",
    "tpot": "time per output token after the first (s)",
    "itl": "inter-token latency (s)",
    "e2el": "end-to-end request latency (s)",
    "output_throughput": "output tokens/s, whole deployment",
    "total_throughput": "input + output tokens/s",
    "request_throughput": "requests/s",
    "per_user_output_throughput": "output tokens/s one request sees",
    "pp_tok_s": "prompt processing tokens/s (llama-bench)",
    "tg_tok_s": "generation tokens/s (llama-bench)",
}
TIME_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class Stat:
    mean: float | None = None
    median: float | None = None
    p99: float | None = None

    def items(self):
        return [(k, v) for k, v in (("mean", self.mean), ("median", self.median), ("p99", self.p99)) if v is not None]


@dataclass(frozen=True)
class Settings:
    """The load and deployment a file states. Lengths are tokens; `isl`/`osl` are fixed lengths or means."""

    model: str | None = None
    engine: str | None = None  # vllm | sglang | trtllm | llama.cpp, where the file says
    engine_version: str | None = None
    gpu_name: str | None = None  # as the file prints it (nvidia-smi's name, "4xNVIDIA_L40S")
    gpus: int | None = None
    tp: int | None = None
    isl: int | None = None
    osl: int | None = None
    lengths: str | None = None  # how isl/osl were read: "fixed", "mean of the run", ...
    concurrency: int | None = None  # closed loop: most requests in flight
    request_rate: float | None = None  # open loop, requests/s; inf = all at once
    burstiness: float | None = None  # open loop: the gamma gaps' shape (vLLM's --burstiness; None or 1: Poisson)
    num_prompts: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    max_batch: int | None = None  # the engine's own cap on running requests, where stated
    max_tokens: int | None = None  # the engine's cap on tokens per step, where stated
    scheduler_policy: str | None = None  # the engine's capacity scheduler policy, where stated (trtllm-bench)
    depth: int = 0  # llama-bench: tokens already in the cache (-d)
    endpoint: str | None = None  # chat | completions, where the file says (kvplan.speed.frontend.ENDPOINTS)
    flash_attn: str | None = None  # llama-bench: the row's FlashAttention setting (`flash_attn`, the md table's `fa`)


@dataclass(frozen=True)
class BenchRun:
    """One run of a file (a JSONL line, a llama-bench row): its settings and metrics."""

    tool: str  # the format's name, as detect.FORMATS lists it
    label: str  # which run of the file ("line 3", "pp512")
    settings: Settings
    metrics: dict = field(default_factory=dict)  # name (METRICS) -> Stat

    def with_settings(self, **changes) -> "BenchRun":
        return replace(self, settings=replace(self.settings, **changes))
