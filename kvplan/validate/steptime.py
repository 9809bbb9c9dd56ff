"""Prefill and decode step times of kvplan's own torch decoder (validate's model, random weights), as speed-corpus
points.

`kvplan step-times` (kvplan.cli.step_times) runs it; scripts/gpu_speed.sh runs that on a GPU.

The decoder is the one `kvplan validate` builds (kvplan.validate.run: same blueprint, dtypes, memory
check before anything is allocated). For each context C and batch B it times one decode step at
position C (the step reads a cache of C + 1 slots per sequence, as the attention reads every slot) and,
batch 1, one prefill of a C-token prompt. Timing: `warmup` untimed calls, then `repeats` calls each
between two CUDA events (torch.cuda.Event, elapsed_time) on a GPU, or perf_counter on the CPU; mean,
median and p99 of the repeats. Eager PyTorch: no CUDA graphs, no fused kernels, no sampling or
scheduler, so these are the step times of this decoder, not of a serving engine.

The points are written as one speed-corpus source (tests/fixtures/speed/README.md schema, engine
`kvplan-torch`, first-party): a decode point is `tpot_ms` at batch B with `isl` C and `osl` 1, a prefill
point `ttft_ms` at batch 1 with `isl` C. A point that runs out of memory is left out and named in the
source's notes. Runs on the CPU too (tests use a one-layer shrunk model).
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch

from kvplan import __version__
from kvplan.core.files import atomic_write
from kvplan.hardware.gpus import gpu_by_device_name
from kvplan.validate.blueprint import Widths
from kvplan.validate.run import Settings, _build, _prepare, device_info, is_out_of_memory



def _timer(dev: torch.device, warmup: int, repeats: int):
    """A function timing `fn` `repeats` times after `warmup` calls: the seconds of each call."""
    def run(fn) -> list[float]:
        for _ in range(warmup):
            fn()
        out = []
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / 1e3)
            return out
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out
    return run


def _stats_ms(seconds: list[float]) -> dict:
    s = sorted(seconds)
    p99 = s[min(len(s) - 1, math.ceil(0.99 * len(s)) - 1)]
    return {"mean": round(1e3 * statistics.fmean(s), 4), "median": round(1e3 * statistics.median(s), 4),
            "p99": round(1e3 * p99, 4)}


def _point(run, model, batch: int, ctx: int, phase: str, time_it) -> dict:
    """One timed point: a decode step of `batch` sequences at position `ctx`, or a prefill of `ctx` tokens."""
    gen = torch.Generator().manual_seed(run.s.seed)
    if phase == "decode":
        model.setup_caches(batch, ctx + 1)
        tok = torch.randint(0, run.bp.vocab, (batch, 1), generator=gen).to(run.dev)
        call = lambda: model(tok, ctx, cached=True)  # noqa: E731
    else:
        model.setup_caches(1, ctx)
        tok = torch.randint(0, run.bp.vocab, (1, ctx), generator=gen).to(run.dev)
        call = lambda: model(tok, 0, cached=True)  # noqa: E731
    with torch.inference_mode():
        seconds = time_it(call)
    return {"phase": phase, "batch": batch, "ctx": ctx, "ms": _stats_ms(seconds), "repeats": len(seconds)}


def measure(full, batches, contexts, *, layers=None, device="cpu", compute_dtype=None, kv_dtype="auto",
            widths: Widths = Widths(), warmup: int = 3, repeats: int = 10, seed: int = 0,
            on_point=None) -> tuple[dict, list, list]:
    """(the run's facts, the timed points, the points skipped for memory) for model spec `full`;
    `on_point(facts, points, skipped)` after each point (a caller under a timeout keeps what was measured)."""
    # validate's checks, and its memory check for the largest decode point (weights + a cache of batch x ctx + 1;
    # a one-token prompt, so no prefill activations): a set of points that cannot fit is refused before allocating.
    # Prefill points (batch 1) are not checked ahead: one that runs out of memory is skipped and named.
    s = Settings(batch=max(batches), ctx=max(contexts) + 1, steps=max(contexts), layers=layers, kv_dtype=kv_dtype,
                 compute_dtype=compute_dtype, device=device, seed=seed, widths=widths)
    run = _prepare(full, s)
    model = _build(replace(run, s=replace(run.s, batch=1, ctx=1)))
    time_it = _timer(run.dev, warmup, repeats)
    points, skipped = [], []
    facts = {**device_info(run.dev), "torch": torch.__version__, "layers": run.n, "layers_total": full.num_layers,
             "compute_dtype": run.compute, "kv_dtype": run.kv.name, "shrunk": list(run.bp.shrunk),
             "auto_shrunk": run.auto}
    for ctx in contexts:
        for phase, bs in (("prefill", [1]), ("decode", batches)):
            for b in bs:
                try:
                    points.append(_point(run, model, b, ctx, phase, time_it))
                except Exception as exc:  # noqa: BLE001 - an allocation failure skips the point, anything else is a bug
                    if not is_out_of_memory(exc):
                        raise
                    skipped.append(f"{phase} batch {b} ctx {ctx}: out of memory")
                    model.setup_caches(1, 1)
                    if run.dev.type == "cuda":
                        torch.cuda.empty_cache()
                if on_point is not None:
                    on_point(facts, points, skipped)
    return facts, points, skipped


def corpus_doc(model_name: str, facts: dict, points: list, skipped: list, *, date: str, host: str) -> dict:
    """The speed-corpus source (tests/fixtures/speed/README.md) for one model's points."""
    gpu = gpu_by_device_name(facts.get("device_name"))  # what torch reports, never a guess
    key = gpu.key if gpu else None
    reduced = facts["layers"] < facts["layers_total"] or facts["shrunk"]
    notes = (f"kvplan's own torch decoder (kvplan validate's model, random weights, eager PyTorch {facts['torch']}, "
             f"no CUDA graphs, no sampling or scheduler) on {facts.get('device_name') or facts.get('device')}; "
             f"weights and compute {facts['compute_dtype']}, cache {facts['kv_dtype']}; "
             + (f"reduced model: {facts['layers']} of {facts['layers_total']} layers, shrunk {facts['shrunk']}; "
                if reduced else "every layer at full width; ")
             + "decode: one step at position ctx over a cache of ctx + 1 slots per sequence; prefill: one prompt of "
             "ctx tokens, batch 1." + (f" Skipped: {'; '.join(skipped)}." if skipped else ""))
    slug = model_name.replace("/", "-").lower()
    out = []
    for p in points:
        metric = "tpot_ms" if p["phase"] == "decode" else "ttft_ms"
        out.append({"id": f"{slug}-{p['phase']}-b{p['batch']}-c{p['ctx']}", "model": model_name,
                    "kvplan_model": model_name, "weight_dtype": facts["compute_dtype"], "kv_dtype": facts["kv_dtype"],
                    "gpus": 1, "tp": 1, "batch": p["batch"], "layers": facts["layers"],
                    "isl": p["ctx"], "osl": 1, "concurrency": p["batch"], "request_rate": None,
                    "num_prompts": p["batch"],
                    "metrics": {metric: p["ms"]}, "row": f"{p['phase']} b{p['batch']} ctx {p['ctx']}: {p['ms']}",
                    "notes": f"{p['repeats']} timed calls after warm-up"})
    src_id = f"kvplan-torch-{slug}-{host}-{date}".replace(" ", "-")
    return {"source": {"id": src_id, "cite": f"first-party: kvplan {__version__} scripts/gpu_speed.sh "
                                               "(kvplan step-times)",
                       "url": None, "date": date, "kind": "results", "notes": notes},
            "defaults": {"engine": "kvplan-torch", "version": __version__,
                         **({"gpu": key} if key else {"gpu_name": facts.get("device_name") or platform.machine()})},
            "points": out}


def write_corpus(model_name: str, facts: dict, points: list, skipped: list, out_dir: Path) -> Path:
    """`<out_dir>/<source id>.yaml`: the points as one speed-corpus source (dated today, named by this host)."""
    import yaml  # only here: writing the corpus file

    doc = corpus_doc(model_name, facts, points, skipped, date=time.strftime("%Y-%m-%d"), host=platform.node() or "host")
    path = Path(out_dir) / f"{doc['source']['id']}.yaml"
    atomic_write(path, yaml.safe_dump(doc, sort_keys=False, width=120))
    return path
