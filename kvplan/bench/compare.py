"""Measured beside predicted: the error of each figure, and the efficiency each roofline term implies.

Pure arithmetic on a `BenchRun`, the simulator's summary of the same load and the simulator's view of
the deployment (`SimModel`: bytes and FLOPs per rank, per stage) with the GPU profile's datasheet
figures. Error is (kvplan - measured) / measured; kvplan is *optimistic* where it predicts a shorter
time or a higher throughput than was measured (the side that sizes too few GPUs).

Efficiencies (per GPU, one tensor-parallel rank, every stage of the step added up):
* decode bandwidth = bytes one decode step reads / measured TPOT (or 1 / tg t/s; or, where the file prints
  no TPOT, (mean E2E - mean TTFT) / (output tokens - 1)), where the step reads
  the weights (routed experts: the share a batch touches under uniform routing, 1 - (1 - k/E)^B, as the
  simulator's step model) and the KV of B sequences at the mean decode context; B is the run's
  concurrency, or, open loop, Little's law on the measured figures (request rate x decode time);
* prefill FLOP/s = the FLOPs of one prompt (2 x active parameters per token plus 4 x heads x head dim
  per query-key pair, causal: n(n+1)/2 pairs; an MLA layer's at its prefill width, the cached depth decompressed) /
  measured median TTFT (or n / pp t/s). TTFT also holds queueing and the engine's per-request work, so this is a floor
  on the prefill's own efficiency.
Beside the datasheet, the decode bandwidth has the profile's measured one where it gives it
(`achieved_bandwidth_bytes_per_s`, a published bandwidth-bound benchmark on that part; None elsewhere), and the
prefill FLOP/s the matmul rate the speed terms read where the profile measured one (`achieved_dense_flops`, a
published matmul benchmark; kvplan.speed.compute_dtype.read_flops: fp8 at the bf16 share where only bf16 was measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.bench.result import BenchRun, Stat
from kvplan.planning.plan import expected_experts_touched
from kvplan.speed.compute_dtype import read_flops
from kvplan.speed.terms import gemm_rate, prefill_width

_HIGHER_IS_BETTER = ("output_throughput", "total_throughput", "request_throughput", "per_user_output_throughput",
                     "pp_tok_s", "tg_tok_s")


@dataclass(frozen=True)
class Row:
    metric: str
    stat: str
    measured: float
    predicted: float | None
    error_pct: float | None  # (predicted - measured) / measured x 100
    optimistic: bool | None


def predicted_metrics(summary: dict, replicas: int = 1) -> dict:
    """The simulator's summary as metrics (seconds, tokens/s; throughputs for `replicas` equal replicas)."""
    lat = summary["latency_s"]
    out = {}
    for name, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e")):
        d = lat[key]
        if d["mean"] is not None:
            out[name] = Stat(d["mean"], d["p50"], d["p99"])
    th = summary["throughput"]
    for name, key in (("output_throughput", "output_tokens_per_s"), ("total_throughput", "total_tokens_per_s"),
                      ("request_throughput", "requests_per_s")):
        out[name] = Stat(mean=th[key] * replicas)
    if "tpot" in out and out["tpot"].mean:
        out["per_user_output_throughput"] = Stat(mean=1.0 / out["tpot"].mean)
    return out


def rows(measured: dict, predicted: dict) -> list[Row]:
    out = []
    for name, stat in measured.items():
        pred = predicted.get(name)
        for which, value in stat.items():
            p = getattr(pred, which, None) if pred is not None else None
            err = None if p is None or not value else 100.0 * (p - value) / value
            better = None if err is None else (err > 0 if name in _HIGHER_IS_BETTER else err < 0)
            out.append(Row(name, which, value, p, err, better))
    return out


def decode_batch(run: BenchRun, replicas: int = 1) -> float:
    """Sequences a decode step of one replica held, from the measured figures: the concurrency (closed loop),
    else Little's law (requests/s x seconds each spends decoding), else 1; shared by `replicas` alike."""
    s, m = run.settings, run.metrics
    if s.concurrency:
        b = float(s.concurrency)
    else:
        rate, tpot = m.get("request_throughput"), m.get("tpot") or m.get("itl")
        b = rate.mean * (s.osl or 0) * tpot.mean if rate and tpot and rate.mean and tpot.mean else 1.0
    return max(1.0, min(b, float(s.num_prompts or b)) / max(1, replicas))


def step_read_bytes(sim, batch: float, context: float) -> float:
    """Bytes one decode step of `batch` sequences at mean `context` reads on one rank, all stages."""
    total = 0.0
    for st in sim.stages:
        total += st.dense_read_bytes + st.kv_bytes_per_token * batch * context
        total += sum(bpt * batch * min(context, w) for bpt, w in st.kv_window_bytes)
        if st.expert_bytes and st.num_experts:
            total += st.expert_bytes * expected_experts_touched(st.num_experts, st.top_k, batch) / st.num_experts
    return total


def prefill_flops(sim, n: int, depth: int = 0) -> float:
    """FLOPs of one prompt of `n` new tokens after `depth` cached ones, on one rank, all stages (causal pairs; the LM
    head's for its one sampled position)."""
    pairs = n * depth + n * (n + 1) / 2
    return sum(st.flops_per_token * n + st.head_flops + st.decompress_flops * depth + pairs * prefill_width(st)
               for st in sim.stages)


def _tpot_from_e2e(run: BenchRun) -> float | None:
    """A mean TPOT the file implies when it prints none: (mean E2E latency - mean TTFT) / (output tokens - 1)."""
    e2e, ttft, osl = run.metrics.get("e2el"), run.metrics.get("ttft"), run.settings.osl
    if not (e2e and ttft and e2e.mean and ttft.mean is not None and osl and osl > 1 and e2e.mean > ttft.mean):
        return None
    return (e2e.mean - ttft.mean) / (osl - 1)


def efficiencies(run: BenchRun, sim, gpu, weight_dtype: str | None, replicas: int = 1) -> list[tuple]:
    """[(term, achieved, datasheet, benchmark, unit)]: decode bandwidth and prefill FLOP/s the measured figures
    imply; `benchmark` is the profile's measured figure for that term (None where it has none)."""
    s, m, out = run.settings, run.metrics, []
    tpot = m.get("tpot") or m.get("itl")
    step_s = (1.0 / m["tg_tok_s"].mean) if "tg_tok_s" in m and m["tg_tok_s"].mean else \
        (tpot.median or tpot.mean if tpot else _tpot_from_e2e(run))
    if step_s and (s.osl or s.isl is not None or s.depth):
        b = 1.0 if "tg_tok_s" in m else decode_batch(run, replicas)
        ctx = s.depth + (s.isl or 0) + (s.osl or 0) / 2
        out.append(("decode bandwidth", step_read_bytes(sim, b, ctx) / step_s, gpu.bandwidth_bytes_per_s,
                    gpu.achieved_bandwidth_bytes_per_s, "B/s"))
    ttft = m.get("ttft")
    prefill_s = (s.isl / m["pp_tok_s"].mean) if "pp_tok_s" in m and m["pp_tok_s"].mean and s.isl else \
        ((ttft.median or ttft.mean) if ttft else None)
    peak, key = gemm_rate(gpu, weight_dtype)  # the datasheet's rate at the precision the step model prices GEMMs at
    if prefill_s and s.isl and peak:
        measured = read_flops(gpu, key) if gpu.achieved_dense_flops else None
        out.append((f"prefill FLOP/s ({key} peak)", prefill_flops(sim, s.isl, s.depth) / prefill_s, peak, measured,
                    "FLOP/s"))
    return [e for e in out if math.isfinite(e[1])]
