"""The serving front end ahead of the simulated engine: the API server a request crosses before the engine admits it.

A served engine's API server (vLLM's, SGLang's, trtllm-serve's) is a process apart from the engine's steps: it parses
each request, renders its chat template and tokenises it, then hands it on. It takes the requests present one by
one, interleaved: every handler is a coroutine on one asyncio event loop that yields at each await, and vLLM's
tokeniser batches whatever requests are pending on one executor thread (`AsyncMicrobatchTokenizer`,
vllm-project/vllm@10f319bf3d2b980a374cfdde08f3cd2663915432:vllm/utils/async_utils.py). So the requests present share
it: processor sharing, each of n present crossing at 1 / n of its rate. With equal work a request (the fitted
`ingress`, seconds a request: kvplan.speed.terms), processor sharing finishes requests in the order they arrived,
and a burst of N sent at once finishes together, after N x ingress: "most reach the engine only once most are
through" (kvplan.speed.frontend.ingress_queue), the mean wait the corpus model fitted (N x ingress, not first-come
first-served's (N + 1) / 2, which its row of docs/speed-history.md's
training-CV table tried and did not adopt: GPUStack's median TTFT ~ its mean).

What the engine sees: a request is admitted once it is through: its arrival plus its crossing time under processor
sharing, its own crossing (`ingress`) included, as the corpus model charges it (kvplan.speed.frontend.ingress_queue): a
burst of N all reach the engine at N x ingress, a request arriving alone one ingress after it was sent (since the
twenty-fourth round; before, the simulator took the own crossing off, one ingress below the corpus model at low load:
about 10 ms of vLLM's tens of ms). Requests overlapping in an open loop wait for each other as processor sharing
says: about ingress x rho / (1 - rho) more at front-end load rho = rate x ingress, small below some tens of requests
a second, and the front end, not the engine, limits a run sent faster than 1 / ingress (vLLM's about 94 a second at
the 10.6 ms shipped in the twenty-fourth round), which the corpus model, fitting open loops with one crossing each,
does not price. Closed loops are run without it (kvplan.cli.bench_predict; the corpus model adds each request's own
crossing, above).

Work: O(N) over requests sorted by arrival (the virtual-time form of processor sharing: virtual time runs at 1 / n
while n are present; a request leaves when it has gained `ingress` since its arrival, and with equal work the
first present leaves first, so the queue is a window over the arrivals).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.speed.model import coefficients, engine_key
from kvplan.speed.terms import TERMS

INGRESS = TERMS.index("ingress")


def _departures(arrivals, per_request: float) -> list[float]:
    """When each request of `arrivals` (sorted ascending) is through a processor-sharing server of work `per_request`
    (> 0) each."""
    n = len(arrivals)
    out = [0.0] * n
    target = [0.0] * n  # the virtual time at which each present request has crossed
    t = v = 0.0  # the clock and the virtual time
    head = i = 0  # the first request not yet through; the next to arrive
    while head < n:
        present = i - head
        if not present:  # idle: the next arrival starts alone
            t = arrivals[i]
            target[i] = v + per_request
            i += 1
            continue
        leave = t + (target[head] - v) * present
        if i < n and arrivals[i] < leave:
            v += (arrivals[i] - t) / present
            t = arrivals[i]
            target[i] = v + per_request
            i += 1
        else:
            v, t = target[head], max(t, leave)
            out[head] = t
            head += 1
    return out


def waits(arrivals, per_request: float) -> list[float]:
    """Each request's time in the front end, its own crossing included, for `arrivals` sorted ascending: its
    departure under processor sharing of work `per_request` each, less its arrival (0 where the work is 0)."""
    if per_request <= 0:
        return [0.0] * len(arrivals)
    return [max(0.0, d - a) for a, d in zip(arrivals, _departures(arrivals, per_request))]


def releases(arrivals, per_request: float) -> list[float]:
    """When the engine sees each request (`arrivals` sorted ascending): when it is through the front end, its arrival
    plus `waits`. Still sorted: processor sharing of equal work finishes first come first served, so request ids stay
    indices."""
    if per_request <= 0:
        return list(arrivals)
    return [max(a, d) for a, d in zip(arrivals, _departures(arrivals, per_request))]


def spread(arrivals, per_request: float, servers: int) -> list[float]:
    """`releases` where `servers` API servers apart each take every servers-th request (round robin: request i goes to
    server i mod servers), each its own processor-sharing front end over its share; aligned with `arrivals` (sorted
    ascending). Not sorted: a request may come through its server before an earlier one through another."""
    if servers <= 1:
        return releases(arrivals, per_request)
    out = [0.0] * len(arrivals)
    for k in range(servers):
        out[k::servers] = releases(arrivals[k::servers], per_request)
    return out


def shared(arrivals, per_request: float, replicas: int) -> list[float]:
    """When one of `replicas` data-parallel ranks behind one API server sees its requests: all of `arrivals` (every
    rank's, sorted ascending) cross the one front end together (`releases`), the rank taking every replicas-th
    (round robin from the first). A burst of N over dp 4: each waits N x per_request, not N / 4 x."""
    return releases(arrivals, per_request)[::max(1, replicas)]


def front_end(sim, speed_set: str | None, served: bool = True) -> "FrontEnd | None":
    """The front end a run on `sim` crosses, its step times' coefficient set `speed_set` (kvplan.speed.eras' key),
    or None where it costs nothing: a load that is not `served` (an in-process harness, trtllm-bench), the roofline,
    a set whose `ingress` is 0. A chat request the engine renders natively (vLLM's gpt-oss harmony:
    kvplan.speed.frontend.native_chat) crosses no Python template: check-bench drops the front end where the file
    states that endpoint; simulate knows no endpoint and prices a run as the corpus model prices one that states
    none."""
    per = ingress_of(sim) if served else 0.0
    return FrontEnd(per, f"coefficient set {engine_key(speed_set)}'s fitted ingress") if per > 0 else None


def configured(held, sim, speed_set: str | None, **pool) -> tuple:
    """(the engine's EngineConfig at its scheduler limits `held` (kvplan.simulator.limits.Limits) and the pool's
    settings, with the serving front end ahead of it; that FrontEnd, or None where it costs nothing): what simulate,
    the CLI's and the API's, runs."""
    fe = front_end(sim, speed_set)
    return held.config(**pool, front_end_s=fe.per_request_s if fe else 0.0), fe


def of_set(speed_set: str | None, speed: str = "calibrated") -> "FrontEnd | None":
    """The front end every simulation under coefficient set `speed_set` crosses, before any model is built (the
    note a table of many simulations says once): its fitted `ingress`, or None on the roofline or where it is 0.
    The same seconds as ingress_of(sim) for any calibrated sim of that set (the set's coefficients, not the plan's)."""
    coef = coefficients(speed_set) if speed == "calibrated" else ()
    per = max(0.0, float(coef[INGRESS])) if coef else 0.0
    return FrontEnd(per, f"coefficient set {engine_key(speed_set)}'s fitted ingress") if per > 0 else None


def ingress_of(sim) -> float:
    """The seconds a request the simulator's step times charge in the serving front end: the coefficient set's
    `ingress` (kvplan.speed.terms), 0 on the roofline (the labelled lower bound keeps no front end) or a fixed step."""
    speed = getattr(sim, "speed", None)
    if speed is None or sim.fixed_step_s is not None:
        return 0.0
    return max(0.0, float(speed.coef[INGRESS]))


@dataclass(frozen=True)
class FrontEnd:
    """The front end a run's requests cross: seconds a request, and what it stands for (`source`, for the note)."""

    per_request_s: float
    source: str  # "coefficient set vllm's fitted ingress"

    def said(self, requests: list) -> str:
        """One line for stderr: the cost a request, what a burst waits (this run's own, where it is one), and this
        run's mean and longest wait."""
        n, s = len(requests), self.per_request_s
        w = waits([r.arrival for r in requests], s)
        burst = n > 1 and requests[0].arrival == requests[-1].arrival
        line = (f"front end: {s * 1e3:,.1f} ms a request ({self.source}), shared by the requests crossing it together "
                "(processor sharing)")
        if burst:
            line += f": the burst of {n:,} waits ~{n * s:,.1f} s before the engine sees most of it"
        else:
            line += f": N requests sent at once wait ~N × {s * 1e3:,.1f} ms before the engine sees most of them"
        if n:
            line += f"; this run's requests wait {_wait(sum(w) / n)} on average, at most {_wait(max(w))}"
        return line

    def about(self) -> dict:
        """The JSON record of the front end itself: cost a request, its source, the discipline."""
        return {"per_request_s": self.per_request_s, "source": self.source, "discipline": "processor sharing"}

    def meta(self, requests: list) -> dict:
        """`about`, and this run's mean and longest wait."""
        w = waits([r.arrival for r in requests], self.per_request_s)
        return {**self.about(), "mean_wait_s": sum(w) / len(w) if w else 0.0, "max_wait_s": max(w, default=0.0)}


def _wait(s: float) -> str:
    """A wait in ms below a second (to 0.01 ms: a float's residue, 1.6e-16 s, reads 0.00 ms), else in s."""
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.3g} s"
