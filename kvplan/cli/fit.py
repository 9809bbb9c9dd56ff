"""`kvplan fit MODEL --gpu GPU`: does it fit, how many requests, how long a context, how many GPUs."""

import dataclasses
from typing import Annotated, Optional

import typer

from kvplan.cli._common import (
    AllowLongOpt, BatchOpt, BlockSizeOpt, CtxOpt, GmuOpt, GpuOpt, HubFlags, HwOpt, JsonOpt, KvDtypeOpt, LoraOpt,
    MaxModelLenOpt, SpeculativeOpt, WeightDtypeOpt, cli_errors, grouped, planned_by, print_notes, stderr,
)
from kvplan.cli.engine_fit import fit_report
from kvplan.engines.context import limited
from kvplan.cli.engine_flags import EngineFlags, speculative_request, with_speculative
from kvplan.cli.layouts import search
from kvplan.cli.offload import OffloadFlags
from kvplan.core.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError
from kvplan.core.units import parse_tokens
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment, deployment_for_gpus, node_size
from kvplan.planning.layout import SEARCH, layout_from_flags
from kvplan.planning.request import read_request
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model


def register(app: typer.Typer) -> None:
    app.command()(fit)


def _request(ctx_tokens: Optional[int], batch: int, kv_dtype: str, weight_dtype, model, block_size: Optional[int],
             gpu_memory_utilization: Optional[str], overhead: Optional[str], kv_cache_memory: Optional[str],
             lora: Optional[str] = None, default_context: Optional[int] = None):
    """The Request the flags ask for (kvplan.planning.request: as the Python API reads its keywords)."""
    return read_request(model, context=ctx_tokens, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                        block_size=block_size, gpu_memory_utilization=gpu_memory_utilization, overhead=overhead,
                        kv_cache_memory=kv_cache_memory, lora=lora, default_context=default_context)


def _deployment(model, gpus: Optional[int], tp: Optional[int], pp: Optional[int], hw):
    """The deployment --gpus/--tp/--pp ask for (simulate's flags), or None for none: as fit's layout
    flags, except that --gpus alone takes the default split (widest tp within the GPU `hw`'s node, then pp)."""
    dep = layout_from_flags(model, gpus, tp, pp)
    if dep != SEARCH:
        return dep
    dep = deployment_for_gpus(model, gpus, node_size(None, hw))
    if dep is None:
        raise KvplanError(f"{model.name}: no tensor × pipeline split of {gpus} GPUs is valid "
                          f"(tp must divide the {model.num_attention_heads} attention heads)", EXIT_USAGE)
    return dep


@cli_errors
@grouped
def fit(
    model: Annotated[str, typer.Argument(
        metavar="MODEL", help="Catalog name or alias (llama-3-70b), a folder or config.json, or a Hub repo id.")],
    gpu: GpuOpt,
    ctx: CtxOpt = None,
    max_model_len: MaxModelLenOpt = None,
    allow_long_context: AllowLongOpt = False,
    batch: BatchOpt = 1,
    gpus: Annotated[Optional[int], typer.Option(
        "--gpus", help="Total GPUs (tp × pp × dp). Alone: every valid layout of this many GPUs, ranked by concurrency. "
        "Without --gpus/--tp: one GPU and the smallest deployment that fits.")] = None,
    tp: Annotated[Optional[int], typer.Option(
        "--tp", help="Tensor-parallel size per data-parallel rank (must divide the attention heads).")] = None,
    pp: Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel size (splits layers).")] = None,
    dp: Annotated[Optional[int], typer.Option(
        "--dp", help="Data-parallel ranks (replicas; DP attention for a MoE model): each holds its own "
        "requests.")] = None,
    ep: Annotated[Optional[int],
                  typer.Option("--ep", help="Expert parallelism over tp × dp ranks (vLLM --enable-expert-parallel); "
                                            "its only size is tp × dp.")] = None,
    dcp: Annotated[Optional[int], typer.Option(
        "--dcp", help="Decode context parallel within tp (MLA models): each rank holds every dcp-th token of a "
        "request's latent.")] = None,
    gpus_per_node: Annotated[Optional[int], typer.Option(
        "--gpus-per-node", help="GPUs per node: tensor parallelism stays within one (--gpus search; default 8), and "
        "TensorRT-LLM's gpus_per_node (default: the GPU profile's node_gpus, else 8).")] = None,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    gpu_memory_utilization: GmuOpt = None,
    overhead: Annotated[Optional[str], typer.Option(
        "--overhead", help="Per-GPU activation + runtime overhead (e.g. 2GiB). Default: an estimate.")] = None,
    kv_cache_memory: Annotated[Optional[str], typer.Option(
        "--kv-cache-memory", help="Exact per-GPU KV budget (as vLLM's flag), e.g. 28.2GiB or bytes.")] = None,
    block_size: BlockSizeOpt = None,
    eng: EngineFlags = EngineFlags(),
    speculative: SpeculativeOpt = None,
    lora: LoraOpt = None,
    emit: Annotated[Optional[str], typer.Option(
        "--emit", help="Also print the serve command line for this plan: vllm, sglang or llama.cpp.")] = None,
    hw_profiles: HwOpt = None,
    hub: HubFlags = HubFlags(),
    explain: Annotated[bool, typer.Option("--explain", help="Print the formula with this model's numbers.")] = False,
    check: Annotated[bool, typer.Option("--check",
                                        help=f"Exit {EXIT_DOES_NOT_FIT} when the workload does not fit.")] = False,
    off: OffloadFlags = OffloadFlags(),
    as_json: JsonOpt = False,
):
    """Does MODEL fit on GPU at this context: concurrency, longest context, GPUs needed, decode speed."""
    hw = find_gpu(gpu, hw_profiles or ())
    ctx_tokens = None if ctx is None else parse_tokens(ctx, "context")
    tiers = off.parse()
    # engine flags and the drafter are checked before the model is resolved (maybe a Hub download)
    chosen, _ = eng.configured(gpu_memory_utilization, block_size, emit)
    drafter = speculative_request(speculative, chosen)
    resolved = resolve_model(model, revision=hub.revision, token=hub.token, timeout=hub.timeout,
                             loaded_bytes=loaded_as_model_dtype)
    spec = with_speculative(resolved.spec, drafter, token=hub.token, timeout=hub.timeout)
    spec, limit_notes, default_ctx = limited(chosen, spec, max_model_len, allow_long_context)
    # no --ctx: --max-model-len, else the engine's default length (the Request says it was not asked for)
    req = _request(ctx_tokens or (default_ctx if max_model_len else None), batch, kv_dtype, weight_dtype, spec,
                   block_size, gpu_memory_utilization, overhead, kv_cache_memory, lora, default_ctx)

    dep = layout_from_flags(spec, gpus, tp, pp, dp, ep, dcp)
    if gpus_per_node is not None and not 1 <= gpus_per_node <= 1024:
        raise KvplanError(f"--gpus-per-node must be between 1 and 1024, got {gpus_per_node}", EXIT_USAGE)
    if spec.speculative is not None:
        chosen.check_layers(spec)  # a drafter this model or engine cannot carry: refused before any output
    if dep != SEARCH:  # no flags: one GPU, then tp x pp deployments
        chosen.check_layout(spec, chosen.deployment(dep or Deployment()))
    # All input is valid from here on: now say where things came from.
    print_notes(resolved, chosen)
    if not chosen.label:  # the engine is an assumption too: say whose rules size the pool, as sweep and cheapest do
        stderr(f"note: {planned_by(None)}")
    for note in limit_notes:
        stderr(f"note: {note}")
    if ctx_tokens is None:
        source = "--max-model-len" if max_model_len else "the model's limit"
        stderr(f"note: --ctx not given; using {source}, {default_ctx:,} tokens")
    layouts = None
    if dep == SEARCH:
        dep, layouts = search(spec, hw, gpus, req, chosen, as_json=as_json, node_gpus=gpus_per_node)
    if dep is not None and gpus_per_node is not None:  # the node size the user tells the engine
        dep = dataclasses.replace(dep, node_gpus=gpus_per_node)
    fit_report(spec, hw, dep, req, chosen, emit_to=emit, as_json=as_json, explain=explain, check=check,
               layouts=layouts, offload=tiers)
