"""`validate --tp/--pp/--dp`'s terminal table: one row per rank, predicted against measured."""

from __future__ import annotations

from kvplan.cli._common import table as make_table
from kvplan.report.text import layer_span


def _bytes(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_ranks(console, record: dict) -> None:
    layout = " x ".join(f"{k} {record[k]}" for k in ("tp", "pp", "dp", "ep") if record[k] > 1)
    title = (f"{record['model']}: {record['layers']} of {record['layers_total']} layers, {layout} "
             f"({record['world']} ranks, {record['dist_backend']}), batch {record['batch']}, ctx {record['ctx']:,}")
    cols = ["rank", "layers", "KV B", "predicted", "weights B", "planner", "ok"]
    table = make_table(cols, right=tuple(cols[:-1]), whole=("ok",), title=title)
    checks = {c["name"]: c for c in record["checks"]}
    for r in record["ranks"]:
        tag = f"rank{r['rank']}"
        ok = all(c["ok"] for name, c in checks.items() if name.startswith(tag + " "))
        ok = ok and r["tokens_match"] and r["matches_single_process"]
        table.add_row(str(r["rank"]), layer_span(r["layers"]),
                      _bytes(r["measured_kv_bytes"]), _bytes(r["predicted_kv_bytes"]),
                      _bytes(r["measured_weights_bytes"]), _bytes(r.get("planner_weights_bytes")),
                      "[green]ok[/]" if ok else "[red]FAIL[/]")
    console.print(table)
    console.print("ranks: tp innermost, then pp, then dp. KV: measured = the planner's per-rank figure, "
                  "exactly. Weights: measured = the shard's closed form exactly, and the planner's per-rank "
                  "figure within 0.5 %. Tokens: cached = uncached = the whole model on one process.")
    console.print("[green]all checks passed[/]" if record["ok"] else "[red]validation failed[/]")
