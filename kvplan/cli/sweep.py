"""`kvplan sweep`: plan every model × GPU × GPU count × context × dtype, rank, write CSV/JSON/HTML.

Thin: check every input first (output names included), call the pure kvplan.compare.sweep (and simulate or size
offload tiers per plan when asked), then hand the result to kvplan.cli.sweep_output, which writes the files, stdout
and the table. plotly is imported only when an .html output is asked for, so `kvplan fit` starts light.
"""

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    MAX_BATCH, AllowLongOpt, BlockSizeOpt, GmuOpt, HubFlags, HwOpt,
    LoraOpt, MaxModelLenOpt, PricesOpt, OUTPUT_FORMATS, SpeculativeOpt, check_range, cli_errors, grouped, output_files,
    planned_by, progress_bar, stderr,
)
from kvplan.engines.context import limited
from kvplan.cli.engine_flags import EngineFlags, lora_lines, speculative_request, with_speculative
from kvplan.cli.offload import OffloadFlags
from kvplan.cli.speed_flags import check_speed, form_notes, plans_gaps, request_note, speed_notes
from kvplan.cli.sweep_output import ranked_rows, skipped_lines, sweep_table, write_files, write_stdout
from kvplan.cli.sweep_size import DEFAULT_MAX_PLANS, check_size
from kvplan.cli.selection import (
    GPU_LIST_HELP, memory_caveats, names, resolve_gpus, resolve_models, weight_caveats, weight_dtypes,
)
from kvplan.cli.workload import SloTpotOpt, SloTtftOpt, WorkloadFlags
from kvplan.compare.offload import size_each
from kvplan.compare.sweep import RANKING, kv_dtypes_for, node_notes, parse_counts, sweep as run_sweep
from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.units import parse_token_list, plural
from kvplan.hardware.prices import load_prices
from kvplan.planning.lora import parse_lora
from kvplan.planning.plan import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, limit_name
from kvplan.report.text import checkpoint_kv_notes
from kvplan.report.offload import offload_columns
from kvplan.simulator.capacity import Target, sim_row, simulate_plan
from kvplan.simulator.frontend import of_set
from kvplan.simulator.limits import per_plan_note

PROGRESS_MIN_PLANS = 20_000  # below this a sweep takes well under a second: no bar
MAX_SIMULATED_PLANS = 500  # --workload simulates each plan (about 0.1-1 s each)


def register(app: typer.Typer) -> None:
    app.command()(sweep)


@cli_errors
@grouped
def sweep(
    models: Annotated[str, typer.Option(
        "--models", "-m", help="Comma-separated models (catalog names, folders, Hub ids), or `all` for the whole "
        "catalog.")],
    ctx: Annotated[str, typer.Option("--ctx", "-c", help="Comma-separated contexts: 8k,32k,128k (k = 1024).")],
    gpu: Annotated[str, typer.Option("--gpu", "-g", help=GPU_LIST_HELP)] = "all",
    gpu_counts: Annotated[str, typer.Option(
        "--gpu-counts", help="GPUs per deployment, comma-separated: tp=n up to the GPU's node (its profile's "
        "node_gpus, else 8), pipeline stages for the rest.")] = "1,2,4,8",
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="Comma-separated KV cache dtypes: auto (model's), bf16, fp8, ...")] = "auto",
    weight_dtype: Annotated[Optional[str], typer.Option(
        "--weight-dtype", help="Comma-separated weight formats (auto = the checkpoint's): bf16, fp8, int4, "
        "...")] = None,
    batch: Annotated[int, typer.Option(
        "--batch", "-b", help="Concurrent requests per deployment (fits, max context and decode speed use it).")] = 1,
    gpu_memory_utilization: GmuOpt = None,
    block_size: BlockSizeOpt = None,
    max_model_len: MaxModelLenOpt = None,
    allow_long_context: AllowLongOpt = False,
    eng: EngineFlags = EngineFlags(),
    prices: PricesOpt = None,
    layouts: Annotated[bool, typer.Option(
        "--layouts", help="For each GPU count, the best of every valid tp × pp × dp (× ep) layout (by concurrency, "
        "then decode speed), not tp then pp.")] = False,
    output: Annotated[Optional[list[Path]], typer.Option(
        "--output", "-o", help="Write every plan to this file, the format from its extension: .csv, .json or .html (a "
        "self-contained report); may repeat.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Every plan as JSON on stdout (instead of the table).")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Every plan as CSV on stdout (instead of the table).")] = False,
    top: Annotated[int, typer.Option("--top", help="Rows of the terminal table.")] = 20,
    title: Annotated[str, typer.Option("--title", help="Title of the HTML report.")] = "kvplan sweep",
    wl: WorkloadFlags = WorkloadFlags(),
    slo_ttft: SloTtftOpt = 2.0,
    slo_tpot: SloTpotOpt = 0.1,
    hw_profiles: HwOpt = None,
    speculative: SpeculativeOpt = None,
    lora: LoraOpt = None,
    off: OffloadFlags = OffloadFlags(),
    hub: HubFlags = HubFlags(),
    speed: Annotated[str, typer.Option(
        "--speed", help="Decode tok/s: calibrated (default: kvplan's step-time model fitted per engine on published "
        "measurements, beside the roofline bound) or roofline (the bare roofline only, a lower "
        "bound on time).")] = "calibrated",
    max_plans: Annotated[int, typer.Option(
        "--max-plans", help="Refuse a sweep of more plans than this (0: no cap); it holds every plan in memory to rank "
        "them.")] = DEFAULT_MAX_PLANS,
):
    """Plan every model × GPU × GPU count × context × KV dtype; rank them; write CSV, JSON, HTML.

    With --workload or --trace, every plan also serves that workload in the simulator (`kvplan
    simulate`; the context is the longest request) and its rows gain the sim_* columns. With
    --offload, each plan's tiers as its engine sizes them (offload_* columns; SIZE per deployment).
    """
    hw = hw_profiles or ()
    contexts = parse_token_list(ctx, "context")
    counts = parse_counts(gpu_counts)
    kv_names = names(kv_dtype, "--kv-dtype")
    for n in kv_names:
        canonical_kv_dtype(n)
    weights = weight_dtypes(weight_dtype)
    check_range("--batch", batch, 1, MAX_BATCH)
    check_speed(speed)
    if top < 0:
        raise KvplanError(f"--top must be 0 or more, got {top}", EXIT_USAGE)
    chosen, gmu = eng.configured(gpu_memory_utilization, block_size)
    drafter = speculative_request(speculative, chosen)
    adapters = parse_lora(lora)
    asked = off.checked(chosen)
    files = output_files(output or [], "--json or --csv for stdout")
    if as_json and as_csv:
        raise KvplanError("--json and --csv both want stdout; write one of them to a file with --output", EXIT_USAGE)
    served = wl.served
    wl.check(slo_ttft=slo_ttft, slo_tpot=slo_tpot)
    loaded = wl.load() if served else None
    gpu_list = resolve_gpus(gpu, hw)
    price_book = load_prices(prices, hw)
    specs = _limited(chosen, [with_speculative(s, drafter, token=hub.token, timeout=hub.timeout)
                              for s in resolve_models(models, hub.revision, hub.token, hub.timeout, chosen)],
                     max_model_len, allow_long_context)
    price_by_gpu = {g.key: p for g in gpu_list if (p := price_book.price(g)) is not None}

    per_model = len(gpu_list) * len(counts) * len(contexts) * len(weights)
    total = sum(per_model * len(kv_dtypes_for(s, kv_names)) for s in specs)  # auto and bf16: two plans of an FP8-KV one
    kwargs = dict(batch=batch, block_size=block_size or DEFAULT_BLOCK_SIZE,
                  gpu_memory_utilization=gmu or DEFAULT_GPU_MEMORY_UTILIZATION, prices=price_by_gpu, engine=chosen,
                  layouts=layouts, lora=adapters, speed=speed)
    stderr(_checked_size(total, max_plans, served))
    result = _run((specs, gpu_list, counts, contexts, kv_names, weights), kwargs, total)
    summary = _summary(result, specs, gpu_list, counts, contexts, kv_names, weights, batch, price_by_gpu, price_book)
    summary += lora_lines(adapters, chosen, "plan") + _speed_lines(result, gpu_list) + _kv_lines(result)
    summary += [f"note: {line}" for line in node_notes(gpu_list, counts, layouts and not chosen.splits_layers_only)]
    sims = front = None
    if served:
        sims, front = _simulate(result, chosen, gpu_list, loaded, slo_ttft, slo_tpot)
        summary.append(f"simulated on every plan: {loaded.said}; SLA TTFT ≤ {slo_ttft:g} s, TPOT ≤ "
                       f"{slo_tpot * 1e3:g} ms; figures in the sim_* columns of -o, --json and --csv")
    if asked.tiers:
        sims = _offload(result, chosen, asked, sims, summary)
    write_files(result, files, title, summary, price_book, gpu_list, sims, front)
    if as_json or as_csv:
        write_stdout(result, "json" if as_json else "csv", price_book, sims, front)
    for line in summary:
        stderr(line)
    for line in skipped_lines(result):
        stderr(f"skipped: {line}")
    if not (as_json or as_csv) and top:
        from rich.console import Console

        Console().print(sweep_table(result, ranked_rows(result, sims, limit=top), price_book.unit))
    for path, fmt in files:
        stderr(f"wrote {OUTPUT_FORMATS[fmt]}: {path}")


def _checked_size(total: int, max_plans: int, served: bool) -> str:
    """The line saying the sweep's size (kvplan.cli.sweep_size), once every limit on it is checked."""
    size = check_size(total, max_plans, "--max-plans")
    if served and total > MAX_SIMULATED_PLANS:
        raise KvplanError(f"--workload simulates every plan: {total:,} plans are more than {MAX_SIMULATED_PLANS:,}; "
                          "narrow the sweep (or use `kvplan cheapest --workload`)", EXIT_USAGE)
    return size


def _limited(engine, specs, max_model_len, allow_long_context) -> list:
    """Each model at the context limit `engine` derives, or --max-model-len's (kvplan.engines.context.limited),
    its notes said on stderr."""
    out = []
    for spec in specs:
        spec, notes, _ = limited(engine, spec, max_model_len, allow_long_context)
        out.append(spec)
        for note in notes:
            stderr(f"note: {spec.name}: {note}")
    return out


def _run(args, kwargs, total: int):
    """The sweep, with a progress bar on a terminal's stderr when it is big enough to wait for."""
    with progress_bar("planning", total, show=total >= PROGRESS_MIN_PLANS, eta=True) as bar:
        try:
            return run_sweep(*args, **kwargs, progress=bar and bar.advance)
        except MemoryError:
            raise KvplanError(f"out of memory planning {total:,} plans; narrow the sweep", EXIT_USAGE) from None


def _summary(result, specs, gpu_list, counts, contexts, kv_names, weights, batch, price_by_gpu,
             price_book) -> list[str]:
    fitting = sum(p.fits for p in result.plans)
    summary = [f"{plural(len(result.plans), 'plan')} ({fitting:,} fit) of {plural(len(specs), 'model')} × "
               f"{plural(len(gpu_list), 'GPU')} × GPU counts {','.join(map(str, counts))} × "
               f"{plural(len(contexts), 'context')} × KV "
               f"{','.join(kv_names)}"
               + (f" × weights {','.join(w or 'auto' for w in weights)}" if weights != [None] else "")
               + f"; batch {batch}"]
    past = [p for p in result.plans if p.binds == "context limit"]
    if past:
        whose = limit_name(all(p.context_limit_asked for p in past))
        summary.append(f"{len(past):,} plan{'s' if len(past) > 1 else ''} ask{'' if len(past) > 1 else 's'} a context "
                       f"past {whose} (fits: limit): the limit binds, not memory, and more GPUs never help")
    if result.skipped:
        summary.append(f"{plural(result.skipped_plans, 'plan')} skipped: deployments the model cannot run (see below)")
    summary.append(planned_by(result.engine))
    summary.append(f"ranked: {RANKING}")
    summary += [f"note: {line}" for line in (*memory_caveats(gpu_list), *weight_caveats(specs, weights))]
    if price_by_gpu:
        summary.append(f"prices per GPU-hour ({price_book.unit}): "
                       + ", ".join(f"{k} {v:g}" for k, v in price_by_gpu.items()))
    return summary


def _speed_lines(result, gpu_list) -> list[str]:
    """What the decode tok/s columns are: the calibrated model and its held-out band, the roofline bound, and
    the GPUs whose profiles lack a matmul rate the plans' terms need (at each precision their weights are stored in)."""
    gaps = plans_gaps(gpu_list, result.plans, lambda p: result.models[p.model])
    lines = speed_notes(result.speed, result.engine_name, "", "")[:1] + [f"note: {w}" for w in gaps]
    if result.speed == "calibrated":
        lines.append("decode tok/s: calibrated (decode_*_calibrated keys; the table's tok/s); the roofline "
                     "beside it is a bound (decode_tokens_per_second; the table's roofline), engines run slower")
    return lines


def _kv_lines(result) -> list[str]:
    """What each model's plans do with the KV cache its checkpoint declares, once per distinct case (the rows'
    checkpoint_kv key); none where no checkpoint declares one."""
    return [f"note: {line}" for line in checkpoint_kv_notes((p, result.models[p.model]) for p in result.plans)]


def _offload(result, engine, asked, sims, summary: list[str]) -> list[dict]:
    """Every plan's offload_* columns (beside its sim_* ones, if any), and a summary line."""
    sized = size_each(engine, result.plans, lambda p: result.models[p.model], asked.tiers, asked.backend, asked.host)
    refused = sum(isinstance(o, str) for o in sized)
    summary.append(f"offload tiers {','.join(t.describe() for t in asked.tiers)} ({asked.backend}) sized per "
                   f"deployment as {result.engine or 'kvplan'} sizes them: offload_* columns of -o, --json and "
                   f"--csv" + (f"; {plural(refused, 'plan')} not sized (offload_refused says why)" if refused else ""))
    cols = [offload_columns(asked.tiers, o) for o in sized]
    return cols if sims is None else [{**s, **c} for s, c in zip(sims, cols)]


def _simulate(result, chosen, gpu_list, loaded, slo_ttft: float, slo_tpot: float) -> tuple[list[dict], dict | None]:
    """(sim_* columns of every plan, in rank order (a progress bar on a terminal), each at `chosen`'s own limits and
    behind simulate's serving front end; that front end's JSON record, or None on the roofline)."""
    target = Target(tuple(loaded.requests), slo_ttft, slo_tpot, engine=result.engine_name, speed=result.speed,
                    configured=chosen)
    stderr(per_plan_note(chosen))
    gpus = {g.key: g for g in gpu_list}
    for line in request_note(result.speed, result.engine_name) + form_notes(  # the step-time line: _speed_lines
            result.plans, lambda p: result.models[p.model], lambda p: gpus[p.gpu], result.engine_name, chosen.version):
        stderr(line)
    fe = of_set(result.engine_name, result.speed)  # the same for every plan: the coefficient set's, said once
    if fe is not None:
        stderr(fe.said(loaded.requests) + " (every plan, as simulate runs it)")
    out = []
    with progress_bar("simulating", len(result.plans)) as bar:
        for p in result.plans:
            out.append(sim_row(simulate_plan(p, result.models[p.model], gpus[p.gpu], target)))
            if bar:
                bar.advance()
    return out, (fe.meta(loaded.requests) if fe is not None else None)


