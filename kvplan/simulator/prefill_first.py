"""SGLang's steps in the simulator: a prefill batch whenever one forms, else a decode step of every running request.

SGLang's scheduler builds a prefill batch first and runs it whenever one forms ("Run prefill first if possible"),
decoding the running batch only otherwise; a decode batch rides a prefill batch only with --enable-mixed-chunk, off
by default (sglang 0.5.15 wheel, srt/managers/scheduler.py `get_next_batch_to_run` L2683-2709, `is_mixed_chunk`
L1018-1021, the mix L2992-3004; kvplan.engines.scheduler.prefill_first says which engines). A prefill batch forms
when a chunked request is part-way through its prompt or a waiting request is admitted (`_get_new_batch_prefill_raw`
L2769-2797, L2835-2930). Its budget is PrefillAdder's (srt/managers/schedule_policy.py L433-470, L654-712,
L797-835, L968-1141): `rem_chunk_tokens` = chunked_prefill_size and `rem_input_tokens` = max_prefill_tokens (16,384
by default, server_args.py L663-673), each less every prompt token added (the running batch's decode tokens too
only when mixed, `num_mixed_decode_tokens`); the chunked request's next chunk first (`add_chunked_req`), then waiting
requests first come first served, whole while they fit the chunk budget, the one that crosses it truncated to what
is left, and none once either budget is spent. SGLang's default chunk (2,048-16,384 by GPU memory,
kvplan.engines.sglang.defaults) is never above max_prefill_tokens, so the chunk binds: one step prefills at most
`max_num_batched_tokens` (the engine's chunked_prefill_size) tokens and decodes no one. Admission is the engine's rule
as the mixed steps apply it (kvplan.simulator.admit: SGLang's new_token_ratio), tried in the prefill step.

A prefill step does not advance the decoding requests: the engine's step counter `s` counts decode steps (a request's
position, its page boundaries, window fills and finish are all kept by it), so a prefill step runs between decode
steps s and s + 1, and the prompts it completes decode from s + 1. Functions of the engine (`engine` is a
kvplan.simulator.engine.Engine with `pf` set).

Left out: max_prefill_tokens where a chunked_prefill_size above it is given (the chunk is taken as the budget),
prefill_max_requests, the prefill delayers, and page rounding of the truncated chunk (SGLang's default page is one
token; MLA models' 64 would round a chunk down to whole pages).
"""

from __future__ import annotations

from kvplan.simulator import admit, fastpath


def batch(engine, s: int) -> tuple[list, bool]:
    """The prefill batch that forms before decode step s: ([(seq, chunk)], preempted). Empty: no batch forms."""
    return admit.fill(engine, s, engine.cfg.max_num_batched_tokens, decode_paged=False)


def step(engine, s: int, t: float) -> tuple[float, bool]:
    """Run the prefill batch that forms after decode step s, if one does: (time after it, whether one ran). None
    formed: a decode step follows, even where the part-way prompt could not grow and was preempted (SGLang's
    PrefillAdder admits a request only with its whole prompt counted, so its chunks always fit; under a rule that
    admits on the first chunk alone, readmitting it at once would prefill it again and again and decode no one)."""
    chunks, _ = batch(engine, s + 1)
    if not chunks:
        return t, False
    t = engine._advance(s, t, chunks, decode=False)
    if engine.cfg.check:
        fastpath.check(engine, s + 1)
    return t, True
