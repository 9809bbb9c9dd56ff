"""kvplan's hit-rate curve beside a published one: the Mooncake paper (FAST'25, kvcache-ai/Mooncake
FAST25-release/Mooncake-FAST25.pdf, §5.3.1 and Figure 9) on the traces it released with it.

The paper's Figure 9 plots each trace's prefix-cache hit rate against the cache's capacity in tokens,
"considering only the sequence of requests", and labels where the 3M-token line (one node's local DRAM)
crosses each curve with the hit rate there as a share of the trace's maximum: Conversation "41% max",
Synthetic "46% max" (Tool&Agent 75%, All 48%: that trace is not in the release snapshot kvplan has). Its text:
"a local cache with a 3M token capacity does not achieve 50% of the theoretical maximum hit rate in
most scenarios", and "a cache capacity of 50M tokens nearly reaches the theoretical maximum hit rate".

Here each figure of kvplan's side is checked by an independent count (a set for the maximum, a brute-force
LRU at the capacity), and beside the paper's: within 4 points of its labels, under half the maximum at 3M
tokens, within 1% of it at 50M. docs/offload.md has the table.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from kvplan.simulator.blocks import BLOCK_TOKENS, block_accesses
from kvplan.simulator.mrc import lru_hits, stack_distances
from kvplan.simulator.traces import load_trace

TRACES = Path(__file__).parent / "fixtures" / "traces"
PAPER_LABEL_AT_3M = {"conversation": 0.41, "synthetic": 0.46}  # Figure 9: hit rate at 3M tokens / the maximum


def _blocks(name: str, tmp_path: Path) -> list:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(lzma.decompress((TRACES / f"mooncake_fast25_{name}.jsonl.xz").read_bytes()))
    requests, _ = load_trace(str(path))
    return block_accesses(requests)


@pytest.mark.parametrize("name", sorted(PAPER_LABEL_AT_3M))
def test_mooncake_fig9_hit_rates_at_3m_and_50m_tokens(name, tmp_path):
    keys = _blocks(name, tmp_path)
    curve = stack_distances(keys)
    # the maximum (every reuse kept) counted apart: accesses to a block seen before
    seen, again = set(), 0
    for k in keys:
        again += k in seen
        seen.add(k)
    assert curve.accesses - curve.cold == again == curve.hits(curve.max_distance)
    local, pooled = 3_000_000 // BLOCK_TOKENS, 50_000_000 // BLOCK_TOKENS
    assert curve.hits(local) == lru_hits(keys, local)  # the one-pass curve, checked by a brute-force LRU
    share_3m = curve.hits(local) / again
    share_50m = curve.hits(min(pooled, curve.max_distance)) / again
    assert share_3m < 0.5 and abs(share_3m - PAPER_LABEL_AT_3M[name]) <= 0.04
    assert share_50m >= 0.99
