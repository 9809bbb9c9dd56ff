"""The PagedAttention paper's Fig. 2 and Fig. 13 (ShareGPT, 2 req/s) next to kvplan's figures.

Run by hand: `.venv/bin/python benchmarks/pagedattention_repro.py [DURATION_S] [SEED]`. The
setting and the paper's figures are in kvplan/simulator/paper.py; tests/test_simulate_paper.py
holds the tolerances. Prints one table: percent of the KV memory holding token states, reserved
for future tokens, never written (internal fragmentation), and the rest; and the mean batch.
"""

from __future__ import annotations

import sys


def _cell(v) -> str:
    return "–" if v is None else f"{v:5.1f}"


def main(duration: float, seed: int) -> None:
    from kvplan.simulator.paper import PAPER_FIG2, PAPER_FIG13_SHAREGPT_2RPS, reproduce

    ours = reproduce(2.0, duration, seed)
    print(f"OPT-13B, A100-40GB, 12 GiB KV, ShareGPT lengths, Poisson 2 req/s, {duration:g} s, seed {seed}")
    print(f"{'':8} {'token states':>17} {'reservation':>17} {'internal frag':>17} {'other/unused':>17} "
          f"{'mean batch':>17}")
    print(f"{'':8} " + " ".join(f"{'paper':>8} {'kvplan':>8}" for _ in range(5)))
    for name, label in (("max", "Max"), ("pow2", "Pow2"), ("oracle", "Oracle"), ("paged", "paged")):
        use, paper = ours[name]["kv"]["memory_use_pct"], PAPER_FIG2[name]
        cols = [(paper.get("token_states"), use["token_states"]), (paper.get("reservation"), use["reservation"]),
                (paper.get("internal_fragmentation"), use["internal_fragmentation"]),
                (paper.get("external_and_other"), use["unused"]),
                (PAPER_FIG13_SHAREGPT_2RPS[name], ours[name]["concurrency"]["mean_running"])]
        print(f"{label:8} " + " ".join(f"{_cell(p):>8} {_cell(o):>8}" for p, o in cols))
    print(f"paged: {100 - ours['paged']['kv']['waste_pct']:.1f}% of allocated KV memory written "
          f"(paper: vLLM {PAPER_FIG2['paged']['token_states']}% token states)")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1800.0, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
