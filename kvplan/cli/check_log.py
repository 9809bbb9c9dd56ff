"""`kvplan check-log FILE`: every number an engine's start-up log printed next to kvplan's.

Thin: read the log (size-capped), call kvplan.engines.reconcile (pure), render.
"""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    HwOpt, JsonOpt, WeightDtypeOpt, check_range, cli_errors, markup_safe, print_result, read_capped_text, stderr,
    table,
)
from kvplan.cli.engine_flags import speculative_request, with_speculative
from kvplan.core.errors import KvplanError
from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.versions import reading, stated_version
from kvplan.hardware.gpus import find_gpu, load_gpus
from kvplan.report.fitted import print_stacked
from kvplan.sources.catalog import find_in_catalog
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model

# A start-up log is tens of KB (the largest fixture 11 KB). Every pattern is searched only in the lines holding its
# required strings (kvplan.engines.logscan): about 0.05 s of CPU a MiB of request lines, 0.07 of repeated start-up
# lines or one long line (0.25 before, when a hundred-odd regex passes ran over all of it). Past 16 MiB (about a second)
# the file is refused: a whole server log is cut to its start-up first.
MAX_LOG_BYTES = 16 * 2**20


def register(app: typer.Typer) -> None:
    app.command("check-log")(check_log)


@cli_errors
def check_log(
    log: Annotated[Path, typer.Argument(
        metavar="LOG", help="A vLLM, SGLang, TensorRT-LLM (PyTorch backend) or llama.cpp start-up log (engine "
        "auto-detected).")],
    model: Annotated[Optional[str], typer.Option(
        "--model", "-m", help="The model, when the log does not name one kvplan knows.")] = None,
    gpu: Annotated[Optional[str],
                   typer.Option("--gpu", "-g", help="The GPU the log came from (for the budget prediction).")] = None,
    engine_version: Annotated[Optional[str], typer.Option(
        "--engine-version", help="Engine release, when the log does not print it.")] = None,
    kv_dtype: Annotated[Optional[str],
                        typer.Option("--kv-dtype", help="Cache dtype, when the log does not print it.")] = None,
    tp: Annotated[Optional[int],
                  typer.Option("--tp", help="Tensor-parallel size, when the log does not show it.")] = None,
    weight_dtype: WeightDtypeOpt = None,  # for a log that states no quantization kvplan can size
    hw_profiles: HwOpt = None,
    as_json: JsonOpt = False,
):
    """Put every number an engine's start-up log printed next to kvplan's, with the difference."""
    text = read_capped_text(log, MAX_LOG_BYTES, "a start-up log", missing="no such log file",
                            hint=f"keep its start: head -c 1M {log} > start.log")  # a whole server log
    rec = parse_log(text)
    check_range("--tp", tp, 1, 4096)  # as fit's --tp, and the log's own tp (kvplan.engines.logrecord)
    if engine_version is not None:  # "" is refused, not taken for "not given" (the log's release)
        engine_version = stated_version(engine_version)
    # --gpu "" is an unknown GPU and a --hw-profiles folder is checked without --gpu too, as fit does: neither is
    # taken for "not given"
    hw = find_gpu(gpu, hw_profiles or ()) if gpu is not None else None
    if gpu is None and hw_profiles:
        load_gpus(hw_profiles)
    spec = _resolve_log_model(model, rec.model)
    if spec is not None and rec.settings.get("speculative"):
        spec = _with_drafter(spec, rec.settings["speculative"])
    if spec is None and rec.model:
        stderr(f"note: the log's model {rec.model!r} is not in the catalog; pass --model to check it")
    result = reconcile(rec, spec, hw, engine_version, kv_dtype, tp, weight_dtype)
    if read := reading(result.engine, result.version):  # a development build the log prints, or --engine-version's
        stderr(f"note: {read}")
    data = {"engine": result.engine, "version": result.version, "model": result.model, "gpu": result.gpu,
            "rows": [r.__dict__ for r in result.rows], "whatif": [list(w) for w in result.whatif],
            "notes": result.notes}
    print_result(as_json, data, lambda console: _render(console, result))
    for n in result.notes:
        stderr(f"note: {n}")


def _with_drafter(spec, text: str):
    """The log's model with the drafter its SpeculativeConfig line names (kvplan.planning.speculative), or as it is
    with a note when kvplan does not model that drafter."""
    try:
        spec = with_speculative(spec, speculative_request(text))
    except KvplanError as exc:
        stderr(f"note: the log serves a drafter ({text}) kvplan does not count: {exc.message}")
        return spec
    stderr(f"note: the log serves a drafter; planned with --speculative {text}")
    return spec


def _resolve_log_model(name: str | None, hint: str | None):
    """--model (an empty one refused, as fit refuses it), else the model the log names when it is in the catalog
    (never the network)."""
    if name is not None:
        return resolve_model(name, loaded_bytes=loaded_as_model_dtype).spec
    if not hint:
        return None
    for cand in (hint, hint.rstrip("/").split("/")[-1], "/".join(hint.rstrip("/").split("/")[-2:])):
        spec = find_in_catalog(cand)
        if spec is None and cand.lower().endswith(("-fp8", "-awq", "-gptq")):
            spec = find_in_catalog(cand.rsplit("-", 1)[0])
        if spec is not None:
            return spec
    return None


def _render(console, result) -> None:
    plain = markup_safe  # the log's own text (model name, version) is never markup
    console.print(f"[bold]{result.engine}[/] {plain(result.version)} log · model {plain(result.model or '?')}"
                  + (f" · GPU {plain(result.gpu)}" if result.gpu else ""))
    t = table(["quantity", "engine printed", "kvplan", "difference", ""],
              right=("engine printed", "kvplan", "difference", ""))
    for r in result.rows:
        mark = "" if r.ok is None else ("[green]ok[/]" if r.ok else "[red]differs[/]")
        t.add_row(plain(r.quantity), plain(r.reported), plain(r.predicted), plain(r.diff), mark)
    print_stacked(console, t)  # a label too long beside the figures on lines of its own, broken only between words
    if result.whatif:
        w = table(["", " "], right=(" ",), title="Same deployment, other workloads")
        for label, value in result.whatif:
            w.add_row(plain(label), plain(value))
        console.print(w)
