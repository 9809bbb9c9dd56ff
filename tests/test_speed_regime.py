"""benchmarks/speed_regime.py's running-batch buckets and its slow-positive sign (the diagnostic issue 21's mid-batch
rows in docs/speed-history.md are read with)."""

from __future__ import annotations

import pytest

from kvplan.speed.bench_load import Load
from conftest import load_script


@pytest.fixture(scope="module")
def regime():
    return load_script("benchmarks/speed_regime.py", "speed_regime")


@pytest.mark.parametrize("batch, label", [(1, "B 1-8"), (8, "B 1-8"), (8.5, "B 9-127"), (127, "B 9-127"),
                                          (127.5, "B 128+"), (512, "B 128+")])
def test_closed_loop_by_running_batch(regime, batch, label):
    # the bucket edges as stated: at most 8 running, 9 to 127, 128 or more (a fractional B, Little's law's, rounds up)
    assert regime.bucket(Load(isl=1024, osl=128, concurrency=64), batch) == label


def test_open_loops_and_llama_bench_apart(regime):
    # an open loop at 2 requests/s is its own bucket whatever its B; a llama-bench pp test is not a serving load
    assert regime.bucket(Load(isl=1024, osl=128, rate=2.0), 4) == "open loop"
    assert regime.bucket(Load(isl=512, osl=0, bench="pp"), 1) == "llama-bench"
    # an unbounded rate (every request at once) is a burst, bucketed by B
    assert regime.bucket(Load(isl=1024, osl=128, rate=float("inf"), num_prompts=256), 256) == "B 128+"


def test_slow_is_positive_for_times_and_throughputs(regime):
    # a TPOT priced 12 ms against 10 ms measured is 20% slow: (12 - 10) / 10 = +0.2
    assert regime.slow("tpot", 0.012, 0.010) == pytest.approx(0.2)
    # an output rate priced 800 tok/s against 1,000 measured is slow too: (1000 - 800) / 1000 = +0.2
    assert regime.slow("output_throughput", 800.0, 1000.0) == pytest.approx(0.2)
    # and one priced 1,250 against 1,000 is optimistic: -0.25
    assert regime.slow("output_throughput", 1250.0, 1000.0) == pytest.approx(-0.25)


def test_buckets_split_moe_from_dense(regime):
    # `--buckets --moe`: a bucket's MoE points (a Shape with routed experts) and its dense ones on lines of their own.
    # Two MoE TTFTs priced 12 and 11 ms against 10 ms measured are +20% and +10% slow, median +15.0%; one dense
    # TTFT priced 9 ms against 10 ms is -10.0%. (TTFT only, so no decode-step shares are computed.)
    from types import SimpleNamespace as NS

    load = Load(isl=1024, osl=128, concurrency=64)
    moe, dense = NS(load=load, shape=NS(num_experts=128)), NS(load=load, shape=NS(num_experts=0))
    found = [(moe, {"ttft": 0.012}, 64, 0, 0, 0.010, "ttft"), (moe, {"ttft": 0.011}, 64, 0, 0, 0.010, "ttft"),
             (dense, {"ttft": 0.009}, 64, 0, 0, 0.010, "ttft")]
    lines = regime.buckets(found, moe=True)
    assert [line.split(" n ")[0].strip() for line in lines] == ["MoE B 9-127", "dense B 9-127"]
    assert "signed  +15.0%" in lines[0] and "signed  -10.0%" in lines[1]
    # without the split the three share one line: +20, +10, -10, median +10.0%
    assert "signed  +10.0%" in regime.buckets(found)[0]
