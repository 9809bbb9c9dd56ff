"""Disaggregated serving simulated end to end: a prefill queue, the KV transfer, a decode batch.

x prefill replicas share one first-come-first-served queue; a free replica takes the waiting prompts
up to its token budget (`max_num_batched_tokens`, at least one prompt) and computes them in one step
of the step-time model. A finished prompt waits (its KV staged on the prefill replica) until a decode
replica has memory for its prompt and output (reserved at admission, as SGLang's decode pre-allocates
before the transfer) and a free sequence slot; then its KV moves over the link, and it joins that
replica's continuous batch at the next step. A decode step of n requests over c cached tokens takes
the step-time model's decode time (StepTimer.step); a request leaves when its last token is written.
TTFT is arrival to the first decode step's start (queue + prefill + staging + transfer); TPOT is the
time per output token after it. Decode replicas are chosen by most free KV memory.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from kvplan.simulator.results import percentile


@dataclass
class _Replica:
    free: int  # KV bytes not reserved
    running: list = field(default_factory=list)  # heap of (finish step, rid)
    joining: list = field(default_factory=list)  # rids whose transfer is done
    n: int = 0  # running requests
    ctx: int = 0  # cached tokens of the running requests
    steps: int = 0
    busy: bool = False
    slots: int = 0  # requests admitted (running, joining or in transfer)


def prefill_done(requests, replicas: int, step_s, budget: int, seen=None) -> list[float]:
    """When each request's prompt is computed, by `replicas` replicas serving one FCFS queue in steps of
    up to `budget` tokens (`step_s(prompts)`: one step's seconds). `seen`: when the queue gets each request (its
    arrival, or once through the prefill servers' front ends: kvplan.simulator.frontend.spread); in that order."""
    n = len(requests)
    at = seen if seen is not None else [r.arrival for r in requests]
    order = range(n) if seen is None else sorted(range(n), key=at.__getitem__)
    done = [0.0] * n
    free = [0.0] * replicas
    i = 0
    while i < n:
        f = heapq.heappop(free)
        start = max(f, at[order[i]])
        batch, tokens = [order[i]], requests[order[i]].prompt
        i += 1
        while i < n and at[order[i]] <= start and tokens + requests[order[i]].prompt <= budget:
            tokens += requests[order[i]].prompt
            batch.append(order[i])
            i += 1
        end = start + step_s([requests[k].prompt for k in batch])
        for k in batch:
            done[k] = end
        heapq.heappush(free, end)
    return done


class _Run:
    """One end-to-end run's state: decode replicas, the event heap, prompts waiting for decode memory."""

    def __init__(self, requests, y: int, decode_step_s, held_bytes, kv_bytes: int, transfer_s, max_num_seqs: int):
        self.reqs, self.step_s, self.held, self.cap = requests, decode_step_s, held_bytes, kv_bytes
        self.transfer_s, self.max_seqs = transfer_s, max_num_seqs
        self.reps = [_Replica(free=kv_bytes) for _ in range(y)]
        self.first, self.finish = [None] * len(requests), [None] * len(requests)
        self.events: list = []  # (time, seq, kind, payload)
        self.seq = 0
        self.pending: deque = deque()
        self.staged_max = self.unserved = 0

    def push(self, t: float, kind: int, payload) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, payload))

    def admit(self, t: float) -> None:
        """Waiting prompts, in order, to the decode replica with the most free memory while one has room."""
        while self.pending:
            r = self.pending[0]
            need = self.held(self.reqs[r].prompt + self.reqs[r].output)
            open_ = [i for i, rep in enumerate(self.reps) if rep.slots < self.max_seqs]
            k = max(open_, key=lambda i: self.reps[i].free, default=None)
            if k is None or self.reps[k].free < need:
                return
            rep = self.reps[k]
            self.pending.popleft()
            rep.free -= need
            rep.slots += 1
            self.push(t + self.transfer_s(self.reqs[r].prompt), 1, (k, r))  # kind 1: KV arrived

    def step(self, k: int, t: float) -> None:
        """Replica k starts a step at t: the requests whose KV arrived join; idle when none runs."""
        rep = self.reps[k]
        for r in rep.joining:
            req = self.reqs[r]
            self.first[r] = t
            rep.n += 1
            rep.ctx += req.prompt
            heapq.heappush(rep.running, (rep.steps + max(1, req.output - 1), r))
        rep.joining = []
        rep.busy = bool(rep.n)
        if rep.n:
            self.push(t + self.step_s(rep.n, rep.ctx), 2, k)  # kind 2: a decode step ends

    def step_end(self, k: int, t: float) -> None:
        rep = self.reps[k]
        rep.steps += 1
        rep.ctx += rep.n
        while rep.running and rep.running[0][0] <= rep.steps:
            _, r = heapq.heappop(rep.running)
            req = self.reqs[r]
            self.finish[r] = t
            rep.n -= 1
            rep.ctx -= req.prompt + max(1, req.output - 1)
            rep.free += self.held(req.prompt + req.output)
            rep.slots -= 1
        self.admit(t)
        self.step(k, t)

    def run(self, ready: list[float]) -> None:
        for r in sorted(range(len(self.reqs)), key=lambda i: ready[i]):
            self.push(ready[r], 0, r)  # kind 0: prompt computed
        while self.events:
            t, _, kind, payload = heapq.heappop(self.events)
            if kind == 0:
                req = self.reqs[payload]
                if self.held(req.prompt + req.output) > self.cap:
                    self.unserved += 1
                    continue
                self.pending.append(payload)
                self.staged_max = max(self.staged_max, len(self.pending))
                self.admit(t)
            elif kind == 1:
                k, r = payload
                self.reps[k].joining.append(r)
                if not self.reps[k].busy:
                    self.step(k, t)
            else:
                self.step_end(payload, t)


def simulate_pd(requests, x: int, y: int, *, prefill_step_s, decode_step_s, held_bytes, kv_bytes: int,
                transfer_s, budget: int, max_num_seqs: int, seen=None) -> dict:
    """Per-request times of `requests` (sorted by arrival) on x prefill and y decode replicas (see the
    module docstring): {'ttft': [...], 'tpot': [...], 'finish': [...], 'staged_max': int, 'unserved': int}.
    held_bytes(tokens): one decode rank's bytes for a request of that length; kv_bytes: its pool. `seen`: when the
    prefill queue gets each request (prefill_done); TTFT still counts from its arrival, when it was sent."""
    ready = prefill_done(requests, x, prefill_step_s, budget, seen)
    run = _Run(requests, y, decode_step_s, held_bytes, kv_bytes, transfer_s, max_num_seqs)
    run.run(ready)
    first, finish = run.first, run.finish
    done = [r for r in range(len(requests)) if finish[r] is not None]
    return {"ttft": [first[r] - requests[r].arrival for r in done],
            "tpot": [(finish[r] - first[r]) / max(1, requests[r].output - 1) for r in done],
            "finish": [finish[r] for r in done], "prefill_done": ready, "staged_max": run.staged_max,
            "unserved": run.unserved, "completed": len(done)}


def summarise(run: dict, requests, slo_ttft: float, slo_tpot: float) -> dict:
    """A run's figures: completed, TTFT and TPOT p50/p90/p99, % meeting both SLOs, throughput."""
    ttft, tpot = run["ttft"], run["tpot"]
    good = sum(1 for a, b in zip(ttft, tpot) if a <= slo_ttft and b <= slo_tpot)
    span = max(run["finish"], default=0.0) - (requests[0].arrival if requests else 0.0)
    out = sum(r.output for r in requests)

    def dist(values):
        v = sorted(values)
        return {"mean": sum(v) / len(v) if v else None, "p50": percentile(v, 50), "p90": percentile(v, 90),
                "p99": percentile(v, 99)}

    n = len(requests)
    return {"requests": n, "completed": run["completed"], "unserved": run["unserved"],
            "ttft_s": dist(ttft), "tpot_s": dist(tpot),
            "pct_meeting_slo": 100.0 * good / n if n else 0.0, "staged_max": run["staged_max"],
            "output_tokens_per_s": out / span if span > 0 else 0.0}
