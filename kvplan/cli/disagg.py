"""`kvplan disagg MODEL --gpu GPU`: a disaggregated deployment's prefill and decode pools, the KV each
request moves between them, and the prefill:decode ratio that meets the SLOs.

Thin: the flags go to the path the Python API's `kvplan.disagg` takes (kvplan.simulator.disagg_inputs: every
input checked, both pools and the transfer planned, the split searched), and the result is printed
(kvplan.report.disagg). Every assumption goes to stderr; data to stdout; `--json` for machines.
"""

import dataclasses
from typing import Annotated, Optional

import typer

from kvplan.cli.engine_fit import print_plan_said
from kvplan.cli.speed_flags import form_notes, plan_speed_notes, request_note
from kvplan.cli._common import (
    ModelArg, BlockSizeOpt, EngineSettingOpt, EngineVersionOpt, GmuOpt, GpuOpt, HwOpt, JsonOpt, KvDtypeOpt,
    StepSpeedOpt, WeightDtypeOpt, cli_errors, grouped, stderr,
)
from kvplan.cli.workload import SloPercentOpt, SloTpotOpt, SloTtftOpt, WorkloadFlags
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.disagg import pool_command, pool_files
from kvplan.hardware.links import DEFAULT_LINK
from kvplan.report.disagg import manifest, replica_counts, result_dict, text_lines, wrapped
from kvplan.report.export import json_text
from kvplan.report.text import dtype_words
from kvplan.simulator.disagg_inputs import disagg_run
from kvplan.speed.coverage import label

MANIFEST_KINDS = ("dynamo", "llm-d")


def register(app: typer.Typer) -> None:
    app.command()(disagg)


@cli_errors
@grouped
def disagg(
    model: ModelArg,
    gpu: GpuOpt,
    isl: Annotated[Optional[str], typer.Option(
        "--isl", help="Input tokens per request (8192, 8k); not with a workload or trace (its requests' own).")] = None,
    osl: Annotated[Optional[str], typer.Option(
        "--osl", help="Output tokens per request; not with a workload or trace (its requests' own).")] = None,
    prefill_tp: Annotated[Optional[int],
                          typer.Option("--prefill-tp", help="Prefill replica's tensor-parallel size.")] = None,
    prefill_pp: Annotated[Optional[int],
                          typer.Option("--prefill-pp", help="Prefill replica's pipeline-parallel size.")] = None,
    decode_tp: Annotated[Optional[int],
                         typer.Option("--decode-tp", help="Decode replica's tensor-parallel size.")] = None,
    decode_pp: Annotated[Optional[int],
                         typer.Option("--decode-pp", help="Decode replica's pipeline-parallel size.")] = None,
    prefill_max_model_len: Annotated[Optional[str], typer.Option(
        "--prefill-max-model-len", help="Prefill servers' max_model_len (default: the longest prompt).")] = None,
    decode_max_model_len: Annotated[Optional[str], typer.Option(
        "--decode-max-model-len", help="Decode servers' max_model_len (default: the longest prompt + output).")] = None,
    link: Annotated[str, typer.Option(
        "--link", help="Fabric between the pools: nvlink4, ib-400g, ib-200g, roce-400g, pcie-gen5, pcie-gen4, or a "
        "YAML file.")] = DEFAULT_LINK,
    wl: WorkloadFlags = WorkloadFlags(),
    slo_ttft: SloTtftOpt = 2.0,
    slo_tpot: SloTpotOpt = 0.1,
    slo_percent: SloPercentOpt = 90.0,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Most GPUs a split may use (prefill + decode).")] = 64,
    engine: Annotated[str, typer.Option(
        "--engine", help="Engine whose allocation and flags each pool gets: vllm (NixlConnector), sglang "
        "(--disaggregation-mode) or trtllm (trtllm-serve + cache_transceiver_config YAML); others plan without serve "
        "flags.")] = "vllm",
    engine_version: EngineVersionOpt = None,
    engine_opt: EngineSettingOpt = None,
    kv_dtype: KvDtypeOpt = "auto",
    weight_dtype: WeightDtypeOpt = None,
    gpu_memory_utilization: GmuOpt = None,
    block_size: BlockSizeOpt = None,
    max_num_seqs: Annotated[Optional[int], typer.Option(
        "--max-num-seqs", help="Most requests a replica (prefill or decode) runs at once; also the engine's own "
        "setting, so each pool is planned and emitted at it. Default: --engine's own (vLLM's by release and GPU); 256 "
        "where it states none.")] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option(
        "--max-num-batched-tokens", help="Tokens per prefill step. Default: --engine's own (vLLM's by release and "
        "GPU); 8192 where it states none.")] = None,
    step_overhead: Annotated[float, typer.Option(
        "--step-overhead", help="Seconds added to every engine step (default 0: the step-time model alone).")] = 0.0,
    speed: StepSpeedOpt = "calibrated",
    show_manifest: Annotated[bool, typer.Option(
        "--manifest", help="Also print a Dynamo DynamoGraphDeployment fragment (each pool's replicas, GPUs, serve "
        "arguments).")] = False,
    manifest_for: Annotated[Optional[str], typer.Option(
        "--manifest-for", help="The manifest's kind: dynamo (the default of --manifest) or llm-d (modelservice values: "
        "prefill/decode replicas, parallelism, GPUs, args); implies --manifest.")] = None,
    as_json: JsonOpt = False,
    hw_profiles: HwOpt = None,
):
    """Disaggregated serving: size the prefill and decode pools, the KV moved per request, the ratio.

    Each pool is an engine plan of one replica on its own layout; the KV moved per request is exact
    per layer kind and per rank; with --qps (and --workload, --trace or --isl/--osl) every xPyD split
    within --max-gpus is simulated end to end and compared with the aggregated deployment. Step times
    from kvplan's calibrated model under --engine's coefficients (--speed roofline: the bare roofline).
    """
    if manifest_for is not None and manifest_for not in MANIFEST_KINDS:
        raise KvplanError(f"--manifest-for must be one of {', '.join(MANIFEST_KINDS)}, got {manifest_for!r}",
                          EXIT_USAGE)
    kind = manifest_for or ("dynamo" if show_manifest else None)
    run = disagg_run(
        model, gpu, isl=isl, osl=osl, prefill_tp=prefill_tp, prefill_pp=prefill_pp, decode_tp=decode_tp,
        decode_pp=decode_pp, prefill_max_model_len=prefill_max_model_len, decode_max_model_len=decode_max_model_len,
        link=link, **dataclasses.asdict(wl),
        slo_ttft=slo_ttft, slo_tpot=slo_tpot, slo_percent=slo_percent, max_gpus=max_gpus, engine=engine,
        engine_version=engine_version, engine_opts=engine_opt, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, step_overhead=step_overhead, hw_profiles=hw_profiles,
        speed=speed)
    if run.requests_said:
        stderr(run.requests_said)
    if run.engine.version_note:
        stderr(f"note: {run.engine.version_note}")
    res = run.result
    plans = (res.decode.plan, res.prefill.plan)
    for line in (plan_speed_notes(speed, run.engine.speed_key, run.engine.version, run.spec, run.gpu, plans)
                 + request_note(speed, run.engine.speed_key)  # and the prefill pool's MLA prefill form
                 + form_notes([res.prefill.plan], lambda _: run.spec, lambda _: run.gpu, run.engine.speed_key,
                              run.engine.version)):
        stderr(line)  # the pools' step times: whose coefficients, their held-out band, what the corpus lacks
    for line in _limit_notes(res.limits):
        stderr(line)
    if res.search:  # the aggregated deployment beside it admits as `simulate --engine` does
        stderr(f"aggregated replicas: {res.limits['decode'].admission.said}")
        if (fe := res.search.get("front_end")) is not None:
            stderr(f"front end: {fe['per_request_s'] * 1e3:,.1f} ms a request ({fe['source']}), processor sharing, "
                   f"as simulate's: {fe['where']} (kvplan.simulator.disagg.front_end)")
    _report(res, run.engine, run.spec, as_json, kind, run.gpu)


def _limit_notes(held: dict) -> list[str]:
    """The scheduler limits each pool's replicas run at, once where both pools run at the same."""
    if held["prefill"] == held["decode"]:
        return [f"each replica: {line}" for line in held["decode"].notes()]
    return [f"{role} replica: {line}" for role in ("prefill", "decode") for line in held[role].notes()]

def _report(res, chosen, spec, as_json: bool, kind: Optional[str], gpu) -> None:
    print_plan_said([(p.role, p.plan) for p in (res.prefill, res.decode)])
    commands = {"prefill": pool_command(chosen, res.prefill_serve or res.prefill.result, spec, "prefill",
                                        res.prefill.holds, res.prefill.max_model_len),
                "decode": pool_command(chosen, res.decode_serve or res.decode.result, spec, "decode",
                                       res.decode_batch, res.decode.max_model_len)}
    kv = res.prefill.plan.request.kv_dtype
    files = pool_files(chosen.name, res.prefill.max_model_len, replica_counts(res), kv is not None and kv.name == "fp8")
    stderr(f"assuming: engine {chosen.label or chosen.name}; {dtype_words(res.prefill.plan, spec, gpu)}; "
           f"link {res.link.key} ({res.link.per_gpu_bytes_per_s / 1e9:g} GB/s per "
           f"GPU one way, {res.link.latency_s * 1e6:g} us per transfer); step times: "
           f"{label(res.setup.speed_engine, res.setup.speed)}")
    for role, result in (("prefill", res.prefill_serve or res.prefill.result),
                         ("decode", res.decode_serve or res.decode.result)):
        note = chosen.emit_note(result, spec) if commands[role] else None
        if note:  # the utilisation its command names, and why it may differ from the pool's as planned
            stderr(f"{role} command: {note}")
    if as_json:
        data = result_dict(res, commands)
        if kind:
            data["manifest"] = manifest(res, commands, chosen.name, kind)
        if files:
            data["trtllm_files"] = files
        typer.echo(json_text(data), nl=False)
        return
    for line in text_lines(res, commands):
        typer.echo(line)
    for role, cmd in commands.items():
        if cmd is None:
            typer.echo(f"{role} command: none ({chosen.name} has no disaggregation flags kvplan writes)")
            continue
        typer.echo(f"{role} command:")
        for line in wrapped(cmd):
            typer.echo(line)
    for name, text in files.items():
        typer.echo(f"--- {name}")
        typer.echo(text, nl=False)
    if kind:
        typer.echo(manifest(res, commands, chosen.name, kind), nl=False)
