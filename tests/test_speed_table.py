"""benchmarks/speed_corpus.py's error table: total tokens/s is scored on a row of its own, after the
all-figures line it is not part of (kvplan.speed.score.SCORED_APART)."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import load_script


def _row(metric: str, pred: float, meas: float) -> tuple:
    return SimpleNamespace(), metric, pred, meas


def test_total_throughput_has_its_own_row_outside_all_figures():
    tool = load_script("benchmarks/speed_corpus.py", "speed_corpus_table")
    # TPOT 11 ms predicted for 10 measured: +10%; total tok/s 500 for 1,000: -50%
    cal = [_row("tpot", 0.011, 0.010), _row("total_throughput", 500.0, 1000.0)]
    roof = [_row("tpot", 0.005, 0.010), _row("total_throughput", 2000.0, 1000.0)]
    lines = tool.table(cal, roof)
    names = [line.split(" | ")[0].lstrip("| ") for line in lines[2:]]
    assert names == ["TPOT / ITL", "all figures", "total tok/s (not in all)"]
    # all figures holds the TPOT point alone: n 1, +10% (the -50% total would make n 2 and the median -20%)
    assert lines[3].startswith("| all figures | 1 | 10% | 10% | 100% | 0% |")
    # roofline: TPOT -50% (optimistic); total +100%, a throughput over by more than 20% (optimistic too)
    assert lines[4].startswith("| total tok/s (not in all) | 1 | 50% | -50% | 0% | 0% |")
    assert lines[4].endswith("| 100% (100%) | 100% |")
