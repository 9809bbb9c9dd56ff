"""Fitting the coefficients: non-negative least squares of relative errors on the training split.

Each figure of a training case gives one row: its predicted value over the measured one, linear in the
coefficients (a time directly, a throughput through its inverse), against 1, so the fit minimises
squared relative error; a source's rows are weighted 1 / sqrt(its rows), so no one source's hundreds of
points decide alone, times their release's recency weight (kvplan.speed.recency: 1 but in vLLM's sets).
The batch an open-loop load runs at, and its arrival wait, depend on the step times: `settle` finds them
(overloaded at the running cap, or Little's law's fixed point), and each of PASSES fit passes linearises the
rows at the previous pass's settled load (the first at c = 1). One set per engine and version era
(kvplan.speed.eras), an older era sharing terms with its engine's current one fitted with it.

kvplan.bench.ship writes the result (`python -m kvplan.bench.ship CORPUS_DIR`); tests/test_speed.py
checks a re-fit of the training split reproduces the shipped coefficients.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from kvplan.hardware.gpus import find_gpu
from kvplan.readers.chat_format import chat_format
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import (DEFAULT_MAX_SEQS, Case, attention_backend, attention_dp, in_training, prefix_cache,
                                 own_moe_kernel)
from kvplan.speed.eras import fitted_with, own_terms, unused_terms
from kvplan.speed.frontend import divisor_row, front_share, ingress_queue, ingress_rate, native_chat
from kvplan.speed.bench_load import decode_context
from kvplan.speed.load import combos, seconds, value
from kvplan.speed.mlaform import as_run
from kvplan.speed.overlap import run_overlaps
from kvplan.speed.model import decode_features, gemm_kernels, nccl_only, prefill_features, priced
from kvplan.speed.recency import weights as recency_weights
from kvplan.speed.robust import robust
from kvplan.speed.compute_dtype import read_flops
from kvplan.speed.shape import custom_off, shape_for, weight_dtype_of
from kvplan.speed.compute_dtype import stated_dtype
from kvplan.speed.ssm_dtype import as_stated, in_dtype
from kvplan.speed.stated import stated
from kvplan.speed.ggml import MMVQ_MAX, materializes_scores, score_bytes_per_flop
from kvplan.speed.terms import TERMS, Shape, bound, path_at, roofline_of

PASSES = 3  # the fit's Gauss-Newton re-linearisations (each at the previous coefficients' settled load)
SETTLE_MAX = 30  # an open loop's fixed-point passes, at most (settle)
SETTLE_TOL = 1e-3  # ... until its E2E moves less than this share
# The roofline's terms never beat the datasheet FLOP/s or the measured bandwidth (kvplan.speed.shape.read_bandwidth):
# their coefficients are 1 or more, so the calibrated
# step is never faster than the roofline (which stays the lower bound). The rest start at 0.
FLOOR = {"weights": 1.0, "kv": 1.0, "gemm": 1.0, "attn": 1.0, "experts": 1.0, "comm": 1.0, "latency": 1.0,
         "measured": 1.0}
# Terms held at their floor, never fitted: a kernel's measured seconds (kvplan.speed.ggml_scan), which no coefficient
# may scale. Each is in every row's prediction at 1 (the robust fit's floor part), so the NNLS sees the measured figure
# less those seconds, and `predict` adds them at the same 1 (the set's coefficient): one path for the fit and the CV
PINNED = ("measured",)
OVERHEAD_BYTES = 2 << 30  # activations, CUDA graphs, the runtime: what the batch cap leaves aside (an estimate)


def v0_graph(engine) -> dict:
    """The Shape's vLLM V0 graph limits (terms.replays_graph) from a case's Running (kvplan.bench.running)."""
    return {"graph_context": float(engine.graph_context), "graph_batch": engine.graph_batch} if engine else {}


@lru_cache(maxsize=None)
def _spec(name: str):
    return find_in_catalog(name)


@lru_cache(maxsize=None)
def _gpu(key: str):
    return find_gpu(key)


def pool_room(case: Case, gpu, s: Shape, engine) -> float:
    """The bytes the plain estimate's KV pool takes a replica: 0.9 of the usable memory less the weights a step reads
    and OVERHEAD_BYTES, or, where the engine's runtime pools a share of what loading leaves free (`engine.free_share`:
    TensorRT-LLM before 1.0, kvplan.bench.running.unsized), that share of the usable memory less both."""
    weights = (s.dense_bytes + s.expert_bytes) / case.pp
    if engine is not None and engine.free_share:
        return engine.free_share * (gpu.memory_usable_bytes - weights - OVERHEAD_BYTES)
    return gpu.memory_usable_bytes * 0.9 - weights - OVERHEAD_BYTES


class Built:
    """A case with its Shape and its batch cap, or the reason it cannot be priced. `running(case, spec, gpu)`
    gives the engine's own (cap, chunk, its state pool's dtype) for the setting, or None (kvplan.bench.running, a
    layer above): None, or no function, keeps the plain estimate (the usable memory less weights and a fixed
    overhead, over isl + osl tokens a request, within the engine's default running limit; chunk: PREFILL_CHUNK); one
    with no cap keeps that pool (`pool_room`: its `free_share` of what loading leaves free where it gives one) within
    its `limit` where it gives one.
    A pipeline of pp stages is priced as pp replicas of the whole model's step (each micro-batch passes
    every stage in turn, so its step is the whole model's, while the stages work on pp micro-batches at
    once: the corpus's Load counts dp x pp replicas), each with one GPU's memory less its stage's weights;
    the hand-off between stages is not priced."""

    def __init__(self, case: Case, running=None):
        self.case, self.shape, self.why = case, None, ""
        spec = _spec(case.model)
        if spec is None:
            self.why = "model not in the catalog"
            return
        if not case.windowed:  # the engine ran the sliding layers as full attention (corpus `sliding_window: none`)
            spec = spec.without_windows()
        spec = as_stated(spec, case.flags)  # the recurrent states in the dtype the run gives them, not the config's
        spec = as_run(spec, case.engine, case.version)  # MLA decompressed under a release with no MLA kernel
        try:
            gpu = _gpu(case.gpu)
        except Exception as e:  # noqa: BLE001 - as shape_for's below
            self.why = f"not plannable: {type(e).__name__}"
            return
        engine = running(case, spec, gpu) if running else None
        if engine is not None:  # the states as the engine's pool holds them, where it says (Request.ssm_dtype)
            spec = in_dtype(spec, engine.ssm_dtype)
        try:
            self.shape = shape_for(spec, gpu, tp=case.tp, ep=case.ep, weight_dtype=weight_dtype_of(case.weight_dtype),
                                   kv_dtype=_kv(case.kv_dtype), dp=case.dp, engine=case.engine, date=case.date,
                                   version=case.version, prefix_cache=prefix_cache(case),
                                   attention_backend=attention_backend(case), attention_dp=attention_dp(case),
                                   compute=stated_dtype(case.flags), host_overlap=run_overlaps(case),  # no `step`
                                   prefill_graph=bool(engine and engine.prefill_graph))  # no MoE launch cost
        except Exception as e:  # noqa: BLE001 - a point kvplan cannot plan is skipped with its reason
            self.why = f"not plannable: {type(e).__name__}"
            return
        s, load = self.shape, case.load
        if native_chat(case.engine, chat_format(spec.family), load.endpoint):  # no Python template: no ingress wait
            load = replace(load, templated=False)
        if s.rate_missing and prefill_unrated(s, load):  # llama.cpp's GEMM path at a rate the profile does not give:
            self.shape, self.why = None, f"GPU profile has no {s.rate_missing} rate (llama.cpp's GEMM path)"
            return  # not priced at zero, skipped and counted
        self.roof_shape = bound(s)  # the roofline knows no engine's kernels
        if fused_allreduce(case.flags):  # the engine's fused kernel, after the roofline's copy
            self.shape = replace(s, fused_allreduce=True)
        if nccl_only(case.flags):  # the run turned the engine's custom all-reduce off: what it tries next, NCCL's ring
            self.shape = custom_off(self.shape, case.engine, gpu, case.version)
        if fp8_context_fmha(case) and gpu.dense_flops.get("fp8") and gpu.fp8 is not False:  # FP8 context attention
            self.shape = replace(self.shape, prefill_attn_rate=read_flops(gpu, "fp8"))
        if gemm_kernels(case.engine) == "ggml" and materializes_scores(case.flags, case.date):  # no FlashAttention
            self.shape = replace(self.shape, score_bytes_per_flop=score_bytes_per_flop(spec, case.tp,
                                                                                         s.attn_flops_per_pair))
        self.shape = replace(self.shape, grouped_shortfall=self.shape.grouped_shortfall and not own_moe_kernel(case),
                             **v0_graph(engine))
        room = pool_room(case, gpu, s, engine)
        per_seq = max(1, s.kv_bytes_per_token) * max(1.0, load.isl + load.osl) + s.state_bytes_per_seq
        limit = case.max_seqs or (engine.limit if engine is not None else None) or DEFAULT_MAX_SEQS[case.engine]
        if room <= 0 and load.bench == "serve":  # the stated layout cannot hold the weights: what ran is not
            self.shape, self.why = None, "weights over memory at the stated layout"  # what kvplan would price
            return
        cap = min(limit, max(1.0, room / per_seq)) if room > 0 else limit  # llama-bench: partial offload
        self.load = replace(load, cap=cap)
        if engine is not None:
            self.load = replace(self.load, cap=engine.cap or self.load.cap, chunk=engine.chunk or self.load.chunk,
                                waves=engine.waves, lockstep=engine.lockstep, lock_mixed=engine.lock_mixed,
                                recompute=engine.recompute, fetch_lag=engine.fetch_lag,
                                balance=engine.balance, poll_wait=engine.poll_wait, packed=engine.packed,
                                joins_late=engine.joins_late, mixed=engine.mixed, batch_wait=engine.batch_wait)

    def parts(self, prev: dict | None, roof: bool = False):
        """(t_wave, t_dec, t_grp features, {metric: combo}) under the previous pass's predictions (its
        end-to-end estimate and prefill server time, kvplan.speed.load.combos; `roof`: of the roofline's Shape)."""
        load, s = self.load, (self.roof_shape if roof else self.shape)
        if load.bench == "pp":
            return prefill_features(s, load.isl, load.depth, load.ubatch, request=0.0), None, None, combos(load)[2]
        if load.bench == "tg":
            return None, decode_features(s, 1, load.depth), None, combos(load)[2]
        prev = prev or {}
        b, g, cm = combos(load, prev.get("e2el"), prev.get("service"), prev.get("rho_cap"), prev.get("outside"),
                          median=stated)  # a median figure's request, where the source states only the median
        return (prefill_features(s, load.isl, batch=b, chunk=load.chunk), decode_features(s, b, decode_context(load)),
                prefill_features(s, load.isl, batch=g, chunk=load.chunk), cm)


# TensorRT-LLM's build flag that fuses each row-parallel linear's all-reduce into its GEMM (a TensorRT engine's
# plugin_config gemm_allreduce_plugin, float16 / bfloat16; NVIDIA's MLPerf Llama-3.1-405B configs' trtllm_build_flags):
# the output tiles are reduced in the NVSwitch (multimem ld_reduce, each rank 1 / tp of them) and multicast by the
# kernel's own warps while its other warps compute the next tiles (NVIDIA/TensorRT-LLM@42169182:cpp/tensorrt_llm/
# kernels/cutlass_kernels/allreduce_gemm/communication/sm90_allreduce_nvls_warpspecialized.hpp,
# CollectiveAllReduceMulticastWarpSpecialized: allreduce_in_switch per tile), so the ring's bandwidth term is not paid
# beside the GEMM; the calls' latency is kept (kvplan.speed.terms.features).
FUSED_ALLREDUCE = "gemm_allreduce_plugin"


def fused_allreduce(flags: dict | None) -> bool:
    """Whether a run's flags build its tensor-parallel all-reduces into the GEMMs (FUSED_ALLREDUCE, not disabled)."""
    v = (flags or {}).get(FUSED_ALLREDUCE)
    return v is not None and str(v).lower() not in ("", "none", "disable", "false")


# TensorRT-LLM's build flag that runs a TensorRT engine's context (prefill) attention in FP8: the attention op's FMHA
# takes Q, K and V in e4m3 (NVIDIA/TensorRT-LLM@00dbe288d2a76e0ad79107e4ef0907d614744c89:cpp/tensorrt_llm/common/
# attentionOp.cpp, AttentionOp::initialize: "FP8 FMHA should be used with fp8 workflow together", mFP8ContextFMHA ->
# fmhaParams.dataType DATA_TYPE_E4M3; sm_89, 90, 100 or 120). The builder keeps it only for an FP8, W4A8-AWQ or NVFP4
# checkpoint and, with paged context FMHA (every MLPerf v5.1 config's), an FP8 KV cache
# (NVIDIA/TensorRT-LLM@008b2b8d23af95e4e19fa6f354f9c5f6349b2bfc:tensorrt_llm/builder.py, build()). Decode attention
# (XQA over the cache) is unchanged.
FP8_CONTEXT_FMHA = "use_fp8_context_fmha"
FP8_CONTEXT_WEIGHTS = ("fp8", "nvfp4")  # the checkpoints' formats the builder keeps the flag for (kvplan's names)


def fp8_context_fmha(case: Case) -> bool:
    """Whether a run's engine was built with FP8 context attention and kept it (FP8_CONTEXT_FMHA enabled, an FP8 or
    NVFP4 checkpoint, an FP8 KV cache); the GPU's FP8 math is the caller's check."""
    v = str((case.flags or {}).get(FP8_CONTEXT_FMHA, "")).lower()
    kv = (_kv(case.kv_dtype) or "").lower()
    return (v in ("enable", "true") and weight_dtype_of(case.weight_dtype) in FP8_CONTEXT_WEIGHTS
            and kv.startswith("fp8"))


def prefill_unrated(s: Shape, load) -> bool:
    """Whether a llama.cpp prefill of this load (its micro-batches: a llama-bench pp test's ubatch, a server's
    chunk) runs a GEMM path whose rate the profile lacks (kvplan.speed.ggml). Decode's vector kernels (<= 8
    tokens a step) keep the GEMM term's usual rate, zero where the profile rates nothing, as every engine's."""
    if load.bench == "tg":
        return False
    per_step = load.isl / max(1, math.ceil(load.isl / load.ubatch)) if load.bench == "pp" else load.chunk or 1 << 30
    return per_step > MMVQ_MAX and not path_at(s, per_step)[0]


def _kv(name):
    if not name or str(name).lower() in ("auto", "none"):
        return None
    return str(name)


def predict(built: Built, coef, prev: dict | None = None) -> dict:
    """{metric: predicted} for the case (coef () or None: the roofline), under the previous pass's `prev`."""
    fp, fd, fg, cm = built.parts(prev, roof=not coef)
    t = [_price(f, coef) if f is not None else 0.0 for f in (fp, fd, fg)]
    per = _ingress(coef)
    wait, share = ingress_queue(built.load) * per, ingress_rate(built.load) * per
    out = {}
    for m, c in cm.items():
        if c[3]:  # a throughput: the front end's share of a request's time in its divisor (a pipeline's: past it)
            out[m] = value(c, *t, extra=front_share(built.case.engine, share, seconds(c, *t)))
        else:
            out[m] = value(c, *t) + (wait if m in QUEUED else 0.0)
    return out


# The figures a burst's wait in the serving front end (kvplan.speed.frontend.ingress_queue) adds to; TPOT, their
# difference over the output, does not move; `waiting` (before the first scheduled step) and `outside` (before the
# request joins the running batch) hold the crossing too
QUEUED = ("ttft", "e2el", "waiting", "outside")
INGRESS = TERMS.index("ingress")


def _ingress(coef) -> float:
    """The coefficient set's seconds per request in the serving front end (0: the roofline's)."""
    return float(coef[INGRESS]) if coef else 0.0


def _price(f, coef) -> float:
    return priced(coef, f) if coef else roofline_of(f)


def settle(built: Built, coef) -> dict:
    """Predictions under the open-loop batch estimate, settled. A load at no stated rate needs one pass. An open
    loop is first checked for overload: rho_cap = r / dp x T(cap), T(cap) the GPU time per request at the running
    cap (rho_cap_of); at rho_cap >= 1 it runs at the cap and its queue grows through the run (kvplan.speed.load:
    combos), one pass; below it, Little's law over the running set, c = r x (E2E(c) - outside(c)) (the time before
    the request joins the running batch holds no slot: kvplan.speed.load.batch_and_mode), and the arrival wait's S, is
    iterated from c = 1 until E2E moves less than SETTLE_TOL, at most SETTLE_MAX passes."""
    load = built.load
    if load.bench != "serve" or not (load.rate and load.rate != float("inf")):
        return predict(built, coef)
    rho = rho_cap_of(built, coef)
    out = {"rho_cap": rho}
    for _ in range(2 if rho >= 1 else SETTLE_MAX):  # overloaded: B = cap; a second pass for the prefill server's S
        last = out.get("e2el")
        out = {**predict(built, coef, out), "rho_cap": rho}
        if last and abs(out["e2el"] - last) <= SETTLE_TOL * last:
            break
    return out


def rho_cap_of(built: Built, coef) -> float:
    """An open loop's utilisation at its running cap: rate / dp x T(cap), T(cap) = (t_wave + osl x t_dec) / cap at
    B = cap (coef () or None: the roofline's)."""
    load, s = built.load, (built.shape if coef else built.roof_shape)
    cap = load.cap
    t_wave = _price(prefill_features(s, load.isl, batch=cap, chunk=load.chunk), coef)
    t_dec = _price(decode_features(s, cap, decode_context(load)), coef)
    return load.rate / load.dp * (t_wave + max(1.0, load.osl) * t_dec) / cap


def rows_for(built: Built, coef_prev) -> list[tuple[list[float], str]]:
    """([weighted feature row, metric]) of a case: prediction / measurement, against 1."""
    prev = settle(built, coef_prev) if coef_prev is not None else None
    fp, fd, fg, cm = built.parts(prev)
    n = len(TERMS)
    fp, fd, fg = (f or [0.0] * n for f in (fp, fd, fg))
    queue, per_request = ingress_queue(built.load), ingress_rate(built.load)
    out = []
    for metric, y in built.case.targets.items():
        c = cm.get(metric)
        if c is None or not y:
            continue
        a, b, e, inv = c
        lin = [a * p + b * d + e * g for p, d, g in zip(fp, fd, fg)]
        if metric in QUEUED:
            lin[INGRESS] += queue
        elif inv:
            lin = divisor_row(lin, per_request, built.case.engine, coef_prev, INGRESS)
        scale = (y / inv) if inv else (1.0 / y)
        out.append(([v * scale for v in lin], metric))
    return out


def fit_engine(built: list[Built], passes: int = PASSES) -> list[float]:
    """NNLS coefficients (TERMS order) over these training cases."""
    return _fit(built, passes)


def fit_era(era: str, built: list[Built], passes: int = PASSES) -> list[float]:
    """The coefficients of `era` (kvplan.speed.eras) over these training cases, which hold every era
    fitted with it (`fitted_with`): an older era that shares terms with its engine's current era takes
    its own copy of its `own_terms` in one joint fit (the other terms fitted on both eras' cases);
    any other era is fitted on its own cases."""
    group = fitted_with(era)
    mine = [b for b in built if b.case.era in group]
    apart = {b.case.era: own_terms(b.case.era) for b in mine if own_terms(b.case.era)}
    return _fit(mine, passes, apart, era)


def _fit(built: list[Built], passes: int, apart: dict | None = None, era: str = "") -> list[float]:
    """The robust fit; `apart`: {older era: the terms it fits apart}, each such term a column of its own
    (a copy of its floor) for that era's rows. A term a row's set does not fit (kvplan.speed.eras.unused_terms)
    is 0 in that row, and a term no set here fits is no column at all (its coefficient 0); `era` reads 0 for a term
    it does not fit, though a set fitted with it (sharing its other terms) fits that column. Returns the
    coefficients `era` reads (TERMS order)."""
    apart = apart or {}
    cols = [(e, t) for e, ts in sorted(apart.items()) for t in ts]  # the extra columns
    n = len(TERMS)

    def of(coef, e):  # the TERMS-order coefficients era e reads from the augmented vector
        out = list(coef[:n])
        for j, (ce, t) in enumerate(cols):
            if ce == e:
                out[TERMS.index(t)] = coef[n + j]
        return out

    per_source: dict = {}
    for b in built:
        per_source[b.case.source] = per_source.get(b.case.source, 0) + len(b.case.targets)
    floor = [FLOOR.get(t, 0.0) for t in TERMS] + [FLOOR.get(t, 0.0) for _, t in cols]
    names = list(TERMS) + [t for _, t in cols]
    unused = {e: unused_terms(e) for e in {b.case.era for b in built}}
    none = frozenset.intersection(*unused.values()) if unused else frozenset()
    keep = [i for i, t in enumerate(names) if t not in none]  # the columns some set here fits
    recent = dict(zip(map(id, built), recency_weights([b.case for b in built])))
    coef = None
    for _ in range(passes):
        rows, ws = [], []
        for b in built:
            w = recent[id(b)] / math.sqrt(per_source[b.case.source])
            for row, _metric in rows_for(b, of(coef, b.case.era) if coef is not None else None):
                row = list(row) + [0.0] * len(cols)
                for j, (ce, t) in enumerate(cols):
                    if ce == b.case.era:
                        row[n + j], row[TERMS.index(t)] = row[TERMS.index(t)], 0.0
                for i, t in enumerate(names):
                    if t in unused[b.case.era]:
                        row[i] = 0.0
                rows.append([row[i] for i in keep])
                ws.append(w)
        pinned = [j for j, i in enumerate(keep) if names[i] in PINNED]
        fitted = iter(robust(rows, ws, [floor[i] for i in keep], pinned))
        coef = [next(fitted) if i in keep else 0.0 for i in range(len(names))]
    left_out = unused_terms(era) if era else frozenset()  # a term `era` does not fit reads 0, not a shared column's
    return [0.0 if t in left_out else c for t, c in zip(TERMS, of(coef, era))]


def split(built: list[Built]) -> tuple[list[Built], list[Built]]:
    train = [b for b in built if in_training(b.case.source)]
    return train, [b for b in built if not in_training(b.case.source)]


def build_all(cases: list[Case], running=None) -> tuple[list[Built], dict]:
    """(the cases kvplan can price, {reason: count} of those it cannot); `running`: see Built."""
    out, skipped = [], {}
    for c in cases:
        b = Built(c, running)
        if b.shape is None:
            skipped[b.why] = skipped.get(b.why, 0) + 1
        else:
            out.append(b)
    return out, skipped


def errors(built: list[Built], coef) -> list[tuple[Built, str, float, float]]:
    """(case, metric, predicted, measured) for every figure of these cases."""
    out = []
    for b in built:
        pred = settle(b, coef)
        for m, y in b.case.targets.items():
            if m in pred and y:
                out.append((b, m, pred[m], y))
    return out
