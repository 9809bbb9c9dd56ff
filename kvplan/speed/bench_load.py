"""A benchmark's load on one data-parallel replica, `Load`, and what it says of itself (its decode context, its drain,
the replicas it keeps busy, whether it runs at a rate, in waves, overloaded): what kvplan.speed.load prices, and the
front end's and a stated median's rules read. Split from kvplan/speed/load.py (round 45); the arithmetic unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.speed.model import PREFILL_CHUNK


@dataclass(frozen=True)
class Load:
    """A benchmark's load on one data-parallel replica of the deployment."""

    isl: float
    osl: float
    concurrency: float | None = None  # closed loop; None: open loop or all at once
    rate: float | None = None  # requests/s over the deployment; None or inf: all at once
    num_prompts: float | None = None
    cap: float = 256  # the most requests a replica runs at once (engine limit, KV room)
    dp: int = 1
    bench: str = "serve"  # serve | pp | tg (llama-bench)
    depth: float = 0  # llama-bench: cached tokens before the measured ones
    ubatch: int = 512  # llama-bench's prompt chunk
    chunk: int = PREFILL_CHUNK  # tokens one prefill step takes (vLLM's max_num_batched_tokens default)
    fixed: bool = False  # every request the same isl and osl (stated lengths, not a dataset's draw)
    arrival_cv2: float | None = 1.0  # an open loop's gaps' squared coefficient of variation; None: no wait
    drawn: bool = False  # output lengths drawn per request (a random range, a dataset): requests finish apart
    out_cv2: float = 0.0  # drawn output lengths' squared coefficient of variation (kvplan.speed.spread); 0: unknown
    waves: bool = False  # the engine decodes only when no prefill batch forms (kvplan.engines.scheduler.runs_waves)
    lockstep: int = 1  # data-parallel workers whose forwards run together (kvplan.engines.scheduler.lockstep_workers)
    lock_mixed: bool = False  # their prefill chunks ride in decode steps (kvplan.engines.scheduler.lockstep_mixed)
    median_gap: bool = False  # the TPOT figure is the median gap between tokens (kvplan.speed.figures.median_gap)
    medians: frozenset = frozenset()  # the ttft / e2el figures stated as medians only (kvplan.speed.figures.medians)
    served: bool = True  # requests cross the engine's HTTP front end (not an in-process harness): frontend.py
    endpoint: str | None = None  # the API a served run's requests hit, as stated: chat | completions (None: not stated)
    templated: bool = True  # the front end renders the prompt with its Python chat template and tokenizer
    recompute: float = 0.0  # prompt prefills a request redoes after a preemption (kvplan.speed.cohort)
    balance: tuple | None = None  # attention-DP balancing's (timeout, batching wait) iterations: kvplan.speed.balance
    batch_wait: tuple | None = None  # batch waiting's (timeout iterations, max tokens ratio): kvplan.speed.balance
    poll_wait: float = 0.0  # decode steps a spread arrival waits for the scheduler's poll (`poll`, module docstring)
    fetch_lag: float = 0.0  # decode steps more it waits, fetched as the step before its own starts (`poll`, likewise)
    packed: bool = False  # a prefill step packs whole prompts up to `chunk`, the server's length: vLLM's V0 on MLA
    joins_late: bool = False  # a request joins the running batch after its prefill batch (SGLang), not when scheduled
    mixed: bool = False  # the step budget takes the running decodes first: kvplan.engines.scheduler.shares_budget


def decode_context(load: Load) -> float:
    """The mean context one decode step of the running requests reads: isl + osl / 2 (each half-way through its
    output), or, where output lengths are drawn (`drawn`, `out_cv2`), over the running set, which is length-biased
    (kvplan.speed.spread: a request runs as many steps as it generates): isl + osl (1 + cv^2) / 2."""
    cv2 = load.out_cv2 if load.drawn else 0.0
    return load.isl + load.osl * (1 + max(0.0, cv2)) / 2


def drain_steps(load: Load, osl: float) -> float:
    """D: the decode steps a finite run lasts past its requests' mean output while its longest ends, where output
    lengths are drawn (`drawn`, `out_cv2` > 0; else 0): osl sqrt(3 cv^2), the top of a uniform law of mean osl and that
    spread, osl (1 + sqrt(3 cv^2)): sglang.bench_serving's random range [r L, L] (its mean L (1 + r) / 2, cv^2
    (1 - r)^2 / (3 (1 + r)^2): L - mean = mean sqrt(3 cv^2)) and vllm bench serve's [L (1 - r), L (1 + r)] alike."""
    return osl * math.sqrt(3 * load.out_cv2) if load.drawn and load.out_cv2 > 0 else 0.0


def overloaded(rho_cap: float | None) -> bool:
    """Whether an open loop's rate reaches what a replica serves at its running cap: rho_cap = r / dp x T(cap)."""
    return rho_cap is not None and rho_cap >= 1


def in_waves(load: Load) -> bool:
    """Whether a closed loop of equal lengths runs in waves (`waves`; the module's docstring)."""
    return bool(load.waves and load.fixed and load.concurrency and not at_rate(load))


def busy(load: Load) -> float:
    """The data-parallel replicas a run keeps busy: dp, fewer where a closed loop's concurrency or the prompts are
    fewer than the replicas (concurrency 1 over 4 DP-attention workers: one runs a request, the others idle)."""
    return float(max(1.0, min(load.dp, load.concurrency or load.dp, load.num_prompts or load.dp)))


def at_rate(load: Load) -> bool:
    """Whether the load is open loop at a finite request rate."""
    return bool(load.rate and load.rate != float("inf"))
