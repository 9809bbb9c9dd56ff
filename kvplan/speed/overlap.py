"""Whether an engine's host work a step overlaps the GPU's step (vLLM's async scheduling), so that work's fixed cost
(the `step` term) is off a step's critical path.

vLLM V1 without async scheduling runs one step at a time: `EngineCore.step` schedules, hands the batch to the worker,
waits for the sampled tokens and updates the requests from them before it schedules the next (vllm 0.11.2 sdist
vllm/v1/engine/core.py L327-350), so the GPU idles through the scheduler's, the input preparation's and the output
update's host time each step. With async scheduling the executor takes two batches at once (`max_concurrent_batches`
2: v1/executor/uniproc_executor.py L59-60, multiproc_executor.py L412-415) and the engine core runs
`step_with_batch_queue` (core.py L200-202, L362-), scheduling step n + 1 while step n runs (vllm-project/vllm#19970,
"overlapping scheduling with model execution"). It is off by default up to 0.13.0 (`async_scheduling: bool = False`:
vllm 0.11.2 sdist vllm/config/scheduler.py L140, 0.13.0 L133) and on by default from 0.14.0 (`Field(default=None)`,
0.14.0 vllm/config/scheduler.py L133, resolved in vllm/config/vllm.py L588-628: True unless pipeline parallelism,
a speculative method other than EAGLE / MTP, or an executor without support). A run states it with
`async_scheduling`; a release not stated is the one current at the run's date (0.14.0 reached PyPI 2026-01-20:
kvplan.engines.vllm.releases UPLOADED), the current one where no date is given (a plan). Other engines: not read
here (False).
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.releases import release_of


class AsyncRule(NamedTuple):
    flag: str  # the option a run states it with
    since: tuple[int, ...]  # the first release scheduling asynchronously by default
    date: str  # that release's upload to PyPI: a run of no stated release dated before it ran an older one
    first: tuple[int, ...]  # the first release of the engine that has it (V1); before it, never


ASYNC = {"vllm": AsyncRule("async_scheduling", (0, 14, 0), "2026-01-20", (0, 8))}


def overlaps_host(engine: str | None, version: str | None, flags: dict | None = None, pp: int = 1,
                  date: str | None = None) -> bool:
    """Whether a vLLM run's host work a step overlaps its GPU step: the flag as the run states it, else the release's
    default (on from its rule's `since`, never with pipeline parallelism; a release not stated, by the run's `date`);
    False for V0 (before 0.8) and other engines."""
    rule = ASYNC.get(engine or "")
    if rule is None:
        return False
    stated = str((flags or {}).get(rule.flag, "")).lower()
    if stated in ("true", "false"):
        return stated == "true"
    release = release_of(version) if version else None
    if release is not None and release < rule.first:
        return False
    if release is None:
        return pp <= 1 and (not date or date >= rule.date)
    return pp <= 1 and release >= rule.since


def run_overlaps(case) -> bool:
    """overlaps_host for a corpus case (kvplan.speed.corpus.Case): its engine, release, flags, stages and date."""
    return overlaps_host(case.engine, case.version, case.flags, case.pp, case.date)
