"""`fit --gpus N` alone: every valid layout of N GPUs planned, ranked, the top few shown with why.

Ranking (kvplan.layout.layout_rank_key): plans that fit first, then the most concurrent requests
at the context, then decode tokens/s, then fewer pipeline stages, then wider tp. The best layout
is then planned and shown as `fit --tp/--pp/--dp/--ep` would show it.
"""

from kvplan.cli._common import stderr, table
from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.units import gib

TOP = 5


def search(spec, hw, gpus: int, req, choice, per_node: int, *, as_json: bool):
    """(the best deployment, the JSON rows of every layout); the table of the top few on stdout.
    One GPU, or llama.cpp (layer split only), has one layout: no search, rows None."""
    from kvplan.deploy import Deployment, search_layouts
    from kvplan.layout import layout_text, pipeline_note, why

    if gpus == 1:
        return Deployment(1, 1), None
    if choice.name == "llama.cpp":  # one layout: layers split over the GPUs
        return Deployment(1, gpus), None
    plans = search_layouts(spec, hw, gpus, req, choice, per_node)
    if not plans:
        raise KvplanError(f"{spec.name}: no layout of {gpus} GPUs is valid (tp must divide the "
                          f"{spec.num_attention_heads} attention heads and stay within {per_node} GPUs per node)",
                          EXIT_USAGE)
    best = plans[0]
    rows = [{"tp": p.deployment.tp, "pp": p.deployment.pp, "dp": p.deployment.dp, "ep": p.deployment.ep,
             "fits": p.fits, "max_concurrency": p.max_concurrency,
             "decode_tokens_per_second": p.decode_tokens_per_second,
             "weight_bytes_per_gpu": p.weight_bytes_per_gpu,
             "kv_bytes_per_sequence_per_gpu": p.kv_bytes_per_sequence_per_gpu, "why": why(p, best)} for p in plans]
    if not as_json:
        from rich.console import Console

        console = Console()
        cols = ["#", "layout", "requests", "tok/s", "weights/GPU", "KV/req/GPU"]
        t = table(cols, right=("#", "requests", "tok/s", "weights/GPU", "KV/req/GPU"), whole=("layout",),
                  title=f"{len(plans)} layouts of {gpus} GPUs, best first")
        for i, p in enumerate(plans[:TOP]):
            t.add_row(str(i + 1), layout_text(p.deployment), f"{p.max_concurrency:,}" + ("" if p.fits else " ✗"),
                      f"{p.decode_tokens_per_second:,.0f}", gib(p.weight_bytes_per_gpu),
                      gib(p.kv_bytes_per_sequence_per_gpu))
        console.print(t)
        console.print("Ranked by concurrent requests at the context (each dp rank holds its own), then decode "
                      "tokens/s at the batch; ✗: does not fit. --json lists every layout with why.")
        note = pipeline_note(plans, TOP)
        if note:
            console.print(note)
    stderr(f"note: planning the best layout, {layout_text(best.deployment)}")
    return best.deployment, rows
