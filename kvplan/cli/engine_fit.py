"""Planning as an engine allocates, for `fit --engine/--emit` (and the engine flags of sweep and cheapest).

Every call into the engine API (kvplan.engines.EngineChoice, its results and capacities) lives in
this one module, so a change of that API touches the CLI here only. Heavy imports stay inside the
functions so `kvplan fit` without --engine starts as before.
"""

import json
import sys

import typer

from kvplan.cli._common import print_warnings, stderr
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError


def engine_plans(spec, hw, dep, req, choice):
    """EngineResults for `dep`, or for one GPU and then the smallest deployment that fits."""
    from kvplan.planner import Deployment, candidate_deployments

    if dep is not None:
        return [choice.result(spec, hw, dep, req)], [f"{dep.gpus} GPU(s)"], 0
    first = choice.result(spec, hw, Deployment(1, 1), req)
    results, titles = [first], ["1 GPU"]
    best = first if first.plan.fits else None
    if best is None:
        for d in candidate_deployments(spec):
            if d.gpus == 1:
                continue
            try:
                res = choice.result(spec, hw, choice.deployment(d), req)
            except KvplanError:
                continue
            if res.plan.fits:
                best = res
                results.append(res)
                titles.append(f"smallest fit: {d.gpus} GPUs")
                break
    recommended = None if best is None else results.index(best)
    return results, titles, recommended


def engine_dict(res) -> dict:
    cap = res.capacity
    return {"name": cap.engine, "version": cap.version, "settings": res.settings,
            "kv_memory_bytes_per_gpu": cap.kv_memory_bytes, "tokens": cap.tokens,
            "max_concurrency": cap.max_concurrency, "blocks": cap.blocks, "block_size": cap.block_size,
            "lines": dict(cap.lines), "notes": list(cap.notes)}


def engine_choice(engine, emit_to, version, opt_items, explicit: dict):
    """The engine flags of `fit`, checked before anything is printed (one-line errors, no half output)."""
    from kvplan.emit import EMITTERS
    from kvplan.engines import EngineChoice, canonical_engine

    if engine is None and emit_to is None:
        raise KvplanError("--engine-version and --engine-opt need --engine", EXIT_USAGE)
    name = canonical_engine(engine or emit_to)
    if emit_to is not None:
        if canonical_engine(emit_to) not in EMITTERS:
            raise KvplanError(f"--emit supports {', '.join(EMITTERS)}, not {emit_to}", EXIT_USAGE)
        if canonical_engine(emit_to) != name:
            raise KvplanError(f"--emit {emit_to} does not match --engine {name}", EXIT_USAGE)
    return EngineChoice.make(name, version, opt_items or (), **explicit)


def fit_with_engine(spec, hw, dep, req, choice, *, emit_to, as_json, explain, check, layouts=None):
    from kvplan.emit import emit
    from kvplan.report import plan_to_dict, render_plans

    engine = choice.name
    results, titles, recommended = engine_plans(spec, hw, dep, req, choice)
    plans = [r.plan for r in results]
    print_warnings([(t, r.plan.warnings) for t, r in zip(titles, results)])
    for note in dict.fromkeys(n for r in results for n in r.capacity.notes):
        stderr(f"note: {note}")
    chosen = results[recommended if recommended is not None else -1]
    command = emit(engine, chosen, spec) if emit_to else None
    if as_json:
        dicts = [{**plan_to_dict(r.plan, spec), "engine": engine_dict(r)} for r in results]
        out = dicts[0] if dep is not None else {"plans": dicts, "recommended": recommended}
        if command:
            out["emit"] = command
        if layouts is not None:
            out["layouts"] = layouts
        print(json.dumps(out, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        render_plans(console, plans, spec, hw, titles)
        table = Table(title=f"{engine} {results[0].capacity.version} (as the engine reports it)", title_justify="left",
                      show_edge=False)
        table.add_column("")
        for t in titles:
            table.add_column(t, justify="right")
        labels = [label for label, _ in results[0].capacity.lines]
        for i, label in enumerate(labels):
            table.add_row(label, *[dict(r.capacity.lines).get(label, "-") for r in results])
        console.print(table)
        if dep is None and recommended is None:
            console.print("[red]No deployment of up to 64 GPUs fits this workload.[/]")
        if command:
            print(command)
    if explain:
        from kvplan.explain import explain_lines

        stream = sys.stderr if as_json else sys.stdout
        print("\n".join(explain_lines(chosen.plan, spec)), file=stream)
    if check and not any(p.fits for p in plans):
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def engine_flags(engine, version, opt_items, gmu, block_size):
    """sweep's and cheapest's --engine flags as an EngineChoice (checked now), or None without any."""
    if engine is None and not (version or opt_items):
        return None
    return engine_choice(engine, None, version, opt_items, {"gpu_memory_utilization": gmu, "block_size": block_size})
