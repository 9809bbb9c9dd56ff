"""TensorRT-LLM's KV pool against its start-up logs: kvplan's PyTorch-backend prediction beside the log's figures.

Imported by budget_corpus.py (same split, `is_held_out` by source); run by hand through it. Two checks, signed
kvplan - TensorRT-LLM:
  (a) **given the budget**: the pool kvplan's rule lays out on the budget the log states (the estimation run's max
      tokens, "Both free_gpu_memory_fraction and max_tokens are set (to F and N ...)": ceil(N / tokens_per_block)
      blocks), against the printed "Allocated X GiB for max tokens in paged KV cache (T)"; and T x kvplan's bytes per
      token against X GiB as printed (rounded to 0.01). Needs the model, neither GPU nor release.
  (b) **end to end**: `TrtLlm(release)` with the record's flags on its GPU (or `gpu_inferred`) at its release (or
      `version_inferred`), never reading the log's figures: weights and the estimation peak where the log prints
      them, the available KV ("available KV cache memory when calculating max tokens", or the estimated max tokens x
      the bytes per token, a one-token interval), the allocated pool (GiB) and its tokens; for a record the index
      marks `unpredictable`, the weights only.
Records of the TensorRT-engine runtime (before the PyTorch backend; flags of a built engine) are listed, not predicted:
kvplan models the PyTorch backend only (docs/engines.md section 3).
"""

from __future__ import annotations

GIB = 2**30


def _engine_backend(rec: dict) -> bool:
    """True for the PyTorch backend (what kvplan models): stated by the record, or a 1.x release."""
    version = rec.get("version") or rec.get("version_inferred") or ""
    return rec.get("backend") == "pytorch" or version.split(".")[0].isdigit() and int(version.split(".")[0]) >= 1


def _setup(rec: dict):
    from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
    from kvplan.engines.trtllm import engine as trt
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.sources.catalog import require_in_catalog

    model = require_in_catalog(rec["kvplan_model"])
    flags = rec.get("flags") or {}
    dep = Deployment(int(rec.get("tp") or 1), int(rec.get("pp") or 1))
    kv = flags.get("kv_cache_dtype")
    req = Request(context=int(flags.get("max_seq_len") or model.max_context),
                  batch=int(flags.get("max_batch_size") or 1),
                  kv_dtype=canonical_kv_dtype(kv, model.dtype) if kv and kv != "auto" else None,
                  weight_dtype=canonical_weight_dtype(rec["weights"]) if rec.get("weights") else None)
    opts = {k: str(flags[k]) for k in ("free_gpu_memory_fraction", "max_num_tokens", "tokens_per_block") if k in flags}
    version = rec.get("version") or rec.get("version_inferred")
    dep = trt.TrtLlm(version).own_stages(model, dep)  # Mapping.pp_layers' cut (kvplan.engines.stage_split)
    return trt, model, dep, req, opts, version


def _given_budget(rec: dict, log) -> dict | None:
    """(a): the pool on the log's own budget, and the printed tokens' bytes against the printed GiB (the check
    `kvplan check-log` makes: kvplan.engines.trtllm.reconcile.given_budget)."""
    from kvplan.engines.trtllm.reconcile import given_budget
    from kvplan.planning.plan import cache_dtypes

    if not rec.get("kvplan_model") or "max_tokens" not in log.reported:
        return None
    trt, model, dep, req, opts, version = _setup(rec)
    eng = trt.TrtLlm(version, opts)
    st = eng.settings(model, None, dep, req)
    kvd = cache_dtypes(eng.request(req, st, model, dep), model)[0]
    return given_budget(log, model, dep, st, kvd, req)


def _end_to_end(rec: dict, log) -> dict | None:
    """(b): kvplan's prediction from the model, GPU, release and flags alone
    (kvplan.engines.trtllm.reconcile.end_to_end, as check-log's rows with --gpu)."""
    from kvplan.engines.trtllm.reconcile import end_to_end
    from kvplan.hardware.gpus import find_gpu

    key = rec.get("gpu") or rec.get("gpu_inferred")
    if not rec.get("kvplan_model") or not key or not (rec.get("version") or rec.get("version_inferred")):
        return None
    trt, model, dep, req, opts, version = _setup(rec)
    e2e = end_to_end(log, trt.TrtLlm(version, opts, {}).result(model, find_gpu(key), dep, req))
    if rec.get("unpredictable"):  # its budget rests on what the source does not state (the index says why): weights
        return {side: {k: v for k, v in terms.items() if k == "weights"} for side, terms in e2e.items()}
    return e2e


def trtllm_rows(records: list[dict], split, parsed) -> list[dict]:
    rows = []
    for rec in records:
        if rec.get("engine") != "trtllm":
            continue
        log = parsed(rec)
        side, _ = split(rec)
        row = {"id": rec["id"], "split": side, "version": rec.get("version"),
               "version_inferred": rec.get("version_inferred"), "gpu": rec.get("gpu") or rec.get("gpu_inferred"),
               "tp": rec.get("tp"), "pp": rec.get("pp"), "pytorch": _engine_backend(rec),
               "model": rec.get("kvplan_model")}
        if row["pytorch"]:
            row["given"] = _given_budget(rec, log)
            row["e2e"] = _end_to_end(rec, log)
        rows.append(row)
    return rows


def _err(e2e: dict, name: str) -> dict | None:
    k, g = e2e["kvplan"].get(name), e2e["engine"].get(name)
    if k is None or g is None or not g:
        return None
    return {"kvplan": k, "engine": g, "error": k - g, "rel": (k - g) / g}


def _given_cell(g: dict | None) -> str:
    if not g:
        return ""
    parts = []
    if "kvplan_tokens" in g:
        ok = "exact" if g["kvplan_tokens"] == g["printed_tokens"] else "miss"
        parts.append(f"{ok} ({g['budget_tokens']:,} tokens -> {g['kvplan_tokens']:,} / {g['printed_tokens']:,})")
    if "tokens_bytes_in_printed_gib" in g:
        parts.append(f"{g['printed_tokens']:,} x {g['bytes_per_token']:,} B "
                     f"{'=' if g['tokens_bytes_in_printed_gib'] else '!='} {g['kv_gib']:.2f} GiB")
    return "; ".join(parts)


def trtllm_markdown(rows: list[dict]) -> str:
    """The README's TensorRT-LLM table: both checks, one row per record."""
    out = ["| TensorRT-LLM record | split | release | GPU | tp×pp | pool given the budget | weights | estimation peak "
           "| available KV | allocated pool | tokens kvplan / TensorRT-LLM |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        version = r["version"] or (f"{r['version_inferred']} (inferred)" if r.get("version_inferred") else "")
        tpp = f"{r['tp']}×{r['pp']}" if r.get("tp") else ""
        if not r["pytorch"]:
            out.append(f"| {r['id']} | {r['split']} | {version} | {r['gpu'] or ''} | {tpp} | TensorRT-engine runtime: "
                       "not modelled | | | | | |")
            continue
        cells = [_given_cell(r.get("given")) or ("model not stated" if not r.get("model") else "")]
        e2e = r.get("e2e")
        for name in ("weights", "peak", "available_kv", "pool"):
            e = _err(e2e, name) if e2e else None
            cells.append("" if e is None else f"{e['error'] / GIB:+.2f} ({e['rel'] * 100:+.1f}%)")
        t = e2e and e2e["engine"].get("tokens")
        cells.append(f"{e2e['kvplan']['tokens']:,} / {t:,} "
                     f"({(e2e['kvplan']['tokens'] - t) / t * 100:+.1f}%)" if t else "")
        out.append(f"| {r['id']} | {r['split']} | {version} | {r['gpu'] or ''} | {tpp} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def trtllm_lines(rows: list[dict]) -> list[str]:
    lines = ["TensorRT-LLM (PyTorch backend) pool: given the log's budget, and end to end (kvplan / engine, GiB):"]
    for r in rows:
        if not r["pytorch"]:
            lines.append(f"  {r['id'][:40]:40} {r['split']:8} TensorRT-engine runtime: not modelled")
            continue
        parts = [_given_cell(r.get("given")) or "model not stated"]
        e2e = r.get("e2e")
        for name in ("weights", "peak", "available_kv", "pool"):
            e = _err(e2e, name) if e2e else None
            if e:
                parts.append(f"{name} {e['kvplan'] / GIB:.2f} / {e['engine'] / GIB:.2f} ({e['rel'] * 100:+.1f}%)")
        if e2e and e2e["engine"].get("tokens"):
            parts.append(f"tokens {e2e['kvplan']['tokens']:,} / {e2e['engine']['tokens']:,}")
        lines.append(f"  {r['id'][:40]:40} {r['split']:8} " + "; ".join(parts))
    return lines
