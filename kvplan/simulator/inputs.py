"""The one check of a simulation's inputs: each refused with one wording, whichever front end took it.

A workload or a trace (not both), its times and rates (kvplan.simulator.bounds), the seed, the SLO's percent,
the scheduler's counts (`max_num_seqs`, `max_num_batched_tokens`) and simulate's pool (`mode`, `reserve`).
The CLI's simulate, sweep, cheapest and disagg and the Python API's simulate and disagg call
`check_workload_inputs` with the inputs they take; an input not given (None) is not checked. Inputs are
named by their keyword (kvplan.core.errors.arg: the CLI shows its flags).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.simulator.bounds import check_times
from kvplan.simulator.engine import RESERVE_POLICIES

MAX_SEED = 2**63
MODES = ("paged", "contiguous")
# the most of each count: requests a replica runs at once, tokens one step takes
COUNTS = {"max_num_seqs": 1_000_000, "max_num_batched_tokens": 1 << 24}


def check_workload_inputs(*, workload=None, trace=None, qps=None, duration=None, seed: int | None = None,
                          slo_ttft=None, slo_tpot=None, slo_percent=None, step_overhead=None, mode: str | None = None,
                          reserve: str | None = None, **counts) -> None:
    """Every input given refused with its reason before any work; `counts`: COUNTS' names."""
    if mode is not None and mode not in MODES:
        raise KvplanError(f"{arg('mode')} must be paged or contiguous, got {mode!r}", EXIT_USAGE, param="mode",
                          value=mode, allowed=MODES)
    if reserve is not None and reserve not in RESERVE_POLICIES:
        raise KvplanError(f"{arg('reserve')} must be one of {', '.join(RESERVE_POLICIES)}, got {reserve!r}",
                          EXIT_USAGE, param="reserve", value=reserve, allowed=tuple(RESERVE_POLICIES))
    if trace is not None and workload is not None:
        raise KvplanError(f"give {arg('workload')} or {arg('trace')}, not both", EXIT_USAGE, param="trace")
    check_times(qps=qps, duration=duration, slo_ttft=slo_ttft, slo_tpot=slo_tpot, step_overhead=step_overhead)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise out_of_range("seed", seed, 0, MAX_SEED)
    if slo_percent is not None and not 0 < slo_percent <= 100:
        raise KvplanError(f"{arg('slo_percent')} must be in (0, 100], got {slo_percent:g}", EXIT_USAGE,
                          param="slo_percent", value=slo_percent, allowed=(0, 100))
    for name, value in counts.items():
        if value is not None and not 1 <= value <= COUNTS[name]:
            raise out_of_range(name, value, 1, COUNTS[name])
