"""The continuous-batching engine: one scheduler step at a time, on a paged or contiguous KV pool.

The scheduler follows vLLM's v1 scheduler (vllm/v1/core/sched/scheduler.py), restated:
each step has a token budget (`max_num_batched_tokens`); running requests come first, one token
per decoding request and a chunk of the prompt for a request still in prefill (chunked
prefill); when the pool cannot hold a running request's new tokens, the most recently admitted
running request is preempted (its blocks freed; it goes back to the head of the queue and is
recomputed from scratch later); if nothing was preempted, waiting requests are admitted first come
first served while budget, `max_num_seqs` and memory allow. An engine that runs a prefill batch whenever one forms
and decodes no one in it (SGLang without --enable-mixed-chunk: `prefill_first`) takes its steps from
kvplan.simulator.prefill_first instead: a prefill step of the whole budget, else a decode step of every request.

On the paged pool, admission is the engine's own where the config names one (kvplan.engines.admission, applied
by kvplan.simulator.admit): TensorRT-LLM's reservations to completion, SGLang's new_token_ratio; vLLM's above else.

Paged pool: pages of `block_size` tokens are allocated as tokens are written, per layer group.
Contiguous pool: one reservation per request at admission, sized by a policy (`max`: the model's
length limit, as a static cache does; `pow2`: the prompt plus the output rounded up to a power of
two; `oracle`: exactly prompt + output), as the Orca baselines of the PagedAttention paper.

Speed: a decoding request needs a new page every `block_size` steps, at a step fixed by its
length, so pages needed per step are kept in `block_size` buckets by step residue, and a
step's work does not grow with the number of running requests. Windowed groups stop growing at
their window (an event), finishes are events; per request there are a handful of events.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from operator import itemgetter

from kvplan.core.collector import collector_paused
from kvplan.engines.admission import ON_DEMAND_RULE, RATIO_RULE, RESERVE_RULE
from kvplan.simulator import admit, fastpath, frontend, prefill_first, queue
from kvplan.simulator.model import SimModel, StepTimer
from kvplan.simulator.prefix import PrefixCache
from kvplan.simulator.queue import Seq
from kvplan.simulator.results import Recorder

DEFAULT_MAX_NUM_SEQS = 256  # vLLM's long-standing default; used where no input or engine states one (limits.py)
DEFAULT_MAX_BATCHED_TOKENS = 8192  # vLLM v1's chunked-prefill budget on a large GPU (online serving); likewise
RESERVE_POLICIES = ("max", "pow2", "oracle")
_tokens = itemgetter(1)  # of a prefix segment (key, tokens)


@dataclass(frozen=True)
class EngineConfig:
    mode: str = "paged"  # paged | contiguous
    reserve: str = "max"  # contiguous: max | pow2 | oracle
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    prefix_caching: bool = True
    check: bool = False  # tests: recount the pool from scratch after every step
    tiers: tuple = ()  # offload tiers below the pool: ((name, bytes per rank, link bytes/s or None), ...)
    admission: object = None  # the engine's kvplan.engines.admission.Admission (paged pool); None: vLLM's
    prefill_first: bool = False  # SGLang's steps: prefill apart from decode (kvplan.engines.scheduler.prefill_first)
    front_end_s: float = 0.0  # seconds a request in the serving front end ahead of the engine (simulator/frontend.py)


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


class Engine:
    """One simulated engine on one KV pool; `run(requests)` returns the Recorder of the run."""

    def __init__(self, model: SimModel, config: EngineConfig = EngineConfig()):
        if config.mode not in ("paged", "contiguous"):
            raise ValueError(f"mode {config.mode!r}")
        if config.reserve not in RESERVE_POLICIES:
            raise ValueError(f"reserve {config.reserve!r}")
        self.m, self.cfg = model, config
        self.paged, self.pf = config.mode == "paged", config.prefill_first
        self.timer = StepTimer(model)
        self.cap = model.kv_budget_bytes
        self.B = model.block_size
        bb = model.block_bytes()
        self.cache = PrefixCache(self.B, bb, config.tiers,
                                 self.cap) if (self.paged and config.prefix_caching and model.all_full
                                                and not model.state_bytes) else None
        # Per decoding request, bytes added at each page boundary / per token, until a window fills.
        self.full_block = self.B * sum(g.bytes_per_token for g in model.groups if g.window is None)
        self.full_token = sum(g.bytes_per_token for g in model.groups if g.window is None)
        self.windows = [(g.window, self.B * g.bytes_per_token, g.bytes_per_token)
                        for g in model.groups if g.window is not None]
        rule = config.admission.rule if (config.admission is not None and self.paged) else ON_DEMAND_RULE
        # the hot paths' flags: an engine rule of its own at all; SGLang's ratio; TensorRT-LLM's reservations
        self.own_rule, self.ratio_rule = rule != ON_DEMAND_RULE, rule == RATIO_RULE
        self.reserve_rule = rule == RESERVE_RULE
        self.ad = admit.State(config.admission, rule, self.full_token or model.token_bytes())

    # ---- pool -------------------------------------------------------------------------------
    def _alloc_bytes(self, seq: Seq, length: int) -> int:
        """The bytes `seq` owns once `length` tokens are in the pool."""
        if not self.paged:
            return seq.reserve
        return self.m.paged(length) - seq.shared

    def _free_bytes(self) -> int:
        active = self.cache.active if self.cache else 0
        return self.cap - self.used - active

    def _take(self, nbytes: int) -> bool:
        cache = self.cache
        if cache is None:
            if nbytes > self.cap - self.used:
                return False
        else:  # _free_bytes(), inline: this runs for every page taken
            if nbytes > self.cap - self.used - cache.active:
                return False
            short = self.used + cache.active + cache.idle + nbytes - self.cap
            if short > 0:
                cache.evict(short)
        self.used += nbytes
        return True

    # ---- decode bookkeeping -----------------------------------------------------------------
    def _start_decode(self, seq: Seq, s: int) -> None:
        """`seq` decodes from step s on: position written at step t is base + t."""
        length = seq.prompt + seq.generated - 1
        seq.decoding, seq.s0, seq.g0, seq.base = True, s, seq.generated, length - s
        inc, wrate = (self.full_block, self.full_token) if self.paged else (0, self.full_token)
        for w, wb, wt in self.windows:
            if length < w:
                inc += wb if self.paged else 0
                wrate += wt
                self._at(self.events, w - seq.base, (seq, seq.version, wb, wt))
        seq.inc, seq.wrate = inc, wrate
        self.bucket[(-seq.base) % self.B] += inc
        self.wrate += wrate
        self.n_dec += 1
        self.ctx_dec += length
        self._at(self.finish_at, s + seq.output - seq.generated - 1, (seq, seq.version))
        if self.ratio_rule:
            admit.decoding(self, seq, s, 1)

    def _at(self, table: dict, step: int, item) -> None:
        """File `item` under `step` in `table` (events or finishes); a new step joins the stop heap."""
        bucket = table.get(step)
        if bucket is None:
            table[step] = bucket = []
            heapq.heappush(self.stops, step)
        bucket.append(item)

    def _stop_decode(self, seq: Seq, s: int) -> int:
        """Remove `seq` from the decode sums before step s runs; returns its length then."""
        length = seq.base + s
        self.bucket[(-seq.base) % self.B] -= seq.inc
        self.wrate -= seq.wrate
        self.n_dec -= 1
        self.ctx_dec -= length
        seq.decoding = False
        if self.ratio_rule:
            admit.decoding(self, seq, seq.s0, -1)
        seq.generated = seq.g0 + (s - seq.s0)
        return length

    def _release(self, seq: Seq, length: int, allocated: int | None = None) -> None:
        """Free `seq`'s pages: `length` tokens written, `allocated` tokens' pages taken (default: as many)."""
        self.used -= self._alloc_bytes(seq, length if allocated is None else allocated)
        self.written -= self.m.held(length) - seq.shared
        self.committed -= seq.final
        if self.own_rule:
            admit.released(self, seq)
        if self.cache is not None and seq.segs:
            self.written -= self.cache.release(seq.segs)
        seq.own = seq.shared = seq.published = 0
        seq.segs = []
        seq.version += 1
        del self.running[seq.rid]
        self.prefilling.pop(seq.rid, None)

    # ---- admission and prefill ----------------------------------------------------------------
    def _admit(self, seq: Seq, budget: int) -> int:
        """Admit the head of the queue with a first chunk of at most `budget` tokens, or return 0."""
        segs, hit, lower, gpu_hit = [], 0, (), 0
        if self.cache is not None and seq.req.prefix:
            segs, hit, lower, gpu_hit = self.cache.lookup(seq.req.prefix, seq.target - 1)
        chunk = min(seq.target - hit, budget)
        shared = woken = 0
        if segs:  # referenced first, so that making room cannot evict them
            shared, woken = self.cache.acquire(segs)
        if self.paged:
            need = self.m.paged(hit + chunk) - shared
        else:
            need = seq.reserve = self.m.held(self._reserve_tokens(seq))
        if (self.own_rule and not admit.fits(self, seq, hit, woken)) or not self._take(need):
            if segs:
                self.cache.release(segs)
            if self.ratio_rule:
                self.ad.blocked = True  # SGLang's batch_is_full: no admission again until a request leaves
            return 0
        if segs:
            seq.shared, seq.segs, seq.published = shared, segs, len(segs)
            self.written += woken
        if hit:
            again = self.rec.preemptions[seq.rid] > 0  # its own blocks again: not a prefix shared (vLLM apart too)
            if again:
                self.cache.rehits += gpu_hit
            else:
                self.cache.hits += gpu_hit
            if lower:
                self.rec.reloaded(seq.rid, self.cache.promote(lower, hit - gpu_hit, self.full_token, again))
        seq.computed = hit
        seq.own = need
        self.written += self.m.held(hit) - seq.shared  # a state, if any, is written at once
        seq.final = self.m.held(seq.prompt + seq.output - 1) - seq.shared
        self.committed += seq.final
        if self.own_rule:
            admit.admitted(self, seq, hit, shared, chunk)
        self.running[seq.rid] = seq
        self.prefilling[seq.rid] = seq
        self.rec.admitted(seq.rid)
        return chunk

    def _grow_prefill(self, seq: Seq, chunk: int) -> bool:
        """Pages for `chunk` more prompt tokens of a running request (paged pool only grows)."""
        if not self.paged:
            return True
        need = self.m.paged(seq.computed + chunk) - seq.shared - seq.own
        if need <= 0 or self._take(need):
            seq.own += max(need, 0)
            return True
        return False

    def _publish(self, seq: Seq) -> None:
        """Share the prompt segments `seq` has now computed (in order, whole blocks only)."""
        prefix = seq.req.prefix
        if seq.published < len(prefix):
            start = sum(map(_tokens, prefix[: seq.published]))
            segs, nbytes = self.cache.publish_run(prefix, seq.published, start, seq.computed)
            if segs:  # another sequence's copy ends the chain: this request keeps its own pages from there
                seq.own -= nbytes
                self.used -= nbytes
                seq.shared += nbytes
                if self.reserve_rule:  # its blocks to completion now count them in the cache's, once
                    seq.reserve -= nbytes
                    self.ad.reserved -= nbytes
                seq.segs += segs
                seq.published += len(segs)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self, requests, progress=None, horizon: float | None = None, released=None) -> Recorder:
        """Simulate `requests` (sorted by arrival, rid = index) to the last completion.

        `horizon` (seconds) spaces the time series; default: the last arrival. `progress(done, total)`
        is called every few thousand steps with the requests that have arrived so far. The cyclic
        garbage collector is paused meanwhile: a run piles up sequences and prefix segments that hold
        no reference cycles, which it would walk again and again (about a tenth of a Mooncake replay).
        `released`: when the engine sees each request (ascending), where a front end shared with requests it does
        not run decided that (kvplan.simulator.frontend.shared); else config.front_end_s's front end decides."""
        with collector_paused():
            return self._run(requests, progress, horizon, released)

    def _run(self, requests, progress, horizon: float | None, released=None) -> Recorder:
        times = [r.arrival for r in requests] if released is None else list(released)  # when the engine sees each:
        if released is None and self.cfg.front_end_s:  # once through the front end, if any (a request's figures
            # count from its arrival, when it was sent: Recorder.arrived)
            times = frontend.releases(times, self.cfg.front_end_s)
        if horizon is None:
            horizon = times[-1] if times else 1.0
        self.rec = rec = Recorder(self.m, len(requests), max(horizon, 1e-3))
        rec.model_mode_contiguous = not self.paged
        self.used = self.written = self.committed = 0
        self.bucket = [0] * self.B
        self.wrate = self.n_dec = self.ctx_dec = 0
        self.events, self.finish_at = {}, {}
        self.stops = []  # a heap of the steps that have events (stale ones are skipped lazily)
        self.running, self.prefilling, self.waiting = {}, {}, deque()
        self.ad = admit.State(self.ad.adm, self.ad.rule, self.ad.tok)
        t, s, i, n = 0.0, 0, 0, len(requests)
        tick = 0
        cache = self.cache
        while True:
            if cache is not None:
                cache.now = t
            while i < n and times[i] <= t:
                queue.arrive(self, requests[i], t)
                i += 1
            if not self.running and not self.waiting:
                if self.ratio_rule:
                    admit.idle(self)
                if i >= n:
                    break
                rec.idle(t, times[i])
                t = times[i]
                continue
            if not self.prefilling and self.n_dec and fastpath.head_blocked(self, s + 1):
                t0 = t
                t, s = fastpath.coast(self, t, s, times[i] if (i < n and not self.waiting) else float("inf"))
                if t > t0:
                    continue
            if self.pf:  # a prefill batch, if one forms, runs before decode step s + 1 (which it does not advance)
                t, ran = prefill_first.step(self, s, t)
                if ran:
                    continue
            s += 1
            chunks, preempted = self._schedule(s)
            if not chunks and not self.n_dec:
                if not preempted:  # nothing can run: the head of the queue does not fit even in an empty pool
                    rec.rejected(self.waiting.popleft().req, "never fits in the KV pool", counted=True)
                continue  # (everything was preempted: admit afresh, no time passes)
            t = self._advance(s, t, chunks)
            if self.cfg.check:
                fastpath.check(self, s + 1)
            if progress is not None and s >= tick:
                tick = s + 4096
                progress(i, n)
        rec.close(t, self)
        return rec

    def _schedule(self, s: int) -> tuple[list, bool]:
        """Step s's work: decode pages, prefill chunks, admissions. Returns ([(seq, chunk)], preempted)."""
        B = self.B
        for seq, version, wb, wt in self.events.pop(s, ()):  # windows that fill at this step
            if seq.version == version and seq.decoding:
                seq.inc -= wb if self.paged else 0
                self.bucket[(-seq.base) % B] -= wb if self.paged else 0
                seq.wrate -= wt
                self.wrate -= wt
        preempted = False
        need = self.bucket[s % B]
        while need > self._free_bytes() and self.running:
            if self.ratio_rule:
                admit.retract(self, s)
            else:
                queue.preempt_tail(self, s)
            preempted = True
            need = self.bucket[s % B]
        if need:
            self._take(need)
        budget = 0 if self.pf else self.cfg.max_num_batched_tokens - self.n_dec  # prefill first: a decode step
        return admit.fill(self, s, budget, decode_paged=True, preempted=preempted)

    def _advance(self, s: int, t: float, chunks: list, decode: bool = True) -> float:
        """Run step s: time passes, tokens are written, prefills complete, requests finish. `decode` False: a
        prefill step after step s, whose completed prompts decode from s + 1 (kvplan.simulator.prefill_first)."""
        m, rec = self.m, self.rec
        n_dec, ctx_dec = (self.n_dec, self.ctx_dec) if decode else (0, 0)
        tokens, pairs, ctx = n_dec, float(ctx_dec + n_dec), ctx_dec
        new, prefill_pairs = 0, 0.0
        for seq, c in chunks:
            prefill_pairs += c * (seq.computed + (c + 1) / 2)
            ctx += seq.computed
            tokens += c
            new += not seq.computed
        dt = self.timer.step(tokens, n_dec + len(chunks), ctx, pairs + prefill_pairs, new, prefill_pairs=prefill_pairs,
                             prefill_context=ctx - ctx_dec)
        t += dt
        if n_dec and self.ratio_rule:
            self.ad.dsteps += 1  # a decode step: new_token_ratio falls (kvplan.simulator.admit.ratio)
        self.ctx_dec += n_dec
        self.written += self.wrate if decode else 0
        for seq, c in chunks:
            before = seq.computed
            seq.computed += c
            self.written += m.held(seq.computed) - m.held(before)
            if self.cache is not None and seq.req.prefix:
                self._publish(seq)
        active, idle = (self.cache.active, self.cache.idle) if self.cache else (0, 0)
        rec.step(t, dt, len(self.running), len(self.waiting), self.used + active, self.written, self.committed, idle,
                 tokens, n_dec + len(chunks))
        for seq, _ in chunks:
            if seq.computed == seq.target:
                del self.prefilling[seq.rid]
                seq.generated += 1
                rec.token(seq.rid, t, first=seq.generated == 1)
                if seq.generated >= seq.output:
                    self._finish(seq, seq.computed, t)
                else:
                    self._start_decode(seq, s + 1)
        for seq, version in self.finish_at.pop(s, ()) if decode else ():
            if seq.version == version and seq.decoding:
                self._finish(seq, self._stop_decode(seq, s + 1), t)
        return t

    def _reserve_tokens(self, seq: Seq) -> int:
        p, o = seq.prompt, seq.output
        length = {"max": self.m.max_model_len, "pow2": p + _pow2(o), "oracle": p + o}[self.cfg.reserve]
        return min(length, self.m.max_model_len)

    def _finish(self, seq: Seq, length: int, t: float) -> None:
        self._release(seq, length)
        self.rec.finished(seq.rid, t)
