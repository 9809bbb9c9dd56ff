"""`check-bench`'s prediction: a benchmark run's setting resolved (flags, then the file) and run through `simulate`.

`predict` is the one place kvplan predicts a benchmark: it plans the deployment with simulate's own
`_deployment_model` and simulate's own defaults (its step overhead, read from the command; the scheduler limits
as simulate takes them, the engine's own: kvplan.simulator.limits), so whatever step-time model `simulate` uses by
default is the one checked here, and runs the run's load on it (kvplan.bench.load). Everything it assumes goes
into `Resolved.assumed` or its notes.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, field, replace

from kvplan.bench import load
from kvplan.bench.compare import predicted_metrics
from kvplan.bench.result import BenchRun, Stat
from kvplan.cli.engine_flags import engine_from_flags
from kvplan.cli import simulate as simulate_command
from kvplan.cli.simulate import _deployment_model
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.admission import policy_opts
from kvplan.hardware.gpus import find_gpu, gpu_by_device_name
from kvplan.simulator.frontend import front_end, shared
from kvplan.simulator.limits import scheduler_limits
from kvplan.speed.eras import era_of
from kvplan.simulator.session import run_all
from kvplan.sources.catalog import find_in_catalog
from kvplan.readers.chat_format import chat_format
from kvplan.speed.fields import IN_PROCESS_TOOLS
from kvplan.speed.ggml import FA_DEFAULT_SINCE, materializes_scores
from kvplan.speed.frontend import native_chat



def simulate_default(name: str):
    """`kvplan simulate`'s default for its parameter `name` (read from the command, so a new default lands here)."""
    return inspect.signature(simulate_command.simulate).parameters[name].default


_QUANT_TAIL = re.compile(r"[-._](q\d(?:_k)?(?:_[a-z0-9]+)?|iq\d\w*|f16|bf16|fp16|f32|fp8|awq|gptq|int4|int8)$", re.I)
_GGUF_TYPE = re.compile(r"(?:^|[-._])(q\d_k_[sml]|q\d_k|q\d_\d|iq\d_[a-z]+|bf16|f16|f32)$", re.I)
_COUNT = re.compile(r"^\s*(\d{1,4})\s*[x×]\s*")


@dataclass
class Resolved:
    """A run's setting as kvplan predicts it, and what was assumed to get there."""

    model: str  # the catalog name or what --model named
    gpu: object  # the GPU profile
    tp: int
    replicas: int
    engine: str | None
    kv_dtype: str
    weight_dtype: str | None
    assumed: list = field(default_factory=list)
    version: str | None = None  # the engine release the file states (picks the speed coefficients' era)
    policy: str | None = None  # the capacity scheduler policy the file states (its admission rule)


def _model_candidates(name: str) -> list[str]:
    base = name.rstrip("/").split("/")[-1]
    stem = base[:-5] if base.lower().endswith(".gguf") else base
    out = [name, base, stem, _QUANT_TAIL.sub("", stem), "/".join(name.rstrip("/").split("/")[-2:])]
    return list(dict.fromkeys(c for c in out if c))


def _catalog_model(name: str | None) -> str | None:
    for cand in _model_candidates(name or ""):
        spec = find_in_catalog(cand)
        if spec is not None:
            return spec.name
    return None


def _gpu_from_file(text: str | None, hw_profiles) -> tuple[object | None, int | None]:
    """(the profile whose device_name the file's GPU name is, GPUs the name counts: "4xNVIDIA_L40S")."""
    if not text:
        return None, None
    m = _COUNT.match(text)
    count = int(m.group(1)) if m else None
    name = " ".join(text[m.end() if m else 0:].replace("_", " ").split()).lower()
    return gpu_by_device_name(name, hw_profiles or ()), count


def _dtypes(s, kv_dtype: str | None, weight_dtype: str | None, assumed: list) -> tuple[str, str | None]:
    kv = kv_dtype or {"f16": "fp16", "fp16": "fp16", "bf16": "bf16", "f32": "fp32"}.get((s.kv_dtype or "").lower(),
                                                                                       s.kv_dtype or "auto")
    if not kv_dtype and s.kv_dtype:
        assumed.append(f"KV cache dtype {kv} (the file's {s.kv_dtype})")
    w = weight_dtype or s.weight_dtype
    if not w and s.model and s.model.lower().endswith(".gguf"):  # a GGUF file's name carries its type
        m = _GGUF_TYPE.search(s.model.rstrip("/").split("/")[-1][:-5])
        w = m.group(1).lower() if m else None
    if w and not weight_dtype:
        assumed.append(f"weights {w} (from the file)")
    return kv, w


def _has_lengths(run: BenchRun) -> bool:
    """llama-bench runs a prompt or a generation test alone; a serving benchmark needs both lengths."""
    s = run.settings
    return bool((s.isl or s.osl) if run.tool == "llama-bench" else (s.isl and s.osl))


def _refuse_missing(run: BenchRun, model, gpu) -> None:
    """Every input the run lacks (model, GPU, lengths: neither a flag nor the file gives it), named in one error,
    so a user adds them all at once rather than one a try; one missing keeps its own sentence."""
    s, said = run.settings, []  # (flags, why the file's own will not do or "", the sentence when alone)
    if model is None:
        said.append((["--model"], f"the file's {s.model!r} is not in kvplan's catalog", f"the file's model {s.model!r} "
                     "is not in kvplan's catalog; pass --model") if s.model
                    else (["--model"], "", "the file names no model; pass --model"))
    if gpu is None:
        said.append((["--gpu"], f"the file's {s.gpu_name!r} has no kvplan profile", f"the file's GPU {s.gpu_name!r} "
                     "has no kvplan profile; pass --gpu") if s.gpu_name
                    else (["--gpu"], "", "the file names no GPU; pass --gpu"))
    if not _has_lengths(run):
        said.append((["--input-len", "--output-len"], "", "the file states no input and output lengths; pass "
                     "--input-len and --output-len"))
    if not said:
        return
    label = f"{run.label}: " if run.label != "the run" else ""
    if len(said) == 1:
        raise KvplanError(label + said[0][2], EXIT_USAGE)
    parts = [f"{flags[0]} ({why})" if why else flags[0] for flags, why, _ in said]
    parts += [f for flags, _, _ in said for f in flags[1:]]
    raise KvplanError(f"{label}inputs missing; pass {_listed(parts)}", EXIT_USAGE)


def _listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def resolve(run: BenchRun, model, gpu, tp, engine, kv_dtype, weight_dtype, hw_profiles) -> Resolved:
    """The run's setting: each of model, GPU, tp, engine and dtypes from its flag, else from the file, else
    refused (model, GPU) or assumed (tp 1, kvplan's own engine), each assumption said."""
    s, assumed = run.settings, []
    name = model or _catalog_model(s.model)
    file_gpu, count = _gpu_from_file(s.gpu_name, hw_profiles)
    _refuse_missing(run, name, gpu or file_gpu)
    if not model:
        assumed.append(f"model {name} (the file's {s.model!r})")
    if gpu:
        hw = find_gpu(gpu, hw_profiles or ())
    else:
        hw = file_gpu
        assumed.append(f"GPU {hw.key} (the file's {s.gpu_name!r})")
    size = tp or s.tp or 1
    if not (tp or s.tp):
        assumed.append("tp 1 (the file states none; --tp to change)")
    gpus = count or s.gpus
    replicas = gpus // size if gpus and gpus > size and gpus % size == 0 else 1
    if replicas > 1:
        assumed.append(f"{gpus} GPUs as {replicas} replicas of tp {size}, the load split evenly between them")
    eng = engine or s.engine
    assumed.append(f"KV pool sized as {eng} does" if eng else "KV pool sized by kvplan's own rules (no engine stated; "
                   "--engine to change)")
    if s.engine_version:
        assumed.append(f"{eng} rules of the newest release kvplan models (the file says {s.engine_version})")
    kv, w = _dtypes(s, kv_dtype, weight_dtype, assumed)
    return Resolved(name, hw, size, replicas, eng, kv, w, assumed, s.engine_version, s.scheduler_policy)


def _sim(r: Resolved, hw_profiles):
    # the run's own capacity scheduler policy, where the file states one (trtllm-bench), sets its admission rule
    chosen, _ = engine_from_flags(r.engine, None, policy_opts(r.engine, r.policy), None, None)
    speed_set = era_of(r.engine, r.version) if r.engine else None
    sim, _, notes, result = _deployment_model(
        r.model, r.gpu.key, gpus=r.tp, tp=r.tp, pp=None, max_model_len=None, kv_dtype=r.kv_dtype,
        weight_dtype=r.weight_dtype, gmu=None, kv_cache_memory=None, overhead=None, block_size=None,
        step_overhead=simulate_default("step_overhead"), chosen=chosen, hw_profiles=hw_profiles, revision=None,
        token=None, timeout=simulate_default("timeout"),
        speed_engine=speed_set, speed_version=r.version)
    return sim, [n for n in notes if n], (chosen, result[0], result[1]), speed_set or chosen.speed_key


def _one(sim, cfg, prompt: int, output: int) -> dict:
    ((summary, _),) = run_all(sim, load.requests(prompt, output, 1, None), {"paged": cfg}, math.inf, math.inf).values()
    return summary["latency_s"]


def _llama_bench(sim, cfg, s) -> dict:
    """pp: n prompt tokens in one batch after `depth` cached (the TTFT difference); tg: one sequence's TPOT."""
    if s.isl:
        t = _one(sim, cfg, s.depth + s.isl,
                 1)["ttft"]["mean"] - (_one(sim, cfg, s.depth, 1)["ttft"]["mean"] if s.depth else 0)
        return {"pp_tok_s": Stat(mean=s.isl / t)} if t > 0 else {}
    tpot = _one(sim, cfg, max(1, s.depth), s.osl + 1)["tpot"]["mean"]
    return {"tg_tok_s": Stat(mean=1.0 / tpot)} if tpot else {}


def _flash_attn_note(s) -> str | None:
    """What a llama-bench row says of FlashAttention, where it may not be what kvplan prices. The simulator's step
    model prices attention as FlashAttention runs it (StepModel refuses llama.cpp's materialized scores, which only
    the corpus fit prices: kvplan.speed.ggml), so a run without it is said to be slower than predicted, not priced."""
    if s.flash_attn is None:  # llama-bench's md table has an `fa` column only where the run set it
        why = ("the file states no FlashAttention setting (llama-bench's default was off in builds before "
               f"{FA_DEFAULT_SINCE}, llama.cpp#23714)")
    elif materializes_scores({"flash_attn": s.flash_attn}, None):
        why = f"FlashAttention off (the file's flash_attn {s.flash_attn})"
    else:
        return None
    return (f"{why}; kvplan prices attention with FlashAttention on, so a run without it is expected "
            "slower than predicted (its attention scores written to memory and read back, more at depth)")


def _load_note(s, rate) -> str:
    """How the run's load is simulated, in one line."""
    lengths = f"every request {s.isl:,} tokens in, {s.osl:,} out" + (f" ({s.lengths})" if s.lengths else "")
    kind = ("Poisson" if s.burstiness in (None, 1.0) else f"gamma (burstiness {s.burstiness:g})")
    sent = (f"{kind} arrivals at {rate:,.3g} req/s per replica" if rate and math.isfinite(rate)
            else "every request sent at once")
    return lengths + "; " + sent + (f", at most {s.concurrency:,} in flight (closed loop)" if s.concurrency else "")


def _through_front_end(fe, chosen, r: Resolved, s, reqs: list, cfg, notes: list) -> tuple:
    """(the config, the replica's requests, when its engine sees them or None) behind the serving front end. Replicas
    of an engine that runs one API server for its data-parallel ranks (Engine.dp_front_end: SGLang's --dp,
    trtllm-serve) share it: the whole run's requests cross it together (at the file's rate, not a replica's share),
    this replica taking every replicas-th (kvplan.simulator.frontend.shared), as the corpus model counts a burst's N
    over dp (kvplan.speed.frontend.ingress_queue). Else each replica crosses its own with its share (vLLM from 0.15.0:
    one API server a DP rank; servers apart). The release the file states decides where the engine's does;
    a file states no --api-server-count, so the release's default is taken."""
    one, why = chosen.dp_front_end(r.version)
    why = f"; {why}" if why and r.replicas > 1 else ""
    if r.replicas == 1 or not one:
        notes.append(fe.said(reqs) + (f" (one API server a replica, with its share of the run{why})"
                                      if r.replicas > 1 else ""))
        return replace(cfg, front_end_s=fe.per_request_s), reqs, None
    every = load.requests(s.isl, s.osl, len(reqs) * r.replicas, s.request_rate, burstiness=s.burstiness)
    notes.append(fe.said(every) + f" (one API server for the {r.replicas} replicas: {chosen.name} runs one for its "
                 f"data-parallel ranks{why}; this replica's requests are every one in {r.replicas} of them)")
    share = [replace(q, rid=i) for i, q in enumerate(every[::r.replicas])]
    return cfg, share, shared([q.arrival for q in every], fe.per_request_s, r.replicas)


def predict(run: BenchRun, r: Resolved, hw_profiles) -> tuple[dict, object, list]:
    """(kvplan's metrics for the run's load on the resolved deployment, the simulator's model, notes); `r` is
    resolve's for the run, which refuses a run without the lengths it needs (with any other input missing)."""
    s = run.settings
    sim, notes, (chosen, result, spec), speed_set = _sim(r, hw_profiles)
    held = scheduler_limits(chosen, result, s.max_batch or None, s.max_tokens or None)  # simulate's own choice
    cfg = held.config()  # the engine's own admission rule too, as simulate takes it
    notes.append(held.admission.said)
    if not s.max_batch:
        notes.append(f"at most {cfg.max_num_seqs:,} requests running at once ({held.seqs_from}; not in the file)")
    if not s.max_tokens:
        notes.append(f"{cfg.max_num_batched_tokens:,} tokens a step ({held.tokens_from}; not in the file)")
    if run.tool == "llama-bench":
        fa = _flash_attn_note(s)
        return _llama_bench(sim, cfg, s), sim, notes + ([fa] if fa else [])
    wanted = s.num_prompts or load.DEFAULT_REQUESTS
    n = load.request_count(math.ceil(wanted / r.replicas), s.isl, s.osl)
    if n * r.replicas < wanted:
        notes.append(f"{n:,} requests simulated per replica, of the run's {wanted:,} (steady state; kvplan's cap)")
    rate = s.request_rate / r.replicas if s.request_rate and math.isfinite(s.request_rate) else s.request_rate
    notes.append(_load_note(s, rate))
    reqs = load.requests(s.isl, s.osl, n, rate, burstiness=s.burstiness)  # the file's own arrival process
    released = None  # when the engine sees each, where a front end shared with the other replicas decides it
    fe = front_end(sim, speed_set, served=run.tool not in IN_PROCESS_TOOLS)
    fmt = chat_format(spec.family)
    if fe is not None and native_chat(r.engine or "", fmt, s.endpoint):  # no Python template
        notes.append(f"front end: none for chat requests in {fmt} (the file's chat endpoint: "
                     f"{r.engine} renders them to token ids natively, as the corpus model prices it)")
        fe = None
    if s.concurrency:
        reqs = load.closed_loop(sim, cfg, reqs, math.ceil(s.concurrency / r.replicas))
        if fe is not None:  # each request's own crossing of the API server, as the corpus model prices a closed loop
            released = [q.arrival + fe.per_request_s for q in reqs]
            notes.append(f"front end: {fe.per_request_s * 1e3:,.1f} ms a request ({fe.source}): each request of the "
                         "closed loop reaches the engine one crossing after it is sent, as the corpus model prices "
                         "a closed loop (requests sent together are not made to share it)")
    elif fe is not None:  # every request crosses an API server before the engine sees it
        cfg, reqs, released = _through_front_end(fe, chosen, r, s, reqs, cfg, notes)
    ((summary, _),) = run_all(sim, reqs, {"paged": cfg}, math.inf, math.inf, released=released).values()
    itl = run.metrics.get("itl")
    if itl is not None and (itl.median is not None or itl.p99 is not None):
        notes.append("ITL: the mean is predicted (every gap between tokens pooled); its median and p99 are not "
                     "(the simulation keeps no per-token gaps, and a median ITL is one step, not a request's TPOT)")
    return predicted_metrics(summary, r.replicas), sim, notes
