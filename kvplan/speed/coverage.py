"""What a calibrated figure can be trusted for: its held-out error band, and whether the corpus covers
the setting (the engine, the GPU, the model family) or the figure is an extrapolation.

The corpus's coverage (GPU keys, model families and engines of the training cases) ships in
coefficients.json beside the coefficients (kvplan.bench.ship).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.releases import release_of
from kvplan.speed.eras import engine_of, padded
from kvplan.speed.ggml import paths as ggml_paths
from kvplan.speed.model import FALLBACK_ENGINE, band, covered, engine_key, gemm_kernels, shipped
from kvplan.speed.compute_dtype import read_flops
from kvplan.speed.allreduce import host_pcie, link
from kvplan.speed.terms import FP4_NAMES, FP8_NAMES, gemm_rate

SPEEDS = ("calibrated", "roofline")


def check_speed(speed: str) -> None:
    """calibrated or roofline, else a one-line error naming the input."""
    if speed not in SPEEDS:
        raise KvplanError(f"{arg('speed')} must be calibrated or roofline, got {speed!r}", EXIT_USAGE, param="speed",
                          value=speed, allowed=SPEEDS)


def band_text(engine: str | None, metric: str = "tpot") -> str:
    """"held-out TPOT median error 50%, 20% within 20%" or "" where the file has none."""
    b = band(engine if covered(engine) else FALLBACK_ENGINE, metric)
    if not b or not b.get("n"):
        return ""
    name = {"tpot": "TPOT", "ttft": "TTFT", "e2el": "end-to-end",
            "output_throughput": "output tok/s"}.get(metric, metric)
    return (f"held-out {name} median error {100 * b['median_abs']:.0f}%, {100 * b['within_20']:.0f}% of "
            f"{b['n']} points within 20%")


def unmeasured(engine: str | None) -> str:
    """A line where the coefficient set the figure comes from has no held-out figure at all (its error is not
    measured: no held-out source of that era or backend), else "": a set every source of which falls on the
    training side of the split (TensorRT-LLM before 1.0 until its 0.14 perf overview came in, held out)."""
    key = engine if covered(engine) else FALLBACK_ENGINE
    metrics = ("tpot", "ttft", "e2el", "output_throughput", "pp_tok_s", "tg_tok_s")
    if any((band(key, m) or {}).get("n") for m in metrics):
        return ""
    return f"no held-out source prices {engine_key(key)}'s coefficients: their error is unmeasured"


def outside(engine: str | None, gpu_key: str, family: str, version: str | None = None) -> list[str]:
    """What of this setting the corpus's training sources (what the coefficients were fitted on) do not cover
    (empty: engine, GPU, family and release all in them);
    `version`: the engine release asked (None: not said, the current era)."""
    cov = shipped().get("coverage", {})
    out = []
    name = engine_of(engine_key(engine))
    span = cov.get("releases", {}).get(name) if covered(engine) else None
    rel = release_of(version)
    if span and rel is not None:
        if padded(rel) > padded(release_of(span[1])):
            out.append(f"{name} {version} is newer than the newest release in the speed corpus ({span[1]}): "
                       f"{engine_key(engine)}'s coefficients, extrapolated")
        elif padded(rel) < padded(release_of(span[0])):
            out.append(f"{name} {version} is older than the oldest release in the speed corpus ({span[0]}): "
                       f"{engine_key(engine)}'s coefficients, extrapolated")
    if not covered(engine):
        out.append(f"engine {engine or 'kvplan'} is not among the speed corpus's training sources: "
                   f"{FALLBACK_ENGINE}'s coefficients")
    elif not shipped()["engines"][engine_key(engine)].get("served", True):
        out.append(f"{engine_key(engine)}'s coefficients come from llama-bench runs only (one sequence at a time): "
                   "a batched step or a queue of requests is an extrapolation")
    if cov and gpu_key not in cov.get("gpus", ()):
        out.append(f"GPU {gpu_key} is not among the speed corpus's training sources")
    # the families the corpus trained on are data (coefficients.json), no model type is named here
    if cov and family and not set(cov.get("families", ())).issuperset((family,)):
        out.append(f"model family {family} is not among the speed corpus's training sources")
    return out


def unrated(engine: str | None, gpu, weight_dtype: str | None) -> list[str]:
    """What of a step the profile cannot price: under llama.cpp, a GEMM path whose rate the profile does not give
    (kvplan.speed.ggml), which the calibrated figure prices at zero, so its prefill is optimistic (empty otherwise)."""
    if gpu is None or gemm_kernels(engine) != "ggml":
        return []
    _, missing = ggml_paths(gpu, weight_dtype, 1.0, lambda p: read_flops(gpu, p))
    if not missing:
        return []
    return [f"GPU {gpu.key}'s profile gives no {missing} rate, which llama.cpp's prefill GEMM runs at: that term is "
            "priced at zero, so a prefill is faster here than it will be"]


def rate_gaps(gpus, weight_dtype: str | None = None, priced: bool = False) -> list[str]:
    """One line for each of `gpus` whose profile lacks a matmul rate a figure needs (kvplan.speed.terms.gemm_rate):
    no bf16 (or fp16) rate, so the GEMM and attention FLOPs terms cost no time and a prefill, a TTFT or a
    compute-bound step is a lower bound; or, with fp8/fp4 `weight_dtype`, no rate for the low precision its tensor
    math runs, so those GEMMs are priced at the next rate it gives (fp8's for fp4, bf16's for fp8). Said, not hidden
    (a profile of the user's own with `dense_flops` prices them). `priced`: the caller prints compute_line beside
    these lines, which names a measured 16-bit rate standing in for the datasheet's itself (not said twice)."""
    lines = []
    for g in gpus:
        flops = g.dense_flops
        measured = 0.0 if flops.get("bf16") or flops.get("fp16") else read_flops(g, "bf16")  # no datasheet 16-bit
        if measured and not priced:
            lines.append(f"GPU {g.key}'s profile states no datasheet bf16 or fp16 rate: its 16-bit GEMMs and "
                         f"attention run at the measured {measured / 1e12:,.1f} TFLOP/s (achieved_dense_flops), a "
                         "benchmark's figure, not a peak; the roofline prices them at zero, a lower bound")
        elif not (measured or flops.get("bf16") or flops.get("fp16")):
            lines.append(f"GPU {g.key}'s profile states no bf16 or fp16 matmul rate (dense_flops): prefill GEMMs and "
                         "attention cost no time on it, so its TTFT and prefill figures are lower bounds (give the "
                         f"rate in a profile of your own, {arg('hw_profiles')})")
            continue
        _, precision = gemm_rate(g, weight_dtype)
        w = str(weight_dtype or "").lower()
        wanted = "fp4" if w in FP4_NAMES and g.fp4 else "fp8" if w in FP4_NAMES + FP8_NAMES and g.fp8 else None
        if wanted and precision != wanted:
            lines.append(f"GPU {g.key}'s profile states no {wanted} matmul rate (dense_flops), though it has {wanted} "
                         f"tensor math: {weight_dtype} GEMMs are priced at its {precision} rate, slower than its "
                         f"{wanted} kernels may run (give the rate in a profile of your own, {arg('hw_profiles')})")
    return lines


def link_gaps(gpus, ranks: int) -> list[str]:
    """One line for each of `gpus` whose profile states no bandwidth for its scale-up link where a step's collectives
    span `ranks` > 1 of them (tensor or expert parallel): kvplan.speed.allreduce.link prices them over the host's PCIe
    then, which the line says with the rate it took (empty at one rank, or where the link's bandwidth is stated)."""
    if ranks <= 1:
        return []
    return [f"GPU {g.key}'s profile states no link bandwidth (interconnect.per_dir_bytes_per_s): the collectives among "
            f"{ranks} of them are priced over the host's PCIe Gen{host_pcie(g)[0]} x{host_pcie(g)[1]}, "
            f"{link(g, ranks)[0] / 1e9:.1f} GB/s a direction (give the rate in a profile of your own, "
            f"{arg('hw_profiles')})" for g in gpus if not g.interconnect_bytes_per_s]


def label(engine: str | None, speed: str = "calibrated") -> str:
    """How step times were made, in a few words."""
    if speed != "calibrated":
        return "roofline (a lower bound)"
    key = engine_key(engine) if covered(engine) else FALLBACK_ENGINE
    return f"calibrated ({key} coefficients, fit {shipped().get('fit_date', '?')})"
