"""The engine's fast path and its self-check.

`coast` runs stretches of decode-only steps (nothing to prefill, nobody admissible) without the
scheduler's per-step work, summing the Recorder's integrals itself; its steps and figures are
the full loop's. `check` recounts the pool from the running requests (tests run with it on).
Functions of the engine (`engine` is a kvplan.simulator.engine.Engine).
"""

from __future__ import annotations

import heapq

from kvplan.simulator import admit


def head_blocked(engine, s: int) -> bool:
    """True when the queue's head cannot be admitted at step s, nor before a request finishes
    (decoding only takes memory): nothing waits, the running set is full, or the head's
    first chunk does not fit (under an engine's own admission rule: kvplan.simulator.admit)."""
    if not engine.waiting:
        return True
    if len(engine.running) >= engine.cfg.max_num_seqs:
        return True
    seq = engine.waiting[0]
    if engine.own_rule:
        return admit.head_blocked(engine, seq, s)
    if not engine.paged:
        return engine.m.held(engine._reserve_tokens(seq)) > engine._free_bytes()
    segs, hit = ([], 0)
    if engine.cache is not None and seq.req.prefix:
        segs, hit = engine.cache.peek(seq.req.prefix, seq.target - 1)
    chunk = min(seq.target - hit, engine.cfg.max_num_batched_tokens - (0 if engine.pf else engine.n_dec))
    if chunk <= 0:
        return True
    need = engine.m.paged(hit + chunk)
    for g in segs:  # the bytes the head would share, less those idle now (they stop being evictable)
        need -= g.nbytes if g.refs else 0
    return need > engine._free_bytes()


def coast(engine, t: float, s: int, until: float) -> tuple[float, int]:
    """Run pure decode steps (no prefill, no admission possible) until a request finishes,
    a window fills, pages run short, or time reaches `until` (an arrival into an empty queue).
    Each step is the full loop's step without its scheduling work; returns (t, s)."""
    events, finish_at, bucket, B = engine.events, engine.finish_at, engine.bucket, engine.B
    rec, n, cap = engine.rec, engine.n_dec, engine.cap
    step_time = engine.timer.decode_step(n)
    running, waiting = len(engine.running), len(engine.waiting)
    active = engine.cache.active if engine.cache else 0
    idle = engine.cache.idle if engine.cache else 0
    ctx, written, wrate, committed = engine.ctx_dec, engine.written, engine.wrate, engine.committed
    # The Recorder's integrals, summed here and handed over once (or at a sample point).
    busy = a_res = a_wr = a_idle = 0.0
    s_start = s
    sample_at = rec.next_sample if rec.sample_every is not None else float("inf")
    stops = engine.stops  # the next step with a finish or a window event ends the stretch
    while stops and (stops[0] <= s or (stops[0] not in events and stops[0] not in finish_at)):
        heapq.heappop(stops)
    stop = stops[0] if stops else float("inf")
    paged, cache = engine.paged, engine.cache
    reserved = engine.used + active
    last = stop - 1  # the last step this stretch may run
    while t < until and s < last:
        if paged:
            need = bucket[(s + 1) % B]
            if need:
                if need > cap - engine.used - active:
                    break
                if cache is not None:  # Engine._take, inline: idle segments evicted for what the pool lacks
                    short = engine.used + active + idle + need - cap
                    if short > 0:
                        cache.evict(short)
                        idle = cache.idle
                engine.used += need
                reserved = engine.used + active
        dt = step_time(ctx)
        t += dt
        s += 1
        ctx += n
        written += wrate
        busy += dt
        a_res += reserved * dt
        a_wr += written * dt
        a_idle += idle * dt
        if t >= sample_at:
            break
    steps = s - s_start
    engine.ad.dsteps += steps  # decode steps (SGLang's new_token_ratio falls on each)
    engine.ctx_dec, engine.written = ctx, written
    if steps:
        rec.coasted(t, steps, busy, n, running, waiting, a_res, a_wr, committed * busy, a_idle, idle,
                    engine.used + active, written)
    return t, s


def check(engine, s: int) -> None:
    """Recount the pool from the running requests (tests); raises AssertionError on drift."""
    m = engine.m
    used = written = 0
    for seq in engine.running.values():
        length = seq.base + s if seq.decoding else seq.computed
        if engine.paged:
            assert seq.decoding or seq.own == m.paged(length) - seq.shared, (seq.rid, seq.own)
            used += m.paged(length) - seq.shared
        else:
            used += seq.reserve
        written += m.held(length) - seq.shared
    assert used == engine.used, ("used", used, engine.used)
    active = engine.cache.active if engine.cache else 0
    assert written + active == engine.written, ("written", written + active, engine.written)
    assert engine.used + active <= engine.cap, ("over capacity", engine.used, active, engine.cap)
    if engine.reserve_rule:  # every request's pages within its reservation, the reservations within the pool
        reserved = sum(seq.reserve for seq in engine.running.values())
        assert reserved == engine.ad.reserved, ("reserved", reserved, engine.ad.reserved)
        assert engine.used <= reserved and reserved + active <= engine.cap, ("reservations", reserved, active)
