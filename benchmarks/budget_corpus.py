"""kvplan's vLLM start-up budget against the corpus of real logs: signed error per record and per term.

Run by hand: `.venv/bin/python benchmarks/budget_corpus.py` (table + summary of both splits, held-out rows
included: it says so on its first line), `--train` (training rows and summaries only: what a change may be tuned
on), `--held-out` (held-out rows only), `--calibrate` (re-fit the constants of kvplan/engines/vllm/overhead.py on
the training split and print them), `--json`. Records come from tests/fixtures/logs/corpus/index.yaml; each is read
by kvplan's own log parser. A record is predicted when its model is in the catalog and its GPU is
known: kvplan computes the weights, the three overhead terms and the available KV memory from the
model, GPU, version and flags alone (never from the log's figures) and the error is kvplan - engine.

The split is by source, never by record: the source of an issue is repo#issue; of a file in a
benchmark repository, repo + the model it ran (so every run of one model in one sweep lands on the
same side). A source is held out when the first byte of sha256(source) is below 86 (about 1/3).
SGLang's records (weights, state pool, token pool) are scored by budget_sglang.py beside this file, on the same split;
TensorRT-LLM's (the PyTorch backend's pool, given the log's budget and end to end) by budget_trtllm.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import budget_calibrate  # noqa: E402 (the vLLM constants' fit, beside this file)
import budget_sglang  # noqa: E402 (SGLang's pool, beside this file)
import budget_trtllm  # noqa: E402 (TensorRT-LLM's pool, beside this file)

CORPUS = ROOT / "tests" / "fixtures" / "logs" / "corpus"
GIB = 2**30
TERMS = ("weights", "activation_peak", "non_torch", "consumed", "cudagraph_estimate", "available_kv")
PRINTED = {"weights": "model_loading_gib", "activation_peak": "activation_peak_gib", "non_torch": "non_torch_gib",
           "consumed": "weights_non_torch_gib",
           "cudagraph_estimate": "cudagraph_estimate_gib", "available_kv": "available_kv_gib"}


def source_key(rec: dict) -> str:
    if rec.get("issue"):
        return f"{rec['repo']}#{rec['issue']}"
    return f"{rec['repo']}:{rec.get('model') or rec['id']}"


def is_held_out(rec: dict) -> bool:
    return hashlib.sha256(source_key(rec).encode()).digest()[0] < 86


def _split(rec: dict) -> tuple[str, str]:
    return ("held-out" if is_held_out(rec) else "train"), source_key(rec)


def load_index() -> list[dict]:
    import yaml

    return yaml.safe_load((CORPUS / "index.yaml").read_text())


def parsed(rec: dict):
    """The record as kvplan's parser reads its excerpt; a transcribed table row is read from the index."""
    from types import SimpleNamespace

    from kvplan.engines.logparse import _num, parse_log

    if rec.get("transcribed") in ("table", "json"):
        return SimpleNamespace(reported={k: _num(str(v)) for k, v in rec["figures"].items()}, settings={},
                               stage_layers=None)
    return parse_log((CORPUS / rec["log"]).read_text())


def predict(rec: dict, log) -> dict | None:
    """kvplan's figures (bytes) for a record, from model + GPU + version + flags; None if not predictable."""
    from kvplan.sources.catalog import require_in_catalog
    from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
    from kvplan.engines.vllm import engine as vllm
    from kvplan.engines.logrecord import logged_split
    from kvplan.engines.vllm import overhead as vllm_overhead
    from kvplan.engines.versions import parse_version
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request

    version = rec.get("version") or rec.get("version_inferred")
    key = rec.get("gpu") or rec.get("gpu_inferred")  # an inferred GPU as an inferred version: the notes say why
    if rec.get("engine") != "vllm" or not rec.get("kvplan_model") or not key or not version:
        return None
    model, gpu = require_in_catalog(rec["kvplan_model"]), find_gpu(key)
    flags = rec.get("flags") or {}
    # the layers per stage as the log's command line sets them (VLLM_PP_LAYER_PARTITION=16,32 before `vllm serve`,
    # read by kvplan's parser: kvplan.engines.logparse); vLLM reads the variable (envs.py, 0.5.4 wheel L254-255) and
    # prints no line with its value (its Ray executor's "Copying the following environment variables to workers"
    # names variables, not values), so the log's own excerpt of the command is where a run states it
    dep = Deployment(int(rec.get("tp") or 1), int(rec.get("pp") or 1), **logged_split(log))
    kv = flags.get("kv_cache_dtype")
    if (not kv or kv == "auto") and str(flags.get("dtype", "auto")) not in ("auto", "bfloat16", model.dtype):
        kv = flags["dtype"]  # --kv-cache-dtype auto is the model's dtype as served (--dtype float32: fp32 pages)
    req = Request(context=int(flags.get("max_model_len") or model.max_context),
                  kv_dtype=canonical_kv_dtype(kv, model.dtype) if kv and kv != "auto" else None,
                  weight_dtype=canonical_weight_dtype(rec["weights"]) if rec.get("weights") else None)
    opts = {k: str(flags[k]) for k in ("max_num_batched_tokens", "max_num_seqs", "enforce_eager") if k in flags}
    if flags.get("quantization") == "awq":  # vLLM's --quantization awq: AWQ's own kernel (vllm.awq_dequant)
        opts["awq_kernel"] = "awq"
    if rec.get("mxfp4_backend"):  # the MXFP4 kernel the record names, not the release's choice on the GPU
        opts["mxfp4_backend"] = rec["mxfp4_backend"]
    if rec.get("flashinfer_sampler") is not None:  # the sampler path the log names
        opts["flashinfer_sampler"] = str(rec["flashinfer_sampler"])
    explicit = {"gpu_memory_utilization": flags["gpu_memory_utilization"]} if "gpu_memory_utilization" in flags else {}
    res = vllm.Vllm(version, opts, explicit).result(model, gpu, dep, req)
    layers = max(b - a for a, b in _ranges(model, res.plan.deployment))  # the stages as planned
    # the rank that prints "Model loading took" is the driver's, in the first pipeline stage
    loaded = res.plan.stages[0].weight_bytes if dep.pp > 1 and res.plan.stages else res.plan.weight_bytes_per_gpu
    if rec.get("unpredictable"):  # its budget's settings are not stated (the index says why): the weights only
        return {"weights": loaded}
    return {"weights": loaded, "kv_tokens": res.capacity.tokens, "gpu_blocks": res.capacity.blocks,
            "from_budget": _from_printed_budget(log, vllm.Vllm(version, opts, explicit), model, gpu, dep, req),
            "activation_peak": _printed_peak(log, res.settings, parse_version(str(version))),
            "non_torch": res.settings["overhead_non_torch"],
            **_consumed(res, loaded, parse_version(str(version))),
            "cudagraph_estimate": vllm_overhead.cudagraph_estimate(layers, model, dep.tp, res.settings["max_num_seqs"],
                                                                   gpu, req.weight_dtype,
                                                                   awq_forced=res.settings["awq_forced"]),
            "available_kv": res.plan.kv_memory_bytes_per_gpu}


def _consumed(res, loaded: int, version) -> dict:
    """kvplan's figure for the closing line's "GiB for consumed memory (weights + non-torch)", which from 0.27.0 is
    the budget's free-memory drop from the start-up snapshot to the end of the profile run (gpu_worker.py 0.27.0
    L526, L752-774; mem_utils.py L317-319): the weights as loaded, the non-torch increase and the runner's persistent
    states and buffers (the terms kvplan.engines.vllm.overhead counts there). Before 0.27.0 the line is not scored."""
    from kvplan.engines.vllm.reconcile import _runner_terms  # check-log's sum of the runner terms

    if not version or version < (0, 27, 0):
        return {}
    return {"consumed": loaded + res.settings["overhead_non_torch"] + _runner_terms(res.settings)}


def _printed_peak(log, ours: dict, version) -> int:
    """kvplan's figure for the peak the log prints: the profile's peak (and encoder profile); from 0.27.0 the closing
    line's "GiB for peak activation" also holds the CUDA-graph estimate vLLM subtracted (gpu_worker.py 0.27.0
    L527-529, 0.30.0 L616-618, 0.33.0 L748-750), so kvplan's own estimate is added, as check-log does
    (kvplan.engines.vllm.reconcile._term_rows)."""
    peak = ours["overhead_activation_peak"] + ours.get("overhead_encoder_profile", 0)
    if log.settings.get("peak_from_summary") and version and version >= (0, 27, 0):
        peak += ours.get("overhead_cudagraphs", 0)
    return peak


def _from_printed_budget(log, engine, model, gpu, dep, req) -> dict | None:
    """The pool kvplan lays out on the budget the log prints (rounded, so an interval): (figure, lowest, highest)
    for the printed tokens, or blocks where the log prints a block count. Exact when the printed figure lies in it."""
    import math

    from kvplan.planning.plan import cache_dtypes

    num = log.reported.get("available_kv_gib")
    if num is None or dep.pp > 1:  # with pipeline stages the log prints one stage's budget; the pool is the least
        return None
    st = engine.settings(model, gpu, dep, req)
    kvd, std = cache_dtypes(engine.request(req, st, model, dep), model)
    lo, hi = num.interval
    caps = [engine.capacity_at(model, dep, st, b, req.context, kvd, std)
            for b in (int(math.ceil(lo * GIB)), int(math.ceil(hi * GIB)) - 1)]
    for key, field in (("kv_cache_tokens", "tokens"), ("gpu_blocks", "blocks")):
        if key in log.reported:
            return {"figure": key, "printed": int(log.reported[key].value),
                    "lowest": getattr(caps[0], field), "highest": getattr(caps[1], field)}
    return None


def _ranges(model, dep):
    from kvplan.planning.deploy import stage_ranges

    return stage_ranges(model, dep)


def rows(records: list[dict]) -> list[dict]:
    out = []
    for rec in records:
        log = parsed(rec)
        pred = predict(rec, log)
        row = {"id": rec["id"], "source": source_key(rec), "split": "held-out" if is_held_out(rec) else "train",
               "version": rec.get("version"), "version_inferred": rec.get("version_inferred"),
               "gpu": rec.get("gpu") or rec.get("gpu_inferred"), "tp": rec.get("tp"), "pp": rec.get("pp"), "terms": {}}
        for term in TERMS:
            num = log.reported.get(PRINTED[term])
            if num is None or pred is None or term not in pred:
                continue
            eng = num.value * GIB
            if term == "activation_peak" and (rec.get("pp") or 1) > 1:
                continue  # the printed line may be a stage before the last (no sampler run)
            err = (pred[term] - eng) / GIB
            rel = (pred[term] - eng) / eng if eng else None
            row["terms"][term] = {"engine_gib": num.value, "kvplan_gib": round(pred[term] / GIB, 3),
                                  "error_gib": round(err, 3), "error_rel": None if rel is None else round(rel, 4)}
        if pred and pred.get("from_budget"):
            row["from_budget"] = pred["from_budget"]
        for key in ("kv_cache_tokens", "gpu_blocks"):  # the pool kvplan predicts end to end, as the engine prints it
            num = log.reported.get(key)
            ours = (pred or {}).get("kv_tokens" if key == "kv_cache_tokens" else key)
            if num is not None and ours is not None and "available_kv" in (pred or {}):
                eng = int(num.value)
                row["pool"] = {"figure": key, "engine": eng, "kvplan": ours,
                               "error_rel": round((ours - eng) / eng, 4) if eng else None}
                break
        out.append(row)
    return out


def summary(rs: list[dict], split: str) -> dict:
    out = {}
    for term in TERMS:
        errs = [r["terms"][term] for r in rs if r["split"] == split and term in r["terms"]]
        if not errs:
            continue
        rel = [abs(e["error_rel"]) for e in errs if e["error_rel"] is not None]
        gib = [e["error_gib"] for e in errs]
        tol = 0.02 if term == "weights" else 0.05
        by_source: dict[str, bool] = {}
        for r in rs:
            e = r["terms"].get(term)
            if r["split"] == split and e is not None and e["error_rel"] is not None:
                by_source[r["source"]] = by_source.get(r["source"], True) and abs(e["error_rel"]) <= tol
        out[term] = {"n": len(errs), "median_error_gib": round(statistics.median(gib), 3),
                     "median_abs_rel": round(statistics.median(rel), 4) if rel else None,
                     "within_tol": sum(1 for x in rel if x <= tol), "tol": tol,
                     "sources": len(by_source), "sources_all_within": sum(by_source.values())}
    pools = [r["pool"] for r in rs if r["split"] == split and r.get("pool") and r["pool"]["error_rel"] is not None]
    if pools:
        rel = [p["error_rel"] for p in pools]
        out["kv_pool"] = {"n": len(rel), "median_error_rel": round(statistics.median(rel), 4),
                          "within_tol": sum(1 for x in rel if abs(x) <= 0.05), "tol": 0.05,
                          "over": sum(1 for x in rel if x > 0.05)}
    exact = [r["from_budget"] for r in rs if r["split"] == split and r.get("from_budget")]
    if exact:
        inside = sum(1 for e in exact if e["lowest"] <= e["printed"] <= e["highest"])
        out["pool_from_printed_budget"] = {"n": len(exact), "exact": inside}
    return out


def calibrate(records: list[dict]) -> dict:
    """The overhead constants re-fitted on the training split (budget_calibrate.py beside this file)."""
    return budget_calibrate.calibrate(records, is_held_out, parsed)


def print_table(rs: list[dict]) -> None:
    head = ("record", "split", "term", "engine", "kvplan", "error")
    lines = []
    for r in rs:
        for term, e in r["terms"].items():
            rel = "" if e["error_rel"] is None else f" ({e['error_rel'] * 100:+.1f}%)"
            lines.append((r["id"][:34], r["split"][:5], term[:12], f"{e['engine_gib']:g}", f"{e['kvplan_gib']:.2f}",
                          f"{e['error_gib']:+.2f} GiB{rel}"))
        if r.get("pool"):
            p = r["pool"]
            rel = "" if p["error_rel"] is None else f"{p['error_rel'] * 100:+.1f}%"
            lines.append((r["id"][:34], r["split"][:5], p["figure"][:12], f"{p['engine']}", f"{p['kvplan']}", rel))
        if r.get("from_budget"):
            e = r["from_budget"]
            ok = "exact" if e["lowest"] <= e["printed"] <= e["highest"] else "MISS"
            lines.append((r["id"][:34], r["split"][:5], "on printed", f"{e['printed']}",
                          f"{e['lowest']}-{e['highest']}", ok))
    widths = [max(len(x[i]) for x in lines + [head]) for i in range(len(head))]
    for row in [head, *lines]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def markdown(rs: list[dict], summ: dict) -> str:
    """The README's held-out table: one row per record, signed error per term (GiB, % of the engine's)."""
    short = ("weights", "activation_peak", "non_torch", "cudagraph_estimate", "available_kv")
    out = ["| held-out record | vLLM | GPU | tp×pp | weights | activation peak | non-torch | CUDA graphs (est.) | "
           "available KV | KV pool | pool on the printed budget |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        if r["split"] != "held-out" or not r["terms"]:
            continue
        cells = []
        for t in short:
            e = r["terms"].get(t)
            cells.append("" if e is None else f"{e['error_gib']:+.2f} ({e['error_rel'] * 100:+.1f}%)")
        p, e = r.get("pool"), r.get("from_budget")
        cells.append("" if not p or p["error_rel"] is None else f"{p['error_rel'] * 100:+.1f}%")
        cells.append("" if not e else ("exact" if e["lowest"] <= e["printed"] <= e["highest"] else
                                       f"miss ({e['printed']:,} not in {e['lowest']:,}-{e['highest']:,})"))
        version = r["version"] or (f"{r['version_inferred']} (inferred)" if r.get("version_inferred") else None)
        out.append(f"| {r['id']} | {version} | {r['gpu']} | {r['tp']}×{r['pp']} | " + " | ".join(cells) + " |")
    s = summ["held-out"]
    out.append("")
    out.append("| held-out summary | n | median signed error | median abs. error | within tolerance | "
               "sources with every record within |")
    out.append("|---|---|---|---|---|---|")
    for t in short:
        if t in s:
            v = s[t]
            out.append(f"| {t.replace('_', ' ')} | {v['n']} | {v['median_error_gib']:+.2f} GiB | "
                       f"{v['median_abs_rel'] * 100:.1f}% | {v['within_tol']}/{v['n']} within {v['tol'] * 100:g}% | "
                       f"{v['sources_all_within']}/{v['sources']} |")
    if "kv_pool" in s:
        v = s["kv_pool"]
        out.append(f"| KV pool (tokens or blocks, end to end) | {v['n']} | {v['median_error_rel'] * 100:+.1f}% | | "
                   f"{v['within_tol']}/{v['n']} within 5% ({v['over']} over by more) | |")
    if "pool_from_printed_budget" in s:
        v = s["pool_from_printed_budget"]
        out.append(f"| pool on the printed budget | {v['n']} | | | {v['exact']}/{v['n']} exact | |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    side = ap.add_mutually_exclusive_group()
    side.add_argument("--train", action="store_true", help="training rows and summaries only (no held-out figure)")
    side.add_argument("--held-out", action="store_true", help="held-out rows only")
    ap.add_argument("--calibrate", action="store_true", help="re-fit vLLM's overhead constants (training split)")
    ap.add_argument("--json", action="store_true", help="rows and summaries of the splits asked for, as JSON")
    ap.add_argument("--markdown", action="store_true",
                    help="the README's tables (held-out rows and both splits' summaries)")
    a = ap.parse_args()
    if a.markdown and (a.train or a.held_out):
        ap.error("--markdown prints the README's tables as they stand; it takes no split")
    splits = ("train",) if a.train else ("held-out",) if a.held_out else ("train", "held-out")
    records = load_index()
    if a.calibrate:
        print(json.dumps(calibrate(records), indent=1))
        return
    rs = rows(records)
    summ = {s: summary(rs, s) for s in ("train", "held-out")}
    sg = budget_sglang.sglang_weights(records, _split, parsed)
    states = budget_sglang.sglang_states(records, _split, parsed)
    pool = budget_sglang.sglang_pool(records, _split, parsed)
    trt = budget_trtllm.trtllm_rows(records, _split, parsed)
    if a.json:
        def keep(xs):
            return [x for x in xs if x["split"] in splits]
        print(json.dumps({"splits": splits, "rows": keep(rs), "summary": {s: summ[s] for s in splits},
                          "sglang_weights": keep(sg), "sglang_states": keep(states), "sglang_pool": keep(pool),
                          "sglang_pool_summary": {s: budget_sglang.pool_summary(pool, s) for s in splits},
                          "trtllm": keep(trt)}, indent=1, default=str))
        return
    if a.markdown:
        print(markdown(rs, summ))
        print()
        print(budget_sglang.pool_markdown(pool))
        print()
        print(budget_trtllm.trtllm_markdown(trt))
        return
    print(f"Splits printed: {' and '.join(splits)}" + ("" if a.train else
          " (held-out rows: never tune on them; --train prints the training split alone)"))
    print_report(records, [r for r in rs if r["split"] in splits], {s: summ[s] for s in splits},
                 [r for r in sg if r["split"] in splits], [r for r in states if r["split"] in splits],
                 [r for r in pool if r["split"] in splits], [r for r in trt if r["split"] in splits], splits)


def print_report(records, rs, summ, sg, states, pool, trt, splits) -> None:
    """The plain-text report of the splits asked for: vLLM's table and summaries, then SGLang's and TensorRT-LLM's."""
    print_table(rs)
    n_pred = sum(1 for r in rs if r["terms"])
    print(f"\n{len(records)} records, {n_pred} predicted in the splits printed (model in the catalog, GPU and version "
          "known)")
    for split, s in summ.items():
        print(f"\n{split}: term  n  median error  median |rel|  within tol")
        for term, v in s.items():
            if term == "kv_pool":
                print(f"  {'KV pool (tokens)':18} {v['n']:3}  median {v['median_error_rel'] * 100:+.1f}%  "
                      f"{v['within_tol']}/{v['n']} within 5%, {v['over']} over by more")
                continue
            if term == "pool_from_printed_budget":
                print(f"  pool on the printed budget: {v['exact']}/{v['n']} exact (the printed figure inside "
                      "kvplan's interval for the rounded budget)")
                continue
            mr = "" if v["median_abs_rel"] is None else f"{v['median_abs_rel'] * 100:.1f}%"
            print(f"  {term:18} {v['n']:3}  {v['median_error_gib']:+.2f} GiB  {mr:>6}  {v['within_tol']}/{v['n']} "
                  f"within {v['tol'] * 100:g}%")
    print("\nSGLang weights (Load weight end: mem usage) against kvplan's SGLang plan, as loaded and as stored:")
    for r in sg:
        print(f"  {r['id'][:40]:40} {r['split']:8} {r['kvplan']:10} {r['engine_gib']:g} GB  {r['kvplan_gib']:.2f} GiB  "
              f"{r['error_rel'] * 100:+.1f}%")
    print("\nSGLang state pool (Mamba Cache is allocated): slots, and slots from the record's own budget by the rule;"
          " conv / ssm GB, and kvplan's from the printed slots:")
    for r in states:
        print(f"  {r['id'][:40]:40} {r['split']:8} {r['version']:8} slots {r['slots']} / {r['kvplan_slots']}  "
              f"conv {r['conv_gb']} / {r['kvplan_conv_gb']} GB  ssm {r['ssm_gb']} / {r['kvplan_ssm_gb']} GB")
    print()
    print("\n".join(budget_sglang.pool_lines(pool, splits)))
    print()
    print("\n".join(budget_trtllm.trtllm_lines(trt)))


if __name__ == "__main__":
    main()
