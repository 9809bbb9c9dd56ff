"""`kvplan sweep` and `kvplan cheapest`: procurement reports from the command line.

Thin: parse and check every input first, call the pure kvplan.sweep / kvplan.cheapest, then
write files (kvplan.export, kvplan.html_report) atomically and print. plotly is imported only
when --html is asked for, so this module adds nothing heavy to `kvplan fit`'s start-up.
"""


import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError

PROGRESS_MIN_PLANS = 20_000  # below this a sweep takes well under a second: no bar


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _names(text: str, what: str) -> list[str]:
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise KvplanError(f"{what} list {text!r} is empty", EXIT_USAGE)
    return list(dict.fromkeys(items))


def _engine_choice(engine, version, opt_items, gmu, block_size):
    """The --engine flags as a kvplan.engines.EngineChoice (checked now), or None without any."""
    if engine is None and not (version or opt_items):
        return None
    from kvplan.cli_engines import engine_choice

    return engine_choice(engine, None, version, opt_items, {"gpu_memory_utilization": gmu, "block_size": block_size})


def resolve_gpus(text: str, hw_dirs) -> list:
    """`h100,h200` or `all` -> GPU objects (each once, in the order given)."""
    from kvplan.hardware import find_gpu, load_gpus

    names = _names(text, "--gpus")
    if [n.lower() for n in names] == ["all"]:
        return list(load_gpus(hw_dirs).values())
    out = {}
    for n in names:
        g = find_gpu(n, hw_dirs)
        out.setdefault(g.key, g)
    return list(out.values())


def resolve_models(text: str, revision=None, token=None, timeout: float = 10.0) -> list:
    """`llama-3.1-70b,qwen3-32b` or `all` (the catalog) -> ModelSpecs, notes on stderr."""
    from kvplan.catalog import load_catalog
    from kvplan.resolve import resolve_model

    names = _names(text, "--models")
    if [n.lower() for n in names] == ["all"]:
        return sorted(load_catalog(), key=lambda s: s.name)
    specs = {}
    for n in names:
        r = resolve_model(n, revision=revision, token=token, timeout=timeout)
        _stderr(r.note)
        for notice in r.notices:
            _stderr(f"note: {notice}")
        specs.setdefault(r.spec.name, r.spec)
    return list(specs.values())


def _weight_dtypes(text: Optional[str]) -> list:
    from kvplan.dtypes import canonical_weight_dtype

    if text is None:
        return [None]
    out = []
    for n in _names(text, "--weight-dtype"):
        key = None if n.lower() in ("auto", "checkpoint") else canonical_weight_dtype(n)
        if key not in out:
            out.append(key)
    return out


def _check_output(path: Optional[str], flag: str, stdout_ok: bool) -> Optional[str]:
    if path is None:
        return None
    if path == "-":
        if not stdout_ok:
            raise KvplanError(f"{flag} needs a file name", EXIT_USAGE)
        return path
    folder = Path(path).expanduser().parent
    try:
        folder_ok, is_dir = folder.is_dir(), Path(path).expanduser().is_dir()
    except OSError as exc:  # a name too long for the filesystem
        raise KvplanError(f"{flag} {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    if not folder_ok:
        raise KvplanError(f"{flag} {path}: folder {folder} does not exist", EXIT_USAGE)
    if is_dir:
        raise KvplanError(f"{flag} {path} is a folder; give a file name", EXIT_USAGE)
    return path


def _money(v) -> str:
    return "–" if v is None else f"{v:,.2f}"


def _sweep_table(result, rows: list[dict], currency: str):
    from rich.table import Table

    from kvplan.units import human_tokens

    table = Table(show_edge=False, title=f"Best {len(rows)} of {len(result.plans):,} plans", title_justify="left")
    priced = any(r["price_per_gpu_hour"] is not None for r in rows)
    weights = len({r["weight_dtype"] for r in rows}) > 1
    cols = ["#", "model", "GPU", "GPUs", "ctx", "KV"] + (["weights"] if weights else [])
    cols += ["fits", "max conc", "tok/s"] + ([f"cost/user-h ({currency})"] if priced else [])
    for c in cols:  # names and numbers are never cut (see _print_whole)
        table.add_column(c, justify="left" if c in ("model", "GPU", "KV", "weights") else "right", no_wrap=True)
    for r in rows:
        gpus = str(r["gpus"]) if r["pp"] == 1 else f"{r['gpus']} ({r['tp']}×{r['pp']})"
        cells = [str(r["rank"]), _markup_safe(r["model"]), r["gpu"], gpus, human_tokens(r["context"]), r["kv_dtype"]]
        cells += [r["weight_dtype"]] if weights else []
        cells += ["[green]yes[/]" if r["fits"] else "[red]no[/]", f"{r['max_concurrency']:,}",
                  f"{r['decode_tokens_per_second']:,.0f}"]
        if priced:
            cpu = r["cost_per_concurrent_user_hour"]
            cells += ["–" if cpu is None else f"{cpu:,.4f}"]
        table.add_row(*cells)
    return table


def _print_whole(renderable, console=None) -> None:
    """Print a table at its natural width even where the terminal is narrower (the terminal then
    wraps the lines): rich would otherwise cut model names and numbers to '…'."""
    from rich.console import Console

    from rich.measure import Measurement

    console = console or Console()
    need = Measurement.get(console, console.options.update_width(4096), renderable).maximum
    if need > console.width:
        console = Console(width=need, force_terminal=console.is_terminal, no_color=console.no_color)
    console.print(renderable)


def _write_outputs(result, csv_path, json_path, html_path, title: str, summary: list[str], prices,
                   gpus=()) -> None:
    """Every requested output, each written atomically ('-': stdout)."""
    if not (csv_path or json_path or html_path):
        return
    from dataclasses import asdict

    from kvplan.export import atomic_write, json_document, write_csv
    from kvplan.sweep import RANKING, sweep_rows

    rows = sweep_rows(result)
    if csv_path == "-":
        write_csv(rows, sys.stdout)
    elif csv_path:
        atomic_write(csv_path, lambda stream: write_csv(rows, stream), newline="")
    if json_path:
        head = {"engine": result.engine, "ranking": RANKING, "plans_count": len(rows), "fits_count": sum(r["fits"] for r in rows),
                "skipped_plans": result.skipped_plans, "skipped": [asdict(s) for s in result.skipped],
                "currency": prices.currency or None, "prices_per_gpu_hour": result.prices}
        text = json_document(head, rows)
        if json_path == "-":
            sys.stdout.write(text)
        else:
            atomic_write(json_path, text)
    if html_path:
        from kvplan.html_report import render_html
        from kvplan.procurement import headlines

        atomic_write(html_path, render_html(rows, title=title, summary=summary, skipped=_skipped_lines(result),
                                            currency=prices.unit, headlines=headlines(result, gpus)))


def _skipped_lines(result) -> list[str]:
    return [f"{s.model}: {s.gpus} GPU{'s' if s.gpus > 1 else ''} (tp {s.tp} × pp {s.pp}) skipped, {s.reason} "
            f"({s.plans:,} plans)" for s in result.skipped]


def register(app: typer.Typer) -> None:
    """Add `sweep` and `cheapest` to the kvplan app."""
    from kvplan.cli import (
        BlockSizeOpt, EngineOpt, EngineSettingOpt, EngineVersionOpt, GmuOpt, HwOpt, RevisionOpt, TokenOpt, cli_errors,
    )

    @app.command()
    @cli_errors
    def sweep(
        models: Annotated[str, typer.Option("--models", "-m", help="Comma-separated models (catalog names, folders, Hub ids), or `all` for the whole catalog.")],
        ctx: Annotated[str, typer.Option("--ctx", "-c", help="Comma-separated contexts: 8k,32k,128k (k = 1024).")],
        gpus: Annotated[str, typer.Option("--gpus", "-g", help="Comma-separated GPU names or aliases, or `all` (default).")] = "all",
        gpu_counts: Annotated[str, typer.Option("--gpu-counts", help="GPUs per deployment: n ≤ 8 is tp=n; above, tp=8 and pp=n/8.")] = "1,2,4,8",
        kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="Comma-separated KV cache dtypes: auto (model's), bf16, fp8, ...")] = "auto",
        weight_dtype: Annotated[Optional[str], typer.Option("--weight-dtype", help="Comma-separated weight formats (auto = the checkpoint's): bf16, fp8, int4, ...")] = None,
        batch: Annotated[int, typer.Option("--batch", "-b", help="Concurrent requests per deployment (fits, max context and decode speed use it).")] = 1,
        gpu_memory_utilization: GmuOpt = None,
        block_size: BlockSizeOpt = None,
        engine: EngineOpt = None,
        engine_version: EngineVersionOpt = None,
        engine_opt: EngineSettingOpt = None,
        prices: Annotated[Optional[Path], typer.Option("--prices", help="YAML of `gpu: price per GPU-hour` (any currency).")] = None,
        csv_out: Annotated[Optional[str], typer.Option("--csv", help="Write every plan as CSV to this file (- for stdout).")] = None,
        json_out: Annotated[Optional[str], typer.Option("--json", help="Write every plan as JSON to this file (- for stdout).")] = None,
        html_out: Annotated[Optional[str], typer.Option("--html", help="Write a self-contained HTML report (charts + table) to this file.")] = None,
        top: Annotated[int, typer.Option("--top", help="Rows of the terminal table.")] = 20,
        title: Annotated[str, typer.Option("--title", help="Title of the HTML report.")] = "kvplan sweep",
        hw_profiles: HwOpt = None,
        revision: RevisionOpt = None,
        token: TokenOpt = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the Hub.")] = 10.0,
    ):
        """Plan every model × GPU × GPU count × context × KV dtype; rank them; write CSV, JSON, HTML."""
        from kvplan.prices import load_prices
        from kvplan.sweep import RANKING, parse_counts
        from kvplan.sweep import sweep as run_sweep
        from kvplan.units import parse_fraction, parse_token_list

        hw = hw_profiles or ()
        contexts = parse_token_list(ctx, "--ctx")
        counts = parse_counts(gpu_counts)
        kv_names = _names(kv_dtype, "--kv-dtype")
        from kvplan.dtypes import canonical_kv_dtype

        for n in kv_names:
            canonical_kv_dtype(n)
        weights = _weight_dtypes(weight_dtype)
        if not 1 <= batch <= 1_000_000:
            raise KvplanError(f"--batch must be between 1 and 1,000,000, got {batch}", EXIT_USAGE)
        if block_size is not None and not 1 <= block_size <= 4096:
            raise KvplanError(f"--block-size must be between 1 and 4096, got {block_size}", EXIT_USAGE)
        if top < 0:
            raise KvplanError(f"--top must be 0 or more, got {top}", EXIT_USAGE)
        gmu = parse_fraction(gpu_memory_utilization, "--gpu-memory-utilization") if gpu_memory_utilization else None
        chosen = _engine_choice(engine, engine_version, engine_opt, gmu, block_size)
        csv_path = _check_output(csv_out, "--csv", True)
        json_path = _check_output(json_out, "--json", True)
        html_path = _check_output(html_out, "--html", False)
        if csv_path == "-" and json_path == "-":
            raise KvplanError("--csv - and --json - both want stdout; write one of them to a file", EXIT_USAGE)
        gpu_list = resolve_gpus(gpus, hw)
        price_book = load_prices(prices, hw)
        specs = resolve_models(models, revision, token, timeout)
        price_by_gpu = {g.key: p for g in gpu_list if (p := price_book.price(g)) is not None}

        per_model = len(gpu_list) * len(counts) * len(contexts) * len(weights)
        total = sum(per_model * len({canonical_kv_dtype(n, s.dtype) for n in kv_names}) for s in specs)
        from kvplan.planner import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION

        kwargs = dict(batch=batch, block_size=block_size or DEFAULT_BLOCK_SIZE,
                      gpu_memory_utilization=gmu or DEFAULT_GPU_MEMORY_UTILIZATION, prices=price_by_gpu, engine=chosen)
        args = (specs, gpu_list, counts, contexts, kv_names, weights)
        if total >= PROGRESS_MIN_PLANS and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                          console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("plans", total=total)
                result = run_sweep(*args, **kwargs, progress=lambda n: bar.advance(task, n))
        else:
            result = run_sweep(*args, **kwargs)

        fitting = sum(p.fits for p in result.plans)
        summary = [f"{len(result.plans):,} plans ({fitting:,} fit) of {len(specs)} model(s) × {len(gpu_list)} GPU(s) "
                   f"× GPU counts {','.join(map(str, counts))} × {len(contexts)} context(s) × KV {','.join(kv_names)}"
                   + (f" × weights {','.join(w or 'auto' for w in weights)}" if weights != [None] else "")
                   + f"; batch {batch}"]
        if result.skipped:
            summary.append(f"{result.skipped_plans:,} plans skipped: deployments the model cannot run (see below)")
        summary.append(f"planned as {result.engine} allocates" if result.engine else
                       "planned with kvplan's engine-neutral rules (--engine for an engine's own)")
        summary.append(f"ranked: {RANKING}")
        if price_by_gpu:
            summary.append(f"prices per GPU-hour ({price_book.unit}): "
                           + ", ".join(f"{k} {v:g}" for k, v in price_by_gpu.items()))
        _write_outputs(result, csv_path, json_path, html_path, title, summary, price_book, gpu_list)
        for line in summary:
            _stderr(line)
        for line in _skipped_lines(result):
            _stderr(f"skipped: {line}")
        if "-" not in (csv_path, json_path) and top:
            from rich.console import Console

            from kvplan.sweep import sweep_rows

            _print_whole(_sweep_table(result, sweep_rows(result, limit=top), price_book.unit))
        for path, what in ((csv_path, "CSV"), (json_path, "JSON"), (html_path, "HTML")):
            if path and path != "-":
                _stderr(f"wrote {what}: {path}")

    @app.command()
    @cli_errors
    def cheapest(
        model: Annotated[str, typer.Argument(help="Catalog name or alias, a folder or config.json, or a Hub repo id.")],
        concurrency: Annotated[int, typer.Option("--concurrency", "-n", help="Concurrent requests that must fit at --ctx.")],
        ctx: Annotated[Optional[str], typer.Option("--ctx", "-c", help="Context per request: 32k, 128k. Default: the model's limit.")] = None,
        min_tps: Annotated[Optional[float], typer.Option("--min-tokens-per-second", help="Decode tokens/s each request must get at that concurrency (roofline).")] = None,
        prices: Annotated[Optional[Path], typer.Option("--prices", help="YAML of `gpu: price per GPU-hour` (any currency).")] = None,
        gpus: Annotated[Optional[str], typer.Option("--gpus", "-g", help="Comma-separated GPU names or aliases, or `all`. Default: the GPUs --prices prices, else all.")] = None,
        gpu_counts: Annotated[Optional[str], typer.Option("--gpu-counts", help="GPU counts to try (n ≤ 8: tp=n; above: tp=8, pp=n/8). Default: the first valid tp of 1,2,4,...,--max-gpus.")] = None,
        max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest deployment tried without --gpu-counts.")] = 64,
        kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype: auto (model's), bf16, fp8, ...")] = "auto",
        weight_dtype: Annotated[Optional[str], typer.Option("--weight-dtype", help="Weight format override: bf16, fp8, int4, ...")] = None,
        gpu_memory_utilization: GmuOpt = None,
        block_size: BlockSizeOpt = None,
        engine: EngineOpt = None,
        engine_version: EngineVersionOpt = None,
        engine_opt: EngineSettingOpt = None,
        top: Annotated[int, typer.Option("--top", help="Rows of the ranking shown in the terminal.")] = 15,
        hw_profiles: HwOpt = None,
        revision: RevisionOpt = None,
        token: TokenOpt = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the Hub.")] = 10.0,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")] = False,
    ):
        """The cheapest deployments that hold CONCURRENCY requests of CTX tokens (and a speed floor).

        Exit code 6 when no deployment meets the target (the reasons are still printed).
        """
        from kvplan.cheapest import RANKING, candidate_row, cheapest as rank, failure_summary
        from kvplan.dtypes import canonical_kv_dtype, canonical_weight_dtype
        from kvplan.planner import candidate_deployments
        from kvplan.prices import load_prices
        from kvplan.resolve import resolve_model
        from kvplan.sweep import deployment_for, parse_counts
        from kvplan.units import human_tokens, parse_fraction, parse_tokens

        hw = hw_profiles or ()
        if not 1 <= concurrency <= 1_000_000:
            raise KvplanError(f"--concurrency must be between 1 and 1,000,000, got {concurrency}", EXIT_USAGE)
        if min_tps is not None and not 0 < min_tps < float("inf"):
            raise KvplanError(f"--min-tokens-per-second must be a positive number, got {min_tps:g}", EXIT_USAGE)
        if not 1 <= max_gpus <= 4096:
            raise KvplanError(f"--max-gpus must be between 1 and 4096, got {max_gpus}", EXIT_USAGE)
        if block_size is not None and not 1 <= block_size <= 4096:
            raise KvplanError(f"--block-size must be between 1 and 4096, got {block_size}", EXIT_USAGE)
        ctx_tokens = None if ctx is None else parse_tokens(ctx, "--ctx")
        counts = parse_counts(gpu_counts) if gpu_counts is not None else None
        gmu = parse_fraction(gpu_memory_utilization, "--gpu-memory-utilization") if gpu_memory_utilization else None
        chosen = _engine_choice(engine, engine_version, engine_opt, gmu, block_size)
        canonical_kv_dtype(kv_dtype)
        wdt = canonical_weight_dtype(weight_dtype) if weight_dtype else None
        gpu_list = resolve_gpus(gpus or "all", hw)
        price_book = load_prices(prices, hw)
        if gpus is None and prices is not None:  # a prices file names the GPUs one can buy: search those
            gpu_list = [g for g in gpu_list if price_book.price(g) is not None]
            _stderr(f"note: searching the {len(gpu_list)} GPUs with a price ({', '.join(g.key for g in gpu_list)}); "
                    "--gpus all for every GPU")
        resolved = resolve_model(model, revision=revision, token=token, timeout=timeout)
        spec = resolved.spec
        _stderr(resolved.note)
        for notice in resolved.notices:
            _stderr(f"note: {notice}")
        if ctx_tokens is None:
            ctx_tokens = spec.max_context
            _stderr(f"note: --ctx not given; using the model's limit, {ctx_tokens:,} tokens")
        if ctx_tokens > spec.max_context:
            _stderr(f"warning: context {ctx_tokens:,} exceeds the model's max_position_embeddings ({spec.max_context:,})")
        deps = [deployment_for(c) for c in counts] if counts else candidate_deployments(spec, max_gpus)
        candidates = rank(spec, gpu_list, ctx_tokens, concurrency, deployments=deps, min_tokens_per_second=min_tps,
                          prices=price_book, kv_dtype=canonical_kv_dtype(kv_dtype, spec.dtype), weight_dtype=wdt,
                          gpu_memory_utilization=gmu, block_size=block_size, engine=chosen)
        meets = [c for c in candidates if c.meets]
        target = (f"{spec.name}: {concurrency:,} concurrent requests of {human_tokens(ctx_tokens)} tokens"
                  + (f", ≥ {min_tps:g} tokens/s each" if min_tps else ""))
        if as_json:
            print(json.dumps({
                "model": spec.name, "context": ctx_tokens, "concurrency": concurrency,
                "min_tokens_per_second": min_tps, "currency": price_book.currency or None, "ranking": RANKING,
                "meets": [candidate_row(c, spec, i) for i, c in enumerate(meets, 1)],
                "fails": [candidate_row(c, spec, None) for c in candidates if not c.meets],
            }, indent=2))
        else:
            _print_cheapest(target, meets, failure_summary(candidates), top, price_book.unit, len(candidates))
        if not meets:
            raise typer.Exit(EXIT_DOES_NOT_FIT)


def _print_cheapest(target: str, meets, failing, top: int, unit: str, tried: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{_markup_safe(target)}[/] · {tried} deployments tried")
    if meets:
        priced = any(c.price_per_gpu_hour is not None for c in meets)
        table = Table(show_edge=False, title=f"Meeting the target ({len(meets)}), cheapest first" if priced
                      else f"Meeting the target ({len(meets)}), fewest GPUs first (no prices given)",
                      title_justify="left")
        cols = ["#", "GPU", "GPUs (tp × pp)", "max conc", "tok/s per request", "KV GiB/GPU"]
        if priced:
            cols += [f"price/GPU-h ({unit})", "cost/h"]
        for c in cols:
            table.add_column(c, justify="left" if c == "GPU" else "right", no_wrap=c == "GPU")
        for i, c in enumerate(meets[:top], 1):
            d, p = c.deployment, c.plan
            cells = [str(i), c.gpu, f"{d.gpus} ({d.tp} × {d.pp})", f"{p.max_concurrency:,}",
                     f"{c.tokens_per_second_per_request:,.1f}", f"{p.kv_memory_bytes_per_gpu / 2**30:,.2f}"]
            if priced:
                cells += [_money(c.price_per_gpu_hour), _money(c.cost_per_hour)]
            table.add_row(*cells)
        _print_whole(table, console)
        if len(meets) > top:
            console.print(f"… and {len(meets) - top} more (--top N, or --json for all)")
    else:
        console.print("[red]No deployment meets the target.[/]")
    if failing:
        table = Table(show_edge=False, title="Not meeting it (per GPU: the closest miss)", title_justify="left")
        for c in ("GPU", "failing counts", "why"):
            table.add_column(c, no_wrap=c == "GPU")
        for gpu, tried_counts, why in failing:
            table.add_row(gpu, tried_counts, _markup_safe(why))
        _print_whole(table, console)


def _markup_safe(text: str) -> str:
    from kvplan.markup import plain

    return plain(text)
