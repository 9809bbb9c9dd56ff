"""`kvplan cheapest MODEL -n N`: the cheapest deployments that hold N requests at a context.

Thin: check every input, call the pure kvplan.compare.cheapest, print the ranking (or --json).
"""

from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    ModelArg, MAX_BATCH, AllowLongOpt, BlockSizeOpt, GmuOpt, HubFlags, HwOpt, JsonOpt, LoraOpt, MaxModelLenOpt,
    PricesOpt, SpeculativeOpt, check_range, cli_errors, grouped, markup_safe, print_notes, print_result, planned_by,
    progress_bar, stderr, table,
)
from kvplan.engines.context import limited
from kvplan.cli.engine_flags import EngineFlags, lora_lines, speculative_request, with_speculative
from kvplan.cli.offload import OffloadFlags, say
from kvplan.cli.speed_flags import form_notes, plans_gaps, request_note, speed_band, speed_line
from kvplan.speed.coverage import label
from kvplan.cli.selection import memory_caveats, resolve_gpus, weight_caveats
from kvplan.cli.workload import SloPercentOpt, SloTpotOpt, SloTtftOpt, WorkloadFlags, sla_text
from kvplan.compare.cheapest import RANKING, cheapest as rank, count_deployments, failure_summary, not_simulated
from kvplan.compare.offload import size_each
from kvplan.compare.sweep import parse_counts
from kvplan.compare.replicas import workload_copies
from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
from kvplan.core.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError
from kvplan.core.units import human_tokens, parse_tokens, plural
from kvplan.hardware.prices import load_prices
from kvplan.planning.lora import parse_lora
from kvplan.planning.layout import layout_text
from kvplan.planning.plan import limit_name
from kvplan.report.export import candidate_row
from kvplan.report.text import checkpoint_kv_notes, dtype_words
from kvplan.report.offload import offload_dict
from kvplan.simulator.capacity import Target, filter_candidates, sim_key
from kvplan.simulator.frontend import of_set
from kvplan.simulator.limits import per_plan_note
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model


def register(app: typer.Typer) -> None:
    app.command()(cheapest)


@cli_errors
@grouped
def cheapest(
    model: ModelArg,
    concurrency: Annotated[Optional[int], typer.Option(
        "--concurrency", "-n", help="Concurrent requests that must fit at --ctx (with a workload: default 1, one "
        "request of --ctx).")] = None,
    ctx: Annotated[Optional[str], typer.Option(
        "--ctx", "-c", help="Context per request: 32k, 128k. Default: the model's limit.")] = None,
    max_model_len: MaxModelLenOpt = None,
    allow_long_context: AllowLongOpt = False,
    min_tps: Annotated[Optional[float], typer.Option(
        "--min-tokens-per-second", help="Decode tokens/s each request must get at that concurrency (1 / the calibrated "
        "decode step at that batch).")] = None,
    prices: PricesOpt = None,
    gpu: Annotated[Optional[str], typer.Option(
        "--gpu", "-g", help="Comma-separated GPU names or aliases, or `all`. Default: the GPUs --prices prices, else "
        "all.")] = None,
    gpu_counts: Annotated[Optional[str], typer.Option(
        "--gpu-counts", help="GPU counts to try (tp=n up to the GPU's node, else pp stages). Default: the first "
        "valid tp of 1,2,4,...,--max-gpus.")] = None,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest deployment tried without --gpu-counts; with "
                                          "--replicas, the most GPUs the copies take in all.")] = 64,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype",
                                          help="KV cache dtype: auto (model's), bf16, fp8, ...")] = "auto",
    weight_dtype: Annotated[Optional[str],
                            typer.Option("--weight-dtype", help="Weight format override: bf16, fp8, int4, ...")] = None,
    gpu_memory_utilization: GmuOpt = None,
    block_size: BlockSizeOpt = None,
    eng: EngineFlags = EngineFlags(),
    layouts: Annotated[bool, typer.Option(
        "--layouts", help="Try every valid tp × pp × dp (× ep) layout of each GPU count, not only tp then "
        "pp.")] = False,
    replicas: Annotated[int, typer.Option(
        "--replicas", help="Also reach the target with up to this many independent copies of a deployment (1: "
        "none).")] = 1,
    wl: WorkloadFlags = WorkloadFlags(),
    slo_ttft: SloTtftOpt = 2.0,
    slo_tpot: SloTpotOpt = 0.1,
    slo_percent: SloPercentOpt = 99.0,
    top: Annotated[int, typer.Option("--top", help="Rows of the ranking shown in the terminal.")] = 15,
    hw_profiles: HwOpt = None,
    speculative: SpeculativeOpt = None,
    lora: LoraOpt = None,
    off: OffloadFlags = OffloadFlags(),
    hub: HubFlags = HubFlags(),
    as_json: JsonOpt = False,
):
    """The cheapest deployments that hold --concurrency requests of --ctx tokens (and a speed floor),
    or that serve a workload within an SLA (--workload or --trace: each candidate is simulated,
    see `kvplan simulate`).

    With --offload, each candidate's tiers as its engine sizes them (SIZE per replica; in --json, the
    `offload` of each row; the table's `host ctx`): offloaded contexts wait in host memory, they do not
    add to the concurrency the target counts.

    Exit code 6 when no deployment meets the target (the reasons are still printed).
    """
    hw = hw_profiles or ()
    served = wl.served
    if concurrency is None and not served:
        raise KvplanError("give --concurrency N, or a workload to serve (--workload or --trace)", EXIT_USAGE)
    wl.check(slo_ttft=slo_ttft, slo_tpot=slo_tpot, slo_percent=slo_percent)
    concurrency = 1 if concurrency is None else concurrency
    check_range("--concurrency", concurrency, 1, MAX_BATCH)
    if min_tps is not None and not 0 < min_tps < float("inf"):
        raise KvplanError(f"--min-tokens-per-second must be a positive number, got {min_tps:g}", EXIT_USAGE)
    check_range("--max-gpus", max_gpus, 1, 4096)
    check_range("--replicas", replicas, 1, 4096)
    chosen, gmu = eng.configured(gpu_memory_utilization, block_size)
    drafter = speculative_request(speculative, chosen)
    adapters = parse_lora(lora)
    asked = off.checked(chosen)
    ctx_tokens = None if ctx is None else parse_tokens(ctx, "context")
    counts = parse_counts(gpu_counts) if gpu_counts is not None else None
    canonical_kv_dtype(kv_dtype)
    wdt = canonical_weight_dtype(weight_dtype) if weight_dtype else None
    gpu_list, price_book = _gpus_and_prices(gpu, prices, hw)
    loaded = wl.load() if served else None
    resolved = resolve_model(model, revision=hub.revision, token=hub.token, timeout=hub.timeout,
                             loaded_bytes=loaded_as_model_dtype)
    spec = with_speculative(resolved.spec, drafter, token=hub.token, timeout=hub.timeout)
    spec, limit_notes, default_ctx = limited(chosen, spec, max_model_len, allow_long_context)
    deps = count_deployments(spec, counts, max_gpus)  # a count no split can run fails before any notes
    print_notes(resolved, chosen)
    for note in limit_notes:
        stderr(f"note: {note}")
    if ctx_tokens is None:
        ctx_tokens = default_ctx
        source = "--max-model-len" if max_model_len else "the model's limit"
        stderr(f"note: --ctx not given; using {source}, {ctx_tokens:,} tokens")
    if ctx_tokens > spec.max_context:
        stderr(f"warning: context {ctx_tokens:,} exceeds {limit_name(bool(spec.max_model_len))} "
               f"({spec.max_context:,}): the limit binds, not memory; no deployment fits")
    for line in (*lora_lines(adapters, chosen, "candidate"), *memory_caveats(gpu_list), *weight_caveats([spec], [wdt])):
        stderr(f"note: {line}")
    candidates = rank(spec, gpu_list, ctx_tokens, concurrency, deployments=deps, min_tokens_per_second=min_tps,
                      prices=price_book, kv_dtype=canonical_kv_dtype(kv_dtype, spec.dtype), max_gpus=max_gpus,
                      kv_auto=kv_dtype.strip().lower() == "auto", weight_dtype=wdt, gpu_memory_utilization=gmu,
                      block_size=block_size, engine=chosen, max_replicas=replicas, layouts=layouts, lora=adapters)
    for line in _assumed(chosen, candidates, spec, gpu_list):
        stderr(line)
    sims, front, sla = {}, None, (slo_ttft, slo_tpot, slo_percent)
    if served:
        candidates, sims, front = _serve(candidates, spec, gpu_list, loaded, sla, chosen, replicas, max_gpus)
    else:
        _say_speed(chosen, gpu_list, candidates, spec)
    tiers = _tiers(candidates, spec, chosen, asked) if asked.tiers else {}
    target, data = _answer(spec, ctx_tokens, concurrency, min_tps, price_book, candidates, sims, loaded, sla, tiers,
                           front, chosen.speed_key)
    meets = [c for c in candidates if c.meets]
    print_result(as_json, data, lambda console: _print_cheapest(
        console, target, meets, failure_summary(candidates), top, price_book.unit, len(candidates), tiers,
        not_simulated(candidates)))
    if not meets:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def _assumed(chosen, candidates, spec, gpu_list) -> list[str]:
    """The rules every candidate was planned under (the engine and its release, or kvplan's own) and the dtypes
    they run (a planned candidate's, as `fit` heads its table), said once as sweep says them; then the notes on a
    cache dtype the checkpoint declares."""
    rules = planned_by(chosen.label)
    planned = [c.plan for c in candidates if c.plan is not None]
    words: dict[str, list[str]] = {}  # the dtypes as fit heads them -> the GPUs that run them (a T4 has no bf16)
    for g in gpu_list:
        plan = next((p for p in planned if p.gpu == g.key), None)
        if plan is not None:
            words.setdefault(dtype_words(plan, spec, g), []).append(g.key)
    if len(words) == 1:
        rules += f"; {next(iter(words))}"
    rules += "".join(f"; {w} (on {', '.join(keys)})" for w, keys in words.items() if len(words) > 1)
    return [rules, *(f"note: {n}" for n in checkpoint_kv_notes((p, spec) for p in planned))]


def _say_speed(chosen, gpu_list, candidates, spec) -> None:
    """Without a workload the table's tok/s/req (and --min-tokens-per-second) are the calibrated step's: whose, and
    its band, and what the profiles lack for them, as sweep and --workload say it (plans_gaps)."""
    stderr(speed_line(chosen.speed_key))
    for w in plans_gaps(gpu_list, [c.plan for c in candidates if c.plan is not None], lambda _: spec):
        stderr(f"note: {w}")


def _gpus_and_prices(gpu, prices, hw):
    """The GPUs --gpu names (a prices file alone: the GPUs it prices) and the price book."""
    gpu_list = resolve_gpus(gpu or "all", hw)
    price_book = load_prices(prices, hw)
    if gpu is None and prices is not None:  # a prices file names the GPUs one can buy: search those
        gpu_list = [g for g in gpu_list if price_book.price(g) is not None]
        stderr(f"note: searching the {len(gpu_list)} GPUs with a price ({', '.join(g.key for g in gpu_list)}); "
               "--gpu all for every GPU")
    return gpu_list, price_book


def _tiers(candidates, spec, engine, asked) -> dict:
    """Each planned candidate's OffloadPlan (or why not) by id; the first one meeting the target is said on stderr."""
    planned = [c for c in candidates if c.plan is not None]
    sized = dict(zip(map(id, planned), size_each(engine, [c.plan for c in planned], lambda p: spec, asked.tiers,
                                                 asked.backend, asked.host)))
    best = next((c for c in candidates if c.meets), None)
    if best is not None:
        op = sized[id(best)]
        if isinstance(op, str):
            stderr(f"note: offload tiers of the cheapest deployment not sized: {op}")
        else:
            say(op)
    return sized


def _answer(spec, ctx_tokens: int, concurrency: int, min_tps, price_book, candidates, sims: dict, loaded, sla,
            tiers: dict, front: dict | None = None, engine: str | None = None):
    """(the target in words, the JSON document): the candidates meeting it, ranked, then the rest; `front`: the
    serving front end the simulated requests crossed (workload.front_end), where any did; `engine`: the coefficient
    set the calibrated tok/s/req come from (its label and held-out band)."""
    target = (f"{spec.name}: {concurrency:,} concurrent requests of {human_tokens(ctx_tokens)} tokens"
              + (f", ≥ {min_tps:g} tokens/s each" if min_tps else ""))
    if loaded is not None:
        target = (f"{spec.name}: {loaded.said.split(' (')[0]}, requests up to {human_tokens(ctx_tokens)} tokens, "
                  f"{sla_text(*sla)}")

    def row(c, rank):
        r = candidate_row(c, spec, rank)
        if id(c) in tiers:
            op = tiers[id(c)]
            r["offload"] = {"refused": op} if isinstance(op, str) else offload_dict(op)
        return {**r, **sims.get(sim_key(c), {})} if loaded is not None else r

    data = {"model": spec.name, "context": ctx_tokens, "concurrency": concurrency,
            "min_tokens_per_second": min_tps, "currency": price_book.currency or None, "ranking": RANKING,
            "decode_speed_model": label(engine), "decode_speed_band": speed_band("calibrated", engine),
            "meets": [row(c, i) for i, c in enumerate((c for c in candidates if c.meets), 1)],
            "fails": [row(c, None) for c in candidates if not c.meets]}
    if loaded is not None:
        slo_ttft, slo_tpot, slo_percent = sla
        data["workload"] = {**loaded.meta, "slo_ttft_s": slo_ttft, "slo_tpot_s": slo_tpot, "slo_percent": slo_percent,
                            "front_end": front}
    return target, data


def _serve(candidates, spec, gpu_list, loaded, sla, chosen, replicas: int, max_gpus: int):
    """(candidates re-judged by simulating the workload on them (kvplan.simulator.capacity), with the configured
    engine `chosen`'s calibrated step times and own scheduler limits, behind simulate's serving front end; the
    simulated figures; that front end's JSON record, or None where its set fits no ingress). The served rate, not
    memory, may need copies: each one-copy candidate that holds the target is added 2 .. `replicas` times, on at most
    `max_gpus` GPUs in all (--replicas, --max-gpus; kvplan.compare.replicas.workload_copies)."""
    candidates = workload_copies(candidates, max_replicas=replicas, max_gpus=max_gpus)
    engine = chosen.speed_key  # the coefficient set of its release (kvplan.speed.eras)
    stderr(loaded.said)
    plans = [c.plan for c in candidates if c.plan is not None]
    gpus = {g.key: g for g in gpu_list}
    for line in ([speed_line(engine)] + request_note("calibrated", engine) + [per_plan_note(chosen)]
                 + [f"note: {w}" for w in plans_gaps(gpu_list, plans, lambda _: spec)]
                 + form_notes(plans, lambda _: spec, lambda p: gpus[p.gpu], engine, chosen.version)):
        stderr(line)
    fe = of_set(engine)  # the coefficient set's, the same for every candidate: said once
    if fe is not None:
        stderr(fe.said(loaded.requests) + " (every candidate, as simulate runs it)")
    target = Target(tuple(loaded.requests), *sla, engine=engine, configured=chosen)
    with progress_bar("simulating", len(candidates)) as bar:
        judged, sims = filter_candidates(candidates, spec, gpus, target, progress=bar and bar.done)
    return judged, sims, (fe.meta(loaded.requests) if fe is not None else None)


def _print_cheapest(console, target: str, meets, failing, top: int, unit: str, tried: int, tiers: dict,
                    unsimulated=()) -> None:
    console.print(f"[bold]{markup_safe(target)}[/] · {plural(tried, 'deployment')} tried")
    if meets:
        priced = any(c.price_per_gpu_hour is not None for c in meets)
        cols = ["#", "GPU", "GPUs (layout)", "max conc", "tok/s/req", "KV GiB/GPU"]
        host = bool(tiers) and not priced  # with prices the table is full: the tiers are in --json
        cols += ["host"] if host else []  # contexts the offload tiers hold (the title says so)
        if priced:
            cols += [f"{unit}/GPU-h", f"{unit}/h"]
        t = table(cols, right=tuple(c for c in cols if c != "GPU"), whole=("GPU",),
                  optional=("KV GiB/GPU", f"{unit}/GPU-h"),
                  title=f"Meeting the target ({len(meets)}), cheapest first" if priced
                  else f"Meeting the target ({len(meets)}), fewest GPUs first (no prices given)")
        if host:
            t.caption, t.caption_justify = "host: full-length contexts the offload tiers hold", "left"
        for i, c in enumerate(meets[:top], 1):
            p = c.plan
            cells = [str(i), c.gpu, _layout(c), f"{p.max_concurrency * c.replicas:,}",
                     f"{c.tokens_per_second_per_request:,.1f}", f"{p.kv_memory_bytes_per_gpu / 2**30:,.2f}"]
            if host:  # full-length contexts the offload tiers of all replicas hold ("–": not sized)
                op = tiers.get(id(c))
                cells += ["–" if op is None or isinstance(op, str) else
                          f"{sum(t.contexts for t in op.tiers) * c.replicas:,}"]
            if priced:
                cells += [_money(c.price_per_gpu_hour), _money(c.cost_per_hour)]
            t.add_row(*cells)
        console.print(t)
        if len(meets) > top:
            console.print(f"… and {len(meets) - top} more (--top N, or --json for all)")
    else:
        console.print("[red]No deployment meets the target.[/]")
    if failing:
        t = table(["GPU", "failing counts", "why"], whole=("GPU",), title="Not meeting it (per GPU: the closest miss)")
        for gpu, tried_counts, why in failing:
            t.add_row(gpu, tried_counts, markup_safe(why))
        console.print(t)
    if unsimulated:  # not failures: fewer GPUs of the type already serve the workload (issue 25)
        console.print("Not simulated (fewer GPUs of the type already serve the workload): "
                      + "; ".join(f"{gpu} {counts}" for gpu, counts in unsimulated))


def _layout(c) -> str:
    """'8 (tp 8)', '16 (2 × tp 8)' for two replicas of tp 8."""
    copies = f"{c.replicas} × " if c.replicas > 1 else ""
    return f"{c.gpus} ({copies}{layout_text(c.deployment)})"


def _money(v) -> str:
    return "–" if v is None else f"{v:,.2f}"
