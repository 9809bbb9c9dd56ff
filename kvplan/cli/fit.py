"""`kvplan fit MODEL --gpu GPU`: does it fit, how many requests, how long a context, how many GPUs."""

from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    MAX_BATCH, BatchOpt, BlockSizeOpt, CtxOpt, EngineOpt, EngineSettingOpt, EngineVersionOpt, GmuOpt, GpuOpt, HwOpt,
    JsonOpt, KvDtypeOpt, RevisionOpt, SpeculativeOpt, TimeoutOpt, TokenOpt, WeightDtypeOpt, cli_errors,
    engine_from_flags, print_notes, speculative_request, stderr, with_speculative,
)
from kvplan.cli.offload import HostOpt, OffloadBackendOpt, OffloadOpt, parse_flags as parse_offload_flags
from kvplan.core.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError


def register(app: typer.Typer) -> None:
    app.command()(fit)


def _request(ctx_tokens: Optional[int], batch: int, kv_dtype: str, weight_dtype, model, block_size: Optional[int],
             gpu_memory_utilization: Optional[str], overhead: Optional[str], kv_cache_memory: Optional[str]):
    """The Request the flags ask for; block size and utilisation default to kvplan.planning.plan's (vLLM's)."""
    from kvplan.core.dtypes import canonical_kv_dtype, canonical_weight_dtype
    from kvplan.planning.plan import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, Request
    from kvplan.core.units import parse_bytes, parse_fraction

    if not 1 <= batch <= MAX_BATCH:
        raise KvplanError(f"--batch must be between 1 and {MAX_BATCH:,}, got {batch}", EXIT_USAGE)
    block_size = DEFAULT_BLOCK_SIZE if block_size is None else block_size
    if gpu_memory_utilization is None:
        gpu_memory_utilization = str(DEFAULT_GPU_MEMORY_UTILIZATION)
    return Request(
        context=model.max_context if ctx_tokens is None else ctx_tokens,
        context_from_model=ctx_tokens is None,
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
    """The deployment --gpus/--tp/--pp ask for (simulate's flags), or None for none: as fit's layout
    flags, except that --gpus alone takes the default split (widest tp within a node, then pp)."""
    from kvplan.planning.deploy import deployment_for_gpus
    from kvplan.planning.layout import SEARCH, layout_from_flags

    dep = layout_from_flags(model, gpus, tp, pp)
    if dep != SEARCH:
        return dep
    dep = deployment_for_gpus(model, gpus)
    if dep is None:
        raise KvplanError(f"{model.name}: no tensor × pipeline split of {gpus} GPUs is valid "
                          f"(tp must divide the {model.num_attention_heads} attention heads)", EXIT_USAGE)
    return dep


@cli_errors
def fit(
    model: Annotated[str, typer.Argument(help="Catalog name or alias (llama-3-70b), a folder or config.json, or a Hub repo id.")],
    gpu: GpuOpt,
    ctx: CtxOpt = None,
    batch: BatchOpt = 1,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Total GPUs (tp × pp × dp). Alone: every valid layout of this many GPUs, ranked by concurrency. Without --gpus/--tp: one GPU and the smallest deployment that fits.")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", help="Tensor-parallel size per data-parallel rank (must divide the attention heads).")] = None,
    pp: Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size (splits layers).")] = None,
    dp: Annotated[Optional[int], typer.Option("--dp", help="Data-parallel ranks (replicas; DP attention for a MoE model): each holds its own requests.")] = None,
    ep: Annotated[Optional[int], typer.Option("--ep", help="Expert parallelism over tp × dp ranks (vLLM --enable-expert-parallel); its only size is tp × dp.")] = None,
    dcp: Annotated[Optional[int], typer.Option("--dcp", help="Decode context parallel within tp (MLA models): each rank holds every dcp-th token of a request's latent.")] = None,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node: tensor parallelism stays within one (--gpus search).")] = 8,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    gpu_memory_utilization: GmuOpt = None,
    overhead: Annotated[Optional[str], typer.Option("--overhead", help="Per-GPU activation + runtime overhead (e.g. 2GiB). Default: an estimate.")] = None,
    kv_cache_memory: Annotated[Optional[str], typer.Option("--kv-cache-memory", help="Exact per-GPU KV budget (as vLLM's flag), e.g. 28.2GiB or bytes.")] = None,
    block_size: BlockSizeOpt = None,
    engine: EngineOpt = None,
    engine_version: EngineVersionOpt = None,
    engine_opt: EngineSettingOpt = None,
    speculative: SpeculativeOpt = None,
    emit: Annotated[Optional[str], typer.Option("--emit", help="Also print the serve command line for this plan: vllm, sglang or llama.cpp.")] = None,
    hw_profiles: HwOpt = None,
    revision: RevisionOpt = None,
    token: TokenOpt = None,
    timeout: TimeoutOpt = 10.0,
    explain: Annotated[bool, typer.Option("--explain", help="Print the formula with this model's numbers.")] = False,
    check: Annotated[bool, typer.Option("--check", help=f"Exit {EXIT_DOES_NOT_FIT} when the workload does not fit.")] = False,
    offload: OffloadOpt = None,
    offload_backend: OffloadBackendOpt = "native",
    host: HostOpt = None,
    as_json: JsonOpt = False,
):
    """Does MODEL fit on GPU at this context: concurrency, longest context, GPUs needed, decode speed."""
    from kvplan.cli.engine_fit import fit_report
    from kvplan.hardware.gpus import find_gpu
    from kvplan.sources.resolve import resolve_model
    from kvplan.core.units import parse_tokens

    hw = find_gpu(gpu, hw_profiles or ())
    ctx_tokens = None if ctx is None else parse_tokens(ctx, "--ctx")
    tiers = parse_offload_flags(offload, offload_backend, host)
    # engine flags and the drafter are checked before the model is resolved (maybe a Hub download)
    chosen, _ = engine_from_flags(engine, engine_version, engine_opt, gpu_memory_utilization, block_size, emit)
    drafter = speculative_request(speculative, chosen)
    resolved = resolve_model(model, revision=revision, token=token, timeout=timeout)
    spec = with_speculative(resolved.spec, drafter, token=token, timeout=timeout)
    req = _request(ctx_tokens, batch, kv_dtype, weight_dtype, spec,
                   block_size, gpu_memory_utilization, overhead, kv_cache_memory)
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.layout import SEARCH, layout_from_flags

    dep = layout_from_flags(spec, gpus, tp, pp, dp, ep, dcp)
    if not 1 <= gpus_per_node <= 1024:
        raise KvplanError(f"--gpus-per-node must be between 1 and 1024, got {gpus_per_node}", EXIT_USAGE)
    if spec.speculative is not None:
        chosen.check_layers(spec)  # a drafter this model or engine cannot carry: refused before any output
    if dep != SEARCH:  # no flags: one GPU, then tp x pp deployments
        chosen.check_layout(spec, chosen.deployment(dep or Deployment()))
    # All input is valid from here on: now say where things came from.
    print_notes(resolved)
    if ctx_tokens is None:
        stderr(f"note: --ctx not given; using the model's limit, {spec.max_context:,} tokens")
    layouts = None
    if dep == SEARCH:
        from kvplan.cli.layouts import search

        dep, layouts = search(spec, hw, gpus, req, chosen, gpus_per_node, as_json=as_json)
    fit_report(spec, hw, dep, req, chosen, emit_to=emit, as_json=as_json, explain=explain, check=check,
               layouts=layouts, offload=tiers)
