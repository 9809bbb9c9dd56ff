"""The `kvplan validate` command: a real torch decode that checks the planner's predictions.

torch is imported only inside the command (and the optional transformers backend only when
asked for), so `kvplan fit` never pays for it. The work lives in kvplan.validate; this module
parses, reports and sets the exit code: 0 when every check passes, 1 when any fails.
"""

import importlib.util
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import JsonOpt, KvDtypeOpt, cli_errors, print_result, stderr
from kvplan.cli.validate_ranks import render_ranks
from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError
from kvplan.core.markup import plain
from kvplan.core.units import human_bytes as format_bytes, parse_tokens, signed
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model
from kvplan.validate.blueprint import SMALL, Widths
from kvplan.validate.compare import failures
from kvplan.validate.results import check_output, write_results
from kvplan.validate.shard import Layout
from kvplan.report.fitted import fitted_table

BACKENDS = ("torch", "transformers")


def register(app: typer.Typer) -> None:
    app.command()(validate)


@cli_errors
def validate(
    model: Annotated[str, typer.Argument(
        metavar="MODEL", help="Catalog name or alias (llama-3.1-8b), a folder or config.json, or a Hub repo id.")],
    ctx: Annotated[str, typer.Option(
        "--ctx", "-c", help="Tokens each sequence holds at the end (prompt + decoded): 4096, 4k.")] = "1k",
    batch: Annotated[int, typer.Option(
        "--batch", "-b", help="Sequences decoded together, each holding --ctx tokens; the cache is batch x ctx tokens "
        "per layer.")] = 1,
    layers: Annotated[Optional[int], typer.Option(
        "--layers", help="Build only the first N layers of the real pattern; predictions are for the same reduced "
        "model.")] = None,
    steps: Annotated[int, typer.Option("--steps", help="Greedy decode steps after the prefill.")] = 8,
    kv_dtype: KvDtypeOpt = "auto",
    state_dtype: Annotated[str, typer.Option(
        "--state-dtype", help="Recurrent (Mamba / linear attention) state dtype: auto (the model's), fp32, bf16, fp16, "
        "fp8.")] = "auto",
    dtype: Annotated[Optional[str], typer.Option(
        "--dtype", help="Weights and compute dtype: fp32, bf16, fp16. Default (or auto): fp32 on CPU, the model's on "
        "CUDA.")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    shrink: Annotated[bool, typer.Option(
        "--shrink", help="Shrink MLP/expert widths, routed experts and vocabulary (never the cache geometry) to fit a "
        "CPU.")] = False,
    hidden: Annotated[Optional[int], typer.Option(
        "--hidden", help="Also shrink the hidden size (q/o projections' outer width; the cache does not "
        "depend on it).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for weights and prompt.")] = 0,
    backend: Annotated[str, typer.Option(
        "--backend", help="torch (kvplan's decoder) or transformers (the model's own HF class; needs the "
        "\\[transformers] extra).")] = "torch",
    output: Annotated[Optional[Path],
                      typer.Option("--output", "-o", help="Append this run to a results file (.json or .csv).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel ranks: one process each (torch.distributed; gloo on "
                                                 "CPU, NCCL on CUDA), each measuring its own shard.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages (contiguous layer ranges).")] = 1,
    dp: Annotated[int, typer.Option("--dp", help="Data-parallel ranks, each decoding batch / dp of the "
                                                 "sequences.")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert parallelism: 1, or tp x dp (each rank whole experts, as "
                                                 "vLLM's --enable-expert-parallel).")] = 1,
    as_json: JsonOpt = False,
):
    """Run a real torch decode of MODEL and check kvplan's KV, weight and peak predictions against it."""
    # first, before a model is looked up (a Hub fetch) or a flag read: without torch nothing here can run. Exit 2,
    # the code of an invocation refused before any work, as every missing extra is (readers/hf_meta.py, the
    # transformers backend); 1 is validate's "measured other than predicted", which a script must not confuse with it
    if importlib.util.find_spec("torch") is None:
        raise KvplanError("validate needs torch, which is not installed: pip install 'kvplan[validate]'", EXIT_USAGE)
    ctx_tokens = parse_tokens(ctx, "context")
    _check_flags(tp, pp, dp, ep, backend, hidden)
    compute = _compute(dtype)
    if output is not None:
        check_output(output)  # a bad name, folder or file fails now, not after the run
    resolved = resolve_model(model, loaded_bytes=loaded_as_model_dtype)
    spec = resolved.spec

    from kvplan.validate.run import Settings

    widths = SMALL if shrink else Widths()
    if hidden is not None:
        widths = Widths(hidden, widths.mlp, widths.expert, widths.experts, widths.vocab)
    settings = Settings(batch=batch, ctx=ctx_tokens, steps=steps, layers=layers, kv_dtype=kv_dtype,
                        state_dtype=state_dtype, compute_dtype=compute, device=device, seed=seed,
                        widths=widths)

    layout = Layout(tp, pp, dp, ep)
    if layout.world > 1 or ep > 1:
        from kvplan.validate.dist_run import check_distributed

        check_distributed(spec, settings, layout)  # before anything is printed or started
    stderr(resolved.note)
    done = _run(spec, settings, layout, backend, model)
    if done is not None:  # None: a torchrun rank other than 0 (rank 0 reports)
        _report(*done, as_json, output)


def _check_flags(tp: int, pp: int, dp: int, ep: int, backend: str, hidden: Optional[int]) -> None:
    if min(tp, pp, dp, ep) < 1:
        raise KvplanError("--tp, --pp, --dp and --ep must be at least 1", EXIT_USAGE)
    if tp * pp * dp > 64:
        raise KvplanError(f"{tp * pp * dp} ranks: validate starts at most 64 processes", EXIT_USAGE)
    if tp * pp * dp * ep > 1 and backend != "torch":
        raise KvplanError("--tp/--pp/--dp/--ep run kvplan's own decoder (--backend torch)", EXIT_USAGE)
    if backend not in BACKENDS:
        raise KvplanError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}", EXIT_USAGE)
    if hidden is not None and hidden < 1:
        raise KvplanError(f"--hidden must be positive, got {hidden}", EXIT_USAGE)


def _run(spec, settings, layout, backend: str, model: str):
    """(record, checks) of the run on one process, across ranks, or with transformers' own class;
    None on a torchrun rank other than 0. An allocation failure is a one-line error."""
    from kvplan.validate.run import is_out_of_memory, out_of_memory_error

    try:
        if layout.world > 1 or layout.ep > 1:
            from kvplan.validate.dist_run import validate_distributed

            return validate_distributed(spec, settings, layout)
        if backend == "transformers":
            from kvplan.validate.transformers_backend import validate_transformers

            return validate_transformers(spec, settings, model)
        from kvplan.validate.run import validate as run_validation

        with _progress(settings.steps) as tick:
            return run_validation(spec, settings, progress=tick)
    except Exception as exc:  # an allocation failure the memory check could not foresee
        if isinstance(exc, KvplanError) or not is_out_of_memory(exc):
            raise
        raise out_of_memory_error(exc, settings.device) from None


def _report(record: dict, checks, as_json: bool, output: Optional[Path]) -> None:
    """The notes, the record (JSON or tables), the results file; a failed check is the exit code."""
    for note in record["notes"]:
        stderr(f"note: {note}")
    if "ranks" in record:
        print_result(as_json, record, lambda console: render_ranks(console, record))
    else:
        print_result(as_json, record, lambda console: _render(console, record, checks))
    if output is not None:
        count = write_results(output, record)
        stderr(f"wrote run {count} to {output}")
    if not record["ok"]:
        raise KvplanError("validation failed: " + "; ".join(failures(checks, record["tokens_match"])), EXIT_ERROR)


def _compute(dtype: Optional[str]) -> Optional[str]:
    """--dtype's canonical name; None (and auto) leave the choice to the device."""
    if dtype is None or dtype.strip().lower() == "auto":
        return None

    try:
        name = canonical_kv_dtype(dtype).name
    except KvplanError:
        name = None
    if name not in ("fp32", "bf16", "fp16"):
        raise KvplanError(f"--dtype {dtype!r}: weights and compute run in fp32, bf16 or fp16 (or auto)", EXIT_USAGE)
    return name


class _progress:
    """A progress bar on stderr for the decode steps (silent when stderr is not a terminal)."""

    def __init__(self, total: int):
        self.total = total

    def __enter__(self):
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        self._bar = Progress(console=console, transient=True, disable=not console.is_terminal)
        self._bar.__enter__()
        self._task = self._bar.add_task("decoding", total=self.total)
        return lambda done, total: self._bar.update(self._task, completed=done)

    def __exit__(self, *exc):
        return self._bar.__exit__(*exc)


def _render(console, record: dict, checks) -> None:
    title = plain(f"{record.get('backend', 'torch')} / {record['model']}: {record['layers']} of "
                  f"{record['layers_total']} layers, batch {record['batch']}, "
             f"ctx {record['ctx']:,} ({record['prompt_tokens']:,} prompt + {record['decode_steps']} decoded), "
             f"KV {record['kv_dtype']}, on {record['device_name']} (torch {record['torch_version']})")
    table = fitted_table(title=title, show_edge=False)
    for i, col in enumerate(("", "predicted", "measured", "error", "tolerance", "")):  # figures never wrap: a
        table.add_column(col, justify="right" if col in ("predicted", "measured", "error") else "left",  # cut
                         no_wrap=i > 0, overflow="fold")  # "-90.05%" read as 90.05%; only the label wraps
    labels = {"kv_cache": "KV cache", "kv_cache_after_decode": "KV cache after decode",
              "weights": "weights (as built)", "weights_planner_spec": "weights (planner's spec)", "peak": "peak",
              "kv_cache_visible": "KV cache (tensor views)"}
    for c in checks:
        tol = "exact" if c.tolerance == 0 else f"±{c.tolerance:.1%}"
        if not c.enforced:
            tol = "info"
        status = "[green]ok[/]" if c.ok else "[red]FAIL[/]"
        err = "inf" if c.error == float("inf") else signed(c.error, "+.2%")
        table.add_row(labels.get(c.name, c.name), f"{c.predicted:,} B", f"{c.measured:,} B", err, tol,
                      status if c.enforced else "")
    console.print(table)
    if record.get("backend") != "transformers":
        console.print(f"KV cache: {format_bytes(record['measured_kv_bytes'])} measured; a paged engine (16-token "
                      f"pages) would hold {format_bytes(record['predicted_kv_bytes_paged16'])}")
    same = "[green]same tokens[/]" if record["tokens_match"] else "[red]different tokens[/]"
    console.print(f"cached decode vs uncached recomputation (greedy, seed {record['seed']}): {same}")
    console.print("[green]all checks passed[/]" if record["ok"] else "[red]validation failed[/]")
