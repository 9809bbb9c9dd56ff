"""A vLLM start-up log against kvplan's vLLM arithmetic: the deployment the log states, its budget
(total x gpu_memory_utilization less the weights and the overhead terms vLLM prints), its block pool,
and with no model given the engine's own arithmetic between its printed numbers (kvplan.engines.logcheck
holds the rows)."""

from __future__ import annotations

import math

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.core.units import signed
from kvplan.engines import resolve_engine
from kvplan.engines.base import Capacity, parse_version
from kvplan.engines.logdates import bound_note, released_by
from kvplan.engines.logparse import Num
from kvplan.engines.logrecord import logged_deployment
from kvplan.engines.log_weights import log_weight_dtype
from kvplan.engines.logcheck import GIB, WHATIF_CONTEXTS, Reconciliation, Row, assumed_gpu, cache_dtype, rel
from kvplan.engines.vllm import releases as vllm_releases
from kvplan.engines.vllm import awq_dequant, load_split
from kvplan.engines.vllm.cudagraphs import awq_note
from kvplan.engines.vllm.log_graphs import graph_note, planned_shape, seqs_from_shape
from kvplan.engines.vllm.non_torch import CORPUS_CAPABILITY, corpus_gpu, fi_workspace
from kvplan.engines.vllm.sampler import CORPUS_SM_COUNT, triton_buffer_bytes
from kvplan.engines.vllm.overhead import cudagraph_estimate
from kvplan.hardware.gpus import GPU
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan import Request


def _forced_awq(out, s, model, weight_dtype, version) -> list[str]:
    """The log's `quantization: awq` as engine option awq_kernel=awq where kvplan prices the forced kernel; where it
    does not (an MLA or recurrent model, a release from 0.24.0), a note, so a real log is still reconciled."""
    if s.get("quantization") != "awq" or model is None:
        return []
    why = awq_dequant.unpriced(model, weight_dtype, parse_version(version))
    if why is None:
        return ["awq_kernel=awq"]
    out.notes.append(f"the log forces AWQ's own kernel (quantization: awq): its fp16 weight copy in the CUDA-graph "
                     f"pool is not priced, as kvplan's awq_kernel=awq {why}")
    return []


def reconcile_vllm(rec, model, gpu, version, kv_name, tp, weight_dtype=None):
    """A vLLM log against kvplan: the deployment it states, then its budget, then its pool."""
    s, r = rec.settings, rec.reported
    named = gpu is not None  # --gpu given
    out, gpu, dep, length, version = _vllm_context(rec, model, gpu, version, tp)
    gmu = s.get("gpu_memory_utilization")
    gmu = gmu.value if isinstance(gmu, Num) else gmu
    opts = [f"{k}={s[k]}" for k in ("max_num_batched_tokens", "max_num_seqs") if isinstance(s.get(k), int)]
    opts += [f"flashinfer_sampler={s['flashinfer_sampler']}"] if isinstance(s.get("flashinfer_sampler"), bool) else []
    opts += [f"mxfp4_backend={s['mxfp4_backend']}"] if s.get("mxfp4_backend") else []  # the kernel the log names
    opts += ["model_runner=v1"] if s.get("runner_fallback") else []  # the log says V2 fell back to V1 (vllm.runner)
    opts += ["enforce_eager=true"] if s.get("enforce_eager") is True else []  # its engine config or non-default args
    opts += _forced_awq(out, s, model, weight_dtype, version)  # AWQConfig's own kernel (vllm.awq_dequant)
    explicit = {"gpu_memory_utilization": gmu, "block_size": s.get("block_size"), "graph_shape": rec.graph_shape}
    engine = resolve_engine("vllm", version, opts, **explicit)
    if s.get("runner_fallback"):  # vLLM's own word on its model runner (config/vllm.py use_v2_model_runner)
        out.notes.append(f"the log says vLLM's V2 model runner {s['runner_fallback']} and it used V1: reconciled on "
                         "V1's terms (engine option model_runner=v1)")
    if model is None:
        _vllm_model_free(out, r, length, s.get("block_size") or 16, parse_version(version))
        out.notes.append(f"no model given ({arg('model')}): only the engine's own arithmetic between its printed "
                         "numbers is checked")
        return out
    req = _vllm_request(rec, model, length, kv_name, out, weight_dtype)
    dep = engine.own_stages(model, dep)  # the release's own cut where the log sets none (engines/stage_split.py)
    stand_in = gpu or assumed_gpu()
    pre = engine.settings(model, stand_in, dep, req)
    default = pre.max_num_seqs  # the log's, else the release's default
    seqs, seqs_note = seqs_from_shape(rec, default)
    if seqs is not None:  # the assumed default contradicts the log's FULL graphs (kvplan.engines.vllm.log_graphs)
        opts = [*opts, f"max_num_seqs={seqs}"]
    # the logged shape, or its config's sizes, or the release's default list (kvplan.engines.vllm.capture_list)
    explicit["graph_shape"] = planned_shape(rec, model, seqs or default, pre.max_num_batched_tokens, pre.v,
                                            stand_in)
    engine = resolve_engine("vllm", version, opts, **explicit)
    out.notes.append(seqs_note)
    if s.get("enforce_eager") is True:
        out.notes.append("enforce_eager true (from the log): no CUDA graphs, none subtracted")
    if not named:  # no --gpu: the workspace rule's facts are the corpus machine's
        stand_in = _corpus_stand_in(out, model, dep, engine.settings(model, stand_in, dep, req))
    st = engine.settings(model, stand_in, dep, req)
    res = engine.result(model, stand_in, dep, req)
    out.notes += [n for n in (graph_note(rec, model, st),) if n] + list(awq_note(model, dep.tp, st))
    _vllm_budget_rows(out, r, res, st, gpu)
    # the weights row's segment tails under the load's split limit, a CUDA run assumed where the vendor is unknown
    out.notes += [n for n in (load_split.note(model, dep, st),) if n]
    _term_rows(out, r, res.settings, model, dep, st, bool(s.get("peak_from_summary")))
    _vllm_pool_rows(out, r, engine, model, dep, st, req.kv_dtype, length)
    return out


def _vllm_context(rec, model, gpu, version, tp):
    """(Reconciliation, GPU, Deployment, max_model_len, version) as the log states them, with a note
    for each thing it leaves out and kvplan assumes."""
    s = rec.settings
    version, vnote = _release(rec, version)
    out = Reconciliation("vllm", version, model.name if model else rec.model, gpu.key if gpu else None)
    if vnote:
        out.notes.append(vnote)
    length = s.get("max_model_len") or (model.max_context if model else None)
    if length is None:
        raise KvplanError(f"the log does not show max_model_len; pass {arg('model')}", EXIT_USAGE, param="model")
    dep = logged_deployment(rec, tp, out.notes, gpu)
    total = s.get("total_gpu_memory_gib")
    if gpu is None and not isinstance(total, Num):
        out.notes.append(f"no {arg('gpu')} and no total_gpu_memory in the log: the GPU's figures are an assumed "
                         "80 GiB GPU's")
    if gpu is None and isinstance(total, Num):
        gpu = GPU.of_memory("log", "GPU from the log", int(total.value * GIB), "the log's total_gpu_memory")
        out.gpu = f"{total.text} GiB (from the log)"
    elif gpu is not None and isinstance(total, Num):
        out.notes.append(f"the log says total_gpu_memory={total.text} GiB; kvplan's {gpu.key} profile has "
                         f"{gpu.memory_usable_bytes / GIB:.2f} GiB")
    return out, gpu, dep, length, version


ERA_RELEASE = {"v0": "0.6.6", "v1-early": "0.7.0", "v1": "0.11.0"}  # a versionless log's release by its format
# The first release that prints each V1 format (PyPI wheels): the V1 engine ships from 0.7.0 (`vllm/v1/` first in the
# 0.7.0 wheel; its `v1/core/kv_cache_utils.py` L395 "# GPU blocks: %d"); 0.8.0 first prints the "v1" lines ("GPU KV
# cache size: %s tokens", `v1/core/kv_cache_utils.py` L537, and "Model loading took", `v1/worker/gpu_model_runner.py`
# L1140), where 0.7.3 still printed "# GPU blocks" (L522) and "Loading model weights took" (L1060). A log in the
# format was written by that release or a later one, whatever its clock says: the format outranks the timestamp.
ERA_FLOOR = {"v1-early": "0.7.0", "v1": "0.8.0"}


def _release(rec, given: str | None) -> tuple[str, str | None]:
    """The release modelled and, where the log names none, a note on what chose it: `given` (--engine-version)
    always; else the one its log format implies (ERA_RELEASE), or, where the log's own timestamp shows it was
    written before that release reached PyPI, the newest release uploaded by then (kvplan.engines.logdates), but
    never one older than the format's first (ERA_FLOOR): a clock before it is wrong, not the format."""
    unnamed = "the log does not name its vLLM version"
    if given:
        return given, None if rec.version else f"{unnamed}; modelled as {given}, the version given"
    if rec.version:
        return rec.version, None
    era = ERA_RELEASE.get(rec.era, ERA_RELEASE["v1"])
    bound = released_by(vllm_releases.UPLOADED, rec.written) if rec.written else None
    pass_it = f"pass {arg('engine_version')}"
    if rec.floor and parse_version(era) < parse_version(rec.floor[0]):  # a line the format's release never printed
        return _from_floor(rec, bound, unnamed, pass_it)
    if rec.written is None:
        return era, f"{unnamed}; modelled as {era} ({rec.era} log format; no dated timestamp pins it: {pass_it})"
    floor = ERA_FLOOR.get(rec.era)
    if floor and (bound is None or parse_version(bound[0]) < parse_version(floor)):
        up = dict(vllm_releases.UPLOADED)[floor][:10]
        return floor, (f"{unnamed}; modelled as {floor}, the first release printing the {rec.era} log format: its "
                       f"earliest timestamp ({rec.written:%Y-%m-%d %H:%M}) predates {floor}'s upload ({up}), which "
                       f"the format rules out (a clock not set, or a build from before the release; {pass_it})")
    if bound is None:
        first = vllm_releases.UPLOADED[0]
        return first[0], (f"{unnamed}; modelled as {first[0]}, kvplan's first modelled release: its earliest "
                          f"timestamp ({rec.written:%Y-%m-%d %H:%M}) predates it (on PyPI {first[1][:10]}; {pass_it})")
    if parse_version(era) <= parse_version(bound[0]):
        return era, (f"{unnamed}; modelled as {era} ({rec.era} log format); "
                     f"{bound_note('vLLM', rec.written, bound)}; nothing in the log pins which release up to it "
                     f"wrote it ({pass_it})")
    return bound[0], (f"{unnamed}; modelled as {bound[0]}, inferred: {bound_note('vLLM', rec.written, bound)}, "
                      f"before {era}, the {rec.era} log format's default (an older release may have written it; "
                      f"{pass_it})")


def _from_floor(rec, bound, unnamed: str, pass_it: str) -> tuple[str, str]:
    """A log printing a line first printed by a release after its format's default (vllm.releases.FLOORS): the
    newest release uploaded by its earliest timestamp where that is at or after the line's first release; the
    line's first release where the timestamp predates it (a build from before the release); with no dated
    timestamp, the newest kvplan knows."""
    floor, why = rec.floor
    said = f"it prints {why}, so {floor} or later"
    if bound is not None and parse_version(bound[0]) >= parse_version(floor):
        return bound[0], (f"{unnamed}; modelled as {bound[0]}, inferred: {said}; "
                          f"{bound_note('vLLM', rec.written, bound)} (an older release may have written it; {pass_it})")
    if rec.written is not None:  # stamped before the release was out: a build of it from before (nightly, source)
        up = dict(vllm_releases.UPLOADED)[floor][:10]
        return floor, (f"{unnamed}; modelled as {floor}: {said}, though its earliest timestamp "
                       f"({rec.written:%Y-%m-%d %H:%M}) predates {floor}'s upload ({up}): a build from before the "
                       f"release (nightly or source), closest to {floor} ({pass_it})")
    newest = vllm_releases.UPLOADED[-1][0]
    return newest, (f"{unnamed}; modelled as {newest}, the newest kvplan knows: {said}; no dated timestamp bounds "
                    f"it ({pass_it})")


def _corpus_stand_in(out, model, dep, st):
    """The GPU of a log that names none (known by its memory alone) with the HGX H100's compute capability and
    fabric for the FlashInfer all-reduce workspace (vllm.non_torch.corpus_gpu), and a note where that
    assumption adds bytes."""
    gpu = corpus_gpu(st.gpu)
    ws = fi_workspace(model, dep, st, gpu)
    if ws:
        out.notes.append(f"no {arg('gpu')}: vLLM's FlashInfer all-reduce workspace ({ws / GIB:.2f} GiB per GPU) "
                         f"counted as on an HGX H100 (compute capability {CORPUS_CAPABILITY} over NVSwitch), the "
                         f"machine of kvplan's log corpus; pass {arg('gpu')} for another")
    buf = triton_buffer_bytes(st.v, min(st.max_num_seqs, st.max_num_batched_tokens), model.vocab_size, gpu,
                              st.flashinfer_sampler)
    if buf:
        out.notes.append(f"no {arg('gpu')}: vLLM's Triton top-k/top-p buffer ({buf / GIB:.3f} GiB) counted with an "
                         f"H100's {CORPUS_SM_COUNT} multiprocessors; pass {arg('gpu')} for another")
    return gpu


def _vllm_request(rec, model, length, kv_name, out, weight_dtype=None):
    """The Request the log's run made: its length, cache dtype, and the weights' format (the one given, else a
    quantized checkpoint's own, else the method the engine-config line states: kvplan.engines.log_weights)."""
    wdt = log_weight_dtype(model, rec.settings.get("quantization"), weight_dtype, rec.model, out.notes)
    return Request(context=length, kv_dtype=cache_dtype(kv_name or rec.settings.get("kv_cache_dtype"), model),
                   weight_dtype=wdt)


def _vllm_budget_rows(out, r, res, st, gpu):
    """Weights as loaded, the available KV memory, and the non-KV overhead the two imply."""
    p = res.plan
    if "model_loading_gib" in r:
        rep = r["model_loading_gib"].value * GIB
        loaded = _loaded(p)
        d, e = rel(loaded, rep)
        out.rows.append(Row("weights per GPU (Model loading took)", f"{r['model_loading_gib'].text} GiB",
                            f"{loaded / GIB:.4f} GiB", d, abs(e) <= 0.02 if e is not None else None, e))
    if "available_kv_gib" in r and gpu is not None:
        rep = r["available_kv_gib"].value * GIB
        d, e = rel(p.kv_memory_bytes_per_gpu, rep)
        out.rows.append(Row(f"available KV memory (gmu {st.gpu_memory_utilization:g})",
                            f"{r['available_kv_gib'].text} GiB",
                            f"{p.kv_memory_bytes_per_gpu / GIB:.2f} GiB", d, abs(e) <= 0.05, e))
        if "model_loading_gib" in r:
            inferred = gpu.memory_usable_bytes * st.gpu_memory_utilization - r["model_loading_gib"].value * GIB - rep
            ours = res.settings
            est = (ours["overhead_activation_peak"] + ours["overhead_non_torch"] + ours["overhead_cudagraphs"]
                   + _runner_terms(ours))
            d, e = rel(est, inferred)
            out.rows.append(Row("non-KV overhead (total x gmu - weights - KV)", f"{inferred / GIB:.2f} GiB (inferred)",
                                f"{est / GIB:.2f} GiB (estimate)", d, None, e))
    _consumed_row(out, r, res, st)


def _loaded(p) -> int:
    """Weights as loaded: kernel padding and RoPE tables included (Vllm.loaded_extra); the driver's line, the first
    stage's."""
    return p.stages[0].weight_bytes if p.deployment.pp > 1 and p.stages else p.weight_bytes_per_gpu


def _runner_terms(ours: dict) -> int:
    """V2's states and V1's input buffers: in the budget from 0.27.0 (0 before; kvplan.engines.vllm.overhead)."""
    return ours.get("overhead_runner_states", 0) + ours.get("overhead_runner_buffers", 0)


def _consumed_row(out, r, res, st):
    """From 0.27.0 the closing line's "GiB for consumed memory (weights + non-torch)" is the budget's free-memory drop
    from the start-up snapshot to the end of the profile run (gpu_worker.py 0.27.0 L526, L752-774; mem_utils.py
    L317-319): kvplan's weights as loaded + non-torch + the runner's states and buffers. Not compared before 0.27.0."""
    if "weights_non_torch_gib" not in r or st.v < (0, 27, 0):
        return
    ours = res.settings
    est = _loaded(res.plan) + ours["overhead_non_torch"] + _runner_terms(ours)
    d, e = rel(est, r["weights_non_torch_gib"].value * GIB)
    out.rows.append(Row("consumed memory as printed (weights + non-torch + runner)",
                        f"{r['weights_non_torch_gib'].text} GiB", f"{est / GIB:.2f} GiB (estimate)", d, None, e))


def _vllm_pool_rows(out, r, engine, model, dep, st, kvd, length):
    """Tokens, blocks and concurrency from the printed budget (a range: it is rounded) or exactly from
    the printed block count; then the same pool at other contexts and batches."""
    block_bytes, block_tokens = engine.block(model, dep, st, kvd, kvd)
    budget = None

    def at(kv_bytes: int, ctx: int):
        return engine.capacity_at(model, dep, st, kv_bytes, ctx, kvd, kvd)

    if "available_kv_gib" in r:
        lo, hi = r["available_kv_gib"].interval
        c_lo, c_hi = at(int(math.ceil(lo * GIB)), length), at(int(math.ceil(hi * GIB)) - 1, length)
        budget = int(r["available_kv_gib"].value * GIB)
        _range_rows(out, r, c_lo, c_hi, "from the printed budget")
    if "gpu_blocks" in r:
        budget = int(r["gpu_blocks"].value) * block_bytes
        _exact_rows(out, r, at(budget, length), "from # GPU blocks")
    elif "kv_cache_tokens" in r and budget is None:
        budget = int(r["kv_cache_tokens"].value) // block_tokens * block_bytes
    if budget:
        for ctx in sorted({length, *[c for c in WHATIF_CONTEXTS if c <= model.max_context]}):
            cap = at(budget, ctx)
            out.whatif.append((f"at {ctx:,} tokens per request",
                               f"{cap.tokens:,} tokens, concurrency {cap.max_concurrency:.2f}x"))
        cap = at(budget, length)
        for b in (1, 8, 32):
            out.whatif.append((f"longest context for {b} concurrent",
                               f"{engine.longest_context(model, dep, st, cap, b, kvd, kvd):,} tokens"))


def _term_rows(out, r, ours, model, dep, st, summary: bool = False):
    """The budget's terms where the log prints them (v0.6.4+ profiling lines, v0.11+ DEBUG breakdown); the CUDA-graph
    estimate as vLLM prints it whether or not the release subtracts it (kvplan.engines.vllm.cudagraphs). From 0.27.0
    the closing line's "GiB for peak activation" (`summary`) is the profile's transient peak plus the graph estimate
    it subtracted (gpu_worker.py 0.27.0 L527-529, 0.30.0 L616-618, 0.33.0 L748-750), so kvplan's figure adds its own."""
    layers = max(b - a for a, b in stage_ranges(model, dep))
    graphs = cudagraph_estimate(layers, model, dep.tp, st.max_num_seqs, st.gpu, st.weight_dtype, st.graph_shape,
                                st.max_num_batched_tokens, st.v, st.max_capture, st.awq_forced)
    peak, peak_label = ours["overhead_activation_peak"], "activation peak of the profile run"
    if summary and st.v >= (0, 27, 0):
        peak, peak_label = peak + ours["overhead_cudagraphs"], "peak activation as printed (profile peak + graph est.)"
    for key, label, pred in (("activation_peak_gib", peak_label, peak),
                             ("non_torch_gib", "non-torch memory", ours["overhead_non_torch"]),
                             ("cudagraph_estimate_gib", "CUDA graphs (vLLM's estimate)", graphs)):
        if key in r:
            d, e = rel(pred, r[key].value * GIB)
            out.rows.append(Row(label, f"{r[key].text} GiB", f"{pred / GIB:.2f} GiB (estimate)", d, None, e))


def _range_rows(out, r, c_lo, c_hi, how):
    if "kv_cache_tokens" in r:
        rep = int(r["kv_cache_tokens"].value)
        ok = c_lo.tokens <= rep <= c_hi.tokens
        mid = (c_lo.tokens + c_hi.tokens) / 2
        out.rows.append(Row(f"KV cache tokens ({how})", f"{rep:,}", f"{c_lo.tokens:,} .. {c_hi.tokens:,}",
                            "in range" if ok else f"{rep - mid:+,.0f}", ok, (mid - rep) / rep if rep else None))
    if "gpu_blocks" in r:
        rep = int(r["gpu_blocks"].value)
        ok = c_lo.blocks <= rep <= c_hi.blocks
        out.rows.append(Row(f"GPU blocks ({how})", f"{rep:,}", f"{c_lo.blocks:,} .. {c_hi.blocks:,}",
                            "in range" if ok else "outside", ok, None))
    if "max_concurrency" in r:
        rep = r["max_concurrency"]
        lo, hi = round(c_lo.max_concurrency, 2), round(c_hi.max_concurrency, 2)
        ok = lo <= rep.value <= hi
        out.rows.append(Row(f"max concurrency ({how})", f"{rep.text}x", f"{lo:.2f}x .. {hi:.2f}x",
                            "in range" if ok else "outside", ok, None))


def _exact_rows(out, r, cap, how):
    if "kv_cache_tokens" in r:
        rep = int(r["kv_cache_tokens"].value)
        out.rows.append(Row(f"KV cache tokens ({how})", f"{rep:,}", f"{cap.tokens:,}", f"{cap.tokens - rep:+,}",
                            cap.tokens == rep, (cap.tokens - rep) / rep if rep else None))
    if "max_concurrency" in r:
        rep = r["max_concurrency"]
        pred = f"{cap.max_concurrency:.{rep.decimals}f}"
        out.rows.append(Row(f"max concurrency ({how})", f"{rep.text}x", f"{pred}x", "exact" if pred == rep.text else
                            signed(float(pred) - rep.value, "+.2f"), pred == rep.text, None))


def _vllm_model_free(out, r, length, block, v):
    if "gpu_blocks" in r:
        blocks = int(r["gpu_blocks"].value)
    elif "kv_cache_tokens" in r and "max_concurrency" in r:
        blocks = int(r["kv_cache_tokens"].value) // block  # the tokens are whole blocks
        r = {k: v for k, v in r.items() if k != "kv_cache_tokens"}
    else:
        return
    tokens = blocks * block
    conc = tokens / length if v < (0, 8, 0) else blocks / cdiv(length, block)
    cap = Capacity("vllm", "", tokens // block, tokens, conc, length, 0, blocks, block)
    _exact_rows(out, r, cap, f"{blocks:,} blocks x {block}, one group")
