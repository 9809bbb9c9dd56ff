"""One validation run: build the (reduced) model, predict with the planner, decode, measure, compare.

Order of events, so each figure means one thing:
  1. predict with the planner's own functions (kv_profile(...).sequence_bytes(ctx, paged=False)
     for the unpaged static cache; weight_bytes for weights; activation_estimate for the peak);
  2. refuse the run when weights + cache + activations (+ a margin) exceed the device's memory
     available, so a huge --ctx or --hidden is a one-line error, not an allocator crash;
  3. build the decoder (weights) and allocate its cache; measure both by their storages;
  4. under an allocation tracker, prefill ctx - steps prompt tokens and decode `steps` tokens
     greedily, so the cache ends holding exactly ctx tokens; peak = weights + cache + the
     tracker's peak of everything else;
  5. outside the tracker, recompute the whole sequence without cache and check that its greedy
     tokens equal the cached decode's.
"""

from __future__ import annotations

import dataclasses

import os
import platform
import time
from dataclasses import dataclass, field, replace

import torch

from kvplan import __version__
from kvplan.core.dtypes import DType, canonical_kv_dtype
from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.core.meminfo import mem_available
from kvplan.core.units import human_bytes
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import weight_bytes
from kvplan.planning.plan import activation_estimate
from kvplan.planning.profile import kv_profile
from kvplan.validate.blueprint import SMALL, Blueprint, Widths, blueprint, built_spec
from kvplan.validate.compare import (
    KV_TOLERANCE, PEAK_TOLERANCE, PLANNER_WEIGHTS_TOLERANCE, WEIGHTS_TOLERANCE, Check, all_ok,
)
from kvplan.validate.decoder import Decoder
from kvplan.validate.measure import storage_bytes, tracker_for

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
if hasattr(torch, "float8_e4m3fn"):
    TORCH_DTYPES["fp8"] = torch.float8_e4m3fn  # e4m3, as vLLM's fp8 / fp8_e4m3 cache


@dataclass(frozen=True)
class Settings:
    batch: int = 1
    ctx: int = 256  # tokens each sequence holds at the end (prompt + decoded)
    steps: int = 8  # decode steps after the prefill
    layers: int | None = None  # first n layers; None: all
    kv_dtype: str = "auto"
    state_dtype: str = "auto"
    compute_dtype: str | None = None  # None: fp32 on CPU, the model's dtype on CUDA
    device: str = "cpu"
    seed: int = 0
    widths: Widths = field(default_factory=Widths)


def torch_dtype(dt: DType, what: str) -> torch.dtype:
    """The torch dtype of `dt`, or a usage error blaming the input `what` (a keyword: kvplan.core.errors.arg)."""
    if dt.name not in TORCH_DTYPES:
        raise KvplanError(f"{arg(what)} {dt.name} has no torch dtype here; validate supports "
                          f"{', '.join(TORCH_DTYPES)}", EXIT_USAGE, param=what, value=dt.name,
                          allowed=tuple(TORCH_DTYPES))
    return TORCH_DTYPES[dt.name]


def option_dtype(name: str, model_dtype: str, option: str) -> DType:
    """A cache or state dtype option's value, with an error that names the option and what
    validate can build (canonical_kv_dtype's own error speaks of "KV cache dtype" only)."""
    try:
        dt = canonical_kv_dtype(name, model_dtype)
    except KvplanError:
        what = "unknown KV cache dtype" if option == "kv_dtype" else "unknown dtype"
        raise KvplanError(f"{arg(option)} {name!r}: {what}; validate supports auto (the model's, {model_dtype}), "
                          f"{', '.join(TORCH_DTYPES)}", EXIT_USAGE, param=option, value=name) from None
    torch_dtype(dt, option)
    return dt


# What a run holds beyond the predicted weights, cache and activations: torch's own allocations and
# the temporaries of one eager step. A guard against certain failure, not a prediction.
RUNTIME_MARGIN = 256 * 2**20


def available_bytes(dev: torch.device) -> int | None:
    """Memory this run can still take: CUDA's free memory, or the kernel's MemAvailable (physical
    memory when /proc is absent). None when neither can be read."""
    if dev.type == "cuda":
        return torch.cuda.mem_get_info(dev)[0]
    available = mem_available()
    if available is not None:
        return available
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(dev: torch.device, parts: dict[str, int]) -> None:
    """Refuse, before building anything, a run whose predicted bytes exceed what the device has."""
    available = available_bytes(dev)
    need = sum(parts.values()) + RUNTIME_MARGIN
    if available is None or need <= available:
        return
    detail = " + ".join(f"{name} {human_bytes(b)}" for name, b in parts.items() if b)
    raise KvplanError(f"this run needs about {human_bytes(need)} ({detail} + {human_bytes(RUNTIME_MARGIN)} margin) "
                      f"but {dev} has {human_bytes(available)} available; use fewer {arg('layers')}, {arg('shrink')} "
                      f"(and a small {arg('hidden')}), or a smaller {arg('context')} / {arg('batch')}", EXIT_USAGE)


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failure from torch (CPU or CUDA) or Python, as opposed to a bug."""
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and "allocate" in str(exc).lower()


def out_of_memory_error(exc: BaseException, device: str) -> KvplanError:
    """A one-line error for an allocation failure during a run (the first line of torch's message)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(first) > 200:
        first = first[:197] + "..."
    return KvplanError(f"ran out of memory on {device} during the run ({first}); use fewer {arg('layers')}, "
                       f"{arg('shrink')}, or a smaller {arg('context')} / {arg('batch')}", EXIT_ERROR)


def resolve_device(name: str) -> torch.device:
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise KvplanError(f"unknown device {name!r}; use cpu or cuda (cuda:N)", EXIT_USAGE) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KvplanError(f"{arg('device')} {name}: CUDA is not available (torch {torch.__version__})", EXIT_USAGE)
    if dev.type not in ("cpu", "cuda"):
        raise KvplanError(f"{arg('device')} {name}: only cpu and cuda are supported", EXIT_USAGE)
    return dev


def check_settings(spec: ModelSpec, s: Settings) -> None:
    if s.batch < 1:
        raise KvplanError(f"{arg('batch')} must be at least 1, got {s.batch}", EXIT_USAGE, param="batch", value=s.batch)
    if s.steps < 1:
        raise KvplanError(f"{arg('steps')} must be at least 1, got {s.steps}", EXIT_USAGE, param="steps", value=s.steps)
    if s.ctx <= s.steps:
        raise KvplanError(f"{arg('context')} ({s.ctx}) must exceed {arg('steps')} ({s.steps}): the prompt needs a "
                          "token",
                          EXIT_USAGE, param="context", value=s.ctx)
    if s.layers is not None and not 0 < s.layers <= spec.num_layers:
        raise out_of_range("layers", s.layers, 1, spec.num_layers, thousands=False)


def device_info(dev: torch.device) -> dict:
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        return {"device": str(dev), "device_name": props.name, "device_memory_bytes": props.total_memory,
                "cuda_version": torch.version.cuda}
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), name)
    except OSError:
        pass
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return {"device": "cpu", "device_name": name, "device_memory_bytes": memory, "cuda_version": None}


@dataclass(frozen=True)
class Prediction:
    kv_bytes: int
    kv_bytes_paged: int  # what a paged engine (16-token pages) would hold for the same sequences
    weights_bytes: int  # the built model, priced by weight_bytes
    planner_weights_bytes: int  # the planner's own (reduced) spec, same dtype
    activation_bytes: int
    scores_bytes: int  # attention scores an eager (non-flash) prefill materialises, largest layer


def _scores_bytes(bp: Blueprint, s: Settings, prompt: int, itemsize: int, device: str = "cuda") -> int:
    """B x H x T x T x bytes for the widest attention layer: engines' flash kernels never hold this,
    an eager decoder does, so the peak prediction for this decoder adds it (twice: scores, softmax).

    MLA layers compute their scores with einsum, so they hold them everywhere. The other attention
    layers call F.scaled_dot_product_attention: on CPU its fused kernel takes the mask and GQA without
    a T x T buffer (measured, torch 2.13 CPU: gpt-oss-20b, 4 layers shrunk, batch 2, ctx 2,048 peaked
    at 0.38 GB beyond weights and cache where B x H x T x T x 4 x 2 is 4.26 GB; Llama-3.2-1B, 4 layers,
    batch 2, ctx 1k at 0.25 GB against 0.53 GB of scores), so on CPU they add none."""
    size = max(itemsize, 4)
    states = [lp.state.heads * lp.state.head_dim * lp.state.state for lp in bp.layers if lp.state]
    state_temps = 4 * s.batch * max(states) * size if states else 0  # an eager scan's copies of its state
    # Every eager attention layer also holds its query and RoPE's copies of it at the query width
    # (heads x head_dim, which --hidden does not shrink): q, its two rotated halves and the output,
    # 4 x B x T x H x D (measured: Qwen3-235B at hidden 128, 64 heads x 128, batch 2, 37 tokens peaked
    # at 9.8 MB, 4 x 2 x 37 x 8,192 x 4 B = 9.7 MB).
    widths = [bp.heads * lp.mixer.head_dim for lp in bp.layers
              if lp.mixer.kind in ("full", "sliding", "chunked") and getattr(lp.mixer, "head_dim", 0)]
    query = 4 * s.batch * prompt * max(widths) * max(itemsize, 2) if widths else 0
    kinds = ("mla",) if device == "cpu" else ("full", "sliding", "chunked", "mla")
    if not any(lp.mixer.kind in kinds for lp in bp.layers):
        return max(state_temps, query)
    return max(2 * s.batch * bp.heads * prompt * prompt * size, state_temps) + query


def predict(full: ModelSpec, reduced: ModelSpec, bp: Blueprint, s: Settings, kv: DType, state: DType,
            compute: str, prompt: int, device: str = "cuda") -> Prediction:
    """The planner's figures for the reduced model as built; no torch here."""
    # kvplan's decoder keeps the whole recurrent state in --state-dtype, as an engine does when that
    # flag is given: a config's own mamba_ssm_cache_dtype (kept in ssm_dtype) yields to it.
    layers = tuple(dataclasses.replace(x, ssm_dtype="") if getattr(x, "ssm_dtype", "") else x for x in reduced.layers)
    prof = kv_profile(layers, 1, kv, state, 16)
    built = built_spec(reduced, bp)
    act = activation_estimate(built, 1, tokens=s.batch * prompt, max_seqs=s.batch)
    return Prediction(
        kv_bytes=s.batch * prof.sequence_bytes(s.ctx, paged=False),
        kv_bytes_paged=s.batch * prof.sequence_bytes(s.ctx),
        weights_bytes=weight_bytes(built, compute).total,
        planner_weights_bytes=weight_bytes(reduced, compute).total,
        activation_bytes=act * TORCH_DTYPES[compute].itemsize // 2,  # the estimate is for 16-bit activations
        scores_bytes=_scores_bytes(bp, s, prompt, TORCH_DTYPES[compute].itemsize, device),
    )


CPU_FLOP_BUDGET = 2 * 10**11  # ~10 s of fp32 matmuls on a small CPU; a full-width build beyond it is shrunk
CPU_MEMORY_SHARE = 0.5  # ... and so is one whose weights, cache and activations take half the free memory


def cpu_shrink_reason(full: ModelSpec, n: int, s: Settings, kv: DType, compute: str) -> str | None:
    """Why a full-width CPU build of the first n layers is not worth running (None: run it as it is).

    Work: 2 FLOPs per weight per token through every linear layer, for the cached pass and the
    uncached recomputation (2 x batch x ctx tokens), plus the LM head over every recomputed token.
    Memory: the predicted weights + cache + activations against the free memory. Shrinking (the
    `--shrink` widths) never touches the cache geometry, so every cache check stays exact.
    """
    bp = blueprint(full, n, Widths())
    p = bp.param_counts()
    tokens = s.batch * s.ctx
    linear = p.attention + p.mlp + p.shared_experts + p.experts_active
    flops = 2 * linear * 2 * tokens + 2 * (p.lm_head or p.embedding) * tokens  # a tied head still computes
    if flops > CPU_FLOP_BUDGET:
        return f"the full-width build is {flops / 1e12:,.1f} TFLOP of work, minutes on a CPU"
    reduced = full if n == full.num_layers else full.with_layers(n)
    pred = predict(full, reduced, bp, s, kv, kv, compute, s.ctx - s.steps, "cpu")
    need = pred.weights_bytes + pred.kv_bytes + pred.activation_bytes
    available = available_bytes(torch.device("cpu"))
    if available is not None and need > CPU_MEMORY_SHARE * available:
        return f"the full-width build needs about {human_bytes(need)} of the {human_bytes(available)} free"
    return None


@dataclass(frozen=True)
class _Run:
    """One run's settings as resolved: the device, the (reduced) model, dtypes, the blueprint it
    builds and the planner's prediction for it."""

    s: Settings  # with the automatic CPU shrink applied
    dev: torch.device
    n: int  # layers built
    kv: DType
    state: DType
    compute: str
    auto: str | None  # why the build was shrunk automatically on CPU
    bp: Blueprint
    prompt: int
    pred: Prediction


def _prepare(full: ModelSpec, s: Settings) -> _Run:
    """Every setting checked and the prediction made, before torch builds anything; a run that
    would not fit the device's memory is refused here."""
    check_settings(full, s)
    dev = resolve_device(s.device)
    n = s.layers or full.num_layers
    reduced = full if n == full.num_layers else full.with_layers(n)
    kv = option_dtype(s.kv_dtype, full.dtype, "kv_dtype")
    state = option_dtype(s.state_dtype, full.dtype, "state_dtype")
    compute = s.compute_dtype or ("fp32" if dev.type == "cpu" else full.dtype)
    for dt, name in ((kv, "kv_dtype"), (state, "state_dtype"), (canonical_kv_dtype(compute), "dtype")):
        torch_dtype(dt, name)  # each has a torch dtype here, or a one-line error now
    if compute == "fp8":
        raise KvplanError(f"{arg('dtype')} fp8: compute in fp32, bf16 or fp16 (fp8 is a cache dtype here)", EXIT_USAGE)
    auto = cpu_shrink_reason(full, n, s, kv, compute) if dev.type == "cpu" and not s.widths.changed() else None
    if auto:
        s = replace(s, widths=SMALL)
    bp = blueprint(full, n, s.widths)
    prompt = s.ctx - s.steps
    pred = predict(full, reduced, bp, s, kv, state, compute, prompt, dev.type)
    # The eager attention scores (pred.scores_bytes) are left out: torch's CPU and CUDA kernels
    # often never hold them, and counting them would refuse runs that fit.
    check_memory(dev, {"weights as built": pred.weights_bytes, "KV cache": pred.kv_bytes,
                       "activations": pred.activation_bytes})
    return _Run(s, dev, n, kv, state, compute, auto, bp, prompt, pred)


def _build(run: _Run) -> Decoder:
    """The decoder in the compute dtype on the device, its cache allocated for batch x ctx."""
    torch.manual_seed(run.s.seed)
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch_dtype(canonical_kv_dtype(run.compute), "dtype"))
        with torch.device(run.dev):
            model = Decoder(run.bp, torch_dtype(run.kv, "kv_dtype"), torch_dtype(run.state, "state_dtype")).eval()
    finally:
        torch.set_default_dtype(default)
    model.setup_caches(run.s.batch, run.s.ctx)
    return model


def _decode(model: Decoder, run: _Run, tokens, progress) -> tuple:
    """Prefill the prompt and decode `steps` tokens greedily under the allocation tracker:
    (the generated tokens [B, steps + 1], the tracker's snapshot, prefill seconds, decode seconds)."""
    out = []
    t0 = time.perf_counter()
    with torch.inference_mode(), tracker_for(run.dev) as tracker:
        logits = model(tokens, 0, cached=True)  # [B, 1, V]
        out.append(logits[:, -1].argmax(-1))
        t_prefill = time.perf_counter() - t0
        for i in range(run.s.steps):
            logits = model(out[-1][:, None], run.prompt + i, cached=True)
            out.append(logits[:, -1].argmax(-1))
            if progress:
                progress(i + 1, run.s.steps)
        snap = tracker.snapshot()
    return torch.stack(out, 1), snap, t_prefill, time.perf_counter() - t0 - t_prefill


def validate(full: ModelSpec, s: Settings, progress=None) -> tuple[dict, list[Check]]:
    """Run one validation; returns its record (plain data, for results files) and its checks.

    `progress(done, total)` is called after each decode step.
    """
    run = _prepare(full, s)
    s, bp, pred, prompt = run.s, run.bp, run.pred, run.prompt
    model = _build(run)
    measured_weights = storage_bytes(list(model.parameters()))
    measured_kv = storage_bytes(model.cache_tensors())
    gen = torch.Generator().manual_seed(s.seed)
    tokens = torch.randint(0, bp.vocab, (s.batch, prompt), generator=gen).to(run.dev)  # [B, P]
    generated, snap, t_prefill, t_decode = _decode(model, run, tokens, progress)
    measured_kv_after = storage_bytes(model.cache_tensors())  # the cache never grew or moved
    with torch.inference_mode():  # uncached: the whole sequence at once, same masks and rounding
        full_seq = torch.cat([tokens, generated[:, :-1]], 1)  # [B, ctx]
        ref = model(full_seq, 0, cached=False, last_only=False)[:, prompt - 1:].argmax(-1)  # [B, steps + 1]
    tokens_match = bool(torch.equal(ref, generated))

    peak_pred = pred.weights_bytes + pred.kv_bytes + pred.activation_bytes + pred.scores_bytes
    checks = [
        Check("kv_cache", pred.kv_bytes, measured_kv, KV_TOLERANCE),
        Check("kv_cache_after_decode", pred.kv_bytes, measured_kv_after, KV_TOLERANCE),
        Check("weights", pred.weights_bytes, measured_weights, WEIGHTS_TOLERANCE),
        Check("weights_planner_spec", pred.planner_weights_bytes, measured_weights, PLANNER_WEIGHTS_TOLERANCE,
              enforced=not bp.shrunk and run.n == full.num_layers),
        Check("peak", peak_pred, measured_weights + measured_kv + snap.peak_bytes, PEAK_TOLERANCE),
    ]
    return {
        "kvplan_version": _version(), "torch_version": torch.__version__, **device_info(run.dev),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model": full.name, "layers": run.n, "layers_total": full.num_layers,
        "layer_kinds": sorted({lp.mixer.kind for lp in bp.layers}),
        "batch": s.batch, "ctx": s.ctx, "prompt_tokens": prompt, "decode_steps": s.steps,
        "kv_dtype": run.kv.name, "state_dtype": run.state.name, "compute_dtype": run.compute, "seed": s.seed,
        "shrunk": list(bp.shrunk), "notes": _notes(full, run),
        "predicted_kv_bytes": pred.kv_bytes, "measured_kv_bytes": measured_kv,
        "predicted_kv_bytes_paged16": pred.kv_bytes_paged,
        "predicted_weights_bytes": pred.weights_bytes, "planner_weights_bytes": pred.planner_weights_bytes,
        "measured_weights_bytes": measured_weights,
        "predicted_activation_bytes": pred.activation_bytes, "predicted_scores_bytes": pred.scores_bytes,
        "predicted_peak_bytes": peak_pred,
        "measured_peak_bytes": measured_weights + measured_kv + snap.peak_bytes,
        "measured_run_peak_bytes": snap.peak_bytes, "measured_reserved_bytes": snap.reserved_bytes,
        "run_allocations": snap.allocations, "run_allocated_total_bytes": snap.allocated_total_bytes,
        "tokens_match": tokens_match, "prefill_seconds": round(t_prefill, 4), "decode_seconds": round(t_decode, 4),
        "checks": [c.to_dict() for c in checks], "ok": all_ok(checks, tokens_match),
    }, checks


def _notes(full: ModelSpec, run: _Run) -> list[str]:
    """What the run changed from the model as published: layers, widths, compute dtype."""
    notes = list(run.bp.shrunk and [f"shrunk for this run: {', '.join(run.bp.shrunk)}; cache geometry unchanged"] or [])
    if run.auto:
        notes.insert(0, f"shrunk automatically on CPU: {run.auto} (what {arg('shrink')} does; {arg('device')} cuda "
                        "for full width)")
    if run.n < full.num_layers:
        notes.insert(0, f"reduced model: the first {run.n} of {full.num_layers} layers; predictions are for the same "
                        "reduced model")
    if run.compute != full.dtype:
        notes.append(f"weights and activations in {run.compute} (the model's own dtype is {full.dtype})")
    return notes


def _version() -> str:
    return __version__
