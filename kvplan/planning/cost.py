"""What a request's context costs a plan's stages, and the answers that follow from it by division and by search.

The GPU-free part (`context_cost`: a sequence's bytes per stage, a decode step's reads, a token's growth) is worked
out once per request and model in a sweep; `usage` divides each stage's KV memory by it, and `paged_answers` gives
the planner's own answers (whole pages, concurrency by division, the longest context by search) for an engine with
no rule of its own. `stages` are kvplan.planning.plan's Stages (or, for `context_cost`, StagePreps) and `req` its
Request: both only read here, so this module does not import the one that defines them.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from kvplan.core.search import largest_fitting


# Usage and Answers are made once per plan of a sweep: named tuples, the cheapest typed records.
class Usage(NamedTuple):
    """What the plan's context costs, over the stages: per GPU the worst stage, totals summed."""

    sequence_bytes: tuple[int, ...]  # one sequence per stage, allocated slots and states
    step_bytes: int  # one decode step of the batch reads this much, stage after stage
    growth_bytes_per_token: int  # summed over stages
    growth_bytes_per_token_per_gpu: int  # the worst stage
    weight_bytes_per_gpu: int
    kv_memory_bytes_per_gpu: int
    room: bool  # every stage has some KV memory
    concurrency: float  # sequences of the context every stage holds, by division (inf: they cost nothing)
    token_slots: int  # token slots of every caching layer the tightest stage holds, in whole blocks


class Answers(NamedTuple):
    """An engine's answers for one plan (before the verdict rules every engine shares)."""

    kv_cache_tokens: int
    max_concurrency: int
    max_context: int
    fits: bool


class ContextCost(NamedTuple):
    """The part of Usage no GPU changes: what the context costs the stages (a sweep works it out
    once per request and model, not once per GPU)."""

    sequence_bytes: tuple[int, ...]
    step_bytes: int
    growth_bytes_per_token: int
    growth_bytes_per_token_per_gpu: int
    weight_bytes_per_gpu: int
    slot_bytes_per_token: tuple[int, ...]


def context_cost(stages, req) -> ContextCost:
    """What `req`'s context costs `stages` (Stages or StagePreps: their profiles and weights)."""
    ctx, batch = req.context, req.batch
    seqs, slot = [], []
    step = growth_sum = 0
    growth_max = weight_max = None
    for s in stages:
        prof = s.profile
        seqs.append(prof.sequence_bytes(ctx))
        slot.append(prof.slot_bytes_per_token())
        # Each decode step reads this rank's weights and the batch's cached tokens, stage after stage.
        step += s.weight_read_bytes + batch * prof.sequence_bytes(ctx, paged=False)
        growth = prof.growth_bytes_per_token()
        growth_sum += growth
        growth_max = growth if growth_max is None else max(growth_max, growth)
        weight_max = s.weight_bytes if weight_max is None else max(weight_max, s.weight_bytes)
    return ContextCost(tuple(seqs), step, growth_sum, growth_max, weight_max, tuple(slot))


def usage(stages, req, cost: ContextCost | None = None) -> Usage:
    """One pass over the stages (this runs once per plan of a sweep, so it is one explicit loop);
    `cost`: context_cost(stages, req) when the caller already has it."""
    if cost is None:
        cost = context_cost(stages, req)
    kv_min = None
    conc = slots = math.inf
    for s, seq, slot in zip(stages, cost.sequence_bytes, cost.slot_bytes_per_token):
        kv = s.kv_memory_bytes
        kv_min = kv if kv_min is None else min(kv_min, kv)
        conc = min(conc, _div(kv, seq))
        slots = min(slots, _div(kv, slot))
    slots = int(slots // req.block_size * req.block_size) if slots < math.inf else 0
    return Usage(cost.sequence_bytes, cost.step_bytes, cost.growth_bytes_per_token, cost.growth_bytes_per_token_per_gpu,
                 cost.weight_bytes_per_gpu, kv_min, kv_min > 0, conc, slots)


def _div(memory: int, cost: int) -> float:
    if memory <= 0:
        return 0
    return memory // cost if cost > 0 else math.inf


def paged_answers(stages, use: Usage, req, model_limit: int, max_context: int | None = None) -> Answers:
    """The planner's own answers: whole pages, concurrency by division, the longest context by search
    (or `max_context` when the caller already knows it)."""
    if max_context is None:
        max_context = paged_max_context(stages, req.batch, model_limit)
    return Answers(use.token_slots, int(use.concurrency), max_context, use.room and use.concurrency >= req.batch)


def paged_max_context(stages, batch: int, model_limit: int) -> int:
    """Longest context for `batch` sequences on every stage, capped by the model's own limit."""
    def fits(n: int) -> bool:
        return all(batch * s.profile.sequence_bytes(n) <= s.kv_memory_bytes for s in stages)

    return max(0, largest_fitting(fits, model_limit))
