"""A scheduler that polls for new requests every n-th decode step prefills together the requests that arrived over
those n steps (kvplan.speed.balance.polled, kvplan.speed.load `group`): SGLang's --scheduler-recv-interval (issue 21,
SGLang before 0.5.14's TTFT)."""

from __future__ import annotations

import random
from dataclasses import replace

from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos


def test_a_poll_hands_over_the_arrivals_of_its_interval():
    # sgl-project/sglang v0.5.12 wheel srt/managers/scheduler.py recv_requests L1661-1679: past the skipper's gate
    # (every 30 decode steps at --scheduler-recv-interval 30) it drains the socket (max_recv_per_poll -1, no limit), and
    # the next prefill batch takes the waiting queue together. 64 running requests of 1,000 output tokens finish 64 /
    # 1,000 = 0.064 a step (Little's law), 30 x 0.064 = 1.92 over an interval: a request's group 1 + 1.92 = 2.92
    base = Load(isl=1000, osl=1000, concurrency=64, num_prompts=640, cap=256, drawn=True, out_cv2=0.01, waves=True)
    b, g, _ = combos(replace(base, poll_wait=14.5))  # (30 - 1) / 2 steps beyond the default's half step
    assert b == 64 and abs(g - 2.92) < 1e-12
    assert abs(combos(replace(base, poll_wait=4.5))[1] - (1 + 10 * 64 / 1000)) < 1e-12  # interval 10: 1.64
    assert combos(base)[1] == 1.0  # polled every step: drawn lengths finish, and are replaced, one at a time


def test_no_poll_group_where_no_poll_holds_a_request():
    polled = Load(isl=1000, osl=1000, concurrency=64, num_prompts=640, cap=256, drawn=True, out_cv2=0.01, waves=True,
                  poll_wait=14.5)
    assert combos(replace(polled, concurrency=1, num_prompts=10))[1] == 1.0  # a lone request: the engine idles
    assert combos(replace(polled, concurrency=None))[1] == 1.0  # a burst: every request queued before the start
    fixed = replace(polled, drawn=False, out_cv2=0.0, fixed=True)  # equal lengths in waves: the wave's own prefill
    assert combos(fixed)[1] == combos(replace(fixed, poll_wait=0.0))[1]


def test_a_poisson_arrival_finds_one_plus_the_mean_in_its_poll():
    # the group a request is prefilled with, averaged over requests (not over polls): Poisson arrivals at 0.064 a step,
    # polls every 30 steps, simulated apart from kvplan's code; 1 + 30 x 0.064 = 2.92 where a poll's mean is 1.92
    rng, rate, n, polls = random.Random(7), 0.064, 30, 40_000
    sizes = []
    for _ in range(polls):
        k, t = 0, rng.expovariate(rate)
        while t < n:
            k, t = k + 1, t + rng.expovariate(rate)
        sizes.append(k)
    per_request = sum(k * k for k in sizes) / sum(sizes)
    assert abs(per_request - (1 + n * rate)) < 0.03


def test_the_group_and_the_wait_read_the_same_burst():
    # batch_and_mode's burst decides both the poll's group (`group`) and its wait (`later_request`'s poll_steps).
    # 64 requests at concurrency 64, a cap of 32: c = n = 64, a burst, every request queued before the start: no poll
    # holds one, so no wait and no group (G = 1, drawn lengths replaced one at a time), the figures as at poll_wait 0
    from kvplan.speed.load import batch_and_mode, first_wave, group, later_request
    polled = Load(isl=1000, osl=1000, concurrency=64, num_prompts=64, cap=32, drawn=True, out_cv2=0.01, poll_wait=14.5)
    b, _, burst = batch_and_mode(polled, None)
    assert (b, burst) == (32, True) and group(polled, b, burst) == 1.0
    assert later_request(polled, b, 1.0, burst, first_wave(polled, b))[1] == 0.0  # no poll wait
    assert combos(polled) == combos(replace(polled, poll_wait=0.0))
    # a throughput run of untold length at the cap (neither concurrency nor rate nor N): the steady state at B = 32,
    # not a burst, so a poll every 30 steps holds a later request (29 / 2 = 14.5 steps) and takes in what arrived
    # over the 30 steps: 32 / 1,000 a step (Little's law), G = 1 + 30 x 32 / 1,000 = 1.96
    steady = replace(polled, concurrency=None, num_prompts=None)
    b, _, burst = batch_and_mode(steady, None)
    assert (b, burst) == (32, False) and abs(group(steady, b, burst) - 1.96) < 1e-12
    assert later_request(steady, b, 1.96, burst, first_wave(steady, b))[1] == 14.5
