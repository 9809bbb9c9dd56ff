"""kvplan's SGLang memory plan against the SGLang start-up logs of the corpus (benchmarks/budget_corpus.py prints it).

Three checks, each on the records whose model kvplan knows (`kvplan_model`, or `model_inferred` from the pools the log
prints; tests/fixtures/logs/corpus/index.yaml):

* `sglang_pool` (a) given the budget: the tokens kvplan's bytes per token give for the printed "K size" (GB = GiB,
  two decimals: a range of tokens) against the printed `#tokens`, and the K size kvplan gives for the printed tokens
  against the printed text (exact arithmetic, no GPU or release needed);
  (b) end to end: `resolve_engine("sglang", version)` with the record's flags on its GPU (or `gpu_inferred`) at its
  release (or `version_inferred`), never reading the log's figures: weights as loaded against "Load weight end ...
  mem usage", free memory after the weights against its "avail mem", the KV pool (SGLang's "rest": K + V, plus the
  recurrent-state pool's conv + ssm where printed) against the printed sizes, and #tokens against the printed ones.
  Signed error kvplan - SGLang; a positive error on the pool or the tokens is an over-prediction (an OOM at start-up).
* `sglang_weights`: weights as loaded and as stored (the gpt-oss MXFP4 layouts, kvplan.engines.sglang.loaded).
* `sglang_states`: the recurrent-state pool ("Mamba Cache is allocated") by kvplan.engines.sglang.mamba.

The split is budget_corpus's (by source hash); nothing here is fitted.
"""

from __future__ import annotations

import math
import statistics

GIB = 2**30
POOL_TERMS = ("tokens_from_k", "weights", "avail_after_weights", "kv_pool", "tokens")
TOL = {"tokens_from_k": 0.0, "weights": 0.02, "avail_after_weights": 0.05, "kv_pool": 0.05, "tokens": 0.05}


def model_name(rec: dict) -> str | None:
    return rec.get("kvplan_model") or rec.get("model_inferred")


def version_of(rec: dict) -> str | None:
    return rec.get("version") or rec.get("version_inferred")


def gpu_key(rec: dict) -> str | None:
    return rec.get("gpu") or rec.get("gpu_inferred")


def setup(rec: dict, gpu):
    """(engine, model, deployment, request) for a record as its source states it: flags as SGLang's options."""
    from kvplan.core.dtypes import canonical_kv_dtype
    from kvplan.engines import resolve_engine
    from kvplan.engines.sglang import engine as sglang
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.sources.catalog import require_in_catalog

    model = require_in_catalog(model_name(rec))
    flags = rec.get("flags") or {}
    opts = [f"{k}={flags[k]}" for k in ("mem_fraction_static", "chunked_prefill_size", "page_size",
                                        "cuda_graph_max_bs", "max_running_requests") if k in flags]
    engine = resolve_engine("sglang", version_of(rec) or sglang.DEFAULT_VERSION, opts)
    kv = str(flags.get("kv_cache_dtype") or "auto")
    kvd = canonical_kv_dtype(kv, model.dtype) if kv != "auto" else None
    ctx = int(flags.get("context_len") or flags.get("context_length") or engine.context_limit(model).tokens)
    weights = rec.get("weights") or {"float16": "fp16", "bfloat16": "bf16"}.get(str(flags.get("dtype")))
    dep = engine.own_stages(model, Deployment(int(rec.get("tp") or 1), int(rec.get("pp") or 1)))  # its own cut
    return engine, model, dep, Request(context=min(ctx, model.max_context), kv_dtype=kvd, weight_dtype=weights)


def pool_tokens(rep: dict):
    """The printed size of the token pool (kvplan.engines.sglang.reconcile.pool_tokens: "#tokens", or
    max_total_num_tokens where the K line predates it)."""
    from kvplan.engines.sglang.reconcile import pool_tokens as printed

    return printed(rep)


def printed_k(rep: dict):
    """The K size printed, or the one "KV size" of a latent (MLA) pool, whose single buffer kvplan counts as K
    (kvplan.engines.logparse_sglang); None where neither is printed."""
    return rep.get("k_size_gb") or rep.get("kv_size_gb")


def _term(pred: float, eng: float) -> dict:
    return {"engine": eng, "kvplan": pred, "error": pred - eng, "error_rel": (pred - eng) / eng if eng else None}


def given_budget(rec: dict, rep: dict, engine, model, dep, req, st) -> dict:
    """(a): the token range the printed K size gives by kvplan's K bytes per token (buffers hold tokens + one page),
    and the K size kvplan gives for the printed tokens, as text to the printed decimals."""
    from kvplan.engines.sglang.pool import pool_cell
    from kvplan.planning.plan import cache_dtypes

    kvd = cache_dtypes(req, model)[0]
    tokens, k = int(pool_tokens(rep).value), printed_k(rep)
    k_cell = pool_cell(model, dep, kvd, st)[2]
    half = 0.5 * 10 ** -k.decimals
    lo = math.ceil((k.value - half) * GIB / k_cell) - st.page_size
    hi = math.floor((k.value + half) * GIB / k_cell) - st.page_size
    err = 0 if lo <= tokens <= hi else (lo + hi) / 2 - tokens
    k_text = f"{engine.k_size_gib(model, dep, st, tokens, kvd):.{k.decimals}f}"
    return {"engine": tokens, "kvplan": (lo, hi), "error": err, "error_rel": err / tokens,
            "k_size": (k.text, k_text)}


def end_to_end(rec: dict, rep: dict, engine, model, dep, req, gpu) -> dict:
    """(b): kvplan's plan from model + GPU + release + flags alone, against the log's figures (bytes)."""
    res = engine.result(model, gpu, dep, req)
    st, plan, cap = res.settings, res.plan, res.capacity
    loaded = plan.stages[0].weight_bytes if dep.pp > 1 and plan.stages else plan.weight_bytes_per_gpu
    out = {}
    if "weights_mem_usage_gb" in rep:
        out["weights"] = _term(loaded, rep["weights_mem_usage_gb"].value * GIB)
    if "avail_after_weights_gb" in rep:  # free before the weights (usable - what the process holds) - weights
        out["avail_after_weights"] = _term(gpu.memory_usable_bytes - st["init_bytes"] - loaded,
                                           rep["avail_after_weights_gb"].value * GIB)
    if "k_size_gb" in rep and "v_size_gb" in rep or "kv_size_gb" in rep:
        printed = sum(rep[k].value for k in ("k_size_gb", "v_size_gb", "kv_size_gb") if k in rep)
        printed += sum(rep[k].value for k in ("conv_state_gb", "ssm_state_gb") if k in rep)
        out["kv_pool"] = _term(plan.kv_memory_bytes_per_gpu, printed * GIB)
    if pool_tokens(rep) is not None:  # the first pool's line, as kvplan prints it (a hybrid SWA model: the SWA's)
        printed = next(f.value[0] for f in cap.lines if f.label == "KV Cache is allocated")
        out["tokens"] = _term(printed, int(pool_tokens(rep).value))
    elif "max_total_num_tokens" in rep:  # no pool line (before 0.4.2): the scheduler's full-pool count
        out["tokens"] = _term(cap.tokens, int(rep["max_total_num_tokens"].value))
    return out


def sglang_weights(records: list[dict], split, parsed) -> list[dict]:
    """SGLang's weights as loaded ("Load weight end ... mem usage", GB = GiB) against kvplan's SGLang plan, for
    each SGLang record whose model is in the catalog: the record's GPU, else the log check's stand-in. A model kvplan
    refuses for SGLang (a KvplanError, e.g. DeepSeek Sparse Attention's indexer cache) has no row: sglang_pool says
    why."""
    from kvplan.core.errors import KvplanError
    from kvplan.engines import resolve_engine
    from kvplan.engines.logcheck import assumed_gpu
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.sources.catalog import require_in_catalog

    out = []
    for rec in records:
        if rec.get("engine") != "sglang" or not rec.get("kvplan_model"):
            continue
        num = parsed(rec).reported.get("weights_mem_usage_gb")
        if num is None:
            continue
        model = require_in_catalog(rec["kvplan_model"])
        key = rec.get("gpu") or rec.get("gpu_inferred")
        gpu = find_gpu(key) if key else assumed_gpu()
        dep = Deployment(int(rec.get("tp") or 1), int(rec.get("pp") or 1))
        engine = resolve_engine("sglang", rec.get("version"))
        try:
            res = engine.result(model, gpu, dep, Request(context=4096, weight_dtype=rec.get("weights")))
        except KvplanError:
            continue
        eng = num.value * GIB
        for label, pred in (("as loaded", res.plan.weight_bytes_per_gpu),
                            ("checkpoint", res.plan.weight_bytes_per_gpu - res.settings["loaded_extra"])):
            out.append({"id": rec["id"], "split": split(rec)[0], "kvplan": label,
                        "engine_gib": num.value, "kvplan_gib": round(pred / GIB, 3),
                        "error_gib": round((pred - eng) / GIB, 3), "error_rel": round((pred - eng) / eng, 4)})
    return out


def sglang_states(records: list[dict], split, parsed) -> list[dict]:
    """SGLang's recurrent-state pool ("Mamba Cache is allocated") against kvplan.engines.sglang.mamba, for each record
    that prints it: the conv/ssm GB from the printed slots (exact arithmetic), and the slots the release's rule gives
    for the record's own static budget (the printed token pool + state pool, so the split is what is checked)."""
    from kvplan.core.dtypes import canonical_kv_dtype
    from kvplan.engines import resolve_engine
    from kvplan.engines.logcheck import assumed_gpu
    from kvplan.engines.sglang import engine as sglang
    from kvplan.engines.sglang import mamba
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.sources.catalog import require_in_catalog

    out = []
    for rec in records:
        rep = parsed(rec).reported if rec.get("engine") == "sglang" else {}
        name = rec.get("kvplan_model") or rec.get("model_inferred")
        if "ssm_state_gb" not in rep or not name or "max_mamba_cache_size" not in rep:
            continue
        model, dep = require_in_catalog(name), Deployment(int(rec.get("tp") or 1), int(rec.get("pp") or 1))
        version = rec.get("version") or rec.get("version_inferred") or sglang.DEFAULT_VERSION
        engine = resolve_engine("sglang", version)
        dep = engine.own_stages(model, dep)  # the release's own layers per stage (kvplan.engines.stage_split)
        kv = canonical_kv_dtype("auto", model.dtype)
        st = engine.settings(model, assumed_gpu(), dep, Request(context=4096))
        slots, tokens = int(rep["max_mamba_cache_size"].value), int(rep["kv_tokens"].value)
        pool = mamba.state_pool(model, dep, 0, st.state)
        paid = 1 if st.state.version >= (0, 5, 17) else 0
        rest = tokens * engine.token_bytes(model, dep, st, kv) + (slots + paid) * (pool.conv_slot + pool.ssm_slot)
        out.append({"id": rec["id"], "split": split(rec)[0], "version": version,
                    "slots": slots, "kvplan_slots": mamba.state_pool(model, dep, rest, st.state).slots,
                    "conv_gb": rep["conv_state_gb"].text, "kvplan_conv_gb": f"{(slots + 1) * pool.conv_slot / GIB:.2f}",
                    "ssm_gb": rep["ssm_state_gb"].text, "kvplan_ssm_gb": f"{(slots + 1) * pool.ssm_slot / GIB:.2f}"})
    return out


def sglang_pool(records: list[dict], split, parsed) -> list[dict]:
    """One row per SGLang record whose model kvplan knows and whose log prints a pool or its weights; `split(rec)`
    gives (side, source) and `parsed(rec)` the log as kvplan's parser reads it (budget_corpus's)."""
    from kvplan.core.errors import KvplanError
    from kvplan.engines.logcheck import assumed_gpu
    from kvplan.hardware.gpus import find_gpu

    out = []
    for rec in records:
        if rec.get("engine") != "sglang" or not model_name(rec):
            continue
        rep = parsed(rec).reported
        if pool_tokens(rep) is None and not {"weights_mem_usage_gb", "max_total_num_tokens"} & rep.keys():
            continue
        key = gpu_key(rec)
        gpu = find_gpu(key) if key else assumed_gpu()
        row = {"id": rec["id"], "source": split(rec)[1], "split": split(rec)[0], "version": version_of(rec),
               "gpu": key, "tp": int(rec.get("tp") or 1), "pp": int(rec.get("pp") or 1), "terms": {}, "why_not": None}
        try:  # a release kvplan does not model (before 0.4.0) is refused here, said in the row
            engine, model, dep, req = setup(rec, gpu)
            if pool_tokens(rep) is not None and printed_k(rep) is not None:
                st = engine.settings(model, gpu, dep, req)
                row["terms"]["tokens_from_k"] = given_budget(rec, rep, engine, model, dep, req, st)
            if rec.get("unpredictable"):
                row["why_not"] = "unpredictable (the index says why)"
            elif not key or not version_of(rec):
                row["why_not"] = "no " + " and no ".join(w for w, v in (("GPU", key), ("release", version_of(rec)))
                                                        if not v)
            else:
                row["terms"].update(end_to_end(rec, rep, engine, model, dep, req, gpu))
        except KvplanError as e:
            row["why_not"] = f"kvplan refuses it: {e}"
        out.append(row)
    return out


def pool_summary(rows: list[dict], split: str) -> dict:
    """Per term: n, median signed error (GiB, or tokens), median |rel|, within tolerance, and over-predictions
    beyond 5% (the pool and the tokens: an OOM at start-up)."""
    out = {}
    for term in POOL_TERMS:
        errs = [r["terms"][term] for r in rows if r["split"] == split and term in r["terms"]]
        if not errs:
            continue
        rel = [e["error_rel"] for e in errs]
        scale = 1 if term.startswith("tokens") else GIB
        out[term] = {"n": len(errs), "median_error": statistics.median(e["error"] for e in errs) / scale,
                     "median_abs_rel": statistics.median(abs(x) for x in rel),
                     "within_tol": sum(1 for x in rel if abs(x) <= TOL[term]), "tol": TOL[term],
                     "over_5pct": sum(1 for x in rel if x > 0.05)}
    return out


def _cell(term: str, e: dict | None) -> str:
    if e is None:
        return ""
    if term == "tokens_from_k":
        lo, hi = e["kvplan"]
        same = "exact" if e["error"] == 0 else f"{e['error']:+,.0f}"
        return f"{same} ({lo:,}..{hi:,}; K {e['k_size'][1]}/{e['k_size'][0]})"
    if term == "tokens":
        return f"{e['kvplan']:,} / {e['engine']:,} ({e['error_rel'] * 100:+.1f}%)"
    return f"{e['error'] / GIB:+.2f} ({e['error_rel'] * 100:+.1f}%)"


def _median(term: str, v: dict) -> str:
    return f"{v['median_error']:+,.0f} tokens" if term.startswith("tokens") else f"{v['median_error']:+.2f} GiB"


def _within(v: dict) -> str:
    return f"{v['within_tol']}/{v['n']} " + (f"within {v['tol'] * 100:g}%" if v["tol"] else "exact")


def pool_lines(rows: list[dict], splits: tuple[str, ...] = ("train", "held-out")) -> list[str]:
    """The printed report: one line per record and term, then the summaries of the splits asked for (budget_corpus.py
    --train passes the training split alone, so no held-out figure is printed)."""
    lines = ["SGLang pool: (a) tokens from the printed K size by kvplan's bytes per token (given the budget); "
             "(b) end to end from model + GPU + release + flags (kvplan - SGLang):"]
    for r in rows:
        head = f"  {r['id'][:40]:40} {r['split']:8} {str(r['version'])[:11]:11} {str(r['gpu'])[:9]:9}"
        terms = [f"{t} {_cell(t, r['terms'].get(t))}" for t in POOL_TERMS if t in r["terms"]]
        lines.append(head + "  " + "; ".join(terms) + (f"  [no end to end: {r['why_not']}]" if r["why_not"] else ""))
    for split in splits:
        s = pool_summary(rows, split)
        lines.append(f"SGLang pool {split}: term  n  median error  median |rel|  within tol  over-predicted > 5%")
        for term, v in s.items():
            lines.append(f"  {term:20} {v['n']:3}  {_median(term, v)}  {v['median_abs_rel'] * 100:5.1f}%"
                         f"  {_within(v)}  {v['over_5pct']}")
    return lines


def pool_markdown(rows: list[dict]) -> str:
    """The README's SGLang table: every record with a term (train and held-out), then each split's summary."""
    out = ["| SGLang record | split | release | GPU | tp×pp | tokens from K size (given the budget) | weights | "
           "avail after weights | KV pool (K+V+states) | #tokens kvplan / SGLang |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["terms"]:
            continue
        cells = " | ".join(_cell(t, r["terms"].get(t)) for t in POOL_TERMS)
        out.append(f"| {r['id']} | {r['split']} | {r['version'] or ''} | {r['gpu'] or ''} | {r['tp']}×{r['pp']} | "
                   f"{cells} |")
    out += ["", "| SGLang summary | split | n | median signed error | median abs. error | within tolerance | "
            "over-predicted > 5% |", "|---|---|---|---|---|---|---|"]
    for split in ("train", "held-out"):
        for term, v in pool_summary(rows, split).items():
            out.append(f"| {term.replace('_', ' ')} | {split} | {v['n']} | {_median(term, v)} | "
                       f"{v['median_abs_rel'] * 100:.1f}% | {_within(v)} | {v['over_5pct']}/{v['n']} |")
    return "\n".join(out)
