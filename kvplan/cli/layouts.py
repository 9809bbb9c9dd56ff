"""`fit --gpus N` alone: every valid layout of N GPUs planned, ranked, the top few shown with why.

Ranking (kvplan.planning.layout.layout_rank_key): plans that fit first, then the most concurrent requests
at the context, then decode tokens/s, then fewer pipeline stages, then wider tp. The best layout
is then planned and shown as `fit --tp/--pp/--dp/--ep` would show it.
"""

from kvplan.cli._common import stderr, table
from kvplan.compare.candidates import search_layouts, search_node
from kvplan.core.units import gib, plural
from kvplan.planning.deploy import Deployment
from kvplan.planning.layout import layout_text

TOP = 5


def search(spec, hw, gpus: int, req, choice, *, as_json: bool, node_gpus: int | None = None):
    """(the best deployment, the JSON rows of every layout); the table of the top few on stdout.
    One GPU, or an engine that only splits layers (llama.cpp), has one layout: no search, rows None."""
    if gpus == 1:
        return Deployment(1, 1), None
    if choice.splits_layers_only:  # one layout: layers split over the GPUs
        return Deployment(1, gpus), None
    choice.check_layers(spec, req.kv_dtype)  # a cache the engine cannot size is the model's refusal, not every layout's
    choice.with_checkpoint_kv(spec, req)  # so is a declared KV cache it cannot run (kvplan.engines.checkpoint_kv)
    # none: refused with why (kvplan.compare.candidates)
    whose = search_node(hw, node_gpus)[1]
    stderr(f"note: layouts keep tensor parallelism within one node, {whose}; --tp plans a wider group")
    plans = search_layouts(spec, hw, gpus, req, choice, node_gpus)
    best = plans[0]
    rows = [{"tp": p.deployment.tp, "pp": p.deployment.pp, "dp": p.deployment.dp, "ep": p.deployment.ep,
             "fits": p.fits, "max_concurrency": p.max_concurrency,
             "decode_tokens_per_second": p.decode_tokens_per_second,
             "weight_bytes_per_gpu": p.weight_bytes_per_gpu,
             "kv_bytes_per_sequence_per_gpu": p.kv_bytes_per_sequence_per_gpu, "why": why(p, best)} for p in plans]
    if not as_json:
        from rich.console import Console

        console = Console()
        cols = ["#", "layout", "requests", "tok/s ≤", "weights/GPU", "KV/req/GPU"]  # the roofline's: a bound
        t = table(cols, right=("#", "requests", "tok/s ≤", "weights/GPU", "KV/req/GPU"), whole=("layout",),
                  title=f"{len(plans)} layouts of {gpus} GPUs, best first")
        for i, p in enumerate(plans[:TOP]):
            t.add_row(str(i + 1), layout_text(p.deployment), f"{p.max_concurrency:,}" + ("" if p.fits else " ✗"),
                      f"{p.decode_tokens_per_second:,.0f}", gib(p.weight_bytes_per_gpu),
                      gib(p.kv_bytes_per_sequence_per_gpu))
        console.print(t)
        console.print("Ranked by concurrent requests at the context (each dp rank holds its own), then decode "
                      "tokens/s at the batch (tok/s ≤: the roofline's bound; the calibrated figure of the best "
                      "is below); weights/GPU and KV/req/GPU: the most any GPU holds (under pipeline stages, each "
                      "its largest stage's; the memory table shows the stage that binds); ✗: does not fit. --json "
                      "lists every layout with why.")
        note = pipeline_note(plans, TOP)
        if note:
            console.print(note)
    stderr(f"note: planning the best layout, {layout_text(best.deployment)}")
    return best.deployment, rows


def why(plan, best) -> str:
    """One line: how this layout compares with the best one."""
    dep = plan.deployment
    parts = [f"{plural(plan.max_concurrency, 'request')}" + ("" if plan.fits else " (does not fit)")]
    parts.append(f"{plan.weight_bytes_per_gpu / 2**30:.1f} GiB weights and "
                 f"{plan.kv_bytes_per_sequence_per_gpu / 2**30:.2f} GiB KV per request per GPU")
    if dep.dp > 1:
        parts.append(f"each of {dep.dp} dp ranks its own requests")
    if dep.pp > 1:
        parts.append(f"{dep.pp} pipeline stages in turn ({plan.decode_step_seconds * 1e3:.1f} ms a decode step per "
                     f"token; bubbles unless {dep.pp} micro-batches are in flight)")
    if plan is not best and best.max_concurrency:
        parts.append(f"{plan.max_concurrency / best.max_concurrency:.0%} of the best")
    return "; ".join(parts)


def pipeline_note(plans, top: int) -> str | None:
    """When the best layout pipelines, what that costs a request against the fastest of the `top` shown
    without pipeline stages (the ranking counts requests; a pipeline's latency shows only in tok/s)."""
    if not plans or plans[0].deployment.pp == 1:
        return None
    best = plans[0]
    flat = [(i, p) for i, p in enumerate(plans[:top]) if p.deployment.pp == 1 and p.fits]
    text = (f"#1 runs {best.deployment.pp} pipeline stages one after another: each token waits for every stage "
            f"({best.decode_step_seconds * 1e3:.1f} ms a decode step, {best.decode_tokens_per_second:,.0f} tok/s for "
            f"the batch, at the roofline), and stages idle (pipeline bubbles) unless {best.deployment.pp} "
            "micro-batches are in flight.")
    if flat:
        i, fast = max(flat, key=lambda ip: ip[1].decode_tokens_per_second)
        text += (f" #{i + 1} ({layout_text(fast.deployment)}) holds {plural(fast.max_concurrency, 'request')} at "
                 f"{fast.decode_step_seconds * 1e3:.1f} ms a step ({fast.decode_tokens_per_second:,.0f} tok/s, "
                 "roofline): lower per-token latency.")
    return text
