"""`--explain`: the KV formula with this model's own numbers plugged in, layer group by group.

It prints the arithmetic the seed articles teach (2 · L · H_kv · d_h · S · B · bytes) and shows
where a model departs from it: windows that cap S, an MLA latent with no x2, fixed states. The
slots per layer are the plan's own (the engine's rules), so the lines add up to the total.
"""

from __future__ import annotations

import re
import textwrap

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import arg
from kvplan.core.intmath import cdiv
from kvplan.model.layers import Kind, kv_heads_per_rank
from kvplan.readers.kv_heads import MHA_RULE
from kvplan.planning.layout import layout_text
from kvplan.planning.plan import Plan
from kvplan.core.units import gib, human_bytes, plural
from kvplan.planning.speculative import explain_line
from kvplan.report.text import layer_span, run_dtype


def _tokens_text(spec, S: int, held: int) -> str:
    if spec.kind == Kind.SLIDING:
        return f"min(S, window {spec.window:,}) = {held:,}"
    if spec.kind == Kind.CHUNKED:
        return f"min(S, chunk {spec.chunk:,}) = {held:,}"
    return f"S = {S:,}"


def _attention(spec, n, prof, tp, bstr, S):
    per_tok = prof.token_bytes(spec)
    held, slots = spec.tokens_held(S), prof.slots(spec, S)
    heads = kv_heads_per_rank(spec.num_kv_heads, tp)
    v = getattr(spec, "v_head_dim", 0) or spec.head_dim
    dims = f"({spec.head_dim} + {v})" if v != spec.head_dim else f"2 × {spec.head_dim}"
    return (f"  {n} {spec.kind} layers × {dims} × {heads} KV heads × {bstr} = {n * per_tok:,} B/token;"
            f" tokens held {_tokens_text(spec, S, held)} → {slots:,} in pages → {human_bytes(n * per_tok * slots)}")


def _mla(spec, n, prof, tp, bstr, S):
    per_tok, slots = prof.token_bytes(spec), prof.slots(spec, S)
    dcp = getattr(prof.rules, "dcp", 1)  # decode context parallel: every dcp-th token on this rank
    held = f"S = {S:,}" if dcp == 1 else f"S / dcp {dcp} = {cdiv(S, dcp):,} on this rank"
    if hasattr(spec, "indexer_bytes"):  # DSA: the latent's own packing, plus the indexer's fp8 keys
        pool = getattr(prof.rules, "dsa", None)  # an engine's own rows where its rules lay them out (SGLang's)
        latent, keys = (pool.latent_bytes(spec, prof.kv_dtype), pool.indexer_bytes(spec)) if pool is not None else \
            (spec.latent_bytes(prof.kv_dtype), spec.indexer_bytes())
        what = f"({latent:,} B latent + {keys} B indexer keys)"
    else:
        what = f"({spec.kv_lora_rank} latent + {spec.qk_rope_head_dim} rope) × {bstr}"
    return (f"  {n} MLA layers × {what}"
            f" = {n * per_tok:,} B/token (one latent: no ×2, not split by tp); {held} → {slots:,} in pages"
            f" → {human_bytes(n * per_tok * slots)}")


def _state(spec, n, prof, tp, bstr, S):
    state = prof.state_dtype
    values = f"{spec.state_elements(tp):,} state values × {state.bytes_per_element:g} B"
    if spec.ssm_dtype:  # the recurrent part in its own type (fp32): both factors, so the product is the total
        conv, ssm = spec.state_parts(tp)
        own = canonical_kv_dtype(spec.ssm_dtype, "bf16")
        values = (f"({conv:,} conv values × {state.bytes_per_element:g} B + {ssm:,} recurrent values × "
                  f"{own.bytes_per_element:g} B ({own.name}))")
    return (f"  {n} {spec.variant} layers × {values} = {human_bytes(n * prof.state_bytes(spec))} per sequence, "
            "whatever S")


def _pooled_state(spec, n):
    """A state layer whose states an engine keeps in a pool of slots (its own slot count and dtypes): the bytes a
    running request holds are the pool's (the 'State slots' line), not one state in kvplan's dtype."""
    return f"  {n} {spec.variant} layers: states in the engine's state pool (slots a running request holds: below)"


def _none(spec, n, prof, tp, bstr, S):
    return f"  {n} layers without a cache"


LINE = {Kind.FULL: _attention, Kind.SLIDING: _attention, Kind.CHUNKED: _attention, Kind.MLA: _mla,
        Kind.STATE: _state, Kind.NONE: _none}


def _concurrency_lines(plan: Plan, S: int, kv: int, seq: int) -> list[str]:
    """The max-concurrency arithmetic: a state pool's (its tokens bind), each pipeline stage's own, dp ranks', one."""
    dp = plan.deployment.dp
    if plan.state_pool_bytes_per_gpu:  # the states in a pool of their own (SGLang's hybrids): the tokens bind
        return _pooled_lines(plan, S)
    if seq and len(plan.stages) > 1:
        return _staged_concurrency(plan, S)
    if seq and dp > 1:
        return [f"Max concurrency at {S:,} tokens = {dp} dp ranks, each its own requests × floor({kv:,} / {seq:,})"
                f" = {plan.max_concurrency:,}"]
    if seq:
        return [f"Max concurrency at {S:,} tokens = floor({kv:,} / {seq:,}) = {plan.max_concurrency:,}"]
    return []


def _staged_concurrency(plan: Plan, S: int) -> list[str]:
    """Max concurrency under pipeline stages: each stage's GPU holds its own layers' share of every request in its
    own KV room, so the stage with the fewest requests binds (the memory table's column, Plan.binding_stage). The
    plan's per-GPU extremes (the least KV room, the largest sequence) may be two different stages: their quotient
    would understate the answer (DeepSeek-V3 at pp 2: the 31-layer stage has more room than the 30-layer one)."""
    per = [(s.layers, s.kv_memory_bytes, s.profile.sequence_bytes(S)) for s in plan.stages]
    held = [max(0, kv) // seq for _, kv, seq in per if seq]
    terms = [f"layers {layer_span(span)}: floor({kv:,} / {seq:,}) = {max(0, kv) // seq:,}" for span, kv, seq in per
             if seq]
    dp = plan.deployment.dp
    each = f"{dp} dp ranks, each its own requests × " if dp > 1 else ""
    fewest = min(held) * dp
    sums = (f"{min(held):,} × {dp} = " if dp > 1 else "") + f"{fewest:,}"
    end = sums if fewest == plan.max_concurrency else f"{sums}; by the engine's own slot rule {plan.max_concurrency:,}"
    return [f"Max concurrency at {S:,} tokens = {each}the fewest over {len(per)} pipeline stages "
            "(each stage's GPU holds its layers' share of every request):", *(f"    {t}" for t in terms),
            f"    = {end}"]


def _shown(plan: Plan) -> tuple:
    """(profile, one sequence, KV memory, weights, where) of the GPU the lines describe: under pipeline stages the
    binding stage's (Plan.binding_stage, the memory table's column), named, so its layers, its sequence and its
    room add up; the plan's per-GPU extremes may be two stages' (DeepSeek-V3 at pp 2: the largest sequence is the
    31-layer stage's, the least room the 30-layer one's)."""
    stage = plan.binding_stage
    if len(plan.stages) <= 1 or stage is None:
        return (plan.stages[0].profile, plan.kv_bytes_per_sequence_per_gpu, plan.kv_memory_bytes_per_gpu,
                plan.weight_bytes_per_gpu, "")
    return (stage.profile, stage.profile.sequence_bytes(plan.request.context), plan.binding_kv_memory_bytes,
            plan.binding_weight_bytes, f" of layers {layer_span(stage.layers)}")


def explain_lines(plan: Plan, model, gpu=None) -> list[str]:
    """--explain's arithmetic; the cache dtype named as `gpu` runs it (bf16 is fp16 where it has no BF16 math, as
    the header says), the bytes the same."""
    r = plan.request
    prof, seq, kv, weights, where = _shown(plan)
    tp = plan.deployment.tp
    b = prof.kv_dtype
    name = b.name if gpu is None else run_dtype(b.name, gpu)
    bstr = f"{b.bytes_per_element:g} B ({name})"
    S = r.context

    lines = [f"KV cache of {model.name}, per GPU{where and where + ', the stage that binds,'} "
             f"({layout_text(plan.deployment)}), {name} cache, "
             f"block {plural(r.block_size, 'token')}:"]
    parts = [(part, n) for spec, n in prof.groups for part in (spec.parts() if hasattr(spec, "parts") else (spec,))]
    pooled = plan.state_pool_bytes_per_gpu > 0  # the states are slots of the engine's own pool (SGLang's hybrids)
    lines += [_pooled_state(spec, n) if pooled and spec.kind == Kind.STATE
              else LINE[spec.kind](spec, n, prof, tp, bstr, S)
              for spec, n in parts]  # Falcon-H1: both halves of a layer
    if MHA_RULE in getattr(model, "notes", ()):  # the heads above were not the config's word
        lines.append(f"  ({MHA_RULE})")
    if getattr(model, "speculative", None) is not None:
        lines.append(explain_line(model, plan))
    if pooled:
        held = plan.pooled_state_bytes_per_sequence_per_gpu
        lines.append(f"  state slots a running request holds, as the engine sizes them (its slot count and state "
                     f"dtypes): {held:,} B ({human_bytes(held)})")
    lines.append(f"One sequence of {S:,} tokens: {seq:,} B ({gib(seq)}) per GPU{where}")
    if r.kv_cache_memory_bytes is None:
        rest = (f"{gib(plan.usable_memory_bytes)} × {r.gpu_memory_utilization:g}"
                f" − weights {gib(weights)} − overhead {gib(plan.overhead_bytes_per_gpu)}"
                + (f" − LoRA {r.lora.text} {gib(r.lora_bytes)}" if r.lora is not None else ""))
        share = f"({rest}) × free fraction {plan.kv_share:g}" if plan.kv_share != 1 else rest
        lines.append(f"KV memory per GPU{where} = {share} = {gib(kv)}")
    else:
        lines.append(f"KV memory per GPU{where} = {arg('kv_cache_memory')} = {gib(kv)}")
    lines += _concurrency_lines(plan, S, kv, seq)
    lines.append(f"Max context at batch {r.batch} = {plan.max_context:,} tokens (limited by "
                 f"{plan.max_context_limited_by})")
    if plan.binds == "context limit":
        lines.append(f"Does not fit: context {r.context:,} > {plan.context_limit_name} {plan.context_limit:,} tokens"
                     + (f" ({model.context_rule})" if getattr(model, "context_rule", "")
                        and not plan.context_limit_asked
                        else "")
                     + ": the limit binds, not memory")
    elif plan.binds == "memory":
        lines.append(f"Does not fit: memory binds ({plan.max_concurrency:,} of {r.batch:,} requests of {r.context:,} "
                     "tokens fit in the KV memory)")
    lines.append(f"Decode step ≥ (weights read + batch × KV read) / bandwidth = {plan.decode_step_seconds * 1e3:,.2f} "
                 f"ms at {plan.bandwidth_bytes_per_s / 1e12:g} TB/s → {plan.decode_tokens_per_second:,.0f} tokens/s "
                 "for the batch")
    return lines


def _pooled_lines(plan: Plan, context: int) -> list[str]:
    """Concurrency where the engine keeps the states in a pool allocated up front (kvplan.planning.plan.PooledStates):
    the token pool over one sequence's tokens, and the engine's running cap where it binds."""
    pool, tokens = plan.token_pool_bytes_per_gpu, plan.kv_used_bytes_per_gpu // max(1, plan.request.batch)
    lines = [f"Token pool per GPU = KV memory {gib(plan.kv_memory_bytes_per_gpu)} − state pool "
             f"{gib(plan.state_pool_bytes_per_gpu)} (slots allocated up front, each request's among them) = "
             f"{gib(pool)}"]
    if plan.deployment.dp > 1 or not tokens:
        return lines
    by_tokens = pool // tokens
    lines.append(f"Max concurrency at {context:,} tokens = floor({pool:,} / {tokens:,}) = {by_tokens:,}"
                 + (f", capped at {plan.max_concurrency:,} by the engine's running requests"
                    if plan.max_concurrency < by_tokens else ""))
    return lines


# Where an --explain line may break: before an operator of its arithmetic, after a clause. Never inside a figure
# ("131,072 B/token", "4.00 GiB"): a terminal left to wrap a long line cuts anywhere.
_BREAK = re.compile(r"(?= (?:=|→|−|\+|×|≥) )|(?<=[;:,] )")


def wrapped(lines: list[str], width: int = 80) -> list[str]:
    """`lines` (explain_lines) each fitted to `width` columns where it can be: broken before an operator or after a
    clause, its continuation 4 columns in from its own indent; a piece longer than a line alone breaks at spaces."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        more = " " * (len(line) - len(line.lstrip()) + 4)
        pieces = [p for p in _BREAK.split(line) if p]
        current = pieces[0]
        for piece in pieces[1:]:
            if len(current.rstrip()) + len(piece.rstrip()) <= width:
                current += piece
            else:
                out += textwrap.wrap(current.rstrip(), width, subsequent_indent=more, break_long_words=False,
                                     break_on_hyphens=False) or [current]
                current = more + piece.lstrip()
        out += textwrap.wrap(current.rstrip(), width, initial_indent="", subsequent_indent=more,
                             break_long_words=False, break_on_hyphens=False) or [current]
    return out
