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
0.14.0 vllm/config/scheduler.py L133, resolved in vllm/config/vllm.py L588-628). Its default is off under pipeline
parallelism in 0.14.0 and 0.14.1 (L590-596: "not yet supported with pipeline_parallel_size > 1"), and on there from
0.15.0: vllm-project/vllm#32359 ("Support async scheduling + PP", merged 2026-01) lifted it, and the 0.16.0 sdist's
default branch (vllm/config/vllm.py L647-) has no such exclusion, nor have 0.19.0's (L755-) or 0.28.0's (L1185-);
0.15.x ships wheels only, so 0.15.0, the first release cut after the merge, is the end read here (`pp_until`). What
the default branch still turns off (0.28.0 L1185-1230), none of which the corpus's runs state: a pooling model,
a speculative method other than EAGLE / MTP / n-gram on the GPU, `disable_padded_drafter_batch`, an executor without
support, ROCm's DeepEP high-throughput kernels under DBO. A run states it with `async_scheduling`, read first but
only from a V1 release on (opt_bool: 1/yes/true); a release not stated is the one current at the run's date (0.14.0
reached PyPI 2026-01-20, 0.15.0 2026-01-29: kvplan.engines.vllm.releases UPLOADED), the current one where no date is
given (a plan). Other engines: not read here (False).
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.releases import release_of
from kvplan.core.flags import opt_bool


class AsyncRule(NamedTuple):
    flag: str  # the option a run states it with
    since: tuple[int, ...]  # the first release scheduling asynchronously by default
    date: str  # that release's upload to PyPI: a run of no stated release dated before it ran an older one
    first: tuple[int, ...]  # the first release of the engine that has it (V1); before it, never
    pp_until: tuple[int, ...]  # the first release whose default is on under pipeline parallelism too
    pp_date: str  # that release's upload to PyPI


ASYNC = {"vllm": AsyncRule("async_scheduling", (0, 14, 0), "2026-01-20", (0, 8), (0, 15, 0), "2026-01-29")}


def overlaps_host(engine: str | None, version: str | None, flags: dict | None = None, pp: int = 1,
                  date: str | None = None) -> bool:
    """Whether a vLLM run's host work a step overlaps its GPU step: False for V0 (before the rule's `first` release)
    and other engines; else the flag as the run states it, else the release's default (on from the rule's `since`,
    but under pipeline parallelism only from `pp_until`; a release not stated, by the run's `date`)."""
    rule = ASYNC.get(engine or "")
    release = release_of(version) if version else None
    if rule is None or (release is not None and release < rule.first):
        return False
    if rule.flag in (flags or {}):
        return opt_bool(dict(flags), rule.flag, False)
    if release is None:
        return not date or (date >= rule.date and (pp <= 1 or date >= rule.pp_date))
    return release >= rule.since and (pp <= 1 or release >= rule.pp_until)


def run_overlaps(case) -> bool:
    """overlaps_host for a corpus case (kvplan.speed.corpus.Case): its engine, release, flags, stages and date."""
    return overlaps_host(case.engine, case.version, case.flags, case.pp, case.date)


def plan_overlaps(engine: str | None, version: str | None, stated: bool | None = None, pp: int = 1) -> bool:
    """overlaps_host for a plan: its engine's release (None: current), what its options state (Request.host_overlap;
    None: nothing) and its pipeline stages."""
    rule = ASYNC.get(engine or "")
    return overlaps_host(engine, version, {rule.flag: stated} if rule and stated is not None else None, pp)
