"""load_trace's block names stand for the chains of hash ids they did before (`/1/2/3`, now a number). That the
faster tier and prefix bookkeeping leaves a replay's results as they were is pinned in
tests/test_simulate_replay_pinned.py (summary, records, tiers and their contents, from the old code)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.simulator.traces import load_trace

TRACE = Path(__file__).parent / "fixtures" / "traces" / "mooncake_conversation_400.jsonl"


def test_trace_block_names_are_the_id_chains():
    # a block's name stands for every hash id up to it: two blocks share a name exactly when their chains of ids
    # from the first block are equal, and each name is one object
    reqs, _ = load_trace(str(TRACE))
    rows = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    by_name, objects = {}, {}
    for r, row in zip(reqs, sorted(rows, key=lambda x: x["timestamp"])):
        assert r.prompt == row["input_length"]
        for depth, (key, _) in enumerate(r.prefix, 1):
            assert by_name.setdefault(key, tuple(row["hash_ids"][:depth])) == tuple(row["hash_ids"][:depth])
            assert objects.setdefault(key, key) is key
    assert len(set(by_name.values())) == len(by_name)  # different chains, different names
