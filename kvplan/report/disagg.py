"""`kvplan disagg`'s output: the result as a JSON dict, as lines of at most 80 columns, and a Dynamo
manifest fragment with each pool's replicas, GPUs and serve arguments.

The fragment follows Dynamo's DynamoGraphDeployment (apiVersion nvidia.com/v1alpha1; spec.services
with a worker per pool, `replicas`, `resources.limits.gpu`, `extraPodSpec.mainContainer.args`), as in
ai-dynamo/dynamo components/backends/vllm/deploy/disagg.yaml; llm-d's modelservice values take the
same figures (replicas, GPUs per pod, the serve arguments) in kvplan.report.llmd.
"""

from __future__ import annotations

import json
import shlex

from kvplan.core.units import gib, plural
from kvplan.engines.disagg import split_env
from kvplan.report.llmd import env_rows, llmd_values
from kvplan.speed.coverage import label


def _pool(pool, command) -> dict:
    p = pool.plan
    d = p.deployment
    return {"role": pool.role, "tp": d.tp, "pp": d.pp, "gpus_per_replica": d.gpus,
            "max_model_len": pool.max_model_len, "tokens_per_request": pool.tokens,
            "kv_memory_bytes_per_gpu": p.kv_memory_bytes_per_gpu, "weight_bytes_per_gpu": p.weight_bytes_per_gpu,
            "requests_held": pool.holds, "requests_needed": pool.needs, "binds": pool.binds,
            "command": command}


def result_dict(res, commands: dict) -> dict:
    """Everything `kvplan disagg --json` prints (commands: role -> serve command or None)."""
    m, s = res.moved, res.setup
    ttft = res.prefill_s + res.transfer_s
    out = {
        "model": res.prefill.plan.model, "gpu": res.prefill.plan.gpu,
        "isl": s.isl, "osl": s.osl, "lengths_are_workload_means": s.means,
        "link": {"key": res.link.key, "per_gpu_bytes_per_s": res.link.per_gpu_bytes_per_s,
                 "latency_s": res.link.latency_s, "source": res.link.source},
        "prefill": _pool(res.prefill, commands.get("prefill")),
        "decode": {**_pool(res.decode, commands.get("decode")), "batch": res.decode_batch,
                   "batch_binds": res.decode_batch_binds},
        "kv_moved": {"bytes": m.kv_bytes, "per_prefill_rank_bytes": m.per_prefill_rank,
                     "per_decode_rank_bytes": m.per_decode_rank, "received_bytes": m.received_bytes,
                     "sent_per_prefill_rank_bytes": m.sent_per_prefill_rank},
        "timing_s": {"prefill": res.prefill_s, "transfer": res.transfer_s, "ttft": ttft,
                     "transfer_share_of_ttft": res.transfer_s / ttft if ttft else 0.0, "tpot": res.tpot_s},
        "rates": {"prefill_requests_per_s_per_replica": res.prefill_rps,
                  "decode_requests_per_s_per_replica": res.decode_rps,
                  "balanced_ratio": {"prefill": res.ratio[0], "decode": res.ratio[1]}},
        "slo": {"ttft_s": s.slo_ttft, "tpot_s": s.slo_tpot, "percent": s.slo_percent},
        "scheduler_limits": {role: held.meta() for role, held in res.limits.items()},
        "step_time_model": label(s.speed_engine, s.speed),  # the pools' engine's coefficients (kvplan.simulator.disagg)
    }
    if res.search:
        out["search"] = res.search
    return out


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:,.1f} ms"


def _split_row(name: str, run: dict | None) -> str:
    if run is None:
        return f"{name:<26} none meets the SLOs within the GPU limit"
    return (f"{name:<26} {run['gpus']:>5,} {_ms(run['ttft_s']['p90']):>11} {_ms(run['tpot_s']['p90']):>10} "
            f"{run['pct_meeting_slo']:>6.1f}%")


def text_lines(res, commands: dict) -> list[str]:
    """The result for people: pools, KV moved, timings, ratio, search; each line at most 80 columns."""
    m, s = res.moved, res.setup
    mean = " (means)" if s.means else ""
    lines = [f"{res.prefill.plan.model} on {res.prefill.plan.gpu}: ISL {s.isl:,}, OSL {s.osl:,}{mean}, "
             f"link {res.link.key}"]
    for pool in (res.prefill, res.decode):
        p, d = pool.plan, pool.plan.deployment
        lines.append(f"{pool.role} replica: tp {d.tp} pp {d.pp} ({plural(d.gpus, 'GPU')}), max_model_len "
                     f"{pool.max_model_len:,}, KV {gib(p.kv_memory_bytes_per_gpu)}/GPU")
        if pool.role == "prefill":
            lines.append(f"  holds {pool.holds:,} prompts of {pool.tokens:,}; in flight + staged "
                         f"{pool.needs:,}; binds: {pool.binds}")
        else:
            lines.append(f"  holds {pool.holds:,} requests of {pool.tokens:,} tokens; batch {res.decode_batch:,}"
                         f"; binds: {res.decode_batch_binds}")
    lines.append(f"KV moved per request: {m.kv_bytes:,} B once; {m.per_decode_rank:,} B per decode rank")
    lines.append(f"  {m.received_bytes:,} B received in all; {m.sent_per_prefill_rank:,} B sent per prefill rank")
    ttft = res.prefill_s + res.transfer_s
    share = 100 * res.transfer_s / ttft if ttft else 0.0
    lines.append(f"TTFT alone {_ms(ttft)}: prefill {_ms(res.prefill_s)} + transfer {_ms(res.transfer_s)} "
                 f"({share:.1f}%)")
    lines.append(f"TPOT at batch {res.decode_batch:,}: {_ms(res.tpot_s)}")
    lines.append(f"rates per replica: prefill {res.prefill_rps:,.2f} req/s, decode {res.decode_rps:,.2f} req/s")
    lines.append(f"balanced ratio: {res.ratio[0]}P:{res.ratio[1]}D")
    if res.search:
        c = res.search["chosen"]
        head = "disaggregated" if c is None else f"disaggregated {c['prefill_replicas']}P:{c['decode_replicas']}D"
        lines.append(f"{'deployment':<26} {'GPUs':>5} {'TTFT p90':>11} {'TPOT p90':>10} {'in SLO':>7}")
        lines.append(_split_row(head, c))
        for name, run in (("same budget", res.search["aggregated_same_gpus"]),
                          ("fewest", res.search["aggregated_fewest"])):
            label = f"aggregated, {name}" if run is None else f"agg tp {run['tp']} pp {run['pp']}, {name}"
            lines.append(_split_row(label, run))
        if c is not None:
            room = c["prefill_replicas"] * res.prefill.holds
            verdict = "fits" if c["staged_max"] <= room else "too many"
            lines.append(f"  staged at most {c['staged_max']:,} prompts (prefill pool holds {room:,}: {verdict})")
    return lines


def replica_counts(res) -> tuple[int, int]:
    """Prefill and decode replicas: the chosen split of a search, else the balanced ratio."""
    chosen = (res.search or {}).get("chosen")
    return (chosen["prefill_replicas"], chosen["decode_replicas"]) if chosen else tuple(res.ratio)


def manifest(res, commands: dict, engine_label: str, kind: str = "dynamo") -> str:
    """A DynamoGraphDeployment fragment (spec.services) with each pool's replicas, GPUs and arguments;
    kind "llm-d": llm-d's modelservice values instead (kvplan.report.llmd)."""
    counts = replica_counts(res)
    if kind == "llm-d":
        return llmd_values(res, commands, counts, engine_label)
    prefix = engine_label.capitalize()
    rows = ["apiVersion: nvidia.com/v1alpha1", "kind: DynamoGraphDeployment", "spec:", "  services:"]
    for pool, n in zip((res.prefill, res.decode), counts):
        cmd = commands.get(pool.role)
        env, args = split_env(cmd)  # VLLM_USE_V1 and the like: the container's env, not an argument
        rows += [f"    {prefix}{pool.role.capitalize()}Worker:", f"      replicas: {n}",
                 "      resources:", "        limits:", f"          gpu: \"{pool.plan.deployment.gpus}\""]
        if args:
            rows += ["      extraPodSpec:", "        mainContainer:"]
            rows += env_rows(env, "          ")
            rows += ["          args:"] + [f"            - {json.dumps(a)}" for a in args]
    return "\n".join(rows) + "\n"


def _units(words: list[str]) -> list[str]:
    """The words a line break may not separate: a flag and its value ("--max-num-seqs 3") stay together."""
    out: list[str] = []
    for word in words:
        if out and out[-1].startswith("-") and " " not in out[-1] and not word.startswith("-"):
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def wrapped(command: str, width: int = 80) -> list[str]:
    """A shell command as lines of at most `width` columns joined by backslash continuations, a flag kept
    with its value (a unit longer than a line keeps its own line)."""
    lines, line = [], ""
    for word in _units(list(map(shlex.quote, shlex.split(command)))):
        if line and len(line) + 1 + len(word) > width - 2:
            lines.append(line + " \\")
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines
