"""Plans rendered for machines (a JSON-ready dict) and for people (rich tables).

This is the edge where bytes get units: GiB (2^30) for memory, as allocators and engine logs
print it, and the raw integers in JSON.
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.core.markup import plain
from kvplan.hardware.facts import bf16_fact, runs_bf16
from kvplan.planning.plan import KV_ENGINE_AUTO, KV_TOPICS, Plan
from kvplan.planning.layout import layout_text
from kvplan.core.units import gib, human_bytes, human_tokens, plural
from kvplan.engines.versions import reading
from kvplan.planning.speculative import report
from kvplan.report.fitted import fitted_table
from rich.text import Text


GIB, MIB = 2**30, 2**20

# How each unit of an engine's Figure (kvplan.engines.base.Figure) reads, in the engine's own style:
# vLLM and TensorRT-LLM print GiB, llama.cpp MiB, SGLang "GB" that are GiB.
FIGURE_FORMATS = {
    "bytes": lambda v: f"{v / GIB:,.2f} GiB ({v:,} B)",  # separators: 100,015.14 GiB of a budget past any GPU
    "GiB": lambda v: f"{v / GIB:,.2f} GiB",
    "GiB.3": lambda v: f"{v / GIB:,.3f} GiB",
    "MiB": lambda v: f"{v / MIB:.2f} MiB",
    "B": lambda v: f"{v:,} B",
    "B.2": lambda v: f"{v:,.2f} B",  # a float an engine computes and prints so (SGLang's bytes_per_full_token)
    "tokens": lambda v: f"{v:,} tokens",
    "count": lambda v: f"{v:,}",
    "number": lambda v: f"{v:g}",
    "ratio": lambda v: f"{v:.2f}",
    "times": lambda v: f"{v:.2f}x",
    "a x b": lambda v: f"{v[0]} x {v[1]}",
    "a / b": lambda v: f"{v[0]:,} / {v[1]}",
    "cells in streams": lambda v: f"{v[0]:,} cells ({plural(v[1], 'stream')} of {v[2]:,})",
    "cells per stream": lambda v: f"{v:,} cells per stream",
    "B full + B SWA x ratio": lambda v: f"{v[0]:,} B full + {v[1]:,} B SWA x {v[2]:g}",
    "sglang tokens, K GiB": lambda v: f"#tokens: {v[0]:,}, K size: {v[1] / GIB:.2f} GB (GiB)",
    "sglang GB": lambda v: f"{v / GIB:.2f} GB (GiB)",
    "dsv4 pools": lambda v: ", ".join(f"{k}={n:,}" for k, n in zip(("full", "swa", "c4", "c128", "c4_state",
                                                                     "c128_state"), v)),
    "rows x entries int32": lambda v: f"{v[0]:,} x {v[1]:,} x 4 B = {v[2] / GIB:,.2f} GiB",
    # weights as an engine loads them: the checkpoint's bytes and what loading adds (padding, repacking, tables)
    "checkpoint + loading": lambda v: f"{(v[0] + v[1]) / GIB:.2f} GiB = {v[0] / GIB:.2f} checkpoint "
                                      f"{'+' if v[1] >= 0 else '-'} {abs(v[1]) / GIB:.2f} loading",
}


def _capped(plan: Plan) -> str:
    """Why the longest context is what it is, where not memory: the model's own limit, or the max_model_len asked
    for (which may be past or short of the model's)."""
    why = {"model": " (model limit)", "max_model_len": f" ({arg('max_model_len')})"}
    return why.get(plan.max_context_limited_by, "")


def format_figure(fig) -> str:
    """An engine's figure as people read it (see FIGURE_FORMATS)."""
    return FIGURE_FORMATS[fig.unit](fig.value)


def format_warning(warning) -> str:
    """A plan's warning (kvplan.planning.plan.PlanWarning) as people read it: its values in their units."""
    return warning.message.format(*(FIGURE_FORMATS[u](v) for v, u in zip(warning.values, warning.units)))


def plan_warnings(plan: Plan) -> list[str]:
    """The plan's warnings proper (what may make a figure wrong or asks the user to act), as people read them."""
    return [format_warning(w) for w in plan.warnings if not w.note]


def plan_notes(plan: Plan) -> list[str]:
    """The plan's assumptions at stated defaults (PlanWarning.note), as people read them."""
    return [format_warning(w) for w in plan.warnings if w.note]


def checkpoint_kv_state(plan: Plan, model) -> str | None:
    """What the plan's KV cache is to the cache its checkpoint declares (kvplan.engines.checkpoint_kv): "followed"
    (the engine's 'auto' takes the declared cache), "not followed" ('auto' keeps the model dtype), "asked" (a dtype
    named, the declared one or not); None where the checkpoint declares none."""
    if getattr(model, "checkpoint_kv", None) is None:
        return None
    return next((KV_TOPICS[w.topic] for w in plan.warnings if w.topic in KV_TOPICS), "asked")


def checkpoint_kv_notes(pairs) -> list[str]:
    """Each distinct (model, checkpoint KV warning) of these (plan, model) pairs once, in their order: what a
    ranking of many plans says of the caches checkpoints declare, where it prints no plan's own warnings."""
    seen: dict = {}
    for plan, model in pairs:
        declared = getattr(model, "checkpoint_kv", None) is not None
        for w in plan.warnings:
            if (declared and w.topic in KV_TOPICS) or w.topic == KV_ENGINE_AUTO:
                seen.setdefault(f"{plan.model}: {format_warning(w)}", None)
    return list(seen)


def engine_to_dict(res) -> dict:
    """An EngineResult's engine part for --json: its settings, figures (raw and as printed), notes."""
    cap = res.capacity
    return {"name": cap.engine, "version": cap.version, "settings": res.settings,
            "kv_memory_bytes_per_gpu": cap.kv_memory_bytes, "tokens": cap.tokens,
            "max_concurrency": cap.max_concurrency, "blocks": cap.blocks, "block_size": cap.block_size,
            "max_running": cap.max_running,
            # how a release that is not a plain X.Y.Z was read (a development build: the release before)
            **({"version_read": read} if (read := reading(cap.engine, cap.version)) else {}),
            # requests of the context the pool holds while decoding, where not max_concurrency (the engine's printed)
            "resident_concurrency": cap.resident,
            # what the plan's pool and request tokens are where not what memory holds (llama.cpp: -c's cells)
            **({"answer_labels": dict(zip(("kv_pool_tokens_per_deployment", "request_tokens_at_context"),
                                          cap.answer_labels))} if cap.answer_labels else {}),
            "lines": {f.label: format_figure(f) for f in cap.lines},
            "figures": [{"label": f.label, "value": list(f.value) if isinstance(f.value, tuple) else f.value,
                         "unit": f.unit} for f in cap.lines],
            "notes": list(cap.notes)}


def run_dtype(name: str, gpu) -> str:
    """A 16-bit dtype as `gpu` runs it: bf16 is fp16 (the same 2 bytes) where the GPU has no BF16 math (its profile's
    `bf16: false`, else its compute capability: hardware.facts.bf16_fact). Volta, Turing: engines cast a bf16
    checkpoint to fp16; vLLM refuses bfloat16 below compute capability 8.0 (vllm 0.8.0 wheel,
    v1/worker/gpu_worker.py L303)."""
    return "fp16" if name == "bf16" and not runs_bf16(gpu) else name


def effective_weight_dtype(plan: Plan, model) -> str:
    return plan.request.weight_dtype or model.quantization.method


def plan_to_dict(plan: Plan, model, nested: bool = True, rank: int | None = None) -> dict:
    """The plan's figures for --json, one key per figure. `rank` (a row of a ranking) comes first
    when given; `nested=False` leaves out the nested breakdowns, `layer_kinds` and the speculative
    report (a row of a table has no place for them). A sweep makes 100k rows: each is one dict
    display, with nothing merged."""
    r = plan.request
    # The part of a sequence that does not grow with the context (recurrent, linear-attention and
    # convolution states), per stage; each stage's profile worked its figure out once.
    states = [stage.profile.state_bytes_per_sequence() for stage in plan.stages]
    used, pool = plan.kv_used_bytes_per_gpu, plan.state_pool_bytes_per_gpu
    row = {
        "rank": rank,
        "model": plan.model, "gpu": plan.gpu,
        "gpus": plan.deployment.gpus, "tp": plan.deployment.tp, "pp": plan.deployment.pp,
        "dp": plan.deployment.dp, "ep": plan.deployment.ep, "dcp": plan.deployment.dcp,
        "context": r.context, "batch": r.batch,
        "weight_dtype": effective_weight_dtype(plan, model),
        "kv_dtype": (r.kv_dtype.name if r.kv_dtype else model.dtype),
        "checkpoint_kv": checkpoint_kv_state(plan, model),  # the declared KV cache: followed, not followed, asked
        "block_size": r.block_size,
        "gpu_memory_utilization": r.gpu_memory_utilization,
        "usable_memory_bytes_per_gpu": plan.usable_memory_bytes,
        "budget_bytes_per_gpu": plan.budget_bytes,
        "weight_bytes": plan.weight_bytes,
        "weight_bytes_per_gpu": plan.weight_bytes_per_gpu,
        "overhead_bytes_per_gpu": plan.overhead_bytes_per_gpu,
        "overhead_is_estimate": r.overhead_bytes is None and r.kv_cache_memory_bytes is None,
        "kv_share": plan.kv_share,  # of what weights, overhead and adapters leave, the share the engine keeps
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": plan.kv_bytes_per_token_per_gpu,
        "kv_bytes_per_sequence": plan.kv_bytes_per_sequence,
        "kv_bytes_per_sequence_per_gpu": plan.kv_bytes_per_sequence_per_gpu,
        "state_bytes_per_sequence": plan.deployment.tp * sum(states),
        "state_bytes_per_sequence_per_gpu": max(states, default=0),
        "kv_memory_bytes_per_gpu": plan.kv_memory_bytes_per_gpu,  # less a state pool (SGLang's hybrids)
        "state_pool_bytes_per_gpu": pool, "token_pool_bytes_per_gpu": plan.token_pool_bytes_per_gpu,
        "pooled_state_bytes_per_sequence_per_gpu": plan.pooled_state_bytes_per_sequence_per_gpu,
        "kv_used_bytes_per_gpu": used, "free_bytes_per_gpu": plan.free_bytes_per_gpu,
        "above_budget_bytes_per_gpu": plan.above_budget[1] if plan.above_budget else 0,  # SGLang's request slots
        "kv_cache_tokens": plan.kv_cache_tokens,  # = kv_pool_tokens_per_deployment (kept for old readers)
        "kv_pool_tokens_per_deployment": plan.kv_cache_tokens,
        "request_tokens_at_context": plan.max_concurrency * r.context, "max_concurrency": plan.max_concurrency,
        "max_context": plan.max_context, "max_context_limited_by": plan.max_context_limited_by,
        "context_limit": plan.context_limit,
        "fits": plan.fits, "binds": plan.binds,
        "decode_step_seconds": plan.decode_step_seconds,
        "decode_tokens_per_second": plan.decode_tokens_per_second,
        "decode_tokens_per_second_per_request": (1 / plan.decode_step_seconds) if plan.decode_step_seconds else 0.0,
        "speculative": _speculative(plan, model) if nested else None,
        "warnings": plan_warnings(plan), "notes": plan_notes(plan),
    }
    if r.lora is not None:  # the adapters the engine keeps room for, and what it reserves per GPU
        row["lora"], row["lora_bytes_per_gpu"] = r.lora.text, r.lora_bytes
    if nested and plan.above_budget:  # what the engine allocates above its budget, and the room there (SGLang)
        row["above_budget"] = dict(zip(("what", "bytes_per_gpu", "room_bytes_per_gpu"), plan.above_budget))
    if rank is None:
        del row["rank"]
    if nested and model.quantization.notes:  # what reading the checkpoint's quantization noticed (stderr's notes)
        row["quantization_notes"] = list(model.quantization.notes)
    return _with_layer_kinds(row, plan) if nested else row


def _binding_dict(plan: Plan) -> dict:
    """The stage the memory table shows (Plan.binding_stage): its layers [first, last] and its GPU's figures, which
    add up (kv_used_bytes_per_gpu and free_bytes_per_gpu at the top level are this stage's too); token_pool_layers:
    beside a state pool, the stage whose cell the token pool and those two count in (Plan.token_pool_stage)."""
    stage, cell = plan.binding_stage, plan.token_pool_stage
    first, end = stage.layers if stage is not None else (0, 0)
    pool = [cell.layers[0], cell.layers[1] - 1] if cell is not None else [0, -1]
    return {"layers": [first, end - 1], "token_pool_layers": pool, "weight_bytes_per_gpu": plan.binding_weight_bytes,
            "kv_memory_bytes_per_gpu": plan.binding_kv_memory_bytes,
            "kv_used_bytes_per_gpu": plan.kv_used_bytes_per_gpu, "free_bytes_per_gpu": plan.free_bytes_per_gpu}


def _with_layer_kinds(row: dict, plan: Plan) -> dict:
    """`row` with `layer_kinds` right after the states it splits, and at its end `binding_stage`: the memory table's
    column, one stage's GPU (the binding one under pipeline stages)."""
    out = {}
    for key, value in row.items():
        out[key] = value
        if key == "state_bytes_per_sequence_per_gpu":
            out["layer_kinds"] = layer_kinds(plan)
    out["binding_stage"] = _binding_dict(plan)
    return out


def _speculative(plan: Plan, model):
    if getattr(model, "speculative", None) is None:
        return None

    return report(model, plan)


def layer_kinds(plan: Plan) -> list[dict]:
    """Per kind of layer: its layers, the bytes a token adds and the bytes one `context`-token
    sequence holds, states included (all ranks, as the plan's engine allocates pages). The kinds'
    states, worked out layer by layer, add up to plan_to_dict's state_bytes_per_sequence
    (tests/test_reports.py checks it over the catalog).
    """
    copies, ctx = plan.deployment.tp, plan.request.context
    kinds = {}
    for stage in plan.stages:
        prof = stage.profile
        for spec, n in prof.groups:
            token = spec.token_bytes(prof.kv_dtype, prof.tp)
            state = prof.state_bytes(spec)
            held = prof.rules.tokens_allocated(spec, ctx, prof.block_size) if token else 0
            row = kinds.setdefault(spec.kind, {"kind": spec.kind, "layers": 0, "kv_bytes_per_token": 0,
                                               "state_bytes_per_sequence": 0, "bytes_per_sequence": 0})
            row["layers"] += n
            row["kv_bytes_per_token"] += copies * n * (token if not spec.bounded else 0) // spec.compress_ratio
            row["state_bytes_per_sequence"] += copies * n * state
            row["bytes_per_sequence"] += copies * n * (held * token + state)
    return list(kinds.values())


def _memory_rows(plans: list[Plan]) -> list:
    """The memory table's rows: (label, the cell of a plan)."""
    first = plans[0]
    rows = [
        ("usable memory", lambda p: gib(p.usable_memory_bytes)),
        ("× utilisation", lambda p: f"{p.request.gpu_memory_utilization:g} → {gib(p.budget_bytes)}"),
        ("− weights", lambda p: gib(p.binding_weight_bytes)),
        ("− overhead" + (" (est.)" if first.request.overhead_bytes is None else ""),
         lambda p: gib(p.overhead_bytes_per_gpu)),
        ("= KV cache", lambda p: gib(p.binding_kv_memory_bytes)),
        ("− batch × context", lambda p: gib(p.kv_used_bytes_per_gpu)),
        ("= free", lambda p: gib(p.free_bytes_per_gpu)),
    ]
    if any(p.state_pool_bytes_per_gpu for p in plans):  # a recurrent-state pool out of the KV cache (SGLang)
        rows[5:5] = [("− state pool", lambda p: gib(p.state_pool_bytes_per_gpu)),
                     ("= token pool", lambda p: gib(p.token_room_bytes_per_gpu))]
    if first.request.kv_cache_memory_bytes is not None:  # the budget given beside what else the GPU holds
        given = (f"KV cache ({arg('kv_cache_memory')})", lambda p: gib(p.binding_kv_memory_bytes))
        rows = [*rows[:1], *rows[2:4], given, *rows[5:]]
    elif first.request.lora is not None:  # the engine's adapter slots, its own row before the KV cache
        rows.insert(4, (f"− LoRA {first.request.lora.text}", lambda p: gib(p.request.lora_bytes)))
    if any(p.kv_share != 1 for p in plans):  # the engine keeps a share of what is left (TensorRT-LLM's fraction)
        rows.insert(next(i for i, r in enumerate(rows) if r[0] == "= KV cache"),
                    ("× free fraction", lambda p: f"{p.kv_share:g} → {gib(p.binding_kv_memory_bytes)}"))
    if any(p.above_budget for p in plans):  # what the engine allocates above its budget (SGLang's request slots)
        at = next((i for i, r in enumerate(rows) if r[0] == "× utilisation"), 0) + 1
        rows.insert(at, (f"  above it: {next(p.above_budget[0] for p in plans if p.above_budget)}",
                         lambda p: f"{gib(p.above_budget[1])} of {gib(p.above_budget[2])}" if p.above_budget else "–"))
    if any(len(p.stages) > 1 for p in plans):  # under pipeline stages the column is one stage's GPU: say which
        rows.append(("stage shown (binds)", _stage_cell))
    return rows


def _stage_cell(p: Plan) -> str:
    """The layers of the stage the memory column shows (Plan.binding_stage), and beside a state pool the stage whose
    cell the token pool, used and free rows count in where it is another (Plan.token_pool_stage); 'all' with one."""
    stage, cell = p.binding_stage, p.token_pool_stage
    if stage is None or len(p.stages) <= 1:
        return "all layers"
    pool = f" (token pool: {layer_span(cell.layers)})" if cell is not stage else ""
    return f"layers {layer_span(stage.layers)}{pool}"


def layer_span(layers) -> str:
    """A stage's or rank's layers, held as the half-open (first, end), as the tables and notes print them: "31-60"."""
    first, end = layers
    return f"{first}-{end - 1}"


def _packed(width: int, parts: list[str]) -> str:
    """Rich-markup parts joined by ' · ', a new line before a part that would pass `width`, so a terminal never
    wraps inside one ('KV' on one line, its dtype on the next)."""
    lines, line, used = [], "", 0
    for part in parts:
        n = Text.from_markup(part).cell_len
        if line and used + 3 + n > width:
            lines.append(line)
            line, used = "", 0
        line, used = (f"{line} · {part}", used + 3 + n) if line else (part, n)
    return "\n".join([*lines, line])


def _dtype_parts(plan: Plan, model, gpu) -> list[str]:
    """The header's 'weights ...' and 'KV ...' as the GPU runs them (run_dtype), saying where that is not the
    checkpoint's bf16."""
    weights = effective_weight_dtype(plan, model)
    kv = plan.request.kv_dtype.name if plan.request.kv_dtype else model.dtype
    parts = [f"weights {run_dtype(weights, gpu)}", f"KV {run_dtype(kv, gpu)}"]
    if "bf16" not in (weights, kv):
        return parts
    bf16, basis = bf16_fact(gpu)
    if not bf16:
        return [*parts, "bf16 run as fp16: no bf16 on this GPU" + (f" ({basis})" if basis else "")]
    known = str(getattr(gpu, "vendor", "")).lower() != "unknown"  # not a GPU known only by its memory
    return [*parts, f"bf16 {basis}"] if known and basis.startswith("assumed") else parts


def dtype_words(plan: Plan, model, gpu) -> str:
    """'weights X, KV Y' as the header of `fit` says them (the GPU's run dtypes), for a command's assumptions line."""
    return ", ".join(_dtype_parts(plan, model, gpu)[:2])


def _per_token(p: Plan) -> str:
    """The cache's growth per token; a model whose every layer is windowed or a fixed state grows by 0 past its
    windows, which reads as a free cache unless said (StarCoder2-7B at 16k: every layer a 4,096-token window)."""
    if p.kv_bytes_per_token == 0 and p.kv_bytes_per_sequence:
        return "0 B (fixed per sequence)"
    return human_bytes(p.kv_bytes_per_token)


def _pool_tokens(p) -> str:
    """The deployment's KV pool tokens; with dp ranks, each its own engine printing its own pool, as D x one's."""
    dp = p.deployment.dp
    return f"{p.kv_cache_tokens:,}" + (f" ({dp} × {p.kv_cache_tokens // dp:,})" if dp > 1 else "")


def render_plans(console, plans: list[Plan], model, gpu, titles: list[str], calibrated: list | None = None,
                 labels: tuple[str, str] | None = None) -> None:
    """A table per question: the memory budget line by line, then the answers; `calibrated`: each plan's
    decode step under kvplan.speed's calibrated model (shown above the roofline's lower bound); `labels`: the pool
    and tokens rows' words where an engine's pool is not what memory holds (Capacity.answer_labels)."""

    first = plans[0]
    console.print(_packed(console.width, [
        f"[bold]{plain(model.name)}[/] on [bold]{plain(gpu.name)}[/]", f"context {human_tokens(first.request.context)}",
        f"batch {first.request.batch}", *_dtype_parts(first, model, gpu)]))
    budget = fitted_table(title="Memory per GPU", title_justify="left", show_edge=False)
    budget.add_column("")
    for t in titles:
        budget.add_column(t, justify="right")
    for label, fn in _memory_rows(plans):
        budget.add_row(label, *[fn(p) for p in plans])
    console.print(budget)
    # every row answers for the whole deployment (all its GPUs); the memory table above is one GPU's
    answers = fitted_table(title="Answers per deployment", title_justify="left", show_edge=False)
    answers.add_column("")
    for t in titles:
        answers.add_column(t, justify="right")
    pool_label, use_label = labels or ("KV pool tokens (as engines count)", "tokens requests can use")
    answer_rows = [
        ("GPUs (layout)", lambda p: f"{p.deployment.gpus} ({layout_text(p.deployment)})"),
        ("fits", lambda p: "[green]yes[/]" if p.fits else f"[red]no ({p.binds})[/]"),
        ("KV per token (all its GPUs)", _per_token),
        ("KV per sequence (all its GPUs)", lambda p: human_bytes(p.kv_bytes_per_sequence)),
        # the pool counted as an engine prints it (a hybrid's windowed layers hold fewer), then what the requests
        # that fit at the context use of it: neither is summed over GPUs (every tp rank holds its share of each);
        # dp ranks are engines of their own, so the deployment's pools are summed and one's is shown beside them
        (pool_label, _pool_tokens),
        (f"{use_label} @ {human_tokens(first.request.context)}",
         lambda p: f"{p.max_concurrency * p.request.context:,}"),
        (f"max concurrency @ {human_tokens(first.request.context)}", lambda p: f"{p.max_concurrency:,}"),
        (f"max context @ batch {first.request.batch}", lambda p: f"{p.max_context:,}" + _capped(p)),
        # A plan that does not fit decodes nothing: no speed shown ("–"; --json keeps the roofline's figures)
        ("decode step (roofline)", lambda p: f"{p.decode_step_seconds * 1e3:,.1f} ms" if p.fits else "–"),
        ("decode tokens/s (batch)", lambda p: f"{p.decode_tokens_per_second:,.0f}" if p.fits else "–"),
    ]
    if calibrated:
        step = dict(zip(map(id, plans), calibrated))
        answer_rows[-2:] = [
            ("decode step (calibrated)", lambda p: f"{step[id(p)] * 1e3:,.1f} ms" if p.fits else "–"),
            ("decode tokens/s (calibrated)", lambda p: f"{p.request.batch / step[id(p)]:,.0f}" if p.fits else "–"),
            ("decode step (roofline, ≥)", lambda p: f"{p.decode_step_seconds * 1e3:,.1f} ms" if p.fits else "–"),
            ("decode tokens/s (roofline, ≤)", lambda p: f"{p.decode_tokens_per_second:,.0f}" if p.fits else "–"),
        ]
    for label, fn in answer_rows:
        answers.add_row(label, *[fn(p) for p in plans])
    console.print(answers)
