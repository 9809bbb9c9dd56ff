"""A TensorRT-LLM (PyTorch backend) start-up log against kvplan's TensorRT-LLM arithmetic: the pool from the log's
own budget, the bytes a token from its "GiB for max tokens (N)" pair, and kvplan's own budget end to end
(kvplan.engines.logcheck holds the rows).

The rules checked are kvplan.engines.trtllm.engine's, cited there: max_tokens = budget // bytes per token, blocks =
ceil(max_tokens / tokens_per_block) (KVCacheManager.calculate_max_num_blocks), and a sequence's blocks
ceil(min(max sequence length, window) / tokens_per_block) (TensorRT-LLM@b35ac1b6
cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, the "Max KV cache blocks per sequence" line's maxBlocksPerSeq).
`given_budget` and `end_to_end` are also what benchmarks/budget_trtllm.py prints over the log corpus.
"""

from __future__ import annotations

import math

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines import resolve_engine
from kvplan.engines.base import parse_version
from kvplan.engines.log_weights import log_weight_dtype
from kvplan.engines.logcheck import GIB, WHATIF_CONTEXTS, Reconciliation, Row, assumed_gpu, cache_dtype, rel
from kvplan.engines.logdates import bound_note, released_by
from kvplan.engines.logrecord import logged_deployment
from kvplan.engines.trtllm import engine as trt
from kvplan.engines.trtllm import releases as trt_releases
from kvplan.planning.plan import Request

# Lines of the pool the PyTorch backend (and the executor's KVCacheManager) prints; a log with none of them is the
# TensorRT-engine runtime's (v0.5-v0.9: "Allocate N bytes for k/v cache", "Using N tokens in paged KV cache")
POOL_KEYS = ("max_tokens", "primary_blocks", "max_tokens_set", "estimated_max_tokens", "available_kv_gib")
# (GiB printed, tokens printed) pairs: the pool ("Allocated X GiB for max tokens in paged KV cache (N)") and the
# estimation run ("Estimated max memory in KV cache : X GiB" / "Estimated max tokens in KV cache : N")
PAIRS = (("kv_gib", "max_tokens", "pool"), ("estimated_kv_gib", "estimated_max_tokens", "estimate"))


def reconcile_trtllm(rec, model, gpu, version, kv_name, tp, weight_dtype: str | None = None):
    """A TensorRT-LLM log against kvplan: the deployment it states, its pool given its budget, the bytes a token,
    and (with the GPU) kvplan's budget from the GPU alone. `weight_dtype` (the benchmark's record) overrides the
    checkpoint's weight format; otherwise an FP8 checkpoint named by the log counts as FP8, with a note."""
    r, s = rec.reported, rec.settings
    _refuse_unchecked(r, s)
    version, vnote = _version(rec.version, version, rec.written)
    out = Reconciliation("trtllm", version, model.name if model else rec.model, gpu.key if gpu else None)
    if vnote:
        out.notes.append(vnote)
    tpb = int(r["tokens_per_block"].value) if "tokens_per_block" in r else 32
    if "tokens_per_block" not in r:
        out.notes.append("the log does not print its tokens per block; 32 assumed (TensorRT-LLM's default)")
    if model is None:
        if not _model_free(out, r, s, tpb):
            named = (f"the log's model {rec.model} is not one kvplan knows" if rec.model
                     else "the log does not name its model")
            raise KvplanError(f"{named} and it prints no blocks to check its tokens by; pass {arg('model')} to "
                              "check it", EXIT_USAGE, param="model")
        out.notes.append(f"no model given ({arg('model')}): only the engine's own arithmetic between its printed "
                         "numbers is checked")
        return out
    out.notes.append(f"the log does not name its model; checked as {model.name} ({arg('model')})" if not rec.model else
                     f"the log's model {rec.model} checked as {model.name}")
    # the stages cut as TensorRT-LLM cuts them (Mapping.pp_layers, kvplan.engines.stage_split), not as vLLM does
    dep = trt.TrtLlm(version).own_stages(model, logged_deployment(rec, tp, out.notes, gpu))
    engine, st, req = _setup(rec, model, dep, version, kv_name, weight_dtype, out)
    kvd = req.kv_dtype
    bpt = trt.rank_bytes_per_token(model, dep, kvd)
    res = engine.result(model, gpu or assumed_gpu(), dep, req)
    if "weights_gib" in r:  # the estimation run's "Memory used after loading model weights (inside torch)"
        w = res.plan.weight_bytes_per_gpu
        d, e = rel(w, r["weights_gib"].value * GIB)
        out.rows.append(Row("weights per GPU (after loading, inside torch)", f"{r['weights_gib'].text} GiB",
                            f"{w / GIB:.2f} GiB", d, _within(e, 0.02), e))
    _budget_rows(out, r, model, dep, st, kvd, bpt, req)
    _pair_rows(out, r, bpt)
    given = given_budget(rec, model, dep, st, kvd, req)
    if given and "kvplan_tokens" in given:
        _pool_rows(out, r, given, tpb)
    cap = _concurrency_rows(out, r, s, model, dep, st, kvd, bpt, req, given)
    if gpu is None:
        out.notes.append(f"no {arg('gpu')}: kvplan's own budget (end to end, from the GPU alone) is left out")
    else:
        _end_to_end_rows(out, end_to_end(rec, res))
        if "weights_gib" not in r:
            fmt = req.weight_dtype or model.quantization.method
            less = (f": a quantized checkpoint holds less, and leaves more for the cache (pass its folder as "
                    f"{arg('model')})" if fmt in ("bf16", "fp16", "fp32") else "")
            out.notes.append("the log prints no weights; kvplan's budget counts "
                             f"{res.plan.weight_bytes_per_gpu / GIB:.2f} GiB a GPU ({fmt})" + less)
    if cap is not None:
        for c in sorted({req.context, *[c for c in WHATIF_CONTEXTS if c <= model.max_context]}):
            n = cap.blocks // cdiv(c, st.tokens_per_block)
            out.whatif.append((f"requests of {c:,} tokens",
                               f"{n:,} at once ({cap.blocks:,} blocks of {st.tokens_per_block})"))
        out.whatif.append(("KV pool bytes per GPU", f"{cap.tokens * bpt / GIB:.2f} GiB"))
    return out


def _within(e: float | None, tol: float) -> bool | None:
    """Judged where there is an error to judge (a printed zero has none)."""
    return None if e is None else abs(e) <= tol


def _refuse_unchecked(r, s) -> None:
    """One-line errors for a log kvplan cannot check: the TensorRT-engine runtime's, one without pool figures, or
    one whose sizes no real run prints (a zero block size or sequence length would divide by zero)."""
    if not any(k in r for k in POOL_KEYS):
        if "kv_bytes" in r or "kv_tokens" in r:
            raise KvplanError("a TensorRT-LLM log of the TensorRT-engine runtime (only its 'Allocate N bytes for k/v "
                              "cache' / 'Using N tokens in paged KV cache' lines): kvplan models the PyTorch "
                              "backend's pool, so it is not checked", EXIT_USAGE)
        raise KvplanError("the TensorRT-LLM log shows none of the pool's figures kvplan checks (the estimation run's "
                          "max tokens, primary blocks, 'Allocated X GiB for max tokens in paged KV cache (N)')",
                          EXIT_USAGE)
    sizes = {"tokens_per_block": r["tokens_per_block"].value if "tokens_per_block" in r else None,
             **{k: s.get(k) for k in ("max_seq_len", "window_size", "max_batch_size", "max_num_tokens")}}
    for key, value in sizes.items():
        if value is not None and value < 1:
            raise KvplanError(f"the log's {key} = {value:g} must be positive", EXIT_USAGE)


def _version(printed: str | None, given: str | None, when=None) -> tuple[str, str | None]:
    """The release modelled, and a note where it is not the one the log printed: `given` always wins; a log that
    prints none is modelled as the newest release on PyPI by its earliest timestamp (kvplan.engines.logdates), or,
    with no dated timestamp, the newest kvplan knows."""
    if given:
        return trt.TrtLlm(given).version, None  # a release outside kvplan's range is the user's error
    if not printed:
        return _unprinted(when)
    v = parse_version(printed)
    lo, hi = trt.VERSIONS[0], trt.VERSIONS[-1]
    if v < parse_version(lo):
        return lo, f"the log's TensorRT-LLM {printed} is older than kvplan's first modelled release; modelled as {lo}"
    if v[:2] > parse_version(hi)[:2]:
        return hi, f"the log's TensorRT-LLM {printed} is newer than kvplan's last modelled release; modelled as {hi}"
    return printed, None


def _unprinted(when) -> tuple[str, str]:
    """A log with no version line: the release its timestamp bounds, said as a bound, not a proof."""
    unnamed, pass_it = "the log does not print its TensorRT-LLM version", f"pass {arg('engine_version')}"
    bound = released_by(trt_releases.UPLOADED, when) if when else None
    if when is None:
        return trt.DEFAULT_VERSION, (f"{unnamed}; modelled as {trt.DEFAULT_VERSION}, the newest kvplan knows (no "
                                     f"dated timestamp pins it: {pass_it})")
    lo = trt.VERSIONS[0]
    if bound is None or parse_version(bound[0]) < parse_version(lo):
        return lo, (f"{unnamed}; modelled as {lo}, kvplan's first modelled release: its earliest timestamp "
                    f"({when:%Y-%m-%d %H:%M}) predates {lo}'s upload, so an older release wrote it ({pass_it})")
    return bound[0], (f"{unnamed}; modelled as {bound[0]}, inferred: {bound_note('TensorRT-LLM', when, bound)} (an "
                      f"older release may have written it; {pass_it})")


def _setup(rec, model, dep, version, kv_name, weight_dtype, out):
    """(engine, settings, Request) with the log's settings: the fraction its warning prints, its max_num_tokens and
    tokens per block, max_seq_len (else the window of its blocks-per-sequence line, else the model's limit), the
    cache dtype, and the weights' format."""
    r, s = rec.reported, rec.settings
    opts = []
    if "fraction_set" in r:
        if not 0 < r["fraction_set"].value <= 1:
            raise KvplanError(f"the log's free_gpu_memory_fraction = {r['fraction_set'].text} is not a fraction",
                              EXIT_USAGE)
        opts.append(f"free_gpu_memory_fraction={r['fraction_set'].text}")
    else:
        out.notes.append("free_gpu_memory_fraction not in the log; 0.9 (TensorRT-LLM's default) for kvplan's own "
                         "budget")
    if "max_num_tokens" in s:
        opts.append(f"max_num_tokens={s['max_num_tokens']}")
    if "tokens_per_block" in r:
        opts.append(f"tokens_per_block={int(r['tokens_per_block'].value)}")
    engine = resolve_engine("trtllm", version, opts)
    ctx = s.get("max_seq_len") or s.get("window_size")
    if ctx is None:
        limit = engine.context_limit(model)
        ctx = limit.tokens
        out.notes.append(f"the log does not show max_seq_len; TensorRT-LLM's own, {ctx:,} tokens ({limit.rule}), "
                         "assumed")
    weight_dtype = log_weight_dtype(model, None, weight_dtype, rec.model, out.notes)  # no quant line is read yet
    req = Request(context=ctx, batch=s.get("max_batch_size") or 1, weight_dtype=weight_dtype,
                  kv_dtype=_kv_dtype(rec, model, dep, kv_name, out))
    return engine, engine.settings(model, None, dep, req), req


def _kv_dtype(rec, model, dep, kv_name, out):
    """--kv-dtype, else the one whose bytes a token put the log's printed tokens in its printed GiB (the checkpoint's
    own KV quantization, "Using checkpoint KV quantization", is not named in the log), else the model's dtype."""
    if kv_name:
        return cache_dtype(kv_name, model)
    r = rec.reported
    auto = cache_dtype(None, model)
    pair = next(((g, t) for g, t, _ in PAIRS if g in r and t in r), None)
    if pair is None:
        out.notes.append(f"the log does not show its cache dtype; {auto.name} (the model's) assumed "
                         f"(pass {arg('kv_dtype')})")
        return auto
    lo, hi = r[pair[0]].interval
    n = int(r[pair[1]].value)
    for kvd in dict.fromkeys((auto, canonical_kv_dtype("fp8", model.dtype))):
        b = trt.rank_bytes_per_token(model, dep, kvd)
        if lo * GIB <= n * b < hi * GIB:
            if kvd != auto:
                out.notes.append(f"the log does not show its cache dtype; {kvd.name}, whose {b:,} B a token put its "
                                 f"{n:,} tokens in {r[pair[0]].text} GiB (pass {arg('kv_dtype')})")
            return kvd
    out.notes.append(f"the log does not show its cache dtype, and neither the model's nor fp8 puts its {n:,} tokens "
                     f"in {r[pair[0]].text} GiB; {auto.name} assumed (pass {arg('kv_dtype')})")
    return auto


def _budget_key(r) -> str | None:
    """The estimation run's max tokens the log prints: the warning's "Both free_gpu_memory_fraction and max_tokens are
    set (to F and N, ...)", else "Estimated max tokens in KV cache : N"; None where it prints neither."""
    return next((k for k in ("max_tokens_set", "estimated_max_tokens") if k in r), None)


def given_budget(rec, model, dep, st, kvd, req) -> dict | None:
    """The pool kvplan's rule lays out on the log's own budget (the estimation run's max tokens: the warning's
    "Both free_gpu_memory_fraction and max_tokens are set (to F and N, ...)", else "Estimated max tokens in KV
    cache : N"), and whether the printed tokens' bytes lie in the printed GiB. None without a printed pool."""
    r = rec.reported
    if "max_tokens" not in r:
        return None
    bpt = trt.rank_bytes_per_token(model, dep, kvd)
    out = {"bytes_per_token": bpt, "printed_tokens": int(r["max_tokens"].value)}
    if "kv_gib" in r:
        lo, hi = r["kv_gib"].interval
        out["kv_gib"] = r["kv_gib"].value
        out["tokens_bytes_in_printed_gib"] = lo * GIB <= out["printed_tokens"] * bpt < hi * GIB
    key = _budget_key(r)
    if key:
        n = int(r[key].value)
        cap = trt.capacity(model, dep, n * bpt, req.context, req.batch, st, kvd)
        out.update(budget_tokens=n, kvplan_tokens=cap.tokens, kvplan_blocks=cap.blocks)
    return out


def end_to_end(rec, res) -> dict:
    """kvplan's figures from the model, GPU, release and flags alone (`res`, an EngineResult) beside the log's:
    weights and the estimation peak where printed, the available KV ("available KV cache memory when calculating
    max tokens", else the estimation run's max tokens x the bytes a token, a one-token interval), the pool (GiB)
    and its tokens."""
    bpt = res.capacity.bytes_per_token
    r = rec.reported
    out = {"kvplan": {"weights": res.plan.weight_bytes_per_gpu,
                      "peak": res.plan.weight_bytes_per_gpu + res.settings["overhead_estimate"],
                      "available_kv": res.plan.kv_memory_bytes_per_gpu,
                      "pool": res.capacity.tokens * bpt, "tokens": res.capacity.tokens}, "engine": {}}
    eng = out["engine"]
    for key, name in (("weights_gib", "weights"), ("peak_gib", "peak"), ("available_kv_gib", "available_kv"),
                      ("kv_gib", "pool")):
        if key in r:
            eng[name] = r[key].value * GIB
    key = _budget_key(r)
    if "available_kv" not in eng and key:  # floor(available / bpt) = N: available in [N, N+1) x bpt
        eng["available_kv"] = int(r[key].value) * bpt
        out["available_kv_from"] = key
    if "max_tokens" in r:
        eng["tokens"] = int(r["max_tokens"].value)
    return out


def _budget_rows(out, r, model, dep, st, kvd, bpt, req):
    """The estimation run's max tokens from its printed (rounded) available KV: a range of whole tokens."""
    if "available_kv_gib" not in r:
        return
    key = _budget_key(r)
    lo, hi = r["available_kv_gib"].interval
    t_lo, t_hi = int(math.ceil(lo * GIB)) // bpt, (int(math.ceil(hi * GIB)) - 1) // bpt
    if key is None:
        out.rows.append(Row("max tokens from the printed available KV (budget // bytes a token)",
                            f"{r['available_kv_gib'].text} GiB", f"{t_lo:,} .. {t_hi:,}", "", None, None))
        return
    rep = int(r[key].value)
    ok = t_lo <= rep <= t_hi
    mid = (t_lo + t_hi) / 2
    out.rows.append(Row(f"max tokens from the printed available KV ({r['available_kv_gib'].text} GiB // {bpt:,} B)",
                        f"{rep:,}", f"{t_lo:,} .. {t_hi:,}", "in range" if ok else f"{rep - mid:+,.0f}", ok,
                        (mid - rep) / rep if rep else None))


def _pair_rows(out, r, bpt: int | None):
    """The bytes a token each printed (GiB, tokens) pair implies, against kvplan's (or shown, without a model)."""
    for g, t, label in PAIRS:
        if g not in r or t not in r:
            continue
        n = int(r[t].value)
        lo, hi = r[g].interval
        implied = f"{lo * GIB / n:,.1f} .. {hi * GIB / n:,.1f} B" if n else "-"
        if bpt is None:
            out.rows.append(Row(f"KV bytes a token ({label} {r[g].text} GiB / {n:,} tokens)", implied, "-", "", None))
            continue
        ok = lo * GIB <= n * bpt < hi * GIB
        d, e = rel(n * bpt / GIB, r[g].value)
        out.rows.append(Row(f"KV bytes a token ({label} {r[g].text} GiB / {n:,} tokens)", implied,
                            f"{bpt:,} B", "in range" if ok else d, ok, e))


def _pool_rows(out, r, given, tpb):
    """Blocks and tokens exactly from the log's budget tokens: ceil(N / tokens_per_block) blocks."""
    n = given["budget_tokens"]
    how = f"ceil({n:,} estimated / {tpb})"
    if "primary_blocks" in r:
        rep = int(r["primary_blocks"].value)
        pred = given["kvplan_blocks"]
        out.rows.append(Row(f"primary blocks ({how})", f"{rep:,}", f"{pred:,}", "exact" if pred == rep else
                            f"{pred - rep:+,}", pred == rep, (pred - rep) / rep if rep else None))
    rep, pred = given["printed_tokens"], given["kvplan_tokens"]
    out.rows.append(Row(f"max tokens in paged KV cache ({how} x {tpb})", f"{rep:,}", f"{pred:,}",
                        "exact" if pred == rep else f"{pred - rep:+,}", pred == rep,
                        (pred - rep) / rep if rep else None))


def _concurrency_rows(out, r, s, model, dep, st, kvd, bpt, req, given):
    """A sequence's blocks (printed with the window) and the requests of max_seq_len the pool holds."""
    seq = min(req.context, s.get("window_size") or req.context)
    per = cdiv(seq, st.tokens_per_block)
    if "blocks_per_seq" in r:
        rep = int(r["blocks_per_seq"].value)
        out.rows.append(Row(f"blocks a sequence (ceil({seq:,} / {st.tokens_per_block}))", f"{rep:,}", f"{per:,}",
                            "exact" if per == rep else f"{per - rep:+,}", per == rep, None))
    if "primary_blocks" in r:
        blocks, whence = int(r["primary_blocks"].value), "the printed primary blocks"
    elif given and "kvplan_blocks" in given:
        blocks, whence = given["kvplan_blocks"], "kvplan's blocks"
    elif "max_tokens" in r:
        blocks, whence = int(r["max_tokens"].value) // st.tokens_per_block, "the printed max tokens"
    else:
        return None
    cap = trt.capacity(model, dep, blocks * st.tokens_per_block * bpt, req.context, req.batch, st, kvd)
    limit = f"{s['max_batch_size']:,}" if "max_batch_size" in s else "not printed"
    out.rows.append(Row(f"max concurrency at max_seq_len {req.context:,} ({whence} / {per:,}); printed: the "
                        "engine's request limit", limit,
                        f"{blocks / per:,.2f}x", "", None, None))
    return cap


def _end_to_end_rows(out, e2e):
    k, g = e2e["kvplan"], e2e["engine"]
    for name, label, tol in (("peak", "estimation peak (weights + kvplan's activation and runtime estimate)", None),
                             ("available_kv", "available KV, kvplan's budget from the GPU alone", 0.05),
                             ("pool", "KV pool (GiB), kvplan's from the GPU alone", 0.05)):
        if name not in g:  # the weights, where printed, are the row above's figure
            continue
        d, e = rel(k[name], g[name])
        shown = f"{g[name] / GIB:.2f} GiB"
        if name == "available_kv" and "available_kv_from" in e2e:
            label += " (printed: its tokens x B)"
        out.rows.append(Row(label, shown, f"{k[name] / GIB:.2f} GiB", d,
                            None if tol is None else _within(e, tol), e))
    if "tokens" in g:
        d, e = rel(k["tokens"], g["tokens"])
        out.rows.append(Row(f"max tokens predicted from the GPU alone (fit {arg('engine')} trtllm)", f"{g['tokens']:,}",
                            f"{k['tokens']:,}", d, _within(e, 0.05), e))


def _model_free(out, r, s, tpb) -> bool:
    """No model: the engine's own arithmetic between its printed numbers (blocks x tokens per block = max tokens, a
    sequence's blocks from its window), and the bytes a token each (GiB, tokens) pair implies. False if none."""
    before = len(out.rows)
    if "primary_blocks" in r and "max_tokens" in r:
        blocks, rep = int(r["primary_blocks"].value), int(r["max_tokens"].value)
        pred = blocks * tpb
        out.rows.append(Row(f"max tokens in paged KV cache ({blocks:,} primary blocks x {tpb})", f"{rep:,}",
                            f"{pred:,}", "exact" if pred == rep else f"{pred - rep:+,}", pred == rep, None))
    if "blocks_per_seq" in r and s.get("window_size"):
        w = min(s["window_size"], s.get("max_seq_len") or s["window_size"])
        rep, pred = int(r["blocks_per_seq"].value), cdiv(w, tpb)
        out.rows.append(Row(f"blocks a sequence (ceil({w:,} / {tpb}))", f"{rep:,}", f"{pred:,}",
                            "exact" if pred == rep else f"{pred - rep:+,}", pred == rep, None))
        if "primary_blocks" in r:
            out.rows.append(Row(f"max concurrency at {w:,} tokens (primary blocks / {pred:,})", "not printed",
                                f"{int(r['primary_blocks'].value) / pred:,.2f}x", "", None, None))
    if len(out.rows) == before:
        return False
    _pair_rows(out, r, None)
    return True
