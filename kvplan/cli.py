"""The `kvplan` command line: parse, call the pure core, render. Nothing else lives here.

stdout carries data (tables, JSON); stderr carries chatter (where a model came from, notices).
Every user error is a KvplanError, turned into `Error: <one line>` and an exit code by
`cli_errors`; KVPLAN_DEBUG=1 shows the traceback instead.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_ERROR, EXIT_USAGE, KvplanError

app = typer.Typer(
    name="kvplan",
    help="KV-cache capacity planner for LLM serving: does it fit, how many users, how long a context, how many GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

MAX_BATCH = 1_000_000  # concurrent requests: far beyond any deployment, small enough to stay meaningful

# Options every command shares.
GpuOpt = Annotated[str, typer.Option("--gpu", "-g", help="GPU name or alias (a100-80, h100, h200, mi300x, l40s, 4090; see `kvplan gpus`).")]
CtxOpt = Annotated[Optional[str], typer.Option("--ctx", "-c", help="Context per request: 32768, 32k, 128K, 1M. Default: the model's limit.")]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", help="Concurrent requests (for max context, decode speed and fits).")]
KvDtypeOpt = Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype: auto (model's), bf16, fp16, fp32, fp8 (fp8_e4m3), int8, q8_0, q4_0, ...")]
WeightDtypeOpt = Annotated[Optional[str], typer.Option("--weight-dtype", help="Override the checkpoint's weight format: bf16, fp16, fp32, fp8, int8, int4 (awq/gptq), mxfp4.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
HwOpt = Annotated[Optional[list[Path]], typer.Option("--hw-profiles", help="Directory of extra GPU profiles (YAML); may repeat.")]
RevisionOpt = Annotated[Optional[str], typer.Option("--revision", help="Hub revision (branch, tag or commit) for a repo id.")]
GmuOpt = Annotated[Optional[str], typer.Option("--gpu-memory-utilization", help="Fraction of GPU memory the engine may use (default 0.9; with --engine: that engine's default for its version).")]
BlockSizeOpt = Annotated[Optional[int], typer.Option("--block-size", help="KV page size in tokens (default 16; with --engine: the engine's).")]
EngineOpt = Annotated[Optional[str], typer.Option("--engine", help="Plan as this engine allocates: vllm, sglang, trtllm, llama.cpp, transformers.")]
EngineVersionOpt = Annotated[Optional[str], typer.Option("--engine-version", help="Engine release whose defaults and rules apply (e.g. 0.11.0; llama.cpp: 2024-08, current). Default: the newest modelled.")]
EngineSettingOpt = Annotated[Optional[list[str]], typer.Option("--engine-opt", help="Engine setting KEY=VALUE (e.g. max_num_batched_tokens=4096, kv_unified=true); may repeat.")]
TokenOpt = Annotated[Optional[str], typer.Option("--token", help="Hub token for gated repos (default: HF_TOKEN / the cached login). Never printed.")]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def cli_errors(fn):
    """Map KvplanError (and anything unexpected) to one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG"):
                raise
            _stderr(f"Error: {exc.message}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            _stderr("Error: interrupted")
            raise typer.Exit(130) from None
        except BrokenPipeError:  # `kvplan ... | head`: the reader left; say nothing more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as exc:  # a bug: still one line, the traceback on request
            if os.environ.get("KVPLAN_DEBUG"):
                raise
            _stderr(f"Error: internal error: {type(exc).__name__}: {exc} (set KVPLAN_DEBUG=1 for the traceback)")
            raise typer.Exit(EXIT_ERROR) from None

    return wrapper


def print_warnings(by_plan) -> None:
    """Each warning once on stderr; one that only some of the plans have names them (`1 GPU: ...`)."""
    seen: list[str] = []
    for _, warnings in by_plan:
        seen += [w for w in warnings if w not in seen]
    for w in seen:
        holders = [title for title, warnings in by_plan if w in warnings]
        where = "" if len(holders) == len(by_plan) else f"{', '.join(holders)}: "
        _stderr(f"warning: {where}{w}")


def _request(ctx_tokens: int, batch: int, kv_dtype: str, weight_dtype, model, block_size: int,
             gpu_memory_utilization: float, overhead: Optional[str], kv_cache_memory: Optional[str]):
    from kvplan.dtypes import canonical_kv_dtype, canonical_weight_dtype
    from kvplan.planner import Request
    from kvplan.units import parse_bytes, parse_fraction

    if not 1 <= batch <= MAX_BATCH:
        raise KvplanError(f"--batch must be between 1 and {MAX_BATCH:,}, got {batch}", EXIT_USAGE)
    if not 1 <= block_size <= 4096:
        raise KvplanError(f"--block-size must be between 1 and 4096, got {block_size}", EXIT_USAGE)
    return Request(
        context=ctx_tokens,
        batch=batch,
        kv_dtype=canonical_kv_dtype(kv_dtype, model.dtype),
        weight_dtype=None if weight_dtype is None or weight_dtype.strip().lower() == "auto"
        else canonical_weight_dtype(weight_dtype),
        block_size=block_size,
        gpu_memory_utilization=parse_fraction(gpu_memory_utilization, "--gpu-memory-utilization"),
        overhead_bytes=None if overhead is None else parse_bytes(overhead, "--overhead", allow_zero=True),
        kv_cache_memory_bytes=None if kv_cache_memory is None else parse_bytes(kv_cache_memory, "--kv-cache-memory"),
    )


def _deployment(model, gpus: Optional[int], tp: Optional[int], pp: Optional[int]):
    """The deployment the flags ask for, or None (none given: one GPU and the smallest that fits).

    --gpus alone picks the widest valid tp within a node of 8 and pipeline stages beyond it, as
    the smallest-fit search and `sweep` do; --tp/--pp fix the split.
    """
    from kvplan.planner import Deployment, deployment_for_gpus, validate_deployment

    for flag, value in (("--gpus", gpus), ("--tp", tp), ("--pp", pp)):
        if value is not None and not 1 <= value <= 4096:
            raise KvplanError(f"{flag} must be between 1 and 4096, got {value}", EXIT_USAGE)
    if gpus is None and tp is None and pp is None:
        return None
    if tp is None and pp is None:
        dep = deployment_for_gpus(model, gpus)
        if dep is None:
            raise KvplanError(f"{model.name}: no tensor × pipeline split of {gpus} GPUs is valid "
                              f"(tp must divide the {model.num_attention_heads} attention heads)", EXIT_USAGE)
        return dep
    if tp is None:
        if gpus is not None and gpus % pp:
            raise KvplanError(f"--gpus {gpus} is not a multiple of --pp {pp}", EXIT_USAGE)
        tp = gpus // pp if gpus is not None else 1
    pp = pp or 1
    if gpus is not None and gpus != tp * pp:
        raise KvplanError(f"--gpus {gpus} does not equal --tp {tp} × --pp {pp}", EXIT_USAGE)
    dep = Deployment(tp, pp)
    why = validate_deployment(model, dep)
    if why:
        raise KvplanError(f"{model.name}: {why}", EXIT_USAGE)
    return dep


@app.command()
@cli_errors
def fit(
    model: Annotated[str, typer.Argument(help="Catalog name or alias (llama-3-70b), a folder or config.json, or a Hub repo id.")],
    gpu: GpuOpt,
    ctx: CtxOpt = None,
    batch: BatchOpt = 1,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Total GPUs (tp × pp). Without --gpus/--tp: one GPU and the smallest deployment that fits.")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size (must divide the attention heads).")] = None,
    pp: Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size (splits layers).")] = None,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    gpu_memory_utilization: GmuOpt = None,
    overhead: Annotated[Optional[str], typer.Option("--overhead", help="Per-GPU activation + runtime overhead (e.g. 2GiB). Default: an estimate.")] = None,
    kv_cache_memory: Annotated[Optional[str], typer.Option("--kv-cache-memory", help="Exact per-GPU KV budget (as vLLM's flag), e.g. 28.2GiB or bytes.")] = None,
    block_size: BlockSizeOpt = None,
    engine: EngineOpt = None,
    engine_version: EngineVersionOpt = None,
    engine_opt: EngineSettingOpt = None,
    emit: Annotated[Optional[str], typer.Option("--emit", help="Also print the serve command line for this plan: vllm, sglang or llama.cpp.")] = None,
    hw_profiles: HwOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the Hub.")] = 10.0,
    explain: Annotated[bool, typer.Option("--explain", help="Print the formula with this model's numbers.")] = False,
    check: Annotated[bool, typer.Option("--check", help=f"Exit {EXIT_DOES_NOT_FIT} when the workload does not fit.")] = False,
    as_json: JsonOpt = False,
):
    """Does MODEL fit on GPU at this context: concurrency, longest context, GPUs needed, decode speed."""
    from kvplan.hardware import find_gpu
    from kvplan.planner import Deployment, plan, smallest_fitting
    from kvplan.report import plan_to_dict, render_plans
    from kvplan.resolve import resolve_model
    from kvplan.units import parse_tokens

    hw = find_gpu(gpu, hw_profiles or ())
    ctx_tokens = None if ctx is None else parse_tokens(ctx, "--ctx")
    resolved = resolve_model(model, revision=revision, token=token, timeout=timeout)
    spec = resolved.spec
    req = _request(ctx_tokens or spec.max_context, batch, kv_dtype, weight_dtype, spec,
                   16 if block_size is None else block_size,
                   "0.9" if gpu_memory_utilization is None else gpu_memory_utilization, overhead, kv_cache_memory)
    dep = _deployment(spec, gpus, tp, pp)
    choice = None
    if engine or emit or engine_version or engine_opt:
        from kvplan.cli_engines import engine_choice

        choice = engine_choice(engine, emit, engine_version, engine_opt, {
            "gpu_memory_utilization": None if gpu_memory_utilization is None else req.gpu_memory_utilization,
            "block_size": block_size})
    # All input is valid from here on: now say where things came from.
    _stderr(resolved.note)
    for notice in resolved.notices:
        _stderr(f"note: {notice}")
    if ctx_tokens is None:
        _stderr(f"note: --ctx not given; using the model's limit, {spec.max_context:,} tokens")
    if choice is not None:
        from kvplan.cli_engines import fit_with_engine

        fit_with_engine(spec, hw, dep, req, choice, emit_to=emit, as_json=as_json, explain=explain, check=check)
        return
    if dep is not None:
        plans, titles, recommended = [plan(spec, hw, dep, req)], [f"{dep.gpus} GPU(s)"], None
    else:
        one = plan(spec, hw, Deployment(1, 1), req)
        best = one if one.fits else smallest_fitting(spec, hw, req)
        plans, titles = [one], ["1 GPU"]
        if best is not None and best is not one:
            plans.append(best)
            titles.append(f"smallest fit: {best.deployment.gpus} GPUs")
        recommended = None if best is None else (0 if best is one else 1)
    print_warnings([(t, p.warnings) for t, p in zip(titles, plans)])
    if as_json:
        dicts = [plan_to_dict(p, spec) for p in plans]
        out = dicts[0] if dep is not None else {"plans": dicts, "recommended": recommended}
        print(json.dumps(out, indent=2))
    else:
        from rich.console import Console

        console = Console()
        render_plans(console, plans, spec, hw, titles)
        if dep is None and recommended is None:
            console.print("[red]No deployment of up to 64 GPUs fits this workload.[/]")
    if explain:
        from kvplan.explain import explain_lines

        stream = sys.stderr if as_json else sys.stdout
        print("\n".join(explain_lines(plans[-1] if recommended is None else plans[recommended], spec)), file=stream)
    if check and not any(p.fits for p in plans):
        raise typer.Exit(EXIT_DOES_NOT_FIT)


@app.command()
@cli_errors
def gpus(hw_profiles: HwOpt = None, as_json: JsonOpt = False):
    """List the GPU catalog: memory, bandwidth, dense FLOPs, aliases."""
    from kvplan.hardware import load_gpus

    catalog = load_gpus(hw_profiles or ())
    if as_json:
        print(json.dumps([{
            "key": g.key, "name": g.name, "vendor": g.vendor, "aliases": list(g.aliases),
            "memory_marketed": g.memory_marketed, "memory_usable_bytes": g.memory_usable_bytes,
            "memory_usable_source": g.memory_usable_source, "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
            "dense_flops": dict(g.dense_flops), "price_per_hour": g.price_per_hour,
        } for g in catalog.values()], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("key", "name", "memory (usable)", "bandwidth", "bf16 dense", "aliases"):
        table.add_column(col, no_wrap=col == "key")
    for g in catalog.values():
        bf16 = dict(g.dense_flops).get("bf16") or dict(g.dense_flops).get("fp16")
        table.add_row(g.key, g.name, f"{g.memory_marketed} ({g.memory_usable_bytes / 2**30:.2f} GiB)",
                      f"{g.bandwidth_bytes_per_s / 1e12:g} TB/s", f"{bf16 / 1e12:g} TFLOPS" if bf16 else "-",
                      ", ".join(g.aliases))
    # A terminal gets its own width; a pipe or file gets whole rows (rich would assume 80 columns).
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def main() -> None:
    """Console entry point: the app, with the parser's own usage errors also as one line.

    Typer prints a bad flag value (`--batch abc`) as a boxed, multi-line usage message; kvplan's
    rule is one `Error:` line and exit 2, so the parser runs in non-standalone mode and its usage
    errors (they carry format_message and exit_code) are printed here.
    """
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        _stderr("Error: aborted")
        code = 130
    except Exception as exc:  # noqa: BLE001 - only the parser's usage errors are handled here
        if not (hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)):
            raise
        message = " ".join(exc.format_message().split())
        if message:  # (no arguments at all: the help was printed, nothing to add)
            hint = f" (see: {exc.ctx.command_path} --help)" if getattr(exc, "ctx", None) is not None else ""
            _stderr(f"Error: {message}{hint}")
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)


# Sub-commands that live in their own modules (each imports its heavy dependencies lazily).
from kvplan import cli_engines, cli_models, cli_reports, cli_simulate, cli_validate  # noqa: E402

app.add_typer(cli_models.models_app, name="models")
cli_validate.register(app)
cli_reports.register(app)
cli_engines.register(app)
cli_simulate.register(app)
