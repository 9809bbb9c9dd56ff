"""How many API servers `vllm serve` runs for its data-parallel ranks, by release: one for all of them (one front end,
kvplan.simulator.frontend.shared) before 0.15.0, one a rank from 0.15.0 (internal load balancing: --api-server-count
defaults to --data-parallel-size). Read in the PyPI wheels (manylinux x86_64) of the releases in READ; the change is
vllm-project/vllm#32525 ("[UX] Default api_server_count to dp_size if not specified", opened 2026-01-17). A release
kvplan has not read is planned as the nearer read one (the older on a tie), and says so.

External or hybrid load balancing (--data-parallel-external-lb, --data-parallel-hybrid-lb, ...) defaults otherwise
(0.15.0 serve.py L86-90: one, or the node's local ranks); kvplan plans the internal balancer, `vllm serve`'s own.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.errors import KvplanError
from kvplan.engines.versions import parse_version


class Read(NamedTuple):
    release: tuple[int, ...]
    one_for_all: bool  # one API server for every DP rank (left alone)
    source: str  # file and lines in that release's wheel


READ = (
    Read((0, 9, 0), True, "no api_server_count anywhere in vllm/entrypoints or vllm/engine/arg_utils.py: one server"),
    Read((0, 9, 1), True, "vllm/entrypoints/cli/serve.py L88-92: --api-server-count added, default=1"),
    Read((0, 9, 2), True, "vllm/entrypoints/cli/serve.py L85-88: --api-server-count default=1"),
    Read((0, 10, 0), True, "vllm/entrypoints/openai/cli_args.py L225-228: --api-server-count default=1"),
    Read((0, 12, 0), True, "vllm/entrypoints/openai/cli_args.py L265-268: --api-server-count default=1"),
    Read((0, 14, 1), True, "vllm/entrypoints/openai/cli_args.py L283-286: default=1; serve.py L53-59 runs it as given"),
    Read((0, 15, 0), False, "vllm/entrypoints/openai/cli_args.py L286-289: default=None; vllm/entrypoints/cli/serve.py "
                            "L86-103: None -> data_parallel_size under internal load balancing (L98)"),
    Read((0, 33, 0), False, "vllm/entrypoints/common/cli_args.py L452-455: default=None; vllm/entrypoints/cli/serve.py "
                            "L113-128: None -> data_parallel_size (L125)"),
)


def _label(release: tuple[int, ...]) -> str:
    return ".".join(map(str, release))


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    pa, pb = (a + (0, 0, 0))[:3], (b + (0, 0, 0))[:3]
    return abs((pa[0] * 1000 + pa[1]) * 1000 + pa[2] - ((pb[0] * 1000 + pb[1]) * 1000 + pb[2]))


def planned(version: str) -> tuple[Read, bool]:
    """(the read release `version` is planned as, whether it is that release itself)."""
    v = (parse_version(version) + (0, 0, 0))[:3]
    hit = next((r for r in READ if r.release == v), None)
    if hit is not None:
        return hit, True
    return min(READ, key=lambda r: (_distance(r.release, v), r.release)), False


def one_for_all(version: str) -> bool:
    """Whether `vllm serve` at `version` runs one API server for all its data-parallel ranks (left to its defaults)."""
    return planned(version)[0].one_for_all


def said(version: str) -> str:
    """One line: how many API servers `version` runs for its DP ranks, from which read release."""
    try:
        read, exact = planned(version)
    except KvplanError:
        return f"vLLM {version!r} is not a release number: its API servers are not known"
    name = _label(read.release)
    how = ("one API server for all its data-parallel ranks" if read.one_for_all
           else "one API server a data-parallel rank (--api-server-count defaults to --data-parallel-size)")
    where = f"vllm {name} wheel, {read.source}"
    return (f"vLLM {version} runs {how} ({where})" if exact else
            f"vLLM {version} planned as {name}, the nearer release kvplan read: {how} ({where})")
