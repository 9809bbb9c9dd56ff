"""An SGLang start-up log against kvplan's SGLang arithmetic: weights, the KV pool's bytes and
tokens, concurrency (kvplan.engines.logcheck holds the rows)."""

from __future__ import annotations

import math

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.units import signed
from kvplan.engines import resolve_engine
from kvplan.engines.logcheck import GIB, WHATIF_CONTEXTS, Reconciliation, Row, assumed_gpu, cache_dtype, rel
from kvplan.engines.logrecord import deployment_at
from kvplan.engines.log_weights import log_weight_dtype
from kvplan.engines.sglang import engine as sglang
from kvplan.engines.sglang import loaded as sglang_loaded
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.planning.deploy import Deployment, stage_ranges
from kvplan.planning.plan import Request, prepare


UNPRINTED = "the log does not print its SGLang version"  # how the notes on the release it ran open


def pool_tokens(r: dict):
    """The pool's printed size: "#tokens", or, where the K line predates it (0.4.2.post1 to 0.4.3.post2 print
    "KV Cache is allocated. K size: ..." alone, mem_cache/memory_pool.py L195), max_total_num_tokens, the size the
    pool is built with (0.4.2.post1 model_executor/model_runner.py L651-652); None where neither is printed."""
    if "kv_tokens" in r:
        return r["kv_tokens"]
    return r.get("max_total_num_tokens") if "k_size_gb" in r else None


def scheduler_tokens(r: dict):
    """The pool's printed size, else max_total_num_tokens where the log prints no pool line at all (before 0.4.2 SGLang
    printed none: 0.4.0.post1's scheduler line, scheduler.py L219-224, or the one-batch bench's line alone,
    bench_one_batch.py L130): the full pool's tokens, what kvplan's capacity counts (its max_total_num_tokens
    figure); None where neither is printed."""
    pool = pool_tokens(r)
    return pool if pool is not None else r.get("max_total_num_tokens")


def reconcile_sglang(rec, model, gpu, version, kv_name, tp, weight_dtype=None):
    s, r = rec.settings, rec.reported
    out = Reconciliation("sglang", version or rec.version or sglang.DEFAULT_VERSION,
                         model.name if model else (rec.model or rec.architecture), gpu.key if gpu else None)
    if model is None:
        named = f"names only {rec.architecture}" if rec.architecture else "names no model"
        raise KvplanError(f"the log {named}; pass {arg('model')} to check it", EXIT_USAGE, param="model")
    if not (version or rec.version):
        out.notes.append(f"{UNPRINTED}; modelled as {out.version}, the newest kvplan knows "
                         f"(pass {arg('engine_version')})")
    given_version, version = version, out.version
    given = tp
    stated = s.get("quantization") if s.get("quantization") != "None" else None  # None: the checkpoint's choice
    wdt = log_weight_dtype(model, stated, weight_dtype, rec.model, out.notes, s.get("quant_bits"))
    inferred = None if tp or rec.tp else _tp_from_weights(model, rec, out, gpu or assumed_gpu(), version, wdt)
    # under pp each stage's pool is its own layers' (the engine's pool_cell); the nodes as the log states them
    dep = deployment_at(rec, tp or rec.tp or inferred or 1, given, out.notes, gpu, inferred=inferred is not None)
    if gpu is None:
        out.notes.append(f"no {arg('gpu')}: the rows that need the GPU's memory (memory in use before the "
                         "weights, #tokens from the GPU alone) are left out")
    ctx = s.get("context_len") or model.max_context
    req = Request(context=ctx, kv_dtype=cache_dtype(kv_name or s.get("kv_cache_dtype"), model), weight_dtype=wdt)
    stand_in = gpu or assumed_gpu()
    opts = [f"mem_fraction_static={s['mem_fraction_static']}"] if "mem_fraction_static" in s else []
    from_pool = None
    if not (given_version or rec.version or opts) and gpu is not None:
        from_pool = _version_from_pool(model, gpu, dep, req, r, out)
        version = out.version = from_pool or version
    engine = resolve_engine("sglang", version, opts)
    dep = engine.own_stages(model, dep)  # the release's own cut (kvplan.engines.stage_split)
    st = engine.settings(model, stand_in, dep, req)
    if dep.pp > 1:
        out.notes.append(f"pp {dep.pp}: each stage's pool is its own layers'; kvplan shows the largest-cell stage's")
    if "mem_fraction_static" not in s:
        vlm = f" (x {st.vlm_factor:.4g} for its vision tower)" if st.vlm_factor != 1.0 else ""
        out.notes.append(f"mem_fraction_static not in the log; {st.mem_fraction_static:g} is the {version} default{vlm}"
                         + ("" if gpu else f" for an assumed 80 GiB GPU (pass {arg('gpu')})"))
    p = resolve_engine().plan(model, stand_in, dep, Request(context=ctx, kv_dtype=req.kv_dtype, weight_dtype=wdt))
    kvd = req.kv_dtype
    if "weights_mem_usage_gb" in r:  # as loaded: the RoPE tables SGLang builds included (sglang/loaded.py)
        loaded = p.weight_bytes_per_gpu + st.loaded_extra
        rep = r["weights_mem_usage_gb"].value * GIB
        d, e = rel(loaded, rep)
        out.rows.append(Row("weights per GPU (as loaded: Load weight end, mem usage)",
                            f"{r['weights_mem_usage_gb'].text} GB", f"{loaded / GIB:.2f} GiB", d, abs(e) <= 0.02, e))
    f = st.mem_fraction_static
    budget = None
    if "avail_after_weights_gb" in r and "weights_mem_usage_gb" in r:
        (lo, hi), (c_lo, c_hi) = _pool_range(engine, model, dep, st, r, ctx, kvd)
        budget = int((r["avail_after_weights_gb"].value * f - r["weights_mem_usage_gb"].value * (1 - f)) * GIB)
        if "kv_tokens" in r:
            rep = int(r["kv_tokens"].value)
            ok = c_lo.tokens <= rep <= c_hi.tokens
            mid = (c_lo.tokens + c_hi.tokens) / 2
            # where the release was inferred from this very row (_version_from_pool) it is shown, not judged
            out.rows.append(Row(f"#tokens (rest = avail x {f:g} - usage x {1 - f:.2f})", f"{rep:,}",
                                f"{c_lo.tokens:,} .. {c_hi.tokens:,}",
                                "release fitted to it" if from_pool else "in range" if ok else f"{rep - mid:+,.0f}",
                                None if from_pool else ok, (mid - rep) / rep))
        if st.state is not None:
            out.rows += _state_rows(r, model, dep, st.state, (int(math.ceil(lo)), int(math.ceil(hi)) - 1), ctx)
        if gpu is not None:
            pre = (r["avail_after_weights_gb"].value + r["weights_mem_usage_gb"].value) * GIB
            out.rows.append(Row("memory in use before weights (device total - free)",
                                f"{(gpu.memory_usable_bytes - pre) / GIB:.2f} GiB (inferred)",
                                f"{st.init_bytes / GIB:.2f} GiB (estimate)",
                                rel(st.init_bytes, gpu.memory_usable_bytes - pre)[0], None,
                                rel(st.init_bytes, gpu.memory_usable_bytes - pre)[1]))
    printed = scheduler_tokens(r)
    if gpu is not None and printed is not None:
        # End to end: what `fit --engine sglang` predicts from the GPU alone, without the log's figures; the label
        # says which mem_fraction_static that took and why (issue 22: a 0 there was unexplained).
        rep = int(printed.value)
        alone = engine.result(model, gpu, dep, req).capacity.tokens
        d, e = rel(alone, rep)
        why = "the log's" if "mem_fraction_static" in s else f"{version}'s default"  # notes: how the release was known
        out.rows.append(Row(f"#tokens predicted from the GPU alone (mem_fraction_static {st.mem_fraction_static:g}, "
                            f"{why})", f"{rep:,}", f"{alone:,}", d, abs(e) <= 0.05, e))
        if alone == 0:
            out.notes.append(_no_pool_note(s, st.mem_fraction_static, version, bool(given_version or rec.version)))
    if printed is not None:
        tokens = int(printed.value)
        for key, label in (("k_size_gb", "K size"), ("v_size_gb", "V size"), ("kv_size_gb", "KV size (MLA latent)")):
            if key in r and pool_tokens(r) is not None:
                pred = f"{engine.k_size_gib(model, dep, st, tokens, kvd):.{r[key].decimals}f}"
                out.rows.append(Row(f"{label} from #tokens (GB = GiB)", f"{r[key].text} GB", f"{pred} GB",
                                    "exact" if pred == r[key].text else signed(float(pred) - r[key].value, "+.2f"),
                                    pred == r[key].text, None))
        budget = tokens * engine.token_bytes(model, dep, st, kvd)
        cap = int(r["max_running_requests"].value) if st.state is not None and "max_running_requests" in r else None
        for c in sorted({ctx, *[c for c in WHATIF_CONTEXTS if c <= model.max_context]}):
            n = tokens // c if cap is None else min(tokens // c, cap)  # a hybrid: within the printed running cap
            out.whatif.append((f"requests of {c:,} tokens", f"{n:,} at once ({tokens:,} tokens"
                               + ("" if cap is None else f", max_running_requests {cap:,}") + ")"))
        out.whatif.append(("KV pool bytes per GPU", f"{budget / GIB:.2f} GiB"))
    return out


def _pool_range(engine, model, dep, st, r: dict, ctx: int, kvd):
    """((lo, hi) bytes, (capacity at lo, capacity at hi)): the KV budget the printed avail and mem usage allow at the
    plan's mem_fraction_static (rest = avail x f - usage x (1 - f), over the printed decimals' intervals), and the
    pools kvplan lays out at its two ends."""
    f = st.mem_fraction_static
    (a_lo, a_hi), (u_lo, u_hi) = r["avail_after_weights_gb"].interval, r["weights_mem_usage_gb"].interval
    lo, hi = (a_lo * f - u_hi * (1 - f)) * GIB, (a_hi * f - u_lo * (1 - f)) * GIB
    return (lo, hi), (engine.capacity_at(model, dep, st, int(math.ceil(lo)), ctx, kvd),
                      engine.capacity_at(model, dep, st, int(math.ceil(hi)) - 1, ctx, kvd))


def _no_pool_note(settings: dict, f: float, version: str, pinned: bool) -> str:
    """Why the GPU-alone row shows 0 tokens: the fraction the log printed, or the release's default (and, where the
    release was not printed, that another release's default may be the one the log ran with)."""
    if "mem_fraction_static" in settings:
        return (f"the log's mem_fraction_static {f:g} leaves no KV pool in kvplan's arithmetic for this GPU and model "
                f"(check {arg('gpu')} and {arg('model')})")
    return (f"kvplan's mem_fraction_static {f:g} ({version}'s default) leaves no KV pool on this GPU"
            + ("" if pinned else f"; if the log came from another release, pass {arg('engine_version')}"))


def _version_from_pool(model, gpu, dep, req, r: dict, out) -> str | None:
    """A log that prints no release, no mem_fraction_static but its avail / usage / #tokens: the newest release
    kvplan models whose default fraction puts the printed #tokens within what the printed avail and usage allow
    (the "#tokens (rest = ...)" row's arithmetic), said in a note; None (the newest release kept) where the
    newest already does, none does, or the log lacks a figure. An older release's default matching is evidence,
    not proof (a run may have passed the flag), so the note says how to override it."""
    if not {"avail_after_weights_gb", "weights_mem_usage_gb", "kv_tokens"} <= r.keys():
        return None
    rep = int(r["kv_tokens"].value)
    for v in reversed(sglang.VERSIONS):
        engine = resolve_engine("sglang", v, [])
        cut = engine.own_stages(model, dep)  # each release's own cut (kvplan.engines.stage_split)
        try:  # a release that cannot run the model (a state layer it has no pool for, ...) did not write the log
            engine.result(model, gpu, dep, req)
            st = engine.settings(model, gpu, cut, req)
            f = st.mem_fraction_static
            _, (c_lo, c_hi) = _pool_range(engine, model, cut, st, r, req.context, req.kv_dtype)
        except KvplanError:
            continue
        if c_lo.tokens <= rep <= c_hi.tokens:
            if v == sglang.DEFAULT_VERSION:
                return None
            _replace_version_note(out, f"{UNPRINTED}; modelled as {v}, inferred from its figures: #tokens {rep:,} is "
                                  f"what avail {r['avail_after_weights_gb'].text} GB and mem usage "
                                  f"{r['weights_mem_usage_gb'].text} GB give at {v}'s default mem_fraction_static "
                                  f"{f:g}, the newest modelled release whose default does (pass "
                                  f"{arg('engine_version')})")
            return v
    return None


def _replace_version_note(out, note: str) -> None:
    """The "no version printed" note replaced where it stands (found by its opening, not by its place: a note
    added before it must survive), or appended where there is none."""
    at = next((i for i, n in enumerate(out.notes) if n.startswith(UNPRINTED)), None)
    if at is None:
        out.notes.append(note)
    else:
        out.notes[at] = note


def _state_rows(r, model, dep, ss, budgets: tuple[int, int], ctx: int) -> list[Row]:
    """The recurrent-state pool (kvplan.engines.sglang.mamba): its slots from the budget, the buffers' GB from
    the log's slots, and the scheduler's cap from the log's slots and tokens."""
    rows = []
    lo, hi = (sglang_mamba.state_pool(model, dep, b, ss) for b in budgets)
    slots = int(r["max_mamba_cache_size"].value) if "max_mamba_cache_size" in r else lo.slots
    if "max_mamba_cache_size" in r:
        ok = lo.slots <= slots <= hi.slots
        rows.append(Row("max_mamba_cache_size (state slots)", f"{slots:,}", f"{lo.slots:,} .. {hi.slots:,}",
                        "in range" if ok else f"{lo.slots - slots:+,}", ok, (lo.slots - slots) / max(1, slots)))
    for key, label, per in (("conv_state_gb", "conv_state size", lo.conv_slot), ("ssm_state_gb", "ssm_state size",
                                                                                lo.ssm_slot)):
        if key in r:
            pred = f"{(slots + 1) * per / GIB:.{r[key].decimals}f}"
            rows.append(Row(f"{label} from slots + 1 (GB = GiB)", f"{r[key].text} GB", f"{pred} GB",
                            "exact" if pred == r[key].text else signed(float(pred) - r[key].value, "+.2f"),
                            pred == r[key].text, None))
    if "max_running_requests" in r and "kv_tokens" in r:
        pool = sglang_mamba.StatePool(slots, lo.conv_slot, lo.ssm_slot, 0, lo.per_request, lo.rule)
        pred = sglang_mamba.max_running(pool, int(r["kv_tokens"].value), ctx, ss)
        rep = int(r["max_running_requests"].value)
        ok = True if pred == rep else None if rep < pred else False  # below: a flag the log may not print
        rows.append(Row(f"max_running_requests (slots // {pool.per_request}, or the flag)",
                        f"{rep:,}", f"{pred:,}", "exact" if pred == rep else f"{pred - rep:+,}", ok, None))
    return rows


def _tp_from_weights(model, rec, out, gpu, version, wdt=None) -> int | None:
    """The log shows no tp: the power of two whose weights per GPU as loaded (the checkpoint's split plus what
    SGLang's loading adds, sglang/loaded.py, as the weights row reads them) match the log's "mem usage" within
    5 %, said in a note; None (tp 1 assumed, said) where none does or the log prints no weights. `wdt`: the weights'
    format the check prices (kvplan.engines.log_weights)."""
    if "weights_mem_usage_gb" not in rec.reported:
        out.notes.append(f"the log does not show the tensor-parallel size; tp 1 assumed (pass {arg('tp')})")
        return None
    printed = rec.reported["weights_mem_usage_gb"].value * GIB
    pp = rec.pp or 1  # the stages cut as the release cuts them (kvplan.engines.stage_split), not as vLLM does
    cut = resolve_engine("sglang", version).own_stages(model, Deployment(1, pp)).stage_layers
    for tp in (1, 2, 4, 8, 16, 32, 64):
        dep = Deployment(tp, pp, stage_layers=cut)
        try:  # the weights of each stage's rank, as a plan reads them (kvplan.planning.plan.prepare), no plan made
            per_gpu = max(s.weight_bytes for s in prepare(model, dep, Request(context=1, weight_dtype=wdt)).stages)
        except KvplanError:
            continue
        per_gpu += sglang_loaded.loaded_extra(model, gpu, tp, version, 1, stage_ranges(model, dep))
        if abs(per_gpu - printed) <= 0.05 * printed:
            out.notes.append(f"the log does not show the tensor-parallel size; tp {tp} inferred: its weights per "
                             f"GPU ({printed / GIB:.2f} GiB) match the model's split {tp} ways (pass {arg('tp')})")
            return tp
    out.notes.append(f"the log does not show the tensor-parallel size and no split of the weights matches "
                     f"its mem usage; tp 1 assumed (pass {arg('tp')})")
    return None
