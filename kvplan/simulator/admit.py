"""The engines' own admission rules in the step-by-step simulator (kvplan.simulator.engine, paged pool).

The rules are kvplan.engines.admission's (read there from each engine's source); here they are applied to the
simulator's pool, in bytes. Functions of the engine (`engine` is a kvplan.simulator.engine.Engine whose `rule` is
not vLLM's on-demand one):

* RESERVE_RULE (TensorRT-LLM's GUARANTEED_NO_EVICT): `reserved` (the run's `State`, `engine.ad`) is the sum of
  every running request's reservation, its pages for prompt + output less the shared prefix pages it references
  (those are in the cache's active bytes, once). A request is admitted when reserved + active + its whole
  prompt + output in pages fit in the pool (the prefix it would share counted too: TensorRT-LLM's pending request
  has no blocks yet); each request's pages never exceed its reservation, so decode never runs short and nothing is
  preempted. STATIC_BATCH: the same, tried only at a step where no request decodes.
* RATIO_RULE (SGLang): a running request counts, beyond the pages it holds, min(remaining output, clip) x
  new_token_ratio tokens (a request still in prefill: the rest of its prompt and its clipped output in full, more
  than SGLang, which counts a chunked request's next chunk only, and its output on the last); one admitted in the
  same step its clipped max new tokens in full. The decoding requests' sum
  is kept as sum(end step) - n x step (each request's remaining output falls by one a step), those whose remaining
  output exceeds the clip apart. A refused admission sets `blocked` (SGLang's batch_is_full) until a request
  leaves. The ratio falls each decode step (`dsteps`) from its last reset.

SGLang's separate prefill and decode batches are kvplan.simulator.prefill_first's (the ratio falls on decode steps
only; with --enable-mixed-chunk the steps mix, vLLM's way, and a step with decoding requests counts as a decode step).
Left out of SGLang's rule: the chunked request's output counted only on its last chunk,
the hybrid sliding-window pool's second count (a window's tokens are priced at the unbounded layers' bytes per
token), page rounding of the prompt (SGLang's default page is one token), priority scheduling and the
ignore_eos path without a radix cache.
"""

from __future__ import annotations

from kvplan.engines.admission import RATIO_RULE, RESERVE_RULE
from kvplan.simulator import queue


class State:
    """One run's admission state, kept apart from the engine's own attributes (`engine.ad`: the engine's instance
    dictionary stays small enough for CPython's shared-key layout, whose lookups the hot loop depends on)."""

    __slots__ = ("adm", "rule", "tok", "reserved", "blocked", "dsteps", "ratio_base", "ratio_from", "sum_end",
                 "n_short", "long", "run_offset", "batch_offset")

    def __init__(self, adm, rule: str, tok: int):
        self.adm, self.rule, self.tok = adm, rule, tok
        self.reserved = 0  # RESERVE_RULE: the running requests' reservations, bytes
        self.blocked = False  # RATIO_RULE: SGLang's batch_is_full
        self.dsteps = 0  # decode steps so far
        self.ratio_base, self.ratio_from = (adm.init_ratio if adm is not None else 0.0), 0
        self.sum_end = self.n_short = 0  # decoding requests' end steps summed, and their count (clip apart)
        self.long = {}  # rid -> end step of decoding requests whose remaining output exceeds the clip
        self.run_offset = self.batch_offset = 0  # bytes counted for the running requests and this step's admissions


def ratio(engine) -> float:
    """SGLang's new_token_ratio now: its last value set (start, idle, retraction), less `decay` a decode step since,
    not below the floor."""
    k = engine.ad.dsteps - engine.ad.ratio_from
    if k <= 0:
        return engine.ad.ratio_base
    adm = engine.ad.adm
    return max(engine.ad.ratio_base - adm.decay * k, adm.min_ratio)


def idle(engine) -> None:
    """Nothing runs or waits: SGLang's idle check resets the ratio to its initial value."""
    engine.ad.ratio_base, engine.ad.ratio_from = engine.ad.adm.init_ratio, engine.ad.dsteps


def decoding(engine, seq, s: int, sign: int) -> None:
    """`seq` starts (sign 1, at step s) or stops (sign -1, s its start step) decoding: the remaining-output sums.
    Its remaining output before step t runs is end - t, end = s + output - generated at step s."""
    if sign > 0:
        end = s + seq.output - seq.generated
        if seq.output - seq.generated > engine.ad.adm.clip:
            engine.ad.long[seq.rid] = end
        else:
            engine.ad.sum_end += end
            engine.ad.n_short += 1
        return
    end = engine.ad.long.pop(seq.rid, None)
    if end is None:
        engine.ad.sum_end -= s + seq.output - seq.g0
        engine.ad.n_short -= 1


def running_offset(engine, s: int) -> int:
    """Bytes SGLang's PrefillAdder counts for the running requests beyond the pages they hold, before step s."""
    adm, clip = engine.ad.adm, engine.ad.adm.clip
    rem = engine.ad.sum_end - engine.ad.n_short * s + sum(min(end - s, clip) for end in engine.ad.long.values())
    tokens = ratio(engine) * rem
    m = engine.m
    prompt = 0
    for seq in engine.prefilling.values():
        prompt += max(0, m.paged(seq.target) - seq.shared - seq.own)
        tokens += min(max(0, seq.output - seq.generated), adm.clip)
    return int(tokens * engine.ad.tok) + prompt


def may_admit(engine, s: int) -> bool:
    """Whether step s tries admissions: under STATIC_BATCH only while no request decodes; under SGLang's rule not
    while the batch is marked full and something runs (if it does, the running requests' count for this step)."""
    if engine.ad.rule == RESERVE_RULE:
        return not (engine.n_dec and engine.ad.adm.static)
    if engine.ad.blocked and engine.running:
        return False
    engine.ad.blocked = False
    engine.ad.run_offset, engine.ad.batch_offset = running_offset(engine, s), 0
    return True


def _total(engine, seq, hit: int) -> int:
    """SGLang's count for admitting `seq`: the prompt tokens it computes plus its clipped remaining output."""
    return (seq.target - hit + min(max(0, seq.output - seq.generated), engine.ad.adm.clip)) * engine.ad.tok


def fits(engine, seq, hit: int, woken: int) -> bool:
    """Whether the engine's rule admits `seq` (its prefix hit of `hit` tokens, now referenced in the cache's active
    bytes; `woken` of them were idle until then). TensorRT-LLM's pending request needs its whole total free, the
    blocks it reuses included (it has no sequence yet: kvplan.engines.admission), idle cached blocks being free."""
    cache_active = engine.cache.active if engine.cache is not None else 0
    if engine.ad.rule == RESERVE_RULE:
        return _reservation_fits(engine, seq, cache_active - woken)
    room = engine.cap - engine.used - cache_active - engine.ad.run_offset - engine.ad.batch_offset
    return _total(engine, seq, hit) < room


def _reservation_fits(engine, seq, cached: int) -> bool:
    """TensorRT-LLM's test for a pending request: its whole total, ceil((prompt + max new tokens) / block) in pages,
    beside every running request's reservation and the `cached` bytes other requests' shared blocks hold."""
    return engine.ad.reserved + cached + engine.m.paged(seq.prompt + seq.output) <= engine.cap


def admitted(engine, seq, hit: int, shared: int, chunk: int) -> None:
    """`seq` was admitted with a first chunk of `chunk` tokens: its reservation, or SGLang's same-batch count."""
    if engine.ad.rule == RESERVE_RULE:
        seq.reserve = engine.m.paged(seq.prompt + seq.output) - shared
        engine.ad.reserved += seq.reserve
    elif chunk == seq.target - hit:  # a whole prompt: its clipped max new tokens count in full this step (a
        # chunk: none), those it generated before a retraction included (schedule_policy.py v0.5.9 L793-797)
        engine.ad.batch_offset += min(seq.output, engine.ad.adm.clip) * engine.ad.tok


def released(engine, seq) -> None:
    """`seq` left the pool (finished, retracted or preempted)."""
    if engine.ad.rule == RESERVE_RULE:
        engine.ad.reserved -= seq.reserve
        seq.reserve = 0
    else:
        engine.ad.blocked = False  # the batch shrank: SGLang clears batch_is_full


def retract(engine, s: int):
    """SGLang's retraction before step s: the decoding request with the fewest output tokens (the longest prompt
    among equals, the newest among those) goes back to the end of the queue, to be recomputed; the ratio is set
    from the requests still decoding. With one request left (SGLang keeps it) or none decoding: vLLM's preemption."""
    victim, key = None, None
    for seq in engine.running.values():
        if seq.decoding:
            k = (seq.g0 + (s - seq.s0), -seq.prompt)
            if key is None or k <= key:
                victim, key = seq, k
    if victim is None or len(engine.running) < 2:
        return queue.preempt_tail(engine, s)
    queue.preempt(engine, victim, s, front=False)
    done = total = n = 0
    for seq in engine.running.values():
        if seq.decoding:
            done += seq.g0 + (s - seq.s0)
            total += seq.output
            n += 1
    engine.ad.ratio_base = min(1.0, (done + engine.ad.adm.retract_steps * n) / (total + 1))
    engine.ad.ratio_from = engine.ad.dsteps + 1  # set for this step; the decay resumes at the next decode step
    return victim


def head_blocked(engine, seq, s: int) -> bool:
    """The fast path's question under the engine's rule: the queue's head cannot be admitted before step s, nor
    until a running request leaves (reservations and SGLang's mark only change then; SGLang's ratio falls, but a
    refused admission is not tried again before a request leaves)."""
    if engine.ad.rule == RATIO_RULE and engine.ad.blocked and engine.running:
        return True
    if engine.ad.adm.static:  # STATIC_BATCH: nothing is admitted while a request decodes (the fast path's case)
        return True
    cache = engine.cache
    hit = shared = woken = 0
    if cache is not None and seq.req.prefix:
        segs, hit = cache.peek(seq.req.prefix, seq.target - 1)
        for g in segs:
            shared += g.nbytes
            woken += 0 if g.refs else g.nbytes
    active = (cache.active if cache is not None else 0) + woken
    if min(seq.target - hit, engine.cfg.max_num_batched_tokens - (0 if engine.pf else engine.n_dec)) <= 0:
        return True  # this step's budget is all decode tokens (mixed steps)
    if engine.ad.rule == RESERVE_RULE:
        return not _reservation_fits(engine, seq, active - woken)
    room = engine.cap - engine.used - active - running_offset(engine, s)
    if _total(engine, seq, hit) < room:
        return False
    engine.ad.blocked = True  # the step would try it and fail: SGLang marks the batch full
    return True


def fill(engine, s: int, budget: int, decode_paged: bool, preempted: bool = False) -> tuple[list, bool]:
    """Step s's prefill chunks and admissions within `budget` tokens, both schedulers' (kvplan.simulator.engine's
    mixed step, kvplan.simulator.prefill_first's prefill step): the chunked requests' next chunks first (a chunk
    whose pages cannot be had preempts the newest running request; `decode_paged`: this step's decode pages are
    already taken), then, if nothing was preempted (this step's decode pages included: `preempted`), waiting requests
    first come first served while the budget, the running limit and the engine's own admission rule allow. Returns
    ([(seq, chunk)], preempted)."""
    chunks = []
    for seq in list(engine.prefilling.values()):
        if budget <= 0:
            break
        if seq.rid not in engine.prefilling:
            continue  # preempted for an earlier one
        chunk = min(seq.target - seq.computed, budget)
        while not engine._grow_prefill(seq, chunk):
            preempted = True
            if queue.preempt_tail(engine, s, decode_paged=decode_paged) is seq:
                chunk = 0
                break
        if chunk:
            chunks.append((seq, chunk))
            budget -= chunk
    if not preempted and budget > 0 and (not engine.own_rule or may_admit(engine, s)):
        while engine.waiting and budget > 0 and len(engine.running) < engine.cfg.max_num_seqs:
            chunk = engine._admit(engine.waiting[0], budget)
            if not chunk:
                break
            chunks.append((engine.waiting.popleft(), chunk))
            budget -= chunk
    return chunks, preempted
