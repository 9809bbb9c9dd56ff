"""Engine commands: `fit --engine/--emit` rendering and `kvplan check-log FILE`.

Thin: parse options, call kvplan.engines / kvplan.logs (pure), render. Heavy imports stay inside
the functions so `kvplan fit` without --engine starts as before.
"""

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError

MAX_LOG_BYTES = 64 * 2**20


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


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


def fit_with_engine(spec, hw, dep, req, choice, *, emit_to, as_json, explain, check):
    from kvplan.cli import print_warnings
    from kvplan.emit import emit
    from kvplan.report import plan_to_dict, render_plans

    engine = choice.name
    results, titles, recommended = engine_plans(spec, hw, dep, req, choice)
    plans = [r.plan for r in results]
    print_warnings([(t, r.plan.warnings) for t, r in zip(titles, results)])
    for note in dict.fromkeys(n for r in results for n in r.capacity.notes):
        _stderr(f"note: {note}")
    chosen = results[recommended if recommended is not None else -1]
    command = emit(engine, chosen, spec) if emit_to else None
    if as_json:
        dicts = [{**plan_to_dict(r.plan, spec), "engine": engine_dict(r)} for r in results]
        out = dicts[0] if dep is not None else {"plans": dicts, "recommended": recommended}
        if command:
            out["emit"] = command
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


def _read_log(path: Path) -> str:
    if not path.is_file():
        raise KvplanError(f"no such log file: {path}", EXIT_NOT_FOUND)
    if path.stat().st_size > MAX_LOG_BYTES:
        raise KvplanError(f"{path}: larger than {MAX_LOG_BYTES // 2**20} MiB; not a start-up log", EXIT_USAGE)
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise KvplanError(f"cannot read {path}: {exc.strerror or exc}", EXIT_NOT_FOUND) from None


def _resolve_log_model(name: str | None, hint: str | None):
    """--model, else the model the log names when it is in the catalog (never the network)."""
    from kvplan.catalog import find_in_catalog
    from kvplan.resolve import resolve_model

    if name:
        return resolve_model(name).spec
    if not hint:
        return None
    for cand in (hint, hint.rstrip("/").split("/")[-1], "/".join(hint.rstrip("/").split("/")[-2:])):
        spec = find_in_catalog(cand)
        if spec is None and cand.lower().endswith(("-fp8", "-awq", "-gptq")):
            spec = find_in_catalog(cand.rsplit("-", 1)[0])
        if spec is not None:
            return spec
    return None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the kvplan app."""
    from kvplan.cli import HwOpt, JsonOpt, cli_errors

    @app.command("check-log")
    @cli_errors
    def check_log(
        log: Annotated[Path, typer.Argument(help="A vLLM, SGLang or llama.cpp start-up log (engine auto-detected).")],
        model: Annotated[Optional[str], typer.Option("--model", "-m", help="The model, when the log does not name one kvplan knows.")] = None,
        gpu: Annotated[Optional[str], typer.Option("--gpu", "-g", help="The GPU the log came from (for the budget prediction).")] = None,
        engine_version: Annotated[Optional[str], typer.Option("--engine-version", help="Engine release, when the log does not print it.")] = None,
        kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="Cache dtype, when the log does not print it.")] = None,
        tp: Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size, when the log does not show it.")] = None,
        hw_profiles: HwOpt = None,
        as_json: JsonOpt = False,
    ):
        """Put every number an engine's start-up log printed next to kvplan's, with the difference."""
        from kvplan.logs.parse import parse_log
        from kvplan.logs.reconcile import reconcile

        text = _read_log(log)
        rec = parse_log(text)
        hw = None
        if gpu:
            from kvplan.hardware import find_gpu

            hw = find_gpu(gpu, hw_profiles or ())
        if tp is not None and tp < 1:
            raise KvplanError(f"--tp must be at least 1, got {tp}", EXIT_USAGE)
        spec = _resolve_log_model(model, rec.model)
        if spec is None and rec.model and rec.engine != "llama.cpp":
            _stderr(f"note: the log's model {rec.model!r} is not in the catalog; pass --model to check it")
        result = reconcile(rec, spec, hw, engine_version, kv_dtype, tp)
        if as_json:
            print(json.dumps({
                "engine": result.engine, "version": result.version, "model": result.model, "gpu": result.gpu,
                "rows": [r.__dict__ for r in result.rows], "whatif": [list(w) for w in result.whatif],
                "notes": result.notes}, indent=2))
            return
        from rich.console import Console
        from rich.table import Table

        from kvplan.markup import plain

        console = Console()
        console.print(f"[bold]{result.engine}[/] {plain(result.version)} log · model {plain(result.model or '?')}"
                      + (f" · GPU {plain(result.gpu)}" if result.gpu else ""))
        table = Table(show_edge=False)
        for col in ("quantity", "engine printed", "kvplan", "difference", ""):
            table.add_column(col, justify="left" if col == "quantity" else "right")
        for r in result.rows:
            mark = "" if r.ok is None else ("[green]ok[/]" if r.ok else "[red]differs[/]")
            table.add_row(plain(r.quantity), plain(r.reported), plain(r.predicted), plain(r.diff), mark)
        console.print(table)
        if result.whatif:
            w = Table(title="Same deployment, other workloads", title_justify="left", show_edge=False)
            w.add_column("")
            w.add_column("", justify="right")
            for label, value in result.whatif:
                w.add_row(plain(label), plain(value))
            console.print(w)
        for n in result.notes:
            _stderr(f"note: {n}")
