"""`fit`'s plans as an engine allocates (the engine-neutral planner without --engine).

Every call into a configured engine's planning API lives in this module (the flags become that
engine in kvplan.cli.engine_flags.engine_from_flags), so a change of that API touches the CLI here only.
Heavy imports stay inside the functions so `kvplan fit` starts fast.
"""

import sys

import typer

from kvplan.cli import offload as tiers
from kvplan.cli.speed_flags import calibrated_keys, plan_speed_notes
from kvplan.cli._common import print_result, print_warnings, stderr
from kvplan.compare.candidates import smallest_fitting
from kvplan.core.errors import EXIT_DOES_NOT_FIT
from kvplan.core.units import plural
from kvplan.engines.emit import emit
from kvplan.planning.deploy import MAX_SEARCH_GPUS, Deployment
from kvplan.speed.plan import dp_step_note, plan_decode_seconds
from kvplan.report.disagg import wrapped as command_lines
from kvplan.report.explain import explain_lines, wrapped
from kvplan.report.text import engine_to_dict, format_figure, plan_notes, plan_to_dict, plan_warnings, render_plans
from kvplan.report.fitted import fitted_table, print_stacked


def engine_result(engine, spec, hw, dep, req):
    """One EngineResult of `dep` as `engine` allocates: `simulate` runs its scheduler on that KV pool
    and sizes offload tiers from the engine's own capacity figures."""
    return engine.result(spec, hw, dep, req)


def print_plan_said(titled) -> None:
    """What each (title, plan) says: its warnings, then its notes (PlanWarning.note), each once (print_warnings;
    here, not in _common, which every command loads and which stays below the report layer)."""
    print_warnings([(t, plan_warnings(p)) for t, p in titled])
    print_warnings([(t, plan_notes(p)) for t, p in titled], "note")


def fit_results(spec, hw, dep, req, engine):
    """EngineResults for `dep`, or for one GPU and then the smallest deployment that fits, with
    titles and the index of the recommended one (None when nothing fits)."""
    if dep is not None:
        return [engine.result(spec, hw, dep, req)], [plural(dep.gpus, "GPU")], 0
    first = engine.result(spec, hw, Deployment(1, 1), req)
    if first.plan.fits or first.plan.binds == "context limit":  # more GPUs never lengthen the model's limit
        return [first], ["1 GPU"], 0 if first.plan.fits else None
    best = smallest_fitting(spec, hw, req, engine, skip_gpus=1)
    if best is None:
        return [first], ["1 GPU"], None
    return [first, best], ["1 GPU", f"smallest fit: {best.plan.deployment.gpus} GPUs"], 1


def fit_report(spec, hw, dep, req, engine, *, emit_to, as_json, explain, check, layouts=None, offload=None) -> None:
    """`fit`'s output for any engine: the plans, a named engine's own figures, the serve command
    (--emit), the formula (--explain), the exit code (--check)."""
    results, titles, recommended = fit_results(spec, hw, dep, req, engine)
    plans = [r.plan for r in results]
    named = engine.label is not None  # a named engine: its own figures are shown too
    print_plan_said([(t, r.plan) for t, r in zip(titles, results)])
    if dep is None and recommended is None and getattr(spec, "speculative", None) is not None:
        stderr("note: with --speculative, layouts with pipeline parallelism are not planned (vLLM puts the whole "
               "drafter on the last stage); --gpus N plans tp × dp layouts")
    for note in dict.fromkeys(n for r in results for n in r.capacity.notes):
        stderr(f"note: {note}")
    if named and plans[0].binds == "context limit":  # the engine's own lines are for a length it refuses
        stderr(f"note: {engine.label} does not serve {req.context:,}-token requests (its limit is "
               f"{plans[0].context_limit:,}): its figures below are what it would print if it did")
    chosen = results[recommended if recommended is not None else -1]
    op = tiers.for_result(engine, chosen, spec, offload)
    command = margin = weights = None
    if emit_to:
        command = emit(engine, chosen, spec)
        margin, weights = engine.emit_note(chosen, spec), engine.emit_weights_note(chosen, spec)
        for line in (weights, margin):
            if line and not as_json:
                stderr(line)
    speeds = [plan_decode_seconds(r.plan, spec, hw, engine.speed_key, version=engine.version) for r in results]
    for line in plan_speed_notes("calibrated", engine.speed_key, engine.version, spec, hw, [chosen.plan, *plans]):
        stderr(line)
    for line in dict.fromkeys(n for p in plans if (n := dp_step_note(p, spec))):  # which rank's batch a step is
        stderr(f"note: {line}")
    dicts = [{**plan_to_dict(r.plan, spec), **calibrated_keys(s, r.plan, engine.speed_key),
              **({"engine": engine_to_dict(r)} if named else {})} for r, s in zip(results, speeds)]
    out = dicts[0] if dep is not None else {"plans": dicts, "recommended": recommended}
    if dep is None and recommended is None:
        out["does_not_fit"] = no_fit_line(plans[0])
    command = tiers.into_output(out, op, command)
    if command:
        out["emit"] = command
    if layouts is not None:  # fit --gpus N: every layout, best first (kvplan.cli.layouts)
        out["layouts"] = layouts
    if margin:
        out["emit_margin"] = margin
    if weights:
        out["emit_weights"] = weights

    def render(console) -> None:
        render_plans(console, plans, spec, hw, titles, calibrated=speeds, labels=results[0].capacity.answer_labels)
        if named:
            _engine_table(console, results, titles)
        if dep is None and recommended is None:
            console.print(f"[red]{no_fit_line(plans[0])}[/]")
        if op is not None:
            tiers.render(console, op)
        if command:  # at the tables' width, a long line broken between words by backslash continuations
            print("\n".join(_at_width(line, console.width) for line in command.splitlines()))

    print_result(as_json, out, render)
    if explain:
        _explain(chosen.plan, spec, hw, sys.stderr if as_json else sys.stdout)
    if check and not any(p.fits for p in plans):
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _at_width(line: str, width: int) -> str:
    """One line of the serve command as the shell still reads it, within `width` columns where its words allow
    (kvplan.report.disagg.wrapped, as disagg prints its commands); a line that does not split as shell words
    (a YAML or JSON line beside the command) is left whole."""
    if len(line) <= width:
        return line
    try:
        return "\n".join(command_lines(line, width))
    except ValueError:  # unbalanced quotes: not one shell command
        return line


def _explain(plan, spec, gpu, stream) -> None:
    """--explain's lines at the tables' width (the terminal's, 80 in a pipe), broken between terms."""
    from rich.console import Console

    print("\n".join(wrapped(explain_lines(plan, spec, gpu), Console(file=stream).width)), file=stream)


def no_fit_line(plan) -> str:
    """Why no deployment fits, in words: the model's context limit (no GPU count changes it) or memory
    on every GPU count the search tried (kvplan.compare.candidates.SMALLEST_FIT_COUNTS)."""
    if plan.binds == "context limit":
        return (f"Does not fit: the context ({plan.request.context:,} tokens) is past {plan.context_limit_name} of "
                f"{plan.context_limit:,} tokens; the limit binds, not memory, so no GPU count helps.")
    return (f"Does not fit: memory binds on every deployment of 1 to {MAX_SEARCH_GPUS} GPUs tried (every "
            "count with a valid tp × pp layout).")


def _engine_table(console, results, titles) -> None:
    """The engine's printed figures, one column per plan, in the engine's own terms."""
    cap = results[0].capacity
    table = fitted_table(title=f"{cap.engine} {cap.version} (as the engine reports it)", title_justify="left",
                         show_edge=False, caption=cap.scope, caption_justify="left")  # what its lines count over
    table.add_column("")
    for t in titles:
        table.add_column(t, justify="right")

    for fig in cap.lines:
        row = [{f.label: f for f in r.capacity.lines}.get(fig.label) for r in results]
        table.add_row(fig.label, *["-" if f is None else format_figure(f) for f in row])
    print_stacked(console, table)  # a label too long beside the figures on lines of its own, broken only between words
