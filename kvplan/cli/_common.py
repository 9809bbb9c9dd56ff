"""What every kvplan command shares: option types, error mapping, warnings, one output helper and one
progress bar (the engine and drafter flags: kvplan.cli.engine_flags).

Imports nothing from kvplan.cli, so any command module can import it alone. stdout carries data (tables, JSON); stderr
carries chatter. Every user error is a KvplanError, turned into `Error: <one line>` and an exit code by `cli_errors`,
which also has the core name each input by its flag; KVPLAN_DEBUG=1 shows the traceback instead.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import inspect
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Callable, Optional, get_type_hints

import typer

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg, inputs_named, path_error
from kvplan.core.files import check_writable
from kvplan.core.markup import one_line, plain, safe_stdout
from kvplan.report.fitted import fitted_table
from kvplan.report.wrap import fitted

EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
MAX_BATCH = 1_000_000  # concurrent requests: kvplan.planning.request.MAX_BATCH (not imported: fit's start-up)

# Options with one meaning wherever they appear. `--gpu/-g` names the GPU(s); `--gpus` is a count.


def _one_gpu(value: str) -> str:
    """fit, simulate and disagg plan one GPU type: a comma-separated list is refused with where lists go."""
    if value is not None and "," in value:
        raise typer.BadParameter("one GPU here; several are compared by `kvplan sweep -g h100,a100-80` or "
                                 "`kvplan cheapest -g h100,a100-80`")
    return value


ModelArg = Annotated[str, typer.Argument(metavar="MODEL",
                                        help="Catalog name or alias, a folder or config.json, or a Hub repo id.")]
GpuOpt = Annotated[str, typer.Option(
    "--gpu", "-g", callback=_one_gpu, help="GPU name or alias (a100-80, h100, h200, mi300x, l40s, 4090; see `kvplan "
    "gpus`).")]
CtxOpt = Annotated[Optional[str], typer.Option(
    "--ctx", "-c", help="Context per request: 32768, 32k, 128K, 1M. Default: the model's limit.")]
BatchOpt = Annotated[int, typer.Option("--batch", "-b",
                                       help="Concurrent requests (for max context, decode speed and fits).")]
KvDtypeOpt = Annotated[str, typer.Option(
    "--kv-dtype", help="KV cache dtype: auto (model's), bf16, fp16, fp32, fp8 (fp8_e4m3), int8, q8_0, q4_0, ...")]
WeightDtypeOpt = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Override the checkpoint's weight format: bf16, fp16, fp32, fp8, int8, int4 (awq/gptq), "
    "mxfp4, nvfp4, or a GGUF type (q4_k_m, q8_0, q6_k, iq4_xs, ...).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
HwOpt = Annotated[Optional[list[Path]],
                  typer.Option("--hw-profiles", help="Directory of extra GPU profiles (YAML); may repeat.")]
RevisionOpt = Annotated[Optional[str],
                        typer.Option("--revision", help="Hub revision (branch, tag or commit) for a repo id.")]
TokenOpt = Annotated[Optional[str], typer.Option(
    "--token", help="Hub token for gated repos (default: HF_TOKEN / the cached login). Never printed.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the Hub.")]
GmuOpt = Annotated[Optional[str], typer.Option(
    "--gpu-memory-utilization", help="Fraction of GPU memory the engine may use (default 0.9; with --engine: that "
    "engine's default for its version).")]
BlockSizeOpt = Annotated[Optional[int], typer.Option(
    "--block-size", help="KV page size in tokens (default 16; with --engine: the engine's).")]
EngineOpt = Annotated[Optional[str], typer.Option(
    "--engine", help="Plan as this engine allocates: vllm, sglang, trtllm, llama.cpp, transformers.")]
EngineVersionOpt = Annotated[Optional[str], typer.Option(
    "--engine-version", help="Engine release whose defaults and rules apply (e.g. 0.11.0; llama.cpp: 2024-08, "
    "current). Default: the newest modelled.")]
StepSpeedOpt = Annotated[str, typer.Option(
    "--speed", help="Step times: calibrated (default: the roofline's terms with --engine's coefficients fitted on "
    "published measurements, vLLM's where none are, labelled with their held-out error) or roofline (the bare "
    "roofline, a lower bound).")]
EngineSettingOpt = Annotated[Optional[list[str]], typer.Option(
    "--engine-opt", help="Engine setting KEY=VALUE (e.g. max_num_batched_tokens=4096, kv_unified=true); may repeat.")]
SpeculativeOpt = Annotated[Optional[str], typer.Option(
    "--speculative", help="Speculative decoding, as vLLM's --speculative-config: mtp[:N] (the checkpoint's MTP "
    "layers), draft:MODEL:N (a draft model), ngram:N. Counts the drafter's cache layers and weights.")]
MaxModelLenOpt = Annotated[Optional[str], typer.Option(
    "--max-model-len", help="The longest request the engine is set up for (vLLM --max-model-len, SGLang "
    "--context-length): 32k, 128k. Default: the limit the engine derives from the config (rope_scaling included).")]
AllowLongOpt = Annotated[bool, typer.Option(
    "--allow-long-context", help="Plan a --max-model-len past the model's limit where vLLM or SGLang refuses one "
    "unless an environment variable allows it (the plan's note names the variable to set).")]
LoraOpt = Annotated[Optional[str], typer.Option(
    "--lora", help="LoRA adapters the engine keeps room for: MAX_LORAS:RANK[:MODULES], e.g. 4:16 or 4:16:q,k,v,o "
    "(modules q,k,v,o,gate,up,down, attn, mlp; default every linear layer). Priced per engine as its own budget row.")]
PricesOpt = Annotated[Optional[Path],
                      typer.Option("--prices", help="YAML of `gpu: price per GPU-hour` (any currency).")]


@dataclasses.dataclass(frozen=True)
class HubFlags:
    """Where a Hub repo id is read from: `--revision`, `--token`, `--timeout` (fit, sweep, cheapest, simulate)."""

    revision: RevisionOpt = None
    token: TokenOpt = None
    timeout: TimeoutOpt = 10.0


def grouped(fn):
    """A command whose parameters include option groups (a frozen dataclass of typer options, e.g. `hub: HubFlags`):
    typer reads each group's fields as options in the group's place, and the command gets the group built from them.
    So flags several commands share are declared once, with one name, default and help text."""
    sig = inspect.signature(fn)
    groups = {p.name: p.annotation for p in sig.parameters.values() if dataclasses.is_dataclass(p.annotation)}
    params = []
    for p in sig.parameters.values():
        if p.name not in groups:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        hints = get_type_hints(groups[p.name], include_extras=True)  # a module's string annotations resolved
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                     annotation=hints[f.name]) for f in dataclasses.fields(groups[p.name])]

    @functools.wraps(fn)
    def wrapper(**kwargs):
        for name, group in groups.items():
            kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group) if f.name in kwargs})
        return fn(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)
    return wrapper


# Inputs whose flag is not `--` + the Python API keyword with dashes (`engine_version` is --engine-version).
FLAGS = {"context": "--ctx", "engine_opts": "--engine-opt"}
# Commands (by function name) that call an input otherwise; none yet.
COMMAND_FLAGS: dict[str, dict[str, str]] = {}


def flag(name: str, command: Optional[str] = None) -> str:
    """The flag of the input the core calls `name` (kvplan.core.errors.arg: 'tp', 'context'), as `command`
    spells it. `cli_errors` has every message, note and label a command prints name inputs this way."""
    return COMMAND_FLAGS.get(command or "", {}).get(name) or FLAGS.get(name) or "--" + name.replace("_", "-")


def stderr(message: str) -> None:
    """A note, warning or summary for people on stderr, broken between words at the tables' width
    (kvplan.report.wrap.fitted: 80 columns in a pipe)."""
    print(fitted(message), file=sys.stderr)


def error_line(message: str) -> None:
    """`Error: ...` on stderr as one line, whatever its length: a script reads an error by its first line."""
    print(message, file=sys.stderr)


def planned_by(label: Optional[str]) -> str:
    """Whose rules size the pool, as fit, sweep and cheapest say it: the engine and its release (its `label`), or
    kvplan's own where no engine was asked for."""
    return (f"planned as {label} allocates" if label else
            f"planned with kvplan's engine-neutral rules ({arg('engine')} for an engine's own)")


def cli_errors(fn):
    """Map KvplanError (and anything unexpected) to one line on stderr and an exit code; while the
    command runs, every message names an input by its flag (`flag`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        safe_stdout()  # paths with non-UTF-8 bytes print as given
        try:
            with inputs_named(functools.partial(flag, command=fn.__name__)):
                return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG"):
                raise
            error_line(f"Error: {one_line(exc.message)}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            error_line("Error: interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `kvplan ... | head`: the reader left; say nothing more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as exc:  # a bug: still one line, the traceback on request
            if os.environ.get("KVPLAN_DEBUG"):
                raise
            user = path_error(exc) if isinstance(exc, OSError) else None  # a file name too long, ...
            if user is not None:
                error_line(f"Error: {one_line(user.message)}")
                raise typer.Exit(user.exit_code) from None
            error_line(f"Error: internal error: {type(exc).__name__}: {one_line(exc)} (set KVPLAN_DEBUG=1 for the "
                       "traceback)")
            raise typer.Exit(EXIT_ERROR) from None

    return wrapper


class ProgressBar:
    """What a long run reports to the bar: `advance(n)` more done, or `done(completed, total)`."""

    def __init__(self, bar, task):
        self._bar, self._task = bar, task

    def advance(self, n: int = 1) -> None:
        self._bar.advance(self._task, n)

    def done(self, completed: int, total: Optional[int] = None) -> None:
        self._bar.update(self._task, completed=completed, total=total)


@contextmanager
def progress_bar(label: str, total: int, *, show: bool = True, eta: bool = False):
    """A transient progress bar on stderr while the block runs, when `show` and stderr is a terminal:
    yields a ProgressBar, else None (the work runs without one)."""
    if not (show and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn()] + ([TimeRemainingColumn()] if eta else [])
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        yield ProgressBar(bar, bar.add_task(label, total=total))


def print_warnings(by_plan, level: str = "warning") -> None:
    """Each warning (or, `level` "note", each plan note) once on stderr; one that only some of the plans have names
    them (`1 GPU: ...`)."""
    seen: list[str] = []
    for _, warnings in by_plan:
        seen += [w for w in warnings if w not in seen]
    for w in seen:
        holders = [title for title, warnings in by_plan if w in warnings]
        where = "" if len(holders) == len(by_plan) else f"{', '.join(holders)}: "
        stderr(f"{level}: {where}{w}")


def print_notes(resolved, engine=None) -> None:
    """Where a model came from, and what resolving it noticed (stderr), as `engine`'s options leave it true
    (Engine.restated: a tower they skip is not "counted in the weights")."""
    stderr(resolved.note)
    for notice in (engine.restated(resolved.spec, resolved.notices) if engine else resolved.notices):
        stderr(f"note: {notice}")


def check_range(flag: str, value, low, high) -> None:
    if value is not None and not low <= value <= high:
        raise KvplanError(f"{flag} must be between {low:,} and {high:,}, got {value}", EXIT_USAGE)


def print_result(as_json: bool, data, render: Callable) -> None:
    """The one way a command prints its answer: `data` as JSON on stdout, or `render(console)`.

    The console is rich's: the terminal's width, 80 columns in a pipe (or $COLUMNS); tables are
    built to fit that (see `table`).
    """
    if as_json:
        print(json.dumps(data, indent=2))
        return
    from rich.console import Console

    render(Console())


def table(columns: list[str], *, right: tuple[str, ...] = (), whole: tuple[str, ...] = (),
          title: Optional[str] = None, optional: tuple[str, ...] = (), drop_first: tuple[str, ...] = ()):
    """A rich table that fits the terminal (80 columns in a pipe) cutting nothing
    (kvplan.report.fitted): numbers (`right`) and short keys one types (`whole`) are never cut or
    wrapped; other text columns wrap between words; the `optional` columns are left out, first named
    first, where the others would not fit, and the caption says so (those also in `drop_first` before any
    name wraps)."""
    t = fitted_table(show_edge=False, title=title, title_justify="left", pad_edge=False, optional=optional,
                     drop_first=drop_first)
    for c in columns:
        if c in right or c in whole:
            t.add_column(c, justify="right" if c in right else "left", no_wrap=True)
        else:
            t.add_column(c, overflow="fold")
    return t


def markup_safe(text: str) -> str:
    """Outside text for a rich table: brackets escaped, undecodable path bytes shown (kvplan.core.markup)."""
    return plain(text)


OUTPUT_FORMATS = {".csv": "CSV", ".json": "JSON", ".html": "HTML"}  # --output extension -> name


def output_files(paths: list[Path], stdout_hint: str = "--json for stdout") -> list[tuple[Path, str]]:
    """Each --output as (path, extension), checked before any work: a known format (OUTPUT_FORMATS),
    a folder that exists and takes a new file, a name the filesystem takes, each path once."""
    out = []
    for path in paths:
        fmt = path.suffix.lower()
        if fmt not in OUTPUT_FORMATS:
            raise KvplanError(f"--output {path}: the format comes from the extension: .csv, .json or .html "
                              f"({stdout_hint})", EXIT_USAGE)
        full = path.expanduser()
        try:
            folder_ok, is_dir = full.parent.is_dir(), full.is_dir()
        except OSError as exc:  # a name too long for the filesystem
            raise KvplanError(f"--output {path}: {exc.strerror or exc}", EXIT_USAGE) from None
        if not folder_ok:
            raise KvplanError(f"--output {path}: folder {full.parent} does not exist", EXIT_USAGE)
        if is_dir:
            raise KvplanError(f"--output {path} is a folder; give a file name", EXIT_USAGE)
        if any(full == p for p, _ in out):
            raise KvplanError(f"--output {path} is given twice", EXIT_USAGE)
        check_writable(full)  # a read-only folder refused now, not after the work (and a first file written)
        out.append((full, fmt))
    return out


def read_capped_text(path: Path, max_bytes: int, kind: str, missing: str = "no such file", hint: str = "") -> str:
    """A user's text file (a log, a benchmark result) as UTF-8, undecodable bytes replaced, or as the UTF-16 a
    byte-order mark says (PowerShell 5's `>` writes UTF-16LE with one; an editor's UTF-8 mark is dropped); refused
    in one line when missing, unreadable, or past `max_bytes` (then it is no `kind`: a hostile or wrong file, and
    `hint` says what to do), or empty (nothing but whitespace)."""
    if path.is_dir():  # it exists: "no such file" would be false
        raise KvplanError(f"{path} is a folder; give {kind} file", EXIT_USAGE)
    if not path.is_file():
        if path.exists():  # a device or a FIFO (/dev/null, a pipe): there, but no file to read
            raise KvplanError(f"{path} is not a regular file; give {kind} file", EXIT_USAGE)
        raise KvplanError(f"{missing}: {path}", EXIT_NOT_FOUND)
    try:  # read through the cap (kvplan.core.capped): no gap between a size check and the read
        data = read_capped(path, max_bytes, str(path), kind, hint)
    except OSError as exc:
        raise KvplanError(f"cannot read {path}: {exc.strerror or exc}", EXIT_NOT_FOUND) from None
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8-sig", errors="replace")
    if not text.strip():  # (a run redirected to the file that failed before printing, a save that never happened)
        raise KvplanError(f"{path} is empty; give {kind} file", EXIT_USAGE)
    return text
