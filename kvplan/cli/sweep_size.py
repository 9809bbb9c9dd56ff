"""How big a sweep is before it runs: the plan count and an estimate of its time and memory said up
front, and a refusal above a cap (`--max-plans`) or above the memory this process may use.

A sweep holds every plan to rank them (the outputs are ranked), so its memory grows with the plan count;
the cap keeps a mistyped cross product (issue 25: `-m all -g all` over 1,024 contexts, 37 million plans,
killed by the kernel at 24 GB after 6 minutes) from running silently into the kernel's OOM killer.
"""

from __future__ import annotations

import resource

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.meminfo import mem_available

DEFAULT_MAX_PLANS = 1_000_000
# Measured on the 2-core development machine: a 54,400-plan sweep (2 models x 34 GPUs x 4 counts x 100 contexts
# x 2 KV dtypes) peaked at 95 MB resident, 23 MB of it the interpreter and kvplan (a 1-plan sweep), with or
# without -o x.csv -o x.json (rows are streamed to the files; before, 452 MB); 0.8 CPU-s to plan and about
# 2 CPU-s per file written.
PLANS_PER_SECOND = 20_000  # planning and one file
BYTES_PER_PLAN = 1_400
BASE_BYTES = 25 * 2**20


def estimate(plans: int) -> tuple[float, int]:
    """(seconds, bytes) a sweep of `plans` plans takes, at the development machine's measured rates."""
    return plans / PLANS_PER_SECOND, BASE_BYTES + plans * BYTES_PER_PLAN


def memory_limit() -> int | None:
    """The bytes this process may still use: its address-space limit (ulimit -v) or the memory the
    system has available, whichever is less; None where neither is known."""
    limits = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(soft)
    available = mem_available()
    if available is not None:
        limits.append(available)
    return min(limits) if limits else None


def _duration(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min"


def check_size(plans: int, max_plans: int, flag: str) -> str:
    """The line said before a sweep runs; a KvplanError above `max_plans` (0: no cap) or when the estimate
    is more memory than the process may use. `flag` is the option that raises the cap."""
    if max_plans < 0:
        raise KvplanError(f"{flag} must be 0 (no cap) or more, got {max_plans}", EXIT_USAGE, param="max_plans",
                          value=max_plans)
    seconds, need = estimate(plans)
    said = (f"sweep: {plans:,} plan{'s' if plans != 1 else ''} to make; about {_duration(seconds)} and "
            f"{need / 2**30:,.1f} GiB of memory (kvplan holds every plan to rank them)")
    if max_plans and plans > max_plans:
        raise KvplanError(f"{plans:,} plans are more than {max_plans:,} (about {_duration(seconds)} and "
                          f"{need / 2**30:,.1f} GiB); narrow the sweep, or pass {flag} {plans} to go on",
                          EXIT_USAGE, param="max_plans", value=plans)
    room = memory_limit()
    if room is not None and need > room:
        raise KvplanError(f"{plans:,} plans need about {need / 2**30:,.1f} GiB of memory, more than the "
                          f"{room / 2**30:,.1f} GiB this process may use (ulimit -v, free memory); narrow the sweep",
                          EXIT_USAGE, param="max_plans", value=plans)
    return said
