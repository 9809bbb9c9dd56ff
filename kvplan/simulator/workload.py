"""Requests to simulate: built-in length distributions with Poisson arrivals, seeded.

A request is an arrival time, prompt and output lengths in tokens, and an optional shared prefix:
a tuple of (key, tokens) segments, in order, that other requests may share (a system prompt, a
retrieved document). The prefix cache (kvplan.simulator.paged) matches segments by key, so two
requests share exactly the leading segments whose keys agree.

Built-in workloads draw lengths from log-normal distributions (clamped to [lo, hi]); each
preset says where its parameters come from. Every number here is a modelling input, not a
measurement of any engine: use a trace (kvplan.simulator.traces) for real traffic.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg

MAX_REQUESTS = 5_000_000  # a run bigger than this is refused up front (about 1 GB of request records)


@dataclass(frozen=True, slots=True)
class SimRequest:
    rid: int
    arrival: float  # seconds from the start
    prompt: int  # input tokens, >= 1
    output: int  # output tokens, >= 1
    prefix: tuple = ()  # ((key, tokens), ...): shareable leading segments of the prompt


@dataclass(frozen=True)
class LogNormal:
    """Log-normal lengths with this median and shape sigma, rounded and clamped to [lo, hi]."""

    median: float
    sigma: float
    lo: int = 1
    hi: int = 1 << 20

    @classmethod
    def with_mean(cls, mean: float, sigma: float, lo: int = 1, hi: int = 1 << 20) -> "LogNormal":
        """The log-normal whose (unclamped) mean is `mean`: median = mean * exp(-sigma^2 / 2)."""
        return cls(mean * math.exp(-sigma * sigma / 2), sigma, lo, hi)

    def draw(self, rng: random.Random) -> int:
        x = int(round(rng.lognormvariate(math.log(self.median), self.sigma)))
        return min(max(x, self.lo), self.hi)

    @property
    def mean(self) -> float:
        """The unclamped mean (clamping moves it only when the tails reach lo or hi)."""
        return self.median * math.exp(self.sigma * self.sigma / 2)


@dataclass(frozen=True)
class Workload:
    """A named length model: prompt and output distributions, and optional shared prefixes.

    `system_prompts` distinct system prompts of `system_tokens` tokens each are drawn uniformly;
    `documents` shared documents of `document_tokens` tokens are drawn by a Zipf law of exponent
    `zipf` (popular documents recur); both count inside the prompt length.
    """

    name: str
    prompt: LogNormal
    output: LogNormal
    source: str
    system_prompts: int = 0
    system_tokens: int = 0
    documents: int = 0
    document_tokens: int = 0
    zipf: float = 1.0


# PagedAttention (Kwon et al., SOSP 2023), §6.1 and Fig. 11: ShareGPT prompts average 161.31
# tokens and outputs 337.99; Alpaca 19.31 and 58.45. Both are capped at OPT's 2,048 positions
# (prompts at 2,047, so that one output token fits; outputs are cut at the limit).
# ShareGPT's shape is the authors' own: their artifact publishes every (prompt, output) length pair under OPT's
# tokenizer (sosp-ae-39/sosp-ae-astra@3180d2f8c2a2aa1729245f9b0cb75a854746e6a8:
# datasets/sharegpt_opt_text_completion_length.pkl, 84,226 pairs, read without executing it), and its request
# generator keeps the pairs with prompt + output < 2,048 (astra/benchmark/trace.py,
# generate_text_completion_requests): 79,725 pairs, prompts of mean 161.18 (the paper's 161.31), standard deviation
# 299.3 (cv^2 3.447, median 35), outputs of mean 338.00 (337.99), standard deviation 283.9 (cv^2 0.705, median 271).
# Each side is the log-normal that, clamped to [1, 2,047], has that mean and cv^2 (the two moments a KV pool's
# occupancy depends on): medians 57.7 / 255.3, sigma 1.497 / 0.756 (tests/test_workload_presets.py re-derives them;
# a log-normal cannot also match the prompts' median of 35). Alpaca's sigma is assumed (its lengths are not in the
# artifact's stored tree), as is the rest: their means are matched before clamping.
WORKLOADS = {
    "sharegpt": Workload("sharegpt", LogNormal(57.7, 1.497, 1, 2047), LogNormal(255.3, 0.756, 1, 2047),
                         "PagedAttention paper (Kwon et al., SOSP 2023) §6.1/Fig. 11 and its artifact's ShareGPT "
                         "lengths: means 161.18 in / 338.00 out, cv^2 3.447 / 0.705 (log-normal, clamped to 2,047)"),
    "alpaca": Workload("alpaca", LogNormal.with_mean(19.31, 0.6, 1, 2047), LogNormal.with_mean(58.45, 0.8, 1, 2047),
                       "PagedAttention paper §6.1/Fig. 11: Alpaca means 19.31 in / 58.45 out; sigma assumed"),
    # The three below are illustrative assumptions, not fitted to any published trace: replay a
    # real trace (--trace, e.g. the Azure LLM inference trace) for figures about real traffic.
    "chat": Workload("chat", LogNormal(1024, 0.9, 16, 32768), LogNormal(256, 0.8, 1, 4096),
                     "assumed: multi-turn chat, median 1,024 in / 256 out, 4 shared system prompts of 512 tokens",
                     system_prompts=4, system_tokens=512),
    "rag": Workload("rag", LogNormal(6144, 0.4, 2048, 32768), LogNormal(192, 0.6, 1, 2048),
                    "assumed: a 1,024-token system prompt, one of 200 documents of 2,048 tokens (Zipf 1.1), "
                    "median 6,144 in / 192 out", system_prompts=1, system_tokens=1024, documents=200,
                    document_tokens=2048, zipf=1.1),
    "code": Workload("code", LogNormal(2048, 0.8, 64, 32768), LogNormal(48, 1.0, 1, 2048),
                     "assumed: completion-style code traffic, long prompts and short outputs, median 2,048 in / 48 "
                     "out, 2 shared system prompts of 256 tokens", system_prompts=2, system_tokens=256),
}


def find_workload(name: str) -> Workload:
    w = WORKLOADS.get(name.strip().lower())
    if w is None:
        raise KvplanError(f"unknown workload {name!r}; built-in: {', '.join(WORKLOADS)} (or {arg('trace')} FILE)",
                          EXIT_USAGE, param="workload", value=name, allowed=tuple(WORKLOADS))
    return w


def _zipf_table(n: int, s: float) -> list[float]:
    weights = [1.0 / (k ** s) for k in range(1, n + 1)]
    total, acc, out = sum(weights), 0.0, []
    for w in weights:
        acc += w / total
        out.append(acc)
    out[-1] = 1.0
    return out


def generate(workload: Workload, qps: float, duration: float, seed: int = 0,
             max_requests: int = MAX_REQUESTS) -> list[SimRequest]:
    """Poisson arrivals at `qps` over [0, duration), lengths drawn from the workload; seeded."""
    if not (qps > 0 and math.isfinite(qps)):
        raise KvplanError(f"{arg('qps')} must be a positive number, got {qps:g}", EXIT_USAGE, param="qps", value=qps)
    if not (duration > 0 and math.isfinite(duration)):
        raise KvplanError(f"{arg('duration')} must be a positive number of seconds, got {duration:g}", EXIT_USAGE,
                          param="duration", value=duration)
    if qps * duration > max_requests:
        raise KvplanError(f"{arg('qps')} × {arg('duration')} asks for about {qps * duration:,.0f} requests; the limit "
                          f"is {max_requests:,}", EXIT_USAGE, param="duration", value=duration)
    rng = random.Random(seed)
    zipf = _zipf_table(workload.documents, workload.zipf) if workload.documents else None
    out, t = [], 0.0
    while True:
        t += rng.expovariate(qps)
        if t >= duration:
            break
        prompt = workload.prompt.draw(rng)
        output = workload.output.draw(rng)
        segments = []
        if workload.system_prompts:
            segments.append((f"sys{rng.randrange(workload.system_prompts)}", workload.system_tokens))
        if zipf is not None:
            doc = bisect.bisect_left(zipf, rng.random())
            segments.append((f"{segments[-1][0] if segments else ''}/doc{doc}", workload.document_tokens))
        shared = sum(n for _, n in segments)
        prompt = max(prompt, shared + 1)  # the prefix is part of the prompt, and one token is always new
        out.append(SimRequest(len(out), t, prompt, output, tuple(segments)))
    return out
