"""Reconciling a start-up log with kvplan: each printed number next to kvplan's, with the difference.

Rounded figures are handled as intervals: "Available KV cache memory: 28.20 GiB" means a budget in
[28.195, 28.205) GiB, so kvplan reports the range of tokens and concurrency that interval allows and
says whether the engine's printed number lies in it. Where the engine prints an exact count (vLLM's
block count, SGLang's #tokens) the check from it is exact. From the log's budget, kvplan infers the
engine's non-KV overhead and shows what the same deployment holds at other contexts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.logs.parse import LogRecord, Num

GIB = 2**30
MIB = 2**20
WHATIF_CONTEXTS = (4096, 8192, 32768, 131072)


@dataclass(frozen=True)
class Row:
    quantity: str
    reported: str
    predicted: str
    diff: str
    ok: bool | None = None  # None: shown, not judged
    error: float | None = None  # signed relative error (kvplan - engine) / engine


@dataclass
class Reconciliation:
    engine: str
    version: str
    model: str | None
    gpu: str | None
    rows: list = field(default_factory=list)
    whatif: list = field(default_factory=list)  # (label, value)
    notes: list = field(default_factory=list)


def _rel(pred: float, rep: float) -> tuple[str, float | None]:
    if not rep:
        return "-", None
    e = (pred - rep) / rep
    return f"{e * 100:+.2f}%", e


def _dtype(name: str | None, model):
    from kvplan.dtypes import canonical_kv_dtype

    return canonical_kv_dtype(name or "auto", model.dtype if model else "bf16")


def reconcile(rec: LogRecord, model=None, gpu=None, version: str | None = None, kv_dtype: str | None = None,
              tp: int | None = None) -> Reconciliation:
    fns = {"vllm": _vllm, "sglang": _sglang, "llama.cpp": _llamacpp}
    if rec.engine not in fns:
        raise KvplanError(f"a {rec.engine} log: kvplan reads its figures but does not check them yet", EXIT_USAGE)
    fn = fns[rec.engine]
    return fn(rec, model, gpu, version, kv_dtype, tp)


# --- vLLM -----------------------------------------------------------------------------------------

def _assumed_gpu():
    from kvplan.hardware import GPU

    return GPU.of_memory("unknown", "an assumed 80 GiB GPU", 80 * GIB, "assumed: no --gpu given")


def _vllm(rec, model, gpu, version, kv_name, tp):
    """A vLLM log against kvplan: the deployment it states, then its budget, then its pool."""
    from kvplan.engines import resolve_engine
    from kvplan.engines.base import parse_version

    s, r = rec.settings, rec.reported
    out, gpu, dep, length, version = _vllm_context(rec, model, gpu, version, tp)
    gmu = s.get("gpu_memory_utilization")
    gmu = gmu.value if isinstance(gmu, Num) else gmu
    opts = [f"{k}={s[k]}" for k in ("max_num_batched_tokens", "max_num_seqs") if isinstance(s.get(k), int)]
    engine = resolve_engine("vllm", version, opts, gpu_memory_utilization=gmu, block_size=s.get("block_size"))
    if model is None:
        _vllm_model_free(out, r, length, s.get("block_size") or 16, parse_version(version))
        out.notes.append("no model given (--model): only the engine's own arithmetic between its printed numbers is checked")
        return out
    req = _vllm_request(rec, model, length, kv_name, out)
    stand_in = gpu or _assumed_gpu()
    st = engine.settings(model, stand_in, dep, req)
    res = engine.result(model, stand_in, dep, req)
    _vllm_budget_rows(out, r, res, st, gpu)
    _term_rows(out, r, res.settings, model, dep)
    _vllm_pool_rows(out, r, engine, model, dep, st, req.kv_dtype, length)
    return out


def _vllm_context(rec, model, gpu, version, tp):
    """(Reconciliation, GPU, Deployment, max_model_len, version) as the log states them, with a note
    for each thing it leaves out and kvplan assumes."""
    from kvplan.deploy import Deployment
    from kvplan.hardware import GPU

    s = rec.settings
    version = version or rec.version or {"v0": "0.6.6", "v1-early": "0.7.0"}.get(rec.era, "0.11.0")
    out = Reconciliation("vllm", version, model.name if model else rec.model, gpu.key if gpu else None)
    if not rec.version:
        out.notes.append(f"the log does not name its vLLM version; modelled as {version} ({rec.era} log format)")
    length = s.get("max_model_len") or (model.max_context if model else None)
    if length is None:
        raise KvplanError("the log does not show max_model_len; pass --model", EXIT_USAGE)
    if not (tp or rec.tp):
        out.notes.append("the log does not show the tensor-parallel size; tp 1 assumed (pass --tp)")
    dep = Deployment(tp or rec.tp or 1, 1)
    total = s.get("total_gpu_memory_gib")
    if gpu is None and isinstance(total, Num):
        gpu = GPU.of_memory("log", "GPU from the log", int(total.value * GIB), "the log's total_gpu_memory")
        out.gpu = f"{total.text} GiB (from the log)"
    elif gpu is not None and isinstance(total, Num):
        out.notes.append(f"the log says total_gpu_memory={total.text} GiB; kvplan's {gpu.key} profile has "
                         f"{gpu.memory_usable_bytes / GIB:.2f} GiB")
    return out, gpu, dep, length, version


def _vllm_request(rec, model, length, kv_name, out):
    """The Request the log's run made: its length, cache dtype, and a quantized checkpoint's weights."""
    from kvplan.plan import Request

    hint = (rec.model or "").lower()
    wdt = "fp8" if "fp8" in hint else ("int4" if ("awq" in hint or "gptq" in hint) else None)
    if wdt and model.quantization.method != wdt:
        out.notes.append(f"the log's checkpoint {rec.model} is {wdt}: weights counted as {wdt}")
    else:
        wdt = None
    return Request(context=length, kv_dtype=_dtype(kv_name or rec.settings.get("kv_cache_dtype"), model), weight_dtype=wdt)


def _vllm_budget_rows(out, r, res, st, gpu):
    """Weights as loaded, the available KV memory, and the non-KV overhead the two imply."""
    p = res.plan
    if "model_loading_gib" in r:
        rep = r["model_loading_gib"].value * GIB
        loaded = p.weight_bytes_per_gpu + res.settings.get("overhead_weights_repack", 0)  # kernel padding
        d, e = _rel(loaded, rep)
        out.rows.append(Row("weights per GPU (Model loading took)", f"{r['model_loading_gib'].text} GiB",
                            f"{loaded / GIB:.4f} GiB", d, abs(e) <= 0.02 if e is not None else None, e))
    if "available_kv_gib" in r and gpu is not None:
        rep = r["available_kv_gib"].value * GIB
        d, e = _rel(p.kv_memory_bytes_per_gpu, rep)
        out.rows.append(Row(f"available KV memory (gmu {st.gpu_memory_utilization:g})", f"{r['available_kv_gib'].text} GiB",
                            f"{p.kv_memory_bytes_per_gpu / GIB:.2f} GiB", d, abs(e) <= 0.05, e))
        if "model_loading_gib" in r:
            inferred = gpu.memory_usable_bytes * st.gpu_memory_utilization - r["model_loading_gib"].value * GIB - rep
            ours = res.settings
            est = ours["overhead_activation_peak"] + ours["overhead_non_torch"] + ours["overhead_cudagraphs"]
            d, e = _rel(est, inferred)
            out.rows.append(Row("non-KV overhead (total x gmu - weights - KV)", f"{inferred / GIB:.2f} GiB (inferred)",
                                f"{est / GIB:.2f} GiB (estimate)", d, None, e))


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
            out.whatif.append((f"at {ctx:,} tokens per request", f"{cap.tokens:,} tokens, concurrency {cap.max_concurrency:.2f}x"))
        cap = at(budget, length)
        for b in (1, 8, 32):
            out.whatif.append((f"longest context for {b} concurrent",
                               f"{engine.longest_context(model, dep, st, cap, b, kvd, kvd):,} tokens"))


def _term_rows(out, r, ours, model, dep):
    """The budget's terms where the log prints them (v0.6.4+ profiling lines, v0.11+ DEBUG breakdown)."""
    from kvplan.deploy import split_layers
    from kvplan.engines.vllm_overhead import cudagraph_estimate

    layers = max(b - a for a, b in split_layers(model.num_layers, dep.pp))
    for key, label, pred in (("activation_peak_gib", "activation peak of the profile run", ours["overhead_activation_peak"]),
                             ("non_torch_gib", "non-torch memory", ours["overhead_non_torch"]),
                             ("cudagraph_estimate_gib", "CUDA graphs (vLLM's estimate)", cudagraph_estimate(layers))):
        if key in r:
            d, e = _rel(pred, r[key].value * GIB)
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
                            f"{float(pred) - rep.value:+.2f}", pred == rep.text, None))


def _vllm_model_free(out, r, length, block, v):
    from kvplan.engines.base import Capacity
    from kvplan.intmath import cdiv

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


# --- SGLang ---------------------------------------------------------------------------------------

def _sglang(rec, model, gpu, version, kv_name, tp):
    from kvplan.deploy import Deployment
    from kvplan.engines import resolve_engine, sglang
    from kvplan.plan import Request

    s, r = rec.settings, rec.reported
    version = version or rec.version or sglang.DEFAULT_VERSION
    out = Reconciliation("sglang", version, model.name if model else (rec.model or rec.architecture),
                         gpu.key if gpu else None)
    if model is None:
        raise KvplanError(f"the log names only {rec.architecture or 'no model'}; pass --model to check it", EXIT_USAGE)
    if not (tp or rec.tp):
        out.notes.append("the log does not show the tensor-parallel size; tp 1 assumed (pass --tp)")
    tp = tp or rec.tp or 1
    dep = Deployment(tp, rec.pp or 1)  # under pp each stage's pool is its own layers' (the engine's pool_cell)
    ctx = s.get("context_len") or model.max_context
    req = Request(context=ctx, kv_dtype=_dtype(kv_name or s.get("kv_cache_dtype"), model))
    stand_in = gpu or _assumed_gpu()
    opts = [f"mem_fraction_static={s['mem_fraction_static']}"] if "mem_fraction_static" in s else []
    engine = resolve_engine("sglang", version, opts)
    st = engine.settings(model, stand_in, dep, req)
    if dep.pp > 1:
        out.notes.append(f"pp {dep.pp}: each stage's pool is its own layers'; kvplan shows the largest-cell stage's")
    if "mem_fraction_static" not in s:
        out.notes.append(f"mem_fraction_static not in the log; {st.mem_fraction_static:g} is the {version} default"
                         + ("" if gpu else " for an assumed 80 GiB GPU (pass --gpu)"))
    p = resolve_engine().plan(model, stand_in, dep, Request(context=ctx, kv_dtype=req.kv_dtype))
    kvd = req.kv_dtype
    if "weights_mem_usage_gb" in r:
        rep = r["weights_mem_usage_gb"].value * GIB
        d, e = _rel(p.weight_bytes_per_gpu, rep)
        out.rows.append(Row("weights per GPU (Load weight end: mem usage)", f"{r['weights_mem_usage_gb'].text} GB",
                            f"{p.weight_bytes_per_gpu / GIB:.2f} GiB", d, abs(e) <= 0.02, e))
    f = st.mem_fraction_static
    budget = None
    if "avail_after_weights_gb" in r and "weights_mem_usage_gb" in r:
        a_lo, a_hi = r["avail_after_weights_gb"].interval
        u_lo, u_hi = r["weights_mem_usage_gb"].interval
        lo, hi = (a_lo * f - u_hi * (1 - f)) * GIB, (a_hi * f - u_lo * (1 - f)) * GIB
        c_lo = engine.capacity_at(model, dep, st, int(math.ceil(lo)), ctx, kvd)
        c_hi = engine.capacity_at(model, dep, st, int(math.ceil(hi)) - 1, ctx, kvd)
        budget = int((r["avail_after_weights_gb"].value * f - r["weights_mem_usage_gb"].value * (1 - f)) * GIB)
        if "kv_tokens" in r:
            rep = int(r["kv_tokens"].value)
            ok = c_lo.tokens <= rep <= c_hi.tokens
            mid = (c_lo.tokens + c_hi.tokens) / 2
            out.rows.append(Row(f"#tokens (rest = avail x {f:g} - usage x {1 - f:.2f})", f"{rep:,}",
                                f"{c_lo.tokens:,} .. {c_hi.tokens:,}", "in range" if ok else f"{rep - mid:+,.0f}",
                                ok, (mid - rep) / rep))
        if gpu is not None:
            pre = (r["avail_after_weights_gb"].value + r["weights_mem_usage_gb"].value) * GIB
            out.rows.append(Row("memory in use before weights (device total - free)",
                                f"{(gpu.memory_usable_bytes - pre) / GIB:.2f} GiB (inferred)",
                                f"{st.init_bytes / GIB:.2f} GiB (estimate)",
                                _rel(st.init_bytes, gpu.memory_usable_bytes - pre)[0], None,
                                _rel(st.init_bytes, gpu.memory_usable_bytes - pre)[1]))
    if gpu is not None and "kv_tokens" in r:
        # End to end: what `fit --engine sglang` predicts from the GPU alone, without the log's figures.
        rep = int(r["kv_tokens"].value)
        alone = engine.result(model, gpu, dep, req).capacity.tokens
        d, e = _rel(alone, rep)
        out.rows.append(Row("#tokens predicted from the GPU alone (fit --engine sglang)", f"{rep:,}", f"{alone:,}",
                            d, abs(e) <= 0.05, e))
    if "kv_tokens" in r:
        tokens = int(r["kv_tokens"].value)
        for key, label in (("k_size_gb", "K size"), ("v_size_gb", "V size")):
            if key in r:
                pred = f"{engine.k_size_gib(model, dep, st, tokens, kvd):.{r[key].decimals}f}"
                out.rows.append(Row(f"{label} from #tokens (GB = GiB)", f"{r[key].text} GB", f"{pred} GB",
                                    "exact" if pred == r[key].text else f"{float(pred) - r[key].value:+.2f}",
                                    pred == r[key].text, None))
        budget = tokens * engine.token_bytes(model, dep, st, kvd)
        for c in sorted({ctx, *[c for c in WHATIF_CONTEXTS if c <= model.max_context]}):
            out.whatif.append((f"requests of {c:,} tokens", f"{tokens // c:,} at once ({tokens:,} tokens)"))
        out.whatif.append(("KV pool bytes per GPU", f"{budget / GIB:.2f} GiB"))
    return out


# --- llama.cpp ------------------------------------------------------------------------------------

def _llamacpp(rec, model, gpu, version, kv_name, tp):
    from kvplan.dtypes import canonical_kv_dtype
    from kvplan.engines import llamacpp
    from kvplan.layers import FullAttention

    s, r = rec.settings, rec.reported
    if rec.layers:
        layers = tuple(FullAttention(1, k, v if v != k else 0) for k, v in rec.layers)
        where = f"{len(layers)} layers of K {rec.layers[0][0]} / V {rec.layers[0][1]} values (from the log)"
        if s.get("n_layer") and s["n_layer"] != len(layers):
            where += f"; the log also says n_layer = {s['n_layer']}"
    elif model is not None:
        layers, where = model.layers, model.name
    elif s.get("n_layer") and (s.get("n_embd_k_gqa") or s.get("n_embd")):
        k = s.get("n_embd_k_gqa") or s["n_embd"]
        v = s.get("n_embd_v_gqa") or k
        layers = tuple(FullAttention(1, k, v if v != k else 0) for _ in range(s["n_layer"]))
        where = f"{s['n_layer']} layers x {k} values per K row (from the log's n_layer / n_embd)"
    else:
        raise KvplanError("the log shows no per-layer geometry; pass --model", EXIT_USAGE)
    cells = r.get("cells")
    n_stream = s.get("n_stream", 1)
    n_ctx = int(cells.value) * n_stream if cells else (s.get("kv_size") or s.get("n_ctx_slot") or s.get("n_ctx"))
    if not n_ctx:
        raise KvplanError("the log shows no n_ctx / kv_size", EXIT_USAGE)
    # The log prints n_ctx after padding; the 2023 "kv self size = X MB" line is the 2023-04 era's.
    ver = version or {"2025": "current", "2023": "2023-04"}.get(rec.era, "2024-03")

    def layout_for(type_k: str, type_v: str):
        st = llamacpp.Settings(ver, 512, True, n_stream == 1, rec.era != "2025",
                               canonical_kv_dtype(type_k), canonical_kv_dtype(type_v))
        return st, llamacpp.layout(layers, n_ctx, max(1, n_stream), st)

    note = None
    if kv_name or s.get("type_k"):
        st, lay = layout_for(kv_name or s["type_k"], kv_name or s.get("type_v") or s["type_k"])
    else:
        # Not printed: f16 is llama.cpp's default, but llama-cpp-python before 0.1.4x defaulted to
        # f16_kv=False, an f32 cache. Take the one whose size the log reports, and say so.
        st, lay = layout_for("f16", "f16")
        note = "the log does not print the cache type; f16 assumed (llama.cpp's default), see --kv-dtype"
        reported = r.get("kv_self_mib")
        if reported is not None and f"{lay.total / MIB:.{reported.decimals}f}" != reported.text:
            st32, lay32 = layout_for("f32", "f32")
            if f"{lay32.total / MIB:.{reported.decimals}f}" == reported.text:
                st, lay = st32, lay32
                note = ("the log does not print the cache type; its size is an f32 cache's (llama-cpp-python "
                        "0.1.x defaulted to f16_kv=False), so f32 is used; see --kv-dtype")
    tk, tv = st.type_k, st.type_v
    out = Reconciliation("llama.cpp", ver, where, gpu.key if gpu else None)
    if note:
        out.notes.append(note)
    for key, label, pred in (("k_mib", f"K ({tk.name})", lay.k_bytes), ("v_mib", f"V ({tv.name})", lay.v_bytes),
                             ("kv_self_mib", "KV self size", lay.k_bytes + lay.v_bytes)):
        if key in r:
            rep = r[key]
            txt = f"{pred / MIB:.{rep.decimals}f}"
            d, e = _rel(pred / MIB, rep.value)
            out.rows.append(Row(f"{label} for {n_ctx:,} cells", f"{rep.text} MiB", f"{txt} MiB",
                                "exact" if txt == rep.text else d, txt == rep.text, e))
    per_layer = lay.layer_bytes
    bufs = {k: v for k, v in r.items() if k.startswith("kv_buffer_")}
    if bufs and per_layer and len(set(per_layer)) == 1:
        for k, v in bufs.items():
            n = v.value * MIB / per_layer[0]
            out.whatif.append((f"{k[10:-4]} KV buffer", f"{v.text} MiB = {n:g} layers of {per_layer[0] / MIB:g} MiB"))
    for c in WHATIF_CONTEXTS:
        for t in ("fp16", "q8_0", "q4_0"):
            dt = canonical_kv_dtype(t)
            lay2 = llamacpp.layout(layers, c, 1, llamacpp.Settings("current", 512, True, True, False, dt, dt))
            out.whatif.append((f"-c {c:,} -ctk/-ctv {t.replace('fp16', 'f16')}", f"{lay2.total / MIB:,.2f} MiB"))
    return out
