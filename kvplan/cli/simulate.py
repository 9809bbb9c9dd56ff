"""`kvplan simulate MODEL --gpu GPU`: how many of my users a deployment holds, and at what latency.

Thin: check every input first (output names included), plan the deployment as `fit` does, turn
the plan into the simulator's inputs (kvplan.simulator.adapter), run the event-driven engine on
the workload or trace, print a summary and write the files. Nothing heavy is imported at start-up.
"""

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    ModelArg, AllowLongOpt, BlockSizeOpt, EngineSettingOpt, EngineVersionOpt, GmuOpt, GpuOpt, HubFlags, HwOpt, JsonOpt,
    KvDtypeOpt, LoraOpt, StepSpeedOpt, OUTPUT_FORMATS, SpeculativeOpt, WeightDtypeOpt, cli_errors, grouped,
    output_files, progress_bar, stderr,
)
from kvplan.cli.engine_fit import engine_result
from kvplan.engines.context import limited
from kvplan.cli.engine_flags import engine_from_flags, speculative_request, with_speculative
from kvplan.cli.speed_flags import check_speed, form_notes, plan_speed_notes, request_note, speed_band
from kvplan.cli.fit import _deployment, _request
from kvplan.cli.offload import OffloadFlags, plan_offload
from kvplan.cli.workload import SloPercentOpt, SloTpotOpt, SloTtftOpt, WorkloadFlags, sla_text
from kvplan.core.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError, arg
from kvplan.core.files import atomic_write_all
from kvplan.core.units import plural
from kvplan.engines.scheduler import with_limits
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.report.export import json_text
from kvplan.report.offload import offload_dict
from kvplan.report.simulation import document, pool_stage, render_html, summary_lines, write_series_csv
from kvplan.report.text import dtype_words, plan_notes, plan_warnings
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.capacity import STEADIER_SHARE, UNSTEADY_SHARE, Target, max_rate, ramp_share
from kvplan.simulator.limits import scheduler_limits
from kvplan.simulator.blocks import BLOCK_TOKENS
from kvplan.simulator.frontend import configured
from kvplan.simulator.offload import auto_tiers, curve_doc, sim_tiers
from kvplan.simulator.traces import hash_block_tokens
from kvplan.simulator.session import configs, run_all, shape_trace
from kvplan.simulator.workload import find_workload, generate
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model
from kvplan.report.fitted import fitted_table

PROGRESS_MIN_REQUESTS = 20_000  # below this a run takes about a second: no bar


def register(app: typer.Typer) -> None:
    app.command()(simulate)


@cli_errors
@grouped
def simulate(
    model: ModelArg,
    gpu: GpuOpt,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Total GPUs (tp × pp); default 1.")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size.")] = None,
    pp: Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size.")] = None,
    wl: WorkloadFlags = WorkloadFlags(),
    mode: Annotated[str, typer.Option(
        "--mode", help="KV pool: paged (pages as tokens arrive) or contiguous (one reservation per "
        "request).")] = "paged",
    reserve: Annotated[str, typer.Option(
        "--reserve", help="Contiguous reservation: max (the length limit), pow2 (output rounded up to a power of two), "
        "oracle (exact).")] = "max",
    compare: Annotated[bool, typer.Option(
        "--compare", help="Run the paged pool and all three contiguous reservations on the same requests.")] = False,
    max_model_len: Annotated[Optional[str], typer.Option(
        "--max-model-len", help="Longest request, prompt + output (as vLLM's flag): 32k, 128k. Default: the limit the "
        "engine derives from the config (rope_scaling included).")] = None,
    allow_long_context: AllowLongOpt = False,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    gpu_memory_utilization: GmuOpt = None,
    kv_cache_memory: Annotated[Optional[str], typer.Option(
        "--kv-cache-memory", help="Exact per-GPU KV budget (as vLLM's flag), e.g. 28GiB.")] = None,
    overhead: Annotated[Optional[str], typer.Option(
        "--overhead", help="Per-GPU activation + runtime overhead (e.g. 2GiB). Default: an estimate.")] = None,
    block_size: BlockSizeOpt = None,
    engine: Annotated[Optional[str], typer.Option(
        "--engine", help="Size the KV pool as this engine allocates it and admit requests as it does (vllm, llama.cpp, "
        "transformers: vLLM's preemption; trtllm: GUARANTEED_NO_EVICT, or MAX_UTILIZATION through --engine-opt "
        "capacity_scheduler_policy; sglang: its new_token_ratio), at its own limits: --max-num-seqs, "
        "--max-num-batched-tokens.")] = None,
    engine_version: EngineVersionOpt = None,
    engine_opt: EngineSettingOpt = None,
    max_num_seqs: Annotated[Optional[int], typer.Option(
        "--max-num-seqs", help="Most requests running at once (vLLM's flag). Default: --engine's own (vLLM's by "
        "release and GPU, SGLang's max_running_requests, TensorRT-LLM's max_batch_size); 256 where it states none. "
        "Given with --engine, it is also the engine's own setting (vLLM's max_num_seqs, SGLang's "
        "max_running_requests), so the KV pool is the one the engine sizes with it.")] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option(
        "--max-num-batched-tokens", help="Tokens per step: decodes plus prefill chunks (vLLM's flag). Default: "
        "--engine's own (vLLM's by release and GPU, SGLang's chunked_prefill_size, TensorRT-LLM's max_num_tokens); "
        "8192 where it states none. Given with --engine, it is also the engine's own setting (vLLM's "
        "max_num_batched_tokens, SGLang's chunked_prefill_size, TensorRT-LLM's max_num_tokens) for its "
        "memory plan.")] = None,
    no_prefix_caching: Annotated[bool, typer.Option("--no-prefix-caching",
                                                    help="Turn off prefix caching (paged pool).")] = False,
    slo_ttft: SloTtftOpt = 2.0,
    slo_tpot: SloTpotOpt = 0.1,
    find_rate: Annotated[bool, typer.Option(
        "--find-rate", help="Search the highest arrival rate at which --slo-percent of requests meet both SLOs (from "
        "--qps, default 1/s, up), then report that rate.")] = False,
    slo_percent: SloPercentOpt = 99.0,
    step_overhead: Annotated[float, typer.Option(
        "--step-overhead", help="Seconds added to every engine step (CPU scheduling, kernel launches), on top of the "
        "step-time model; default 0.")] = 0.0,
    speed: StepSpeedOpt = "calibrated",
    output: Annotated[Optional[list[Path]], typer.Option(
        "--output", "-o", help="Write results to this file, the format from its extension: .json (everything), .csv "
        "(time series) or .html (a self-contained report); may repeat.")] = None,
    as_json: JsonOpt = False,
    title: Annotated[str, typer.Option("--title", help="Title of the HTML report.")] = "kvplan simulate",
    hw_profiles: HwOpt = None,
    speculative: SpeculativeOpt = None,
    lora: LoraOpt = None,
    off: OffloadFlags = OffloadFlags(),
    hub: HubFlags = HubFlags(),
):
    """Simulate serving a workload: concurrency, KV waste, preemptions, throughput, TTFT/TPOT, goodput.

    An event-driven model of a continuous-batching engine (pages, chunked prefill, prefix caching) on
    the plan's KV memory, at the engine's own running limit and tokens per step, scheduling steps as
    --engine does (SGLang: a prefill batch whenever one forms, decode otherwise; else vLLM's mixed
    budget), admitting requests as --engine does (vLLM: preemption by recompute; TensorRT-LLM: whole
    outputs reserved; SGLang: its
    new_token_ratio); step times come from kvplan's calibrated model (--speed roofline: the bare
    roofline, a lower bound).
    """
    wl.check(mode=mode, reserve=reserve, slo_ttft=slo_ttft, slo_tpot=slo_tpot, slo_percent=slo_percent,
             step_overhead=step_overhead, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    if find_rate and compare:
        raise KvplanError("--find-rate searches one pool; drop --compare (or --find-rate)", EXIT_USAGE)
    check_speed(speed)
    opts = with_limits(engine, engine_opt, max_num_seqs, max_num_batched_tokens)  # the engine plans at them too
    chosen, _ = engine_from_flags(engine, engine_version, opts, gpu_memory_utilization, block_size)
    asked = off.parse()
    tiers = asked.tiers
    if tiers and (mode != "paged" or no_prefix_caching or compare):
        raise KvplanError("--offload keeps evicted prefix blocks: it needs the paged pool with prefix caching "
                          "(no --mode contiguous, --no-prefix-caching or --compare)", EXIT_USAGE)
    if any(t.auto for t in tiers) and wl.trace is None:
        raise KvplanError("--offload cpu:auto sizes the tier from a trace's hit-rate curve: give --trace", EXIT_USAGE)
    files = output_files(output or [])
    loaded = wl.load()
    sim, meta, notes, result = _deployment_model(model, gpu, gpus, tp, pp, max_model_len, kv_dtype, weight_dtype,
                                         gpu_memory_utilization, kv_cache_memory, overhead, block_size, step_overhead,
                                         chosen, hw_profiles, hub.revision, hub.token, hub.timeout, speculative, lora,
                                         allow_long_context, speed, prefix_caching=not no_prefix_caching)
    held = scheduler_limits(chosen, result[0], max_num_seqs, max_num_batched_tokens)
    if tiers and not held.prefix_cache:
        raise KvplanError("--offload keeps evicted prefix blocks: it needs the engine's prefix cache, which its "
                          f"{arg('engine_opts')} turns off", EXIT_USAGE)
    notes += held.notes()
    if mode == "paged" or compare:  # the engine's admission rule applies to the paged pool
        notes.append(held.admission.said + ("; the contiguous pools admit by their reservation" if compare else ""))
    else:
        notes.append("admission by the contiguous pool's reservation (--reserve), whatever the engine")
    base, fe = configured(held, sim, chosen.speed_key, mode=mode, reserve=reserve,  # the API server ahead of it
                          prefix_caching=not no_prefix_caching)
    runs = configs(base, compare)
    for line in notes if find_rate else [loaded.said, *notes]:  # every input is valid: say where things came from
        stderr(line)
    meta.update(loaded.meta)
    requests = loaded.requests
    if tiers:
        base, runs = _with_tiers(base, sim, meta, result, asked, requests, wl.trace is not None)
    meta.update({"runs": list(runs), **held.meta(), **held.admission_meta(),
                 "prefix_caching": not no_prefix_caching and held.prefix_cache,
                 "slo_ttft_s": slo_ttft, "slo_tpot_s": slo_tpot})
    if find_rate:
        requests = _search_rate(sim, wl, loaded, runs, meta, slo_ttft, slo_tpot, slo_percent)
    if fe is not None:  # said once the requests are the run's (--find-rate's rate)
        stderr(fe.said(requests))
        meta["front_end"] = fe.meta(requests)
    results = _run(sim, requests, runs, slo_ttft, slo_tpot)
    _report(meta, results, files, as_json, title)


def _search_rate(sim, wl, loaded, runs, meta, slo_ttft, slo_tpot, pct):
    """--find-rate: the highest rate meeting the SLA; returns that rate's requests (meta records the search).
    `wl`: the workload flags; `loaded`: their LoadedRequests (a trace's rows are reshaped at each rate, not read
    again)."""
    workload, qps, duration, seed = wl.workload, wl.qps, wl.duration, wl.seed
    trace = loaded.trace_rows
    if trace is not None:
        make = lambda rate: shape_trace(trace, rate, duration)  # noqa: E731
    else:
        w = find_workload(workload or "chat")
        make = lambda rate: generate(w, rate, duration or 300.0, seed)  # noqa: E731
    (cfg,) = runs.values()
    found = max_rate(sim, make, Target((), slo_ttft, slo_tpot, pct), cfg, start=qps or 1.0)
    slo = sla_text(slo_ttft, slo_tpot, pct)
    meta["rate_search"] = {"slo_percent": pct, "rate": found["rate"], "failed_at": found["failed_at"],
                           "trials": [{"qps": q, "pct_meeting_slo": p} for q, p in found["trials"]]}
    if found["rate"] is None:
        raise KvplanError(f"no arrival rate down to {found['failed_at']:.3g}/s meets the SLA ({slo})",
                          EXIT_DOES_NOT_FIT)
    _steady(found, trace is not None, meta)
    fails = found["failed_at"]
    stderr(f"highest arrival rate meeting the SLA ({slo}): {_rate(found['rate'])} req/s offered (the throughput "
           "below counts completions over the whole run, the drain after the last arrival included)")
    stderr(f"search: {_rate(found['rate'])} req/s meets it"
            + (f"; {_rate(fails)} req/s misses it" if fails else "") + f" ({len(found['trials'])} trials)")
    meta["qps"] = found["rate"]
    reqs = make(found["rate"])
    meta["requests"] = len(reqs)
    stderr(f"{'trace' if trace is not None else 'workload'} at {_rate(found['rate'])} req/s: "
           f"{plural(len(reqs), 'request')}")
    return reqs


def _steady(found: dict, from_trace: bool, meta: dict) -> None:
    """Refuse a rate found on a run that never reached a steady state (kvplan.simulator.capacity.ramp_share: a
    request's mean time in the system past a third of the arrival window); say so past a tenth."""
    held = ramp_share(found["summary"])
    if held is None:
        return
    mean, window, share = held
    meta["rate_search"]["mean_latency_over_arrival_window"] = share if share != float("inf") else None
    longer = "more of the trace's requests (or a longer --duration)" if from_trace else "a longer --duration"
    span = f"{window:,.3g} s" if window >= 0.1 else f"{window * 1e3:,.3g} ms"
    if window <= 0:
        against = "and every request arrives at once"
    elif share < 1:
        against = f"{share:.0%} of the {span} of arrivals"
    else:
        against = f"longer than the {span} of arrivals"
    at = f"at {_rate(found['rate'])} req/s a request spends {mean:,.3g} s in the system on average, {against}"
    if share > UNSTEADY_SHARE:
        raise KvplanError(f"no steady state: {at}, so the run is the deployment filling and draining and the SLA "
                          f"is met only because arrivals stop; give {longer}, at least ~{_seconds(3 * mean)} s of "
                          "arrivals", EXIT_USAGE)
    if share > STEADIER_SHARE:
        stderr(f"note: {at}: the filling and draining weigh on the rate found; {longer} (~{_seconds(10 * mean)} s "
               "of arrivals) gives a steadier answer")


def _rate(r: float) -> str:
    """An arrival rate in req/s: three significant figures, whole numbers past 1,000 (no 5.24e+05)."""
    return f"{r:,.0f}" if r >= 1000 else f"{r:,.3g}"


def _seconds(s: float) -> str:
    """`s` rounded up to a whole 10 s, with thousands separators."""
    return f"{-(-s // 10) * 10:,.0f}"


def _deployment_model(model, gpu, gpus, tp, pp, max_model_len, kv_dtype, weight_dtype, gmu, kv_cache_memory,
                      overhead, block_size, step_overhead, chosen, hw_profiles, revision, token, timeout,
                      speculative=None, lora=None, allow_long_context=False, speed="calibrated",
                      speed_engine=None, speed_version=None, prefix_caching=True):
    """Plan the deployment as `fit` does (with the drafter --speculative names), as `chosen` (a
    configured engine) sizes the pool, then the simulator's inputs and the notes for stderr.
    `speed_engine`: the coefficient set the steps take where it is not the engine's current one
    (check-bench: the era of the release its file names, e.g. "trtllm<1.0"), `speed_version` that release (None:
    the configured engine's); `prefix_caching` False (--no-prefix-caching): no prompt reuses a cached prefix, which
    an MLA prefill's priced form reads (Request.prefix_cache)."""
    speed_engine, speed_version = speed_engine or chosen.speed_key, speed_version or chosen.version
    hw = find_gpu(gpu, hw_profiles or ())
    drafter = speculative_request(speculative, chosen)
    resolved = resolve_model(model, revision=revision, token=token, timeout=timeout,
                             loaded_bytes=loaded_as_model_dtype)
    spec = with_speculative(resolved.spec, drafter, token=token, timeout=timeout)
    spec, limit_notes, length = limited(chosen, spec, max_model_len, allow_long_context)
    req = _request(length, 1, kv_dtype, weight_dtype, spec, block_size, gmu, overhead,
                   kv_cache_memory, lora)
    dep = _deployment(spec, gpus, tp, pp, hw) or Deployment(1, 1)
    notices = chosen.restated(resolved.spec, resolved.notices)  # as the engine's options leave them true
    notes = [resolved.note, *(f"note: {n}" for n in (*notices, *limit_notes))]
    dep = chosen.deployment(dep)
    result = engine_result(chosen, spec, hw, dep, req)  # the pool as the engine sizes it (its admission: held)
    p = result.plan
    if not prefix_caching:  # as an engine option turning its prefix cache off (kvplan.speed.plan.prefill_form)
        p = dataclasses.replace(p, request=dataclasses.replace(p.request, prefix_cache=False))
    sim = sim_model(p, spec, hw, step_overhead_s=step_overhead, speed=speed, engine=speed_engine, version=speed_version)
    if sim.kv_budget_bytes < sim.block_bytes():
        raise KvplanError(f"{spec.name} on {dep.gpus} × {hw.key}: no memory is left for the KV cache "
                          f"(weights {p.weight_bytes_per_gpu / 2**30:.1f} GiB per GPU); try more --gpus", EXIT_USAGE)
    where = (f"{spec.name} on {dep.gpus} × {hw.key}"
             + (f" (tp {dep.tp} × pp {dep.pp})" if dep.pp > 1 else f" (tp {dep.tp})"))
    layers = pool_stage(p)
    notes.append(f"{where}: KV pool {sim.kv_budget_bytes / 2**30:,.2f} GiB per GPU"
                 + (f" of {layers}, the stage that binds (fit's memory column)" if layers else "")
                 + (f" as {chosen.label} sizes it" if chosen.label else "")
                 + f", pages of {sim.block_size} token{'s' if sim.block_size != 1 else ''}, requests up to "
                 f"{sim.max_model_len:,} tokens; {dtype_words(p, spec, hw)}")
    notes += [f"warning: {w}" for w in plan_warnings(p)] + [f"note: {w}" for w in plan_notes(p)]
    notes += plan_speed_notes(speed, speed_engine, chosen.version, spec, hw, [p]) + request_note(speed, speed_engine)
    notes += form_notes([p], lambda _: spec, lambda _: hw, speed_engine, speed_version)
    if not (sim.all_full and not sim.state_bytes):
        notes.append("note: prefix caching is not modelled for sliding-window, chunked or recurrent layers: off")
    meta = {"model": spec.name, "gpu": hw.key, "gpus": dep.gpus, "tp": dep.tp, "pp": dep.pp,
            "kv_dtype": str(p.request.kv_dtype.name if hasattr(p.request.kv_dtype, "name") else p.request.kv_dtype),
            "kv_pool_bytes_per_gpu": sim.kv_budget_bytes, "kv_pool_stage": layers or None, "block_size": sim.block_size,
            "max_model_len": sim.max_model_len,
            "step_overhead_s": step_overhead, "kv_pool_sized_by": chosen.label or "kvplan (engine-neutral)",
            "step_time": sim.speed_label, "step_time_band": speed_band(speed, speed_engine)}
    return sim, meta, notes, (result, spec, dep, chosen)


def _with_tiers(base, sim, meta, result, offload, requests, from_trace):
    """The offload tiers in the simulator's pool (and, for a trace, its hit-rate curve in meta)."""
    res, spec, dep, engine = result
    tiers = offload.tiers
    if from_trace:
        doc, _ = curve_doc(requests, sim.token_bytes() * dep.tp, res.capacity.tokens,
                           hash_block_tokens(meta.get("trace_format")) or BLOCK_TOKENS)
        meta["hit_rate_curve"] = doc
        if any(t.auto for t in tiers):
            tiers, size = auto_tiers(doc, tiers)
            stderr(f"note: cpu:auto: the trace's knee is {doc['knee']['tokens']:,} tokens "
                   f"({doc['knee']['hit_pct']:.1f}% of prompt blocks hit); cpu tier of {size / 2**30:,.0f} GiB")
    op = plan_offload(engine, res.plan, spec, offload._replace(tiers=tiers))
    meta["offload"] = offload_dict(op)
    if offload.host is None:
        stderr("note: no --host: reloads from offload tiers are not priced (TTFT as if they were free)")
    cfg = dataclasses.replace(base, tiers=sim_tiers(op, sim.token_bytes(), offload.host, dep.gpus))
    return cfg, {"paged": cfg}


def _run(sim, requests, runs, slo_ttft, slo_tpot):
    total = len(requests) * len(runs)
    with progress_bar("simulating", total, show=total >= PROGRESS_MIN_REQUESTS, eta=True) as bar:
        return run_all(sim, requests, runs, slo_ttft, slo_tpot, progress=bar and bar.done)


def _report(meta, results, files, as_json, title):
    for name, (summary, _) in results.items():
        r = summary["requests"]
        for reason, count in r["rejected"].items():
            stderr(f"warning: {name}: {plural(count, 'request')} rejected: {reason}")
        if r["outputs_truncated"]:
            stderr(f"warning: {name}: {r['outputs_truncated']:,} outputs cut at the length limit")
    doc = document(meta, results) if as_json or any(fmt == ".json" for _, fmt in files) else None

    def content(fmt):
        if fmt == ".json":
            return json_text(doc)
        if fmt == ".csv":
            return lambda stream: write_series_csv(stream, results)
        return render_html(meta, results, title)

    atomic_write_all((path, content(fmt), "" if fmt == ".csv" else None) for path, fmt in files)  # all, or none
    if as_json:
        sys.stdout.write(json_text(doc))
    else:
        _print_summary(results)
    for path, fmt in files:
        stderr(f"wrote {OUTPUT_FORMATS[fmt]}: {path}")


def _print_summary(results) -> None:
    from rich.console import Console
    console = Console()
    if len(results) == 1:
        (summary, _), = results.values()
        t = fitted_table(show_edge=False, show_header=False, pad_edge=False)
        t.add_column(no_wrap=True)
        t.add_column(overflow="fold")
        for label, value in summary_lines(summary):
            t.add_row(label, value)
        console.print(t)
        return
    t = fitted_table(show_edge=False, pad_edge=False, title_justify="left",
              title="Same requests; contiguous pools reserve max, pow2 or oracle lengths")
    for c in ("pool", "running", "waste", "out tok/s", "TTFT p99", "lat p50", "preempt"):
        t.add_column(c, justify="left" if c == "pool" else "right", no_wrap=True)
    for name, (s, _) in results.items():
        ttft, e2e = s["latency_s"]["ttft"]["p99"], s["latency_s"]["e2e"]["p50"]
        t.add_row(name.replace("contiguous-", ""), f"{s['concurrency']['mean_running']:,.1f}",
                  f"{s['kv']['waste_pct']:.1f}%",
                  f"{s['throughput']['output_tokens_per_s']:,.0f}", "–" if ttft is None else f"{ttft:,.2f} s",
                  "–" if e2e is None else f"{e2e:,.1f} s", f"{s['requests']['preemptions']:,}")
    console.print(t)
