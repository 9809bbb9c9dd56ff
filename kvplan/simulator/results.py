"""What a simulation measured: per-request times, time integrals of the pool, a sampled series.

The engine calls the Recorder once per step (not per token); integrals are exact sums of
value x step duration, so time averages need no sampling. `summary()` turns them into the
figures a report shows: waste, occupancy, concurrency, preemptions, throughput, TTFT/TPOT/latency
percentiles, goodput under an SLA, and both sides of Little's law.
"""

from __future__ import annotations

import math

SAMPLES = 600  # points in the time series
SERIES_COLUMNS = ("time_s", "running", "waiting", "kv_reserved_bytes", "kv_written_bytes", "kv_cached_idle_bytes",
                  "preemptions", "tokens_per_s")


def percentile(sorted_values: list, q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class Recorder:
    def __init__(self, model, n: int, horizon: float | None = None):
        self.model = model
        self.arrival = [0.0] * n
        self.first = [-1.0] * n
        self.finish = [-1.0] * n
        self.output = [0] * n
        self.prompt = [0] * n
        self.preemptions = [0] * n
        self.tiers: list = []  # offload tiers' figures, filled at close
        self.reload = [0.0] * n  # seconds a request waited for its prefix to come back from offload tiers
        self.rejected_by: dict = {}
        self.dropped = 0
        self.truncated = 0
        self.arrived_count = 0
        self.area_system = self.area_running = self.area_waiting = 0.0
        self.area_reserved = self.area_written = self.area_committed = self.area_cache = 0.0
        self.busy = 0.0
        self.steps = 0
        self.tokens = 0
        self.max_running = 0
        self.peak_reserved = 0
        self.series: list = []
        self.sample_every = (horizon / SAMPLES) if horizon else None
        self.next_sample = 0.0
        self._last_sample = (0.0, 0)  # (time, tokens) at the previous sample
        self.end = 0.0
        self.engine_stats: dict = {}
        self._cache_idle = 0
        self.preemption_count = 0
        self.model_mode_contiguous = False

    # ---- events from the engine ---------------------------------------------------------------
    def arrived(self, req, t: float, output: int) -> None:
        rid = req.rid
        self.arrival[rid] = req.arrival
        self.output[rid] = output
        self.prompt[rid] = req.prompt
        self.truncated += output < req.output
        self.arrived_count += 1
        self.area_system += t - req.arrival  # it arrived during the last step; count that time too

    def rejected(self, req, reason: str, counted: bool = False) -> None:
        self.rejected_by[reason] = self.rejected_by.get(reason, 0) + 1
        if counted:
            self.dropped += 1

    def admitted(self, rid: int) -> None:
        pass

    def preempted(self, rid: int) -> None:
        self.preemptions[rid] += 1
        self.preemption_count += 1

    def reloaded(self, rid: int, seconds: float) -> None:
        """The request's prefix crossed an offload tier's link: its first token (and so its end) waits."""
        self.reload[rid] += seconds

    def token(self, rid: int, t: float, first: bool) -> None:
        if first:
            self.first[rid] = t

    def finished(self, rid: int, t: float) -> None:
        self.finish[rid] = t

    def idle(self, t0: float, t1: float) -> None:
        """Nothing runs from t0 to t1 (only cached prefixes stay in the pool)."""
        self.area_cache += self._cache_idle * (t1 - t0)
        self._sample(t1, 0, 0, 0, 0, self._cache_idle, force=False)

    def step(self, t, dt, running, waiting, reserved, written, committed, cache_idle, tokens, seqs) -> None:
        self.steps += 1
        self.busy += dt
        self.tokens += tokens
        self.area_system += (running + waiting) * dt
        self.area_running += running * dt
        self.area_waiting += waiting * dt
        self.area_reserved += reserved * dt
        self.area_written += written * dt
        self.area_committed += committed * dt
        self.area_cache += cache_idle * dt
        self._cache_idle = cache_idle
        if running > self.max_running:
            self.max_running = running
        if reserved > self.peak_reserved:
            self.peak_reserved = reserved
        if self.sample_every is not None and t >= self.next_sample:
            self._sample(t, running, waiting, reserved, written, cache_idle)

    def coasted(self, t, steps, busy, seqs, running, waiting, a_reserved, a_written, a_committed, a_cache,
                cache_idle, reserved, written) -> None:
        """`steps` decode-only steps at once (Engine._coast): the same sums step() would make."""
        self.steps += steps
        self.busy += busy
        self.tokens += seqs * steps
        self.area_system += (running + waiting) * busy
        self.area_running += running * busy
        self.area_waiting += waiting * busy
        self.area_reserved += a_reserved
        self.area_written += a_written
        self.area_committed += a_committed
        self.area_cache += a_cache
        self._cache_idle = cache_idle
        self.max_running = max(self.max_running, running)
        self.peak_reserved = max(self.peak_reserved, reserved)
        if self.sample_every is not None and t >= self.next_sample:
            self._sample(t, running, waiting, reserved, written, cache_idle)

    def _sample(self, t, running, waiting, reserved, written, cache_idle, force=True) -> None:
        if self.sample_every is None or (not force and t < self.next_sample):
            return
        t0, k0 = self._last_sample
        rate = (self.tokens - k0) / (t - t0) if t > t0 else 0.0
        self.series.append((round(t, 6), running, waiting, reserved, written, cache_idle,
                            self.preemption_count, round(rate, 3)))
        self._last_sample = (t, self.tokens)
        self.next_sample = t + self.sample_every
        if len(self.series) >= 2 * SAMPLES:  # a long drain: keep every other point, sample half as often
            self.series = self.series[::2]
            self.sample_every *= 2

    def close(self, t: float, engine) -> None:
        self.end = t
        cache = engine.cache
        self.engine_stats = {
            "steps": self.steps,
            "prefix_cache": cache is not None,
            "prefix_hit_tokens": cache.hits if cache else 0,  # on first admissions: the prompt's shared prefix
            "prefix_hit_tokens_preempted": cache.rehits if cache else 0,  # re-admissions finding their own blocks
            "prefix_evictions": cache.evicted if cache else 0,
        }
        self.tiers = []
        if cache is not None and cache.tiers:
            cache.close(t)
            self.tiers = [{"tier": x.name, "capacity_bytes_per_gpu": x.capacity, "link_bytes_per_s": x.bandwidth,
                           "hit_tokens": x.hits, "hit_tokens_preempted": x.rehits, "reloaded_bytes_per_gpu": x.reloaded,
                           "segments_stored": x.stored,
                           "segments_dropped": x.dropped, "peak_bytes_per_gpu": x.peak,
                           "mean_bytes_per_gpu": x.area / t if t else 0.0} for x in cache.tiers]

    # ---- the figures ---------------------------------------------------------------------------
    def summary(self, slo_ttft: float, slo_tpot: float) -> dict:
        done = [i for i, f in enumerate(self.finish) if f >= 0]
        T = self.end or 1e-12
        rl = self.reload
        ttft = sorted(self.first[i] - self.arrival[i] + rl[i] for i in done)
        e2e = sorted(self.finish[i] - self.arrival[i] + rl[i] for i in done)
        tpot_by = {i: (self.finish[i] - self.first[i]) / (self.output[i] - 1) for i in done if self.output[i] > 1}
        tpot = sorted(tpot_by.values())
        good = sum(1 for i in done if self.first[i] - self.arrival[i] + rl[i] <= slo_ttft
                   and tpot_by.get(i, 0.0) <= slo_tpot)
        out_tokens = sum(self.output[i] for i in done)
        in_tokens = sum(self.prompt[i] for i in done)
        cap = self.model.kv_budget_bytes
        reserved, written = self.area_reserved / T, self.area_written / T

        def dist(values):
            return {"mean": sum(values) / len(values) if values else None, "p50": percentile(values, 50),
                    "p90": percentile(values, 90), "p99": percentile(values, 99),
                    "max": values[-1] if values else None}

        return {
            "requests": {"arrived": self.arrived_count, "completed": len(done), "dropped": self.dropped,
                         "rejected": dict(self.rejected_by), "outputs_truncated": self.truncated,
                         "preempted_requests": sum(1 for p in self.preemptions if p),
                         "preemptions": sum(self.preemptions)},
            "time": {"makespan_s": T, "busy_s": self.busy, "steps": self.steps,
                     "last_arrival_s": max(self.arrival, default=0.0)},
            "throughput": {"requests_per_s": len(done) / T, "output_tokens_per_s": out_tokens / T,
                           "total_tokens_per_s": (out_tokens + in_tokens) / T},
            "latency_s": {"ttft": dist(ttft), "tpot": dist(tpot), "e2e": dist(e2e), "itl": self._itl(done)},
            "concurrency": {"mean_running": self.area_running / T, "max_running": self.max_running,
                            "mean_waiting": self.area_waiting / T, "mean_in_system": self.area_system / T},
            "kv": {"budget_bytes": cap, "mean_reserved_bytes": round(reserved), "mean_written_bytes": round(written),
                   "peak_reserved_bytes": self.peak_reserved,
                   "waste_pct": 100.0 * (1 - written / reserved) if reserved else 0.0,
                   "mean_occupancy_pct": 100.0 * reserved / cap if cap else 0.0,
                   "mean_cached_idle_bytes": round(self.area_cache / T),
                   "memory_use_pct": self._breakdown(T, cap)},
            "prefix_cache": {**{k: v for k, v in self.engine_stats.items() if k.startswith("prefix")},
                             "hit_rate_pct": 100.0 * self.engine_stats.get("prefix_hit_tokens", 0) / in_tokens
                             if in_tokens else 0.0},
            **({"offload": self._offload(in_tokens, T)} if self.tiers else {}),  # only a run with tiers
            "goodput": {"slo_ttft_s": slo_ttft, "slo_tpot_s": slo_tpot, "requests_meeting_slo": good,
                        "pct_meeting_slo": 100.0 * good / len(done) if done else 0.0, "requests_per_s": good / T},
            "littles_law": {"mean_in_system": self.area_system / T,
                            "throughput_x_mean_latency": (len(done) / T) * (sum(e2e) / len(e2e)) if e2e else 0.0},
            "load": load_of(self.arrived_count, max(self.arrival, default=0.0), T, len(done) / T),
        }

    def _itl(self, done: list[int]) -> dict:
        """The gap between tokens pooled over every token (a benchmark's mean ITL): all requests' decode time over
        all their gaps, where the mean TPOT weighs each request alike. The run keeps no per-token gaps, so their
        percentiles are not known (None): a median ITL is a single step's time, a median TPOT a request's average."""
        gaps = sum(self.output[i] - 1 for i in done if self.output[i] > 1)
        time = sum(self.finish[i] - self.first[i] for i in done if self.output[i] > 1)
        return {"mean": time / gaps if gaps else None, "p50": None, "p90": None, "p99": None, "max": None}

    def _offload(self, in_tokens: int, T: float) -> dict:
        """Each offload tier: its share of the prompt tokens (hit rate), occupancy and reloads."""
        out = []
        for x in self.tiers:
            cap = x["capacity_bytes_per_gpu"]
            out.append({**x, "hit_rate_pct": 100.0 * x["hit_tokens"] / in_tokens if in_tokens else 0.0,
                        "mean_occupancy_pct": 100.0 * x["mean_bytes_per_gpu"] / cap if cap else 0.0})
        return {"tiers": out, "requests_reloaded": sum(1 for r in self.reload if r),
                "reload_s_total": sum(self.reload)} if out else {}

    def _breakdown(self, T: float, cap: int) -> dict:
        """The pool over time as the PagedAttention paper's Fig. 2 splits it (percent of the pool):
        token states written; slots reserved for tokens a request will still write; slots it
        will never write (internal fragmentation, for paged: the unwritten tail of last pages);
        and the rest (free, and cached idle prefixes)."""
        if not cap:
            return {}
        written, reserved, committed = self.area_written / T, self.area_reserved / T, self.area_committed / T
        future = max(0.0, min(committed, reserved) - written) if self.model_mode_contiguous else 0.0
        internal = reserved - written - future
        return {"token_states": 100 * written / cap, "reservation": 100 * future / cap,
                "internal_fragmentation": 100 * internal / cap, "unused": 100 * (cap - reserved) / cap}


def load_of(arrived: int, last_arrival_s: float, makespan_s: float, served_per_s: float) -> dict:
    """Whether requests arrived faster than the run served them (an open loop past its capacity): the run goes on
    well past its last arrival (a quarter of it or more) and serves under 90% of the arrival rate, so its queue grew
    for as long as arrivals lasted and its latencies read that queue, not the engine. `simulate`'s "load" line."""
    rate = arrived / last_arrival_s if last_arrival_s and arrived else None
    over = rate is not None and makespan_s - last_arrival_s >= 0.25 * makespan_s and served_per_s < 0.9 * rate
    return {"overloaded": over, "arrived_per_s": rate, "served_per_s": served_per_s}
