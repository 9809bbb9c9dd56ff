"""A speed-corpus point's figures and lengths (kvplan.speed.corpus reads a point through them).

Figures: each metric in seconds or tokens/s, the mean where stated, else the median or the one value (`targets`),
a run's mean ITL compared as its TPOT where it printed both and the ITL is not the longer; a TPOT figure that is only
a median gap flagged (`median_gap`), a TTFT or E2E figure that is only a median named (`medians`). Lengths: a side's
tokens a request from the fixed length, a drawn distribution's totals or mean, a random range's mean, or the
throughput ratio (`length_of`); whether outputs are drawn (`drawn_lengths`), their spread (`output_cv2`), and the mean
a run generated where its requests stopped short of the stated osl (`generated`).
"""

from __future__ import annotations

from kvplan.speed.spread import SHAREGPT_OUTPUT_CV2, random_range_cv2

def _stat(v):
    if isinstance(v, dict):
        for k in ("mean", "value", "median"):
            if v.get(k) is not None:
                return float(v[k])
        return None
    return None if v is None else float(v)


# kvplan's TPOT is a run's decode time over its decode tokens, (E2E - TTFT) / (osl - 1) at the means
# (kvplan.speed.load): the mean gap between tokens over every token, the benchmark's mean ITL. The mean TPOT a
# benchmark prints is another average, of each request's own (latency - ttft) / (output_len - 1)
# (vllm-project/vllm@0049e29c41fd383bda519a3f250e3227713081ef:benchmarks/benchmark_serving.py, calculate_metrics:
# mean_tpot_ms over `tpots`, one per request; mean_itl_ms over `itls`, every gap pooled; SGLang's bench_serving
# likewise): where output lengths vary (ShareGPT, random lengths with a range ratio) it weighs a request of two
# tokens, whose one gap waits behind other requests' prefills, as much as one of 2,000 (GPUStack's ShareGPT runs:
# mean TPOT 1.2-3.4x the mean ITL). So where a run printed both means, the mean ITL is the figure compared, unless
# it is the longer of the two: the client's chunks then carried several tokens (speculative decoding, a stream
# interval) and a gap is a chunk's, not a token's; the mean TPOT stays there.


def _mean(metrics: dict, name: str) -> float | None:
    """The stated mean of `name` (ttft, tpot, itl, e2el) in seconds, or None."""
    for unit, div in (("ms", 1e3), ("ns", 1e9)):
        v = metrics.get(f"{name}_{unit}")
        if isinstance(v, dict) and v.get("mean") is not None and float(v["mean"]) > 0:
            return float(v["mean"]) / div
    return None


def targets(metrics: dict, gpus: int) -> dict:
    out = {}
    for name in ("ttft", "tpot", "e2el", "itl"):
        for unit, div in (("ms", 1e3), ("ns", 1e9)):
            v = _stat(metrics.get(f"{name}_{unit}"))
            if v is not None and v > 0:
                out[name] = v / div
    if "tpot" not in out and "itl" in out:
        out["tpot"] = out["itl"]
    itl, tpot = _mean(metrics, "itl"), _mean(metrics, "tpot")
    if itl and tpot and itl <= tpot:  # the per-token mean kvplan's TPOT is (above)
        out["tpot"] = itl
    out.pop("itl", None)
    if "tpot" not in out and metrics.get("per_user_output_throughput"):
        out["tpot"] = 1.0 / float(metrics["per_user_output_throughput"])
    for name in ("output_throughput", "request_throughput", "total_throughput", "pp_tok_s", "tg_tok_s"):
        v = _stat(metrics.get(name))
        if v:
            out[name] = v
    if "output_throughput" not in out and metrics.get("per_gpu_output_throughput"):
        out["output_throughput"] = float(metrics["per_gpu_output_throughput"]) * gpus
    return out


def median_gap(metrics: dict) -> bool:
    """Whether a point's TPOT figure (targets) is the median gap between tokens: no TPOT stated, and its ITL only as
    a median (the JSONL lines of sglang.bench_serving's late-2024 releases carry median_ttft_ms, median_itl_ms and
    mean_e2e_latency_ms, no mean ITL: the datacrunch-h200-sglang-outputs rows). The client pools every request's
    gaps and takes their median (sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:python/sglang/
    bench_serving.py, `calculate_metrics`: itls += outputs[i].itl, median_itl_ms = np.median(itls)), so a few long
    gaps (a prefill batch run between two decode steps) move it little: kvplan.speed.load prices it apart."""
    if any(metrics.get(f"tpot_{u}") is not None for u in ("ms", "ns")) or metrics.get("per_user_output_throughput"):
        return False
    for unit in ("ms", "ns"):
        v = metrics.get(f"itl_{unit}")
        if v is not None:
            return _median_only(v)
    return False


def _median_only(v) -> bool:
    """Whether a stated figure gives a median and neither a mean nor a value (`targets` then reads its median)."""
    return isinstance(v, dict) and v.get("mean") is None and v.get("value") is None and v.get("median") is not None


def medians(metrics: dict) -> frozenset:
    """The latency figures (ttft, e2el) `targets` reads as a median: stated with a median and neither a mean nor a
    value (InferenceX's rows, median TTFT and E2E; sglang.bench_serving's late-2024 JSONL, median_ttft_ms; a blog's
    p50), whose request kvplan.speed.stated prices from the load's schedule."""
    out = set()
    for name in ("ttft", "e2el"):
        for unit in ("ms", "ns"):
            if _median_only(metrics.get(f"{name}_{unit}")):
                out.add(name)
    return frozenset(out)


def length_of(p: dict, side: str, metrics: dict) -> float | None:
    """A point's mean tokens a request on `side` ("in" or "out"), or None where it cannot be told (module docstring;
    kvplan.speed.corpus's docstring gives the order)."""
    fixed = p.get("isl" if side == "in" else "osl")
    if fixed:
        return float(fixed)
    dist = p.get("input_dist" if side == "in" else "output_dist") or {}
    n = p.get("num_prompts")
    total = dist.get(f"total_{'input' if side == 'in' else 'output'}_tokens")
    if total and n:
        return float(total) / float(n)
    if dist.get("mean"):
        return float(dist["mean"])
    nominal = dist.get(f"random_{'input' if side == 'in' else 'output'}_len")
    if nominal and dist.get("range_ratio") is not None:
        return float(nominal) * (1 + float(dist["range_ratio"])) / 2
    rr, out_t, tot = (_stat(metrics.get(k)) for k in ("request_throughput", "output_throughput", "total_throughput"))
    if rr and out_t:
        if side == "out":
            return out_t / rr
        if tot:
            return (tot - out_t) / rr
    return None


def drawn_lengths(p: dict) -> bool:
    """Whether a point's output lengths differ request to request: no fixed osl, and not a random draw pinned by a
    range ratio of 1 (a dataset's own lengths; a random range, SGLang's bench_serving default 0.0 drawing
    uniformly up to the stated length)."""
    if p.get("osl"):
        return False
    ratio = (p.get("output_dist") or {}).get("range_ratio")
    return ratio is None or float(ratio) < 1


def output_cv2(p: dict, made: float | None = None) -> float:
    """The squared coefficient of variation of a point's output lengths (kvplan.speed.spread): 0 where they are
    all the same (drawn_lengths false); a random range's uniform draw as the engine's own client draws it (vLLM's
    vllm bench serve on [L (1 - r), L (1 + r)], its default ratio 0.0 where none is stated; otherwise
    sglang.bench_serving's on [r L, L], its default 0.0: spread.random_range_cv2); every corpus point with a random
    range names its engine's client; ShareGPT's cited SHAREGPT_OUTPUT_CV2 (`dataset` or the output_dist's kind names
    it); a dataset's cited spread where the point states it (output_dist `cv2`, its citation under `inferred`: MLPerf's
    DeepSeek-R1 set, whose reference outputs are the model's own). A run whose requests stopped at end of sequence
    (`made`, generated) and any other dataset have a spread no source gives: 0, priced as if every request had the
    mean's length (the running set unbiased)."""
    if made or not drawn_lengths(p):
        return 0.0
    dist = p.get("output_dist") or {}
    if dist.get("cv2") is not None:
        return max(0.0, float(dist["cv2"]))
    kind = f"{dist.get('kind') or ''} {p.get('dataset') or ''}".lower()
    if dist.get("random_output_len") or dist.get("range_ratio") is not None or kind.split() == ["random", "random"]:
        return random_range_cv2(p.get("engine"), dist.get("range_ratio"))
    if "sharegpt" in kind:
        return SHAREGPT_OUTPUT_CV2
    return 0.0


SHORT = 0.9  # a run's outputs stopped early: fewer than this share of the stated osl generated on average
RATE_FLOOR = 0.1  # requests/s: below it a request rate printed to 0.01 cannot tell 10% apart


def generated(p: dict, metrics: dict) -> float | None:
    """The output tokens a run generated per request, where its figures show fewer than the stated `osl`: a
    stated output length is the most a request may generate (`vllm bench serve` sends it as max_tokens and,
    without --ignore-eos, a request stops at the model's end of sequence), so the block's output tokens/s over
    its requests/s, below SHORT x osl, is what ran (gpt-oss on random prompts: 105 of 200). None where the
    point states no osl, no such pair of figures, a request rate too coarse to tell (RATE_FLOOR), or no shortfall."""
    osl = p.get("osl")
    rr, out_t = (_stat(metrics.get(k)) for k in ("request_throughput", "output_throughput"))
    if not osl or not rr or not out_t or rr < RATE_FLOOR:
        return None
    made = out_t / rr
    return made if made < SHORT * float(osl) else None
