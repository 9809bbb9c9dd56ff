"""`--speed calibrated|roofline` for the commands that show speed, and the lines that label it: which
step-time model, its held-out error band, and what of the setting the speed corpus does not cover."""

from __future__ import annotations

from kvplan.speed.coverage import band_text, check_speed, label, link_gaps, outside, rate_gaps, unmeasured, unrated
from kvplan.speed.compute_dtype import STATED, compute_line
from kvplan.speed.model import FALLBACK_ENGINE, band, coefficients, covered, engine_key, gemm_kernels
from kvplan.speed.plan import prefill_form
from kvplan.speed.terms import TERMS

__all__ = ["calibrated_keys", "check_speed", "collective_ranks", "form_notes", "plan_speed_notes", "plans_gaps",
           "request_note", "speed_band", "speed_line", "speed_notes", "stored_dtype"]


def speed_line(engine: str | None = None) -> str:
    """The one stderr line naming the calibrated step-time model and its held-out TPOT band."""
    return speed_notes("calibrated", engine, "", "")[0]


def speed_notes(speed: str, engine: str | None, gpu_key: str, family: str, version: str | None = None,
                gpus=(), weight_dtype: str | None = None, stored: str | None = None, ranks: int = 1,
                model_dtype: str | None = None) -> list[str]:
    """stderr lines: the step-time model (its coefficient set: the engine's, or its release's era) and its
    band, what the corpus does not cover (`version`: the release asked, where one was), and what the profiles
    `gpus` lack: the matmul rate the compute terms need, a rate the engine's kernels run at `weight_dtype`, the
    rate of the precision the weights are `stored` in (the checkpoint's where no weight dtype was asked), the link
    bandwidth collectives among `ranks` of them need; with the served `model_dtype`, the 16-bit dtype the step's
    FLOPs are priced in on each GPU and why (kvplan.speed.compute_dtype.compute_line), an assumption printed."""
    priced = speed == "calibrated" and bool(model_dtype)  # compute_line's note, printed below, names the 16-bit rate
    gaps = [f"note: {w}" for w in rate_gaps(gpus, stored or weight_dtype, priced) + link_gaps(gpus, ranks)]
    if speed != "calibrated":
        return ["step times: the bare roofline (--speed roofline): a lower bound, engines run slower"] + gaps
    bands = "; ".join(t for t in (band_text(engine, "tpot"), band_text(engine, "ttft")) if t)
    lines = [f"step times: {label(engine, speed)}" + (f"; {bands}" if bands else "")]
    lines += [f"note: {w}" for w in (unmeasured(engine),) if w]
    lines += [f"note: outside the speed corpus: {w}" for w in outside(engine, gpu_key, family, version)]
    lines += [f"note: {w}" for g in gpus for w in unrated(engine, g, weight_dtype)]
    if model_dtype:
        stated = weight_dtype if weight_dtype in STATED else None
        lines += [f"note: {compute_line(model_dtype, g, stated, gemm_kernels(engine) == 'ggml')}" for g in gpus]
    return lines + gaps


def plan_speed_notes(speed: str, engine: str | None, version: str | None, spec, gpu, plans) -> list[str]:
    """speed_notes for `plans` of `spec` on `gpu` (the first names the weight dtype, all of them the ranks the
    collectives span): the lines fit, simulate and disagg print beside their speed figures."""
    first = plans[0]
    return speed_notes(speed, engine, gpu.key, spec.family, version, (gpu,), weight_dtype=first.request.weight_dtype,
                       stored=stored_dtype(first, spec), ranks=max(collective_ranks(p) for p in plans),
                       model_dtype=spec.dtype)


def form_notes(plans, spec_of, gpu_of, engine: str | None, version: str | None = None) -> list[str]:
    """The MLA prefill form the speed figures price for each of `plans` (`spec_of(plan)`, `gpu_of(plan)`: its model
    and GPU profile; kvplan.speed.plan.prefill_form), each line once: the backend and prefix-cache state priced and
    where they came from."""
    return list(dict.fromkeys(f"note: {line}" for p in plans
                              if (line := prefill_form(p, spec_of(p), gpu_of(p), engine, version))))


def collective_ranks(plan) -> int:
    """The GPUs a plan's step-time collectives span (kvplan.speed.shape: the larger of tp and ep)."""
    return max(plan.deployment.tp, plan.deployment.ep)


def plans_gaps(gpus, plans, spec_of) -> list[str]:
    """What `gpus`' profiles lack for a ranking's `plans` (`spec_of(plan)`: its model), each line once: the matmul
    rate at each precision the plans' weights are stored in (rate_gaps; bf16's alone where there is no plan), and the
    link bandwidth at the most ranks any plan on that GPU spans (link_gaps; Plan.gpu is the profile's key)."""
    stored = sorted({stored_dtype(p, spec_of(p)) for p in plans} or {None}, key=str)
    most = {g.key: max((collective_ranks(p) for p in plans if p.gpu == g.key), default=1) for g in gpus}
    return list(dict.fromkeys([w for dtype in stored for w in rate_gaps(gpus, dtype)]
                              + [w for g in gpus for w in link_gaps([g], most[g.key])]))


def stored_dtype(plan, spec) -> str | None:
    """The precision a plan's GEMMs read their weights in, as the speed terms take it (kvplan.speed.shape.on_gpu):
    the weight dtype asked, else the checkpoint's quantization method (None: 16-bit)."""
    return plan.request.weight_dtype or (spec.quantization.method if spec.quantization else None)


def request_note(speed: str, engine: str | None) -> list[str]:
    """For the commands that run traffic: the fitted cost per request is GPU time in the step that admits
    it, so it bounds the requests/s one replica admits; said where it is fitted (empty otherwise)."""
    per_request = dict(zip(TERMS, coefficients(engine))).get("request", 0.0) if speed == "calibrated" else 0.0
    if per_request <= 0:
        return []
    return [f"note: each request is charged a fitted {1e3 * per_request:.1f} ms of step time, so a simulated "
            f"replica admits at most {1 / per_request:,.0f} requests/s: a limit of the fit, not a measurement "
            "(docs/speed.md: The fitted per-request cost)"]


def speed_band(speed: str, engine: str | None) -> dict | None:
    """The held-out bands for JSON (None for the roofline)."""
    if speed != "calibrated":
        return None
    key = engine_key(engine) if covered(engine) else FALLBACK_ENGINE
    return {m: band(key, m) for m in ("tpot", "ttft", "e2el", "output_throughput")}


def calibrated_keys(step_s: float, plan, engine: str | None) -> dict:
    """fit's JSON keys for `plan`'s calibrated decode step (beside the roofline's decode_step_seconds): both null
    where the plan does not fit (the table's "–", sweep's empty cell)."""
    step = step_s if plan.fits else None
    return {"decode_step_seconds_calibrated": step,
            "decode_tokens_per_second_calibrated": None if step is None else max(1, plan.request.batch) / step
            if step > 0 else 0.0,
            "decode_speed_model": label(engine), "decode_speed_band": speed_band("calibrated", engine)}
