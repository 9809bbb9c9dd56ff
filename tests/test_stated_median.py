"""A figure a source states only as a median is priced at the median request of the load's own schedule
(kvplan.speed.stated), the mean elsewhere; the corpus reader names such figures (kvplan.speed.figures.medians)."""

from dataclasses import replace

import pytest

from kvplan.speed.figures import medians
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos
from kvplan.speed.stated import stated


def _both(load: Load, names=("ttft", "e2el")):
    return combos(load)[2], combos(replace(load, medians=frozenset(names)), median=stated)[2]


def test_the_reader_names_the_figures_stated_only_as_a_median():
    m = {"ttft_ms": {"median": 73.0, "p99": 180.0}, "e2el_ms": {"mean": 900.0, "median": 850.0},
         "itl_ms": {"median": 9.0}}
    assert medians(m) == {"ttft"}  # e2el has a mean; ITL is median_gap's
    assert medians({"ttft_ms": 73.0, "e2el_ns": {"median": 5e8}}) == {"e2el"}  # a bare value is "the one value"
    assert medians({"ttft_ms": {"mean": 1.0, "median": 2.0}}) == frozenset()


def test_a_burst_in_three_waves_the_mean_and_the_median_ttft_by_hand():
    # N = 9 equal requests at once onto B = 3 slots (cap 3): three waves. Prompts of 2,048 tokens = the chunk, so the
    # first wave prefills in K = 3 steps, one prompt a step (q = 1); osl 11, L = 10 tokens after the first.
    # T = (t_wave + 11 t_dec) / 3. First wave: TTFT j / 3 x t_wave, j = 1, 2, 3.
    # A later request (one prompt a group, G = 1: steps(G) = 1) is its group's prefill + one decode step, (0, 1, 1),
    # after waiting (j - 3) T for its slot, and F1 (1 - r / 3) more, r = its turn among the slots (1, 2, 3, 1, 2, 3).
    # F1, the first request's E2E: its prompt ends in step d = 1 (K / B = 1), it rides m1 = min(10, K - d) = 2 of the
    # wave's steps (t_wave / 3 each), then 8 decode steps: F1 = (1, 8, 0).
    # Median of 9: request 5, the second later one: (0, 1, 1) + 2 T + F1 (1 - 2 / 3)
    #   = (0, 1, 1) + (2/3, 22/3, 0) + (1/3, 8/3, 0) = (1, 11, 1).
    # Mean (load.py's burst: requests 4..9 wait 1..6 T, (1 + ... + 6) / 9 = 7/3 T = (7/9, 77/9, 0), the schedule's
    # exact (N - B)(N - B + 1) / 2N, as the median's; B / N = 1/3 of the wave's (B + 1) / 2B = 2/3 t_wave; 2/3 of
    # (0, 1, 1); the refill (N - B) / N x F1 x (1 - mean r / B) = 2/3 x 1/3 F1, mean r = 2):
    #   a = 7/9 + 2/9 + 2/9 = 11/9, b = 77/9 + 2/3 + 16/9 = 11, e = 2/3.
    load = Load(isl=2048, osl=11, num_prompts=9, rate=float("inf"), cap=3, chunk=2048, fixed=True, served=False)
    cm, med = _both(load)
    assert cm["ttft"][:3] == pytest.approx((11 / 9, 11.0, 2 / 3))
    assert med["ttft"][:3] == pytest.approx((1.0, 11.0, 1.0))
    # E2E of request 5: its 2 T wait, its own B x T = (1, 11, 0) from its slot, F1 / 3 (no waits before its prefill)
    assert med["e2el"][:3] == pytest.approx((2 / 3 + 1 + 1 / 3, 22 / 3 + 11 + 8 / 3, 0.0))
    assert med["tpot"] == cm["tpot"]  # TPOT is the mean gap, from the mean TTFT and E2E


def test_a_burst_that_fits_one_wave_takes_its_middle_prompt():
    # 5 prompts of 1,000 tokens, chunk 2,048: q = 2 whole prompts a step, K = ceil(5 / 2) = 3 steps; request j's
    # prompt ends in step ceil(j / 2): steps 1, 1, 2, 2, 3 of 3. Median: request 3, 2/3 t_wave; mean
    # (1 + 1 + 2 + 2 + 3) / 15 = 9/15 = 1 - q (K - 1) / 2B (first_wave).
    load = Load(isl=1000, osl=50, num_prompts=5, rate=float("inf"), cap=8, chunk=2048, fixed=True, served=False)
    cm, med = _both(load, ("ttft",))
    assert cm["ttft"][:3] == pytest.approx((0.6, 0.0, 0.0))
    assert med["ttft"][:3] == pytest.approx((2 / 3, 0.0, 0.0))
    assert med["e2el"] == cm["e2el"]  # not a median figure: the mean stays


def test_a_closed_loop_median_request_is_a_staggered_one_where_they_are_most():
    # Concurrency 4, 40 requests, 1,000-token prompts, chunk 2,048: the first wave is 4 of 40 (share 0.1), its mean
    # TTFT first_wave's 1 - q (K - 1) / 2B = 1 - 2 (2 - 1) / 8 = 0.75 t_wave (q = 2, K = 2). A staggered request: its
    # group of G = 2 prompts' prefill (one chunk, t_grp) + one decode step, plus the step its replacement missed
    # (queueing.missed_step: one t_dec, and (1 - G / B) / steps(G) = 0.5 t_grp): (0, 2, 1.5). Mean: 0.1 x
    # (0.75, 0, 0) + 0.9 x (0, 2, 1.5) = (0.075, 1.8, 1.35); the median (36 staggered of 40): (0, 2, 1.5).
    load = Load(isl=1000, osl=100, concurrency=4, num_prompts=40, chunk=2048, fixed=True, served=False)
    cm, med = _both(load)
    assert cm["ttft"][:3] == pytest.approx((0.075, 1.8, 1.35))
    assert med["ttft"][:3] == pytest.approx((0.0, 2.0, 1.5))
    # E2E: c x T = 4 x (1 / 4, 100 / 4, 0) for all; the staggered 9 in 10 carry their missed step (0, 1, 0.5) in the
    # mean, the median one all of it
    assert cm["e2el"][:3] == pytest.approx((1.0, 100.9, 0.45))
    assert med["e2el"][:3] == pytest.approx((1.0, 101.0, 0.5))


def test_a_closed_loop_mostly_first_wave_takes_the_wave_request_in_the_middle():
    # Concurrency 4, 6 requests: 4 first-wave (steps 1, 1, 2, 2 of K = 2: 0.5, 0.5, 1, 1 t_wave), 2 staggered
    # (0, 2, 1.5) sorted first; the median of 6 is the mean of the 3rd and 4th: wave requests 1 and 2, 0.5 t_wave.
    load = Load(isl=1000, osl=100, concurrency=4, num_prompts=6, chunk=2048, fixed=True, served=False)
    cm, med = _both(load, ("ttft",))
    assert cm["ttft"][:3] == pytest.approx((0.5, 2 / 3, 0.5))  # 4/6 x 0.75 t_wave + 2/6 x (0, 2, 1.5)
    assert med["ttft"][:3] == pytest.approx((0.5, 0.0, 0.0))


def test_an_open_loop_keeps_the_mean():
    # its arrival wait is a queue's mean (M/D/1): the schedule gives no median request
    load = Load(isl=1000, osl=100, rate=2.0, num_prompts=100, served=False)
    cm, med = _both(load)
    assert med == cm


def test_a_closed_loop_in_waves_takes_the_median_of_each_wave_spread():
    # Concurrency 3, 30 requests of 1,000-token prompts run as waves (`waves`), chunk 2,048: q = 2 whole prompts a
    # step, K = ceil(3 / 2) = 2 steps, so each wave's requests' first tokens come at 0.5, 0.5 and 1 t_wave: the mean
    # 2/3 t_wave (first_wave's 1 - q (K - 1) / 2B = 1 - 2 / 6), the median of 30 such requests 0.5 t_wave (the
    # review's case: the median was 0.65 while the wave's spread was added before the common part was taken out).
    load = Load(isl=1000, osl=100, concurrency=3, num_prompts=30, chunk=2048, fixed=True, served=False, waves=True)
    cm, med = _both(load, ("ttft",))
    assert cm["ttft"][:3] == pytest.approx((2 / 3, 0.0, 0.0))
    assert med["ttft"][:3] == pytest.approx((0.5, 0.0, 0.0))


def _drawn_burst(n: int, **kw) -> Load:
    # n requests at once onto B = 3 slots, prompts of 2,048 tokens = the chunk, outputs drawn uniformly with mean 11
    # and sglang.bench_serving's range ratio 0 (cv^2 = 1/3: kvplan.speed.spread.uniform_cv2), so on [0, 22]
    # (osl -/+ osl sqrt(3 cv^2)); drawn lengths are replaced one at a time (G = 1): a later request's own TTFT is its
    # one-step prefill, (0, 1, 1) of t_wave, t_dec, t_grp.
    args = dict(isl=2048, osl=11, num_prompts=n, rate=float("inf"), cap=3, chunk=2048, drawn=True,
                out_cv2=1 / 3, served=False, waves=True)
    return Load(**{**args, **kw})


def test_a_burst_of_drawn_lengths_frees_its_slots_at_the_first_wave_shortest_outputs():
    # SGLang prefills the whole first wave before it decodes (`waves`), so no slot frees before t_wave; the r-th
    # slot frees when the r-th shortest of the wave's 3 outputs ends: expected order statistic of 3 uniform draws on
    # [0, 22], r / (3 + 1) x 22, less the first token the prefill gave. Median of 9: request 5, the 2nd later one
    # (r = 2): t_wave (1 + (r - 1) / 3) for the wave and the one refill's prefill before it, 2 / 4 x 22 - 1 = 10
    # decode steps, plus its own (0, 1, 1): (4/3, 11, 1).
    cm, med = _both(_drawn_burst(9), ("ttft",))
    assert med["ttft"][:3] == pytest.approx((4 / 3, 11.0, 1.0))
    assert med["e2el"] == cm["e2el"]
    # an engine that decodes inside the wave (no `waves`) keeps the staggered refill: (0, 1, 1) + 2 T,
    # T = (t_wave + 11 t_dec) / 3
    _, mixed = _both(_drawn_burst(9, waves=False), ("ttft",))
    assert mixed["ttft"][:3] == pytest.approx((2 / 3, 1 + 22 / 3, 1.0))


def test_a_drawn_burst_refill_prefill_is_a_request_time_share_of_the_unrounded_batch():
    # The burst above at a running cap of 3.2 (a KV-bound cap need not be whole): the wave is round(3.2) = 3 requests,
    # but a refill's prefill before request 5's slot is T's share of t_wave, (1 + recompute) / B = 1 / 3.2, not
    # 1 / 3: t_wave (1 + (2 - 1) / 3.2) = 1.3125 t_wave; the order statistic still of the wave's 3 draws, 2 / 4 x 22 - 1
    # = 10 steps, plus its own (0, 1, 1): (1.3125, 11, 1)
    _, med = _both(_drawn_burst(9, cap=3.2), ("ttft",))
    assert med["ttft"][:3] == pytest.approx((1.3125, 11.0, 1.0))


def test_a_drawn_burst_median_past_the_first_wave_ends_or_a_dataset_spread_keeps_the_refill():
    # 21 requests: the median, request 11, takes the 8th slot freed, past the wave's 3 ends (a refilled request's end,
    # not derived): (0, 1, 1) + 8 T = (8/3, 1 + 88/3, 1)
    _, med = _both(_drawn_burst(21), ("ttft",))
    assert med["ttft"][:3] == pytest.approx((8 / 3, 1 + 88 / 3, 1.0))
    # ShareGPT's spread (cv^2 0.666) is no uniform law on lengths >= 0: request 5 keeps (0, 1, 1) + 2 T
    _, share = _both(_drawn_burst(9, out_cv2=0.666), ("ttft",))
    assert share["ttft"][:3] == pytest.approx((2 / 3, 1 + 22 / 3, 1.0))
