"""How far a benchmark's output lengths spread, request to request: their squared coefficient of variation cv^2.

A running batch holds requests in proportion to how long they stay, and a request stays about as many steps as
it generates, so where output lengths o are drawn per request the running set is length-biased: its requests'
mean output is E[o^2] / E[o] = o (1 + cv^2), not o (kvplan.engines.scheduler.resident_context prices what that
does to an engine's KV-bound running cap; kvplan.speed.bench_load.decode_context to the context a decode step reads).
cv^2 = Var[o] / E[o]^2 is 0 where every request has the same length. Only a spread the tool's own sampling gives
(a random range) or a cited figure (a dataset) is used; none is fitted on the corpus.
"""

from __future__ import annotations

# vllm bench serve's ShareGPT sampling: each conversation's first human turn as the prompt and its first gpt turn's
# tokens as the output length, pairs with prompt or output under 4 tokens, a prompt over 1,024 or both over 2,048
# dropped (vllm-project/vllm@0056b87fc1fda2642f39dda4392824c425dd1638:vllm/benchmarks/dataset_utils.py,
# is_valid_sequence; sglang.bench_serving's sample_sharegpt_requests takes the same first-turn pairs under a like
# filter). The PagedAttention authors' artifact publishes the first-turn (prompt, output) token lengths of ShareGPT,
# 84,226 pairs under OPT's tokenizer (sosp-ae-39/sosp-ae-astra@3180d2f8c2a2aa1729245f9b0cb75a854746e6a8:
# datasets/sharegpt_opt_text_completion_length.pkl, a pickled list of length pairs, read without executing it);
# under vLLM's filter 74,704 remain, outputs of mean 348.4 tokens, standard deviation 284.4 (median 280, 90th
# percentile 764): cv^2 = (284.4 / 348.4)^2 = 0.666. A ratio of lengths, it holds under another tokenizer as far as
# token counts scale alike; a run that stops at end of sequence before the dataset's length (vllm bench serve without
# --ignore-eos) draws from a narrower law that no source gives. (Unfiltered: 1.02; under the paper's own filter,
# prompt + output < 2,048, 0.705: kvplan.simulator.workload's "sharegpt" preset takes that one.)
SHAREGPT_OUTPUT_CV2 = 0.666
# vllm bench serve's --random-range-ratio where a run passes none (vllm/benchmarks/datasets.py, RandomDataset's
# DEFAULT_RANGE_RATIO 0.0: every request the stated lengths)
VLLM_RANGE_RATIO = 0.0
# sglang.bench_serving's --random-range-ratio where a run passes none (its `random` lengths then uniform up to the
# stated length; kvplan.speed.corpus reads the mean the same way)
SGLANG_RANGE_RATIO = 0.0


def symmetric_cv2(range_ratio: float) -> float:
    """cv^2 of lengths uniform on [L (1 - r), L (1 + r)] (vllm bench serve's random dataset, range ratio r, default
    0.0: every request L): variance (2 r L)^2 / 12 over the squared mean L^2 = r^2 / 3; 0.0075 at r = 0.15."""
    r = min(1.0, max(0.0, float(range_ratio)))
    return r * r / 3


def uniform_cv2(range_ratio: float) -> float:
    """cv^2 of lengths uniform on [r L, L] (sglang.bench_serving's random dataset, range ratio r): variance
    (1 - r)^2 L^2 / 12 over the squared mean (1 + r)^2 L^2 / 4 = (1 - r)^2 / (3 (1 + r)^2); 1/3 at r = 0, 0 at 1.
    (vllm bench serve's random dataset draws on [L (1 - r), L (1 + r)] instead: symmetric_cv2.)"""
    r = min(1.0, max(0.0, float(range_ratio)))
    return (1 - r) ** 2 / (3 * (1 + r) ** 2)


def length_biased(mean: float, cv2: float) -> float:
    """The mean output of a running request where outputs of `mean` tokens and squared coefficient of variation
    `cv2` are drawn per request: E[o^2] / E[o] = mean x (1 + cv2)."""
    return mean * (1 + max(0.0, cv2))


# How each engine's own benchmark client draws a random range (the client the corpus's random-range points ran):
# (cv^2 of its draw, its default ratio); an engine not named draws as sglang.bench_serving does
CLIENT_RANGE = {"vllm": (symmetric_cv2, VLLM_RANGE_RATIO)}


def random_range_cv2(engine: str | None, range_ratio: float | None) -> float:
    """cv^2 of a random range of ratio `range_ratio` (None: the client's default) as `engine`'s own client draws it."""
    form, default = CLIENT_RANGE.get(engine or "", (uniform_cv2, SGLANG_RANGE_RATIO))
    return form(default if range_ratio is None else float(range_ratio))
