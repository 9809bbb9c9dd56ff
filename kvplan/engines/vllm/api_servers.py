"""How many API servers `vllm serve` runs for its data-parallel ranks, by release: one for all of them (one front end,
kvplan.simulator.frontend.shared) before 0.15.0, one a rank from 0.15.0 (internal load balancing: --api-server-count
defaults to --data-parallel-size; vllm-project/vllm#32525, "[UX] Default api_server_count to dp_size if not
specified").

Read in the PyPI wheels (manylinux x86_64):
* 0.9.0: no api_server_count anywhere in vllm/entrypoints or vllm/engine/arg_utils.py: one server;
* 0.9.1: vllm/entrypoints/cli/serve.py L88-92 adds --api-server-count, default=1; 0.9.2 serve.py L85-88, 0.10.0
  vllm/entrypoints/openai/cli_args.py L225-228, 0.12.0 cli_args.py L265-268 and 0.14.1 cli_args.py L283-286 keep
  default=1 (0.14.1's serve.py L53-59 runs it as given);
* 0.15.0: cli_args.py L286-289 default=None, and vllm/entrypoints/cli/serve.py L86-103 sets None to
  data_parallel_size under internal load balancing (L98); 0.33.0 the same (entrypoints/common/cli_args.py L452-455,
  serve.py L113-128, L125).
0.14.1 and 0.15.0 are consecutive releases, so the boundary is exact; the releases not read (0.11, 0.13, 0.16 to
0.32) lie between read ones that agree.

External or hybrid load balancing (--data-parallel-external-lb, --data-parallel-hybrid-lb, ...) defaults otherwise
(0.15.0 serve.py L86-90: one, or the node's local ranks); kvplan plans the internal balancer, `vllm serve`'s own.
"""

from __future__ import annotations

from kvplan.engines.versions import parse_version

SERVER_PER_RANK = (0, 15, 0)  # the first release whose --api-server-count defaults to --data-parallel-size


def one_for_all(version: str) -> bool:
    """Whether `vllm serve` at `version` runs one API server for all its data-parallel ranks (left to its defaults)."""
    return parse_version(version) < SERVER_PER_RANK


def said(version: str) -> str:
    """One line: how many API servers `version` runs for its DP ranks, and where that was read."""
    if one_for_all(version):
        return (f"vLLM {version} runs one API server for all its data-parallel ranks (--api-server-count, from 0.9.1, "
                "defaults to 1 before 0.15.0: vllm 0.14.1 wheel, vllm/entrypoints/openai/cli_args.py L283-286)")
    return (f"vLLM {version} runs one API server a data-parallel rank (from 0.15.0 --api-server-count defaults to "
            "--data-parallel-size: vllm 0.15.0 wheel, vllm/entrypoints/cli/serve.py L98; vllm-project/vllm#32525)")
