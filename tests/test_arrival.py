"""The open loop's arrival process: the corpus's `arrival` field (kvplan.speed.corpus), the queueing wait it
selects (kvplan.speed.queueing.arrival_wait) and check-bench's arrivals from a file's own burstiness
(kvplan.bench.load.requests).

Sources of the arithmetic: vLLM's arrivals, vllm-project/vllm@0049e29c41fd383bda519a3f250e3227713081ef:
benchmarks/benchmark_serving.py get_request (gaps numpy gamma(shape=burstiness, scale=1 / (rate x burstiness));
burstiness 1 printed as "Poisson process"); Kingman's G/G/1 approximation (J. F. C. Kingman, "The single server queue in
heavy traffic", Proc. Cambridge Phil. Soc. 57 (1961)): Wq ~ rho / (1 - rho) x (ca2 + cs2) / 2 x S, with cs2 = 0 for a
deterministic server; guidellm's constant profile,
vllm-project/guidellm@03820eba155d34eb602244535cc2412c32af6f54:src/guidellm/scheduler/strategies.py
AsyncConstantStrategy.next_request_time (start + index / rate).
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest
import yaml

from conftest import speed_corpus
from kvplan.bench import detect, load as bench_load
from kvplan.speed.corpus import read_corpus
from kvplan.speed.fields import arrival_of
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos
from kvplan.speed.queueing import arrival_cv2, arrival_wait

CORPUS = Path(__file__).parent / "fixtures" / "speed"
BENCH = Path(__file__).parent / "fixtures" / "bench"


def test_gamma_gaps_squared_cv_is_one_over_burstiness():
    # numpy gamma(shape k, scale theta): mean k theta, variance k theta^2; theta = 1 / (r k):
    # mean 1 / r, variance 1 / (r^2 k), so variance / mean^2 = 1 / k. k = 4: 0.25; k = 0.5: 2.
    assert arrival_cv2("gamma", 4.0) == pytest.approx(0.25)
    assert arrival_cv2("gamma", 0.5) == pytest.approx(2.0)
    assert arrival_cv2("poisson") == 1.0 and arrival_cv2("constant") == 0.0
    assert arrival_cv2("closed") is None and arrival_cv2("burst") is None


def test_kingman_wait_by_hand():
    # rho 0.5, c2 2 (burstiness 0.5): 0.5 / 0.5 x 2 / 2 = 1.0 service time
    assert arrival_wait(0.5, 1e9, 2.0) == pytest.approx(1.0)
    # rho 0.5, c2 0.02 (burstiness 50, llm-d's exp-7): 1 x 0.02 / 2 = 0.01
    assert arrival_wait(0.5, 1e9, 0.02) == pytest.approx(0.01)
    # c2 1 is Pollaczek-Khinchine's M/D/1: rho 0.9: 0.9 / 0.1 / 2 = 4.5
    assert arrival_wait(0.9, 1e9, 1.0) == pytest.approx(4.5)
    assert arrival_wait(0.9, 2.0, 2.0) == 2.0 and arrival_wait(1.5, 2.0, 0.5) == 2.0  # the bound, and past rho 1


def test_evenly_spaced_arrivals_wait_only_past_rho_one():
    assert arrival_wait(0.99, 4.5, 0.0) == 0.0  # D/D/1 below rho 1: each request finds the server free
    # rho 2, S = 1 s, gaps 0.5 s, N = 10 (bound (N - 1) / 2 = 4.5): request n arrives at 0.5 n and starts at
    # n, waiting 0.5 n; the mean over n = 0..9 is 0.5 x 4.5 = 2.25 = 4.5 x (1 - 1 / 2)
    assert arrival_wait(2.0, 4.5, 0.0) == pytest.approx(2.25)


def test_open_loop_ttft_follows_the_arrival_process():
    def ttft(cv2):
        load = Load(1000, 100, rate=5.0, num_prompts=100, cap=64, arrival_cv2=cv2)
        return combos(load, e2e_estimate=2.0, service_estimate=0.1)[2]["ttft"][0]
    # S 0.1 s at 5 req/s: rho 0.5; the wait goes in as q / B on the t_wave coefficient (B = 5 x 2 = 10)
    base = ttft(None)
    assert ttft(0.0) == pytest.approx(base)  # constant spacing below rho 1: no wait
    assert ttft(1.0) - base == pytest.approx(0.5 / 10)  # M/D/1: 0.5 service times, over B
    assert ttft(2.0) - base == pytest.approx(1.0 / 10)  # gamma, burstiness 0.5: 1.0 service times


def test_the_reader_refuses_an_unknown_arrival(tmp_path):
    doc = {"source": {"id": "x", "date": "2025-01-01"},
           "points": [{"id": "p1", "engine": "vllm", "request_rate": 4, "arrival": "uniform"}]}
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=r"x\.yaml, point p1: arrival 'uniform' is not one of poisson, gamma\(k\)"):
        read_corpus(tmp_path)
    for bad in ("gamma", "gamma(0)", "gamma(-1)", "Poisson process"):
        with pytest.raises(ValueError):
            arrival_of(bad)
    assert arrival_of("gamma(0.5)") == pytest.approx(2.0) and arrival_of(" Poisson ") == 1.0


def test_every_rate_point_of_the_corpus_names_its_arrival():
    missing = []
    for name, doc in speed_corpus():
        for point in doc.get("points") or ():
            p = {**(doc.get("defaults") or {}), **point}
            rate = p.get("request_rate")
            if isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate) and "arrival" not in p:
                missing.append(f"{name}:{p.get('id')}")
            if "arrival" in p:
                arrival_of(p["arrival"])
        assert ((doc.get("inferred") or {}).get("arrival")
                or not any("arrival" in (p or {}) for p in doc.get("points") or ())), name
    assert not missing


def test_check_bench_reads_the_files_burstiness():
    (run,) = detect.read_runs((BENCH / "vllm-l40s-llama32-3b-10qps.json").read_text(), "x.json")
    assert run.settings.burstiness == 1.0  # "burstiness": 1.0 in the saved JSON
    # vLLM prints "Burstiness factor: {burstiness} ({distribution})" above its result block (get_request's
    # caller in benchmark_serving.py); a published report with the line set to a gamma run
    text = (BENCH / "vllm-report-gemma3-27b.txt").read_text()
    text = re.sub(r"(?m)^(=+ Serving Benchmark Result =+)$", "Burstiness factor: 0.5 (Gamma distribution)\n\\1", text,
                  count=1)
    (run,) = detect.read_runs(text, "x.txt")
    assert run.settings.burstiness == 0.5


def test_simulated_gamma_arrivals_keep_the_rate_and_spread():
    # 20,000 gaps at 4 req/s, burstiness 0.5: mean 1 / 4 = 0.25 s, squared CV 1 / 0.5 = 2 (tolerances ~4 sigma)
    reqs = bench_load.requests(10, 10, 20_000, 4.0, burstiness=0.5)
    gaps = [b.arrival - a.arrival for a, b in zip(reqs, reqs[1:])]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.25, rel=0.05)
    assert statistics.pvariance(gaps) / mean ** 2 == pytest.approx(2.0, rel=0.12)
    poisson = bench_load.requests(10, 10, 50, 4.0)
    assert poisson == bench_load.requests(10, 10, 50, 4.0, burstiness=1.0)  # burstiness 1: the Poisson draw as before
