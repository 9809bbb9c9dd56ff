"""`kvplan step-times MODEL`: prefill and decode step times of kvplan's own torch decoder, as a speed-corpus file.

Thin: check the flags, resolve the model, call kvplan.validate.steptime (torch, imported only when this
command runs), print one line per point on stderr and write the YAML. scripts/gpu_speed.sh runs it on a GPU.
"""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import KvDtypeOpt, ModelArg, check_range, cli_errors, stderr
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.files import check_writable
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model

MAX_POINTS = 200


def register(app: typer.Typer) -> None:
    app.command("step-times")(step_times)


def _ints(text: str, flag: str) -> list[int]:
    try:
        vals = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise KvplanError(f"{flag}: comma-separated whole numbers, got {text[:40]!r}", EXIT_USAGE) from None
    if not vals or vals[0] < 1 or vals[-1] > 1 << 20:
        raise KvplanError(f"{flag}: each between 1 and {1 << 20:,}, got {text[:40]!r}", EXIT_USAGE)
    return vals


@cli_errors
def step_times(
    model: ModelArg,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    batches: Annotated[str, typer.Option("--batches", help="Decode batch sizes, comma-separated.")] = "1,8",
    contexts: Annotated[str, typer.Option(
        "--contexts", help="Contexts in tokens, comma-separated: each a prefill of that many tokens (batch 1) and a "
        "decode step at that position.")] = "512",
    layers: Annotated[Optional[int],
                      typer.Option("--layers", help="Build only the first N layers (the points say so).")] = None,
    shrink: Annotated[bool, typer.Option(
        "--shrink", help="Shrink MLP/expert widths and vocabulary, as validate --shrink.")] = False,
    dtype: Annotated[Optional[str], typer.Option(
        "--dtype", help="Weights and compute dtype: fp32, bf16, fp16. Default: fp32 on CPU, the model's on "
        "CUDA.")] = None,
    kv_dtype: KvDtypeOpt = "auto",
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed calls before each point.")] = 3,
    repeats: Annotated[int, typer.Option("--repeats", help="Timed calls per point (mean, median, p99).")] = 10,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the speed-corpus YAML.")] = Path("."),
):
    """Time prefill and decode steps of kvplan's torch decoder (validate's model, random weights) and write them as
    speed-corpus points (engine kvplan-torch)."""
    bs, cs = _ints(batches, "--batches"), _ints(contexts, "--contexts")
    check_range("--warmup", warmup, 0, 1000)
    check_range("--repeats", repeats, 1, 1000)
    if len(bs) * len(cs) > MAX_POINTS:
        raise KvplanError(f"--batches x --contexts: at most {MAX_POINTS} points, got {len(bs) * len(cs)}", EXIT_USAGE)
    if output.exists() and not output.is_dir():
        raise KvplanError(f"--output {output}: not a folder", EXIT_USAGE)
    if not output.exists() and not output.absolute().parent.is_dir():  # one new folder at most, not a typo's tree
        raise KvplanError(f"--output {output}: folder {output.absolute().parent} does not exist", EXIT_USAGE)
    folder = output if output.is_dir() else output.absolute().parent  # a read-only one refused before the timing
    check_writable(folder / "kvplan-step-times.yaml")
    spec = resolve_model(model, loaded_bytes=loaded_as_model_dtype).spec
    from kvplan.validate import steptime  # torch at its module level: only this command pays for it
    from kvplan.validate.blueprint import SMALL, Widths

    output.mkdir(exist_ok=True)
    shown = [0]  # points printed so far

    def save(facts, points, skipped):  # after every point: a run cut short by a timeout keeps its points
        for p in points[shown[0]:]:
            stderr(f"{p['phase']:7} batch {p['batch']:4} ctx {p['ctx']:6}: median {p['ms']['median']:10.3f} ms")
        shown[0] = len(points)
        return steptime.write_corpus(spec.name, facts, points, skipped, output)

    facts, points, skipped = steptime.measure(spec, bs, cs, layers=layers, device=device, compute_dtype=dtype,
                                              kv_dtype=kv_dtype, widths=SMALL if shrink else Widths(),
                                              warmup=warmup, repeats=repeats, on_point=save)
    path = save(facts, points, skipped)
    for line in skipped:
        stderr(f"skipped: {line}")
    stderr(f"wrote {path}")
