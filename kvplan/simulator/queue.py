"""The simulator's waiting queue, its two doors (kvplan.simulator.engine): a request arrives (queued, or rejected
when it can never run), and a running request is preempted back to its head (vLLM's preemption by recompute;
SGLang's retraction, kvplan.simulator.admit, queues at the back instead). `Seq` is one request's state in the
engine. Functions of the engine (`engine` is a kvplan.simulator.engine.Engine); none runs once a step.
"""

from __future__ import annotations


class Seq:
    """One request in the engine: its lengths, progress (computed, generated), pages (own, shared), decode sums and
    reservation."""

    __slots__ = ("req", "rid", "prompt", "output", "target", "generated", "computed", "own", "shared", "segs",
                 "published", "decoding", "base", "s0", "g0", "inc", "wrate", "version", "reserve", "final")

    def __init__(self, req, output: int):
        self.req, self.rid, self.prompt, self.output = req, req.rid, req.prompt, output
        self.target, self.generated, self.computed = req.prompt, 0, 0
        self.own = self.shared = 0
        self.segs, self.published = [], 0
        self.decoding = False
        self.base = self.s0 = self.g0 = self.inc = self.wrate = 0
        self.version = 0
        self.reserve = self.final = 0  # reserve: a contiguous reservation, or (paged) its blocks to completion


def arrive(engine, req, t: float) -> None:
    """Queue a request, or reject one that can never run (too long; more than the whole pool)."""
    m = engine.m
    out = min(req.output, m.max_model_len - req.prompt)
    if out < 1:
        engine.rec.rejected(req, "longer than the model's length limit")
        return
    seq = Seq(req, out)
    if not engine.paged:
        largest = m.held(engine._reserve_tokens(seq))
    else:  # TensorRT-LLM reserves blocks for prompt + max new tokens; the last token is never written otherwise
        largest = m.paged(req.prompt + out if engine.reserve_rule else req.prompt + out - 1)
    if largest > engine.cap:
        engine.rec.rejected(req, "never fits in the KV pool")
        return
    engine.rec.arrived(req, t, out)
    engine.waiting.append(seq)


def preempt_tail(engine, s: int, decode_paged: bool = False) -> Seq:
    """Preempt the newest running request before step s runs, back to the head of the queue; `decode_paged`: this
    step's decode pages are already taken (a decoding victim then holds one more token's pages)."""
    return preempt(engine, next(reversed(engine.running.values())), s, decode_paged)


def preempt(engine, victim: Seq, s: int, decode_paged: bool = False, front: bool = True) -> Seq:
    """Free `victim`'s pages before step s runs and queue it to be recomputed: at the head of the queue (vLLM's
    preemption), or at its back (`front` False: SGLang's retraction)."""
    if victim.decoding:
        length = engine._stop_decode(victim, s)
        engine._release(victim, length, length + 1 if decode_paged else length)
    else:
        engine._release(victim, victim.computed)
    victim.computed = 0
    victim.target = victim.prompt + victim.generated
    if front:
        engine.waiting.appendleft(victim)
    else:
        engine.waiting.append(victim)
    engine.rec.preempted(victim.rid)
    return victim
