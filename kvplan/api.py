"""kvplan's Python API: plan, sweep, cheapest, simulate and disagg from a notebook or a program.

Each function takes the CLI's inputs as keyword arguments, named as the flags are (`context` is `--ctx`,
`engine_opts` is `--engine-opt`) and with the same defaults, and returns the core's typed results
(`Plan`, `SweepResult`, `Candidate`s, a `Simulation`). Nothing is printed: what the CLI says on stderr
(where a model came from, the warnings) is in the results (`Plan.warnings`, each a note where its `note` is set:
an assumption at a stated default; `Plan.request.context_from_model`).
Bad input raises `KvplanError`, whose `param`, `value` and `allowed` say which input is wrong and what
would do, and whose message names the input by its keyword (the CLI's, by its flag).

The inputs are read as the CLI reads them, by the same functions (kvplan.planning.request.read_request,
kvplan.engines.configure). This module sits above every layer, beside the CLI; `import kvplan` loads it
only when one of its names is first used (kvplan/__init__.py), so the CLI never pays for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from kvplan.compare.cheapest import Candidate, cheapest as rank, count_deployments
from kvplan.compare.candidates import search_layouts
from kvplan.compare.sweep import SweepResult, parse_counts, sweep as run_sweep
from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.core.units import parse_tokens
from kvplan.engines import configure
from kvplan.engines.base import Engine
from kvplan.engines.offload import OffloadPlan
from kvplan.hardware.gpus import GPU, find_gpu, load_gpus
from kvplan.hardware.hosts import Host
from kvplan.hardware.prices import load_prices
from kvplan.model.spec import ModelSpec
from kvplan.engines.context import limited
from kvplan.engines.scheduler import with_limits
from kvplan.planning.deploy import Deployment, deployment_for_gpus, node_size
from kvplan.planning.layout import SEARCH, layout_from_flags
from kvplan.planning.plan import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, Plan
from kvplan.planning.request import MAX_BATCH, read_request
from kvplan.planning.speculative import apply, parse
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.frontend import configured
from kvplan.speed.coverage import check_speed
from kvplan.simulator.inputs import check_workload_inputs
from kvplan.simulator.limits import Limits, scheduler_limits
from kvplan.simulator.offload import engine_tiers, requested_tiers, sim_tiers
from kvplan.simulator.session import configs, load_requests, run_all
from kvplan.simulator.disagg import Result as DisaggResult
from kvplan.simulator.disagg_inputs import disagg_run
from kvplan.hardware.links import DEFAULT_LINK, Link
from kvplan.sources.catalog import load_catalog
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model

Paths = Sequence[Union[str, Path]]
Opts = Union[Mapping[str, Any], Sequence[str]]


def load_model(name: Union[str, ModelSpec], *, revision: str | None = None, token: str | None = None,
               timeout: float = 10.0) -> ModelSpec:
    """The model `name` names: a catalog name or alias, a folder or config.json, or a Hub repo id."""
    if not isinstance(name, str):
        return name
    return resolve_model(name, revision=revision, token=token, timeout=timeout,
                         loaded_bytes=loaded_as_model_dtype).spec


def gpu(name: Union[str, GPU], *, hw_profiles: Paths = ()) -> GPU:
    """The GPU profile `name` names (a key or alias: h100, a100-80, mi300x), bundled or in `hw_profiles`."""
    if not isinstance(name, str):
        return name
    return find_gpu(name, tuple(hw_profiles))


_find_gpu = gpu  # for the functions whose `gpu` parameter hides it


def with_drafter(model: ModelSpec, speculative: str | None, engine: Engine | None = None, *,
                 token: str | None = None, timeout: float = 10.0) -> ModelSpec:
    """`model` as served with the drafter `speculative` names (vLLM's --speculative-config: 'mtp[:N]',
    'draft:MODEL:N', 'ngram:N'; None: none), refused where `engine` does not model it."""
    drafter = parse(speculative)
    if drafter is None:
        return model
    if engine is not None:
        engine.check_speculative(drafter.method)
    return apply(model, drafter, lambda name: load_model(name, token=token, timeout=timeout))


def plan(model: Union[str, ModelSpec], gpu: Union[str, GPU], *, context: int | str | None = None, batch: int = 1,
         gpus: int | None = None, tp: int | None = None, pp: int | None = None, dp: int | None = None,
         ep: int | None = None, dcp: int | None = None, gpus_per_node: int | None = None, kv_dtype: str = "auto",
         weight_dtype: str | None = None, gpu_memory_utilization: float | str | None = None,
         overhead: int | str | None = None, kv_cache_memory: int | str | None = None, block_size: int | None = None,
         engine: str | None = None, engine_version: str | None = None, engine_opts: Opts = (),
         speculative: str | None = None, lora: str | None = None, hw_profiles: Paths = (),
         revision: str | None = None, token: str | None = None, timeout: float = 10.0,
         max_model_len: int | str | None = None, allow_long_context: bool = False) -> Plan:
    """`kvplan fit`'s plan: does `model` fit on `gpu` at `context` for `batch` requests, and how many
    requests, how long a context, how fast.

    The layout is `kvplan fit`'s: `tp`, `pp`, `dp`, `ep`, `dcp` fix it (`gpus` = tp x pp x dp checks it);
    `gpus` alone plans every valid layout of that many GPUs and returns the best (most requests, then
    decode speed); none of them: one GPU (`cheapest` finds the fewest GPUs that fit). `engine` plans as
    that engine allocates (vllm, sglang, trtllm, llama.cpp, transformers; default kvplan's own rules).
    The model's context limit is the engine's (kvplan.engines.context: rope_scaling by release), or
    `max_model_len`; past the limit an engine that refuses it raises unless `allow_long_context`.
    Plan.binds says what stops a plan that does not fit: "context limit" or "memory".
    """
    hw = _find_gpu(gpu, hw_profiles=hw_profiles)
    chosen, _ = configure(engine, engine_version, engine_opts, gpu_memory_utilization, block_size)
    spec = with_drafter(load_model(model, revision=revision, token=token, timeout=timeout), speculative, chosen,
                        token=token, timeout=timeout)
    spec, _, default = limited(chosen, spec, max_model_len, allow_long_context)
    req = read_request(spec, context=context or (default if max_model_len is not None else None),
                       default_context=default, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                       block_size=block_size, gpu_memory_utilization=gpu_memory_utilization, overhead=overhead,
                       kv_cache_memory=kv_cache_memory, lora=lora)
    dep = layout_from_flags(spec, gpus, tp, pp, dp, ep, dcp)
    if gpus_per_node is not None and not 1 <= gpus_per_node <= 1024:
        raise out_of_range("gpus_per_node", gpus_per_node, 1, 1024)
    if dep == SEARCH:
        dep = _best_layout(spec, hw, gpus, req, chosen, gpus_per_node)
    if dep is not None and gpus_per_node is not None:  # the node size the user tells the engine (gpus_per_node)
        dep = dataclasses.replace(dep, node_gpus=gpus_per_node)
    return chosen.plan(spec, hw, chosen.deployment(dep or Deployment()), req)


def _best_layout(spec, hw, gpus: int, req, engine, node_gpus: int | None = None):
    """`kvplan fit --gpus N`'s layout: every valid one planned and ranked (kvplan.compare.candidates.search_layouts)."""
    if gpus == 1:
        return Deployment(1, 1)
    if engine.splits_layers_only:  # one layout: layers split over the GPUs
        return Deployment(1, gpus)
    engine.with_checkpoint_kv(spec, req)  # a declared KV cache the engine cannot run: refused, not every layout
    # none: refused with why (kvplan.compare.candidates)
    plans = search_layouts(spec, hw, gpus, req, engine, node_gpus)
    return plans[0].deployment


def sweep(models: Union[str, Sequence[Union[str, ModelSpec]]], *, context: Union[int, str, Sequence[Union[int, str]]],
          gpu: Union[str, Sequence[Union[str, GPU]]] = "all", gpu_counts: Union[str, Sequence[int]] = (1, 2, 4, 8),
          kv_dtype: Union[str, Sequence[str]] = "auto", weight_dtype: Union[str, Sequence[str], None] = None,
          batch: int = 1, gpu_memory_utilization: float | str | None = None, block_size: int | None = None,
          engine: str | None = None, engine_version: str | None = None, engine_opts: Opts = (),
          prices: Union[str, Path, None] = None, layouts: bool = False, speculative: str | None = None,
          lora: str | None = None,
          hw_profiles: Paths = (), revision: str | None = None, token: str | None = None,
          timeout: float = 10.0, max_model_len: int | str | None = None,
          allow_long_context: bool = False) -> SweepResult:
    """`kvplan sweep`: every model x GPU x GPU count x context x KV dtype x weight format planned and
    ranked (SweepResult.plans, best first; deployments a model cannot run in SweepResult.skipped).

    Lists are sequences or the CLI's comma-separated text; `models='all'` is the catalog, `gpu='all'`
    every GPU. A GPU count n is tp n up to the GPU's node (node_of), pipeline stages for the rest (`layouts`: the best
    layout of n).
    `prices` is a YAML file of `gpu: price per GPU-hour` (rows are then ranked by cost per user).
    """
    hw = tuple(hw_profiles)
    contexts = [parse_tokens(c, "context") for c in _items(context, "context")]
    counts = parse_counts(gpu_counts) if isinstance(gpu_counts, str) else list(gpu_counts)
    kv_names = _items(kv_dtype, "kv_dtype")
    weights = [None if w is None or str(w).lower() in ("auto", "checkpoint") else canonical_weight_dtype(w)
               for w in ([None] if weight_dtype is None else _items(weight_dtype, "weight_dtype"))]
    if not 1 <= batch <= MAX_BATCH:
        raise out_of_range("batch", batch, 1, MAX_BATCH)
    chosen, gmu = configure(engine, engine_version, engine_opts, gpu_memory_utilization, block_size)
    gpu_list = _gpus(gpu, hw)
    book = load_prices(prices, hw)
    if models == "all":
        models = sorted(load_catalog(), key=lambda s: s.name)
    specs = [limited(chosen, with_drafter(load_model(m, revision=revision, token=token, timeout=timeout),
                                           speculative, chosen, token=token, timeout=timeout),
                     max_model_len, allow_long_context)[0] for m in _items(models, "models")]
    return run_sweep(specs, gpu_list, counts, contexts, kv_names, list(dict.fromkeys(weights)), batch=batch,
                     block_size=block_size or DEFAULT_BLOCK_SIZE,
                     gpu_memory_utilization=gmu or DEFAULT_GPU_MEMORY_UTILIZATION,
                     prices={g.key: p for g in gpu_list if (p := book.price(g)) is not None}, engine=chosen,
                     layouts=layouts, lora=lora)


def cheapest(model: Union[str, ModelSpec], *, concurrency: int, context: int | str | None = None,
             gpu: Union[str, Sequence[Union[str, GPU]], None] = None,
             gpu_counts: Union[str, Sequence[int], None] = None,
             max_gpus: int = 64, min_tokens_per_second: float | None = None, prices: Union[str, Path, None] = None,
             kv_dtype: str = "auto", weight_dtype: str | None = None,
             gpu_memory_utilization: float | str | None = None, block_size: int | None = None,
             engine: str | None = None, engine_version: str | None = None, engine_opts: Opts = (),
             layouts: bool = False, replicas: int = 1, speculative: str | None = None,
             lora: str | None = None, hw_profiles: Paths = (),
             revision: str | None = None, token: str | None = None, timeout: float = 10.0,
             max_model_len: int | str | None = None, allow_long_context: bool = False) -> list[Candidate]:
    """`kvplan cheapest`: every deployment tried for `concurrency` requests of `context` tokens (and at
    least `min_tokens_per_second` each), those meeting the target first, cheapest first (fewest GPUs
    without prices), then the rest with why (`Candidate.why`).

    `gpu` defaults to the GPUs `prices` prices, else every GPU; `gpu_counts` to the first valid tp of
    1, 2, 4, ... up to `max_gpus`. `replicas` > 1 also tries up to that many independent copies of a deployment,
    on at most `max_gpus` GPUs in all.
    """
    for name, value, high in (("concurrency", concurrency, MAX_BATCH), ("max_gpus", max_gpus, 4096),
                              ("replicas", replicas, 4096)):
        if not 1 <= value <= high:
            raise out_of_range(name, value, 1, high)
    hw = tuple(hw_profiles)
    chosen, gmu = configure(engine, engine_version, engine_opts, gpu_memory_utilization, block_size)
    counts = None if gpu_counts is None else (parse_counts(gpu_counts) if isinstance(gpu_counts, str)
                                              else list(gpu_counts))
    book = load_prices(prices, hw)
    gpu_list = _gpus(gpu or "all", hw)
    if gpu is None and prices is not None:  # a prices file names the GPUs one can buy
        gpu_list = [g for g in gpu_list if book.price(g) is not None]
    spec = with_drafter(load_model(model, revision=revision, token=token, timeout=timeout), speculative, chosen,
                        token=token, timeout=timeout)
    spec, _, default = limited(chosen, spec, max_model_len, allow_long_context)
    deployments = count_deployments(spec, counts, max_gpus)
    req = read_request(spec, context=context or default, kv_dtype=kv_dtype, weight_dtype=weight_dtype)
    return rank(spec, gpu_list, req.context, concurrency, deployments=deployments,
                min_tokens_per_second=min_tokens_per_second, prices=book,
                kv_dtype=canonical_kv_dtype(kv_dtype, spec.dtype), kv_auto=req.kv_auto, weight_dtype=req.weight_dtype,
                gpu_memory_utilization=gmu, block_size=block_size, engine=chosen, max_replicas=replicas,
                layouts=layouts, lora=lora, max_gpus=max_gpus)


@dataclass(frozen=True)
class Simulation:
    """One simulated run: the plan whose KV pool it ran on, its figures (`summary`: requests,
    throughput, latency_s, concurrency, kv, goodput, ... as `kvplan simulate --json` writes a run's
    summary) and its time series (`series`: rows of kvplan.report.simulation.SERIES_COLUMNS)."""

    plan: Plan
    summary: dict
    series: list
    offload: OffloadPlan | None = None  # the tiers as the engine sized them (`offload`), or None
    limits: Limits | None = None  # the scheduler's counts it ran at and where each came from (the engine's own)
    front_end: dict | None = None  # the serving front end the requests crossed (kvplan.simulator.frontend), or None


def simulate(model: Union[str, ModelSpec], gpu: Union[str, GPU], *, workload: str | None = None,
             trace: Union[str, Path, None] = None, trace_format: str = "auto", qps: float | None = None,
             duration: float | None = None, seed: int = 0, gpus: int | None = None, tp: int | None = None,
             pp: int | None = None, max_model_len: int | str | None = None, mode: str = "paged",
             reserve: str = "max", kv_dtype: str = "auto", weight_dtype: str | None = None,
             gpu_memory_utilization: float | str | None = None, kv_cache_memory: int | str | None = None,
             overhead: int | str | None = None, block_size: int | None = None, engine: str | None = None,
             engine_version: str | None = None, engine_opts: Opts = (), max_num_seqs: int | None = None,
             max_num_batched_tokens: int | None = None, prefix_caching: bool = True, slo_ttft: float = 2.0,
             slo_tpot: float = 0.1, step_overhead: float = 0.0, speculative: str | None = None,
             lora: str | None = None, offload: str | None = None, offload_backend: str = "native",
             host: Union[str, Host, None] = None,
             hw_profiles: Paths = (), revision: str | None = None, token: str | None = None,
             timeout: float = 10.0, allow_long_context: bool = False, speed: str = "calibrated") -> Simulation:
    """`kvplan simulate`: serve a workload (built-in `workload`, default chat, Poisson arrivals at `qps`,
    default 10/s, for `duration` s, default 300; or a `trace` file) on the deployment's KV pool with the
    engine's steps (Simulation.limits.prefill_first: SGLang's) and admission (Simulation.limits.admission), at the
    engine's own limits (`max_num_seqs`, `max_num_batched_tokens` left None: the engine's defaults by release and GPU,
    256 and 8,192 where it states none; Simulation.limits says which); step times
    from kvplan's calibrated model (kvplan.speed), or with speed="roofline" the bare roofline (a lower bound).

    `offload` ('cpu:64GiB,disk:2TiB', a ratio '2x', or 'cpu:auto' with a `trace`) puts tiers below the pool, sized
    as the engine (or `offload_backend`) sizes them (Simulation.offload); evicted prefixes go down them and come
    back at `host`'s links (a bundled host profile or a YAML file; without one, reloads are free). Requests cross the
    engine's API server first (Simulation.front_end: the fitted ingress, shared by those crossing together)."""
    check_speed(speed)
    tiers, host_profile = requested_tiers(offload, offload_backend, host, mode == "paged" and prefix_caching, trace)
    check_workload_inputs(mode=mode, reserve=reserve, workload=workload, trace=trace, qps=qps, duration=duration,
                          seed=seed, slo_ttft=slo_ttft, slo_tpot=slo_tpot, step_overhead=step_overhead,
                          max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    opts = with_limits(engine, engine_opts, max_num_seqs, max_num_batched_tokens)  # the engine plans at them too
    chosen, _ = configure(engine, engine_version, opts, gpu_memory_utilization, block_size)
    requests, fmt = _requests(workload, trace, trace_format, qps, duration, seed)
    hw = _find_gpu(gpu, hw_profiles=hw_profiles)
    spec = with_drafter(load_model(model, revision=revision, token=token, timeout=timeout), speculative, chosen,
                        token=token, timeout=timeout)
    spec, _, default = limited(chosen, spec, max_model_len, allow_long_context)
    req = read_request(spec, context=default, kv_dtype=kv_dtype, weight_dtype=weight_dtype, block_size=block_size,
                       gpu_memory_utilization=gpu_memory_utilization, overhead=overhead,
                       kv_cache_memory=kv_cache_memory, lora=lora)
    dep = _sim_deployment(spec, gpus, tp, pp, chosen, hw)
    res = chosen.result(spec, hw, dep, req)  # the pool as the engine sizes it; its admission rule below
    p = res.plan if prefix_caching else dataclasses.replace(  # no cached prefix: an MLA prefill's form reads it (CLI's)
        res.plan, request=dataclasses.replace(res.plan.request, prefix_cache=False))
    sim = sim_model(p, spec, hw, step_overhead_s=step_overhead, speed=speed, engine=chosen.speed_key,
                    version=chosen.version)
    if sim.kv_budget_bytes < sim.block_bytes():
        raise KvplanError(f"{spec.name} on {dep.gpus} × {hw.key}: no memory is left for the KV cache (weights "
                          f"{p.weight_bytes_per_gpu / 2**30:.1f} GiB per GPU); try more {arg('gpus')}", EXIT_USAGE)
    held = scheduler_limits(chosen, res, max_num_seqs, max_num_batched_tokens)
    if tiers and not held.prefix_cache:
        raise KvplanError("offload keeps evicted prefix blocks: it needs the engine's prefix cache, which its "
                          f"{arg('engine_opts')} turns off", EXIT_USAGE, param="offload", value=offload)
    base, fe = configured(held, sim, chosen.speed_key, mode=mode, reserve=reserve, prefix_caching=prefix_caching)
    op = (engine_tiers(chosen, res, spec, sim, dep, requests, fmt, tiers, offload_backend, host_profile)
          if tiers else None)
    if op is not None:
        base = dataclasses.replace(base, tiers=sim_tiers(op, sim.token_bytes(), host_profile, dep.gpus))
    ((summary, series),) = run_all(sim, requests, configs(base, False), slo_ttft, slo_tpot).values()
    return Simulation(p, summary, series, op, held, fe.meta(requests) if fe else None)


def _sim_deployment(spec, gpus, tp, pp, chosen, hw) -> Deployment:
    """simulate's layout: tp and pp as given, or `gpus` alone split as simulate's CLI splits them (widest tp within
    the GPU `hw`'s node, then pp), as the engine `chosen` deploys it."""
    dep = layout_from_flags(spec, gpus, tp, pp)
    if dep == SEARCH:
        dep = deployment_for_gpus(spec, gpus, node_size(None, hw))
        if dep is None:
            raise KvplanError(f"{spec.name}: no tensor × pipeline split of {gpus} GPUs is valid (tp must divide "
                              f"the {spec.num_attention_heads} attention heads)", EXIT_USAGE, param="gpus", value=gpus)
    return chosen.deployment(dep or Deployment(1, 1))


def disagg(model: Union[str, ModelSpec], gpu: Union[str, GPU], *, isl: int | str | None = None,
           osl: int | str | None = None, prefill_tp: int | None = None, prefill_pp: int | None = None,
           decode_tp: int | None = None, decode_pp: int | None = None, prefill_max_model_len: int | str | None = None,
           decode_max_model_len: int | str | None = None, link: Union[str, Link] = DEFAULT_LINK,
           workload: str | None = None, trace: Union[str, Path, None] = None, trace_format: str = "auto",
           qps: float | None = None, duration: float | None = None, seed: int = 0, slo_ttft: float = 2.0,
           slo_tpot: float = 0.1, slo_percent: float = 90.0, max_gpus: int = 64, engine: str | None = "vllm",
           engine_version: str | None = None, engine_opts: Opts = (), kv_dtype: str = "auto",
           weight_dtype: str | None = None, gpu_memory_utilization: float | str | None = None,
           block_size: int | None = None, max_num_seqs: int | None = None,
           max_num_batched_tokens: int | None = None,
           step_overhead: float = 0.0, hw_profiles: Paths = (), speed: str = "calibrated") -> DisaggResult:
    """`kvplan disagg`: the prefill and decode pools (`.prefill`, `.decode`: each replica's engine plan, what
    it holds and needs), the KV moved per request (`.moved`), the transfer over `link` (`.transfer_s`), the
    rates and the ratio that balances them (`.ratio`); with `qps` (and `workload`, `trace` or isl/osl) every
    xPyD split within `max_gpus` simulated, the chosen one and the aggregated deployment (`.search`).
    `engine` defaults to vLLM (whose pool flags the serve commands carry), as the CLI's `--engine`.
    `max_num_seqs` / `max_num_batched_tokens` left None: each pool's engine's own (`.limits`, by role).
    `speed`: the step times, kvplan.speed's calibrated ones (`engine`'s coefficients, vLLM's where the corpus has
    none for it) or "roofline" (a lower bound). The CLI's path too (kvplan.simulator.disagg_inputs)."""
    return disagg_run(
        model, gpu, isl=isl, osl=osl, prefill_tp=prefill_tp, prefill_pp=prefill_pp, decode_tp=decode_tp,
        decode_pp=decode_pp, prefill_max_model_len=prefill_max_model_len, decode_max_model_len=decode_max_model_len,
        link=link, workload=workload, trace=trace, trace_format=trace_format, qps=qps, duration=duration, seed=seed,
        slo_ttft=slo_ttft, slo_tpot=slo_tpot, slo_percent=slo_percent, max_gpus=max_gpus, engine=engine,
        engine_version=engine_version, engine_opts=engine_opts, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, step_overhead=step_overhead, hw_profiles=hw_profiles,
        speed=speed).result


def _requests(workload, trace, trace_format: str, qps, duration, seed: int) -> tuple[list, str | None]:
    """The simulator's requests: a built-in workload's Poisson arrivals, or a trace shaped by qps and duration;
    and the trace's format (None for a workload)."""
    loaded = load_requests(workload, trace, trace_format, qps, duration, seed)
    return loaded.requests, loaded.meta.get("trace_format")


def _items(value, param: str) -> list:
    """A sequence, the CLI's comma-separated text, or one value (`context=8192`, one GPU object), as a list (names
    once each); an empty one is refused."""
    if isinstance(value, str):
        items = [t.strip() for t in value.split(",") if t.strip()]
    else:
        items = list(value) if isinstance(value, Iterable) else [value]
    if not items:
        raise KvplanError(f"{arg(param)} list {value!r} is empty", EXIT_USAGE, param=param, value=value)
    return [item for i, item in enumerate(items) if not (isinstance(item, str) and item in items[:i])]


def _gpus(value, hw: tuple) -> list:
    """GPUs by name (or GPU objects), or 'all', each once, in the order given."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return list(load_gpus(hw).values())
    found = {}
    for item in _items(value if isinstance(value, (str, Sequence)) else [value], "gpu"):
        g = _find_gpu(item, hw_profiles=hw)
        found.setdefault(g.key, g)
    return list(found.values())
