"""The wait in queue at a deterministic server, by how its requests arrive: the corpus's `arrival` kinds (`ARRIVALS`),
the squared coefficient of variation of each kind's gaps (`arrival_cv2`), and the mean wait they give (`arrival_wait`:
Pollaczek-Khinchine's M/D/1, Kingman's G/D/1, D/D/1), which kvplan.speed.load prices an open loop's wait for the
prefill server and an overloaded loop's growing queue with; and the step a closed loop's replacement request misses
(`missed_step`)."""

from __future__ import annotations

import math

ARRIVALS = ("poisson", "gamma", "constant", "closed", "burst", "unstated")  # the corpus's `arrival` kinds
# An unstated arrival process (a source that names the rate, not the client that kept it) gets the wait every
# process at that rate shares, D/D/1's: none below rho 1, the overload's queue past it; no variability term.
# Chosen on the training CV over Poisson and no wait at all (docs/speed.md, "The arrival row").
UNSTATED_CV2 = 0.0


def arrival_cv2(kind: str, burstiness: float | None = None) -> float | None:
    """The squared coefficient of variation of an open loop's gaps between arrivals, or None where no
    arrival wait applies: Poisson 1; gamma gaps of shape k (vllm's `--burstiness k`: numpy's
    gamma(shape=k, scale=1 / (rate k)), variance k / (rate k)^2, over the squared mean 1 / rate^2) 1 / k;
    evenly spaced 0; an unstated process UNSTATED_CV2 (as evenly spaced); a closed loop or a burst None."""
    if kind == "poisson":
        return 1.0
    if kind == "gamma":
        if not burstiness or burstiness <= 0:
            raise ValueError(f"a gamma arrival needs a positive burstiness, not {burstiness!r}")
        return 1.0 / burstiness
    if kind == "constant":
        return 0.0
    if kind == "unstated":
        return UNSTATED_CV2
    return None


def arrival_wait(rho: float, bound: float, cv2: float = 1.0) -> float:
    """The mean wait in queue over the service time of a deterministic server whose arrivals' gaps have
    squared coefficient of variation `cv2`: Kingman's G/D/1 approximation rho / (1 - rho) x cv2 / 2, which
    is Pollaczek-Khinchine's M/D/1 exactly at cv2 = 1; at most `bound`, also its value at rho >= 1
    (overloaded). Evenly spaced arrivals (cv2 = 0) are D/D/1: none below rho 1, and past it the n-th of N
    requests (bound = (N - 1) / 2) waits n (1 - 1 / rho) service times, a mean of bound x (1 - 1 / rho)."""
    if rho <= 0:
        return 0.0
    if cv2 <= 0:
        return bound * (1 - 1 / rho) if rho > 1 else 0.0
    return bound if rho >= 1 else min(bound, rho / (1 - rho) * cv2 / 2)


def overload_wait(rho: float, n: float, slots: float) -> float:
    """The mean wait in queue, in service times T, of an overloaded replica's run: N requests arriving evenly at
    rho = r T >= 1 onto a replica that runs up to `slots` of them at once (its running cap) and frees one slot every
    T, at T, 2T, ... from the first arrival (a burst's assumption, kvplan.speed.load). The k-th request arrives at
    x T, x = (k - 1) / rho, when floor(x) have left: k - 1 - floor(x) are ahead of it; past the first `slots` of them
    it starts at the (k - slots - floor(x))-th free slot after its arrival, (k - slots - frac(x)) T later, so it waits
    max(0, (k - 1)(1 - 1 / rho) + 1 - slots) T, exactly; the mean over k = 1..N. At rho -> inf this is the burst's
    (N - B)(N - B + 1) / 2N; with one slot D/D/1's (N - 1) / 2 x (1 - 1 / rho)."""
    if rho <= 1 or n <= 0:
        return 0.0
    a = 1.0 - 1.0 / rho
    j0 = max(0, math.floor((slots - 1) / a) + 1)  # the first j = k - 1 that waits: a j + 1 - slots > 0
    c = n - j0  # the requests that wait, j = j0..N - 1
    return (c * (1 - slots + a * j0) + a * c * (c - 1) / 2) / n if c > 0 else 0.0


def missed_step(b: float, g: float, steps: float) -> tuple[float, float]:
    """The step a closed loop's replacement request waits out, as (t_dec, t_grp) weights, where B requests of equal
    output lengths run at a busy engine in B / G groups (kvplan.speed.load.group) whose G prompts take steps(G) chunks.
    A request ends at a step's end; its client's next one reaches the engine after the engine has started the next
    step, and the engine takes new requests only between steps (vLLM's EngineCore: `run_busy_loop` runs
    `_process_input_queue`, then `_process_engine_step`, whose outputs leave after the step: vllm-project/vllm@
    00080ee13c7a451fce071ccb8d0e94d395acf5a7:vllm/v1/engine/core.py), so it waits that whole step, not half of one.
    The groups' prefills follow one another a step apart, and so do their ends: the first group's replacement misses
    a decode step (t_dec), every later group's the step prefilling the group before it, one chunk of it
    (t_grp / steps(G)) beside the same decodes: u = 1 - G / B of them."""
    return 1.0, max(0.0, 1.0 - g / b) / max(1.0, steps)
