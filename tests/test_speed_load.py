"""The analytic load model (kvplan.speed.load): each metric as a line in the three step costs, checked by
hand arithmetic on made-up step costs (t_wave 4 s, t_dec 0.1 s, t_grp 2 s), so every weight of the
module docstring's formulas is pinned: a wave's first tokens, the staggered groups after it, the queue."""

import math

import pytest

from kvplan.speed.bench_load import Load
from kvplan.speed.load import batch_and_mode, combos, replaces, value
from kvplan.speed.queueing import arrival_wait, overload_wait

T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0


def _metrics(load: Load, e2e=None) -> tuple[float, float, dict]:
    b, g, cm = combos(load, e2e)
    return b, g, {m: value(c, T_WAVE, T_DEC, T_GRP) for m, c in cm.items()}


def test_closed_loop_first_wave_then_staggered_groups():
    # c = 4 of 40 prompts, 1,000 in / 101 out, chunk 8,192: B = 4; a group is min(4, 8192 // 1000 = 8) = 4
    # requests whose prefill takes ceil(4,000 / 8,192) = 1 step.
    # T = (4 + 101 x 0.1) / 4 = 3.525 s per request; E2E = c x T = 14.1 s
    # first wave (4 of 40 = 10%): its 4 prompts fill one step (8,192 // 1,000 = 8 a step), whose end returns all four
    # first tokens (`first_wave`: 1 - 8 x 0 / 8 = 1) x 4 = 4 s; later: t_grp + 1 x t_dec = 2.1 s, and the decode step
    # its replacement missed (one group, B / G = 1: none prefills another group; kvplan.speed.queueing.missed_step)
    # 0.1 s. TTFT = 0.1 x 4 + 0.9 x 2.2 = 2.38 s; E2E = 14.1 + 0.9 x 0.1 = 14.19 s
    # TPOT = (14.19 - 2.38) / 100 = 0.1181 s; tok/s = 101 / 3.525
    b, g, m = _metrics(Load(1000, 101, concurrency=4, num_prompts=40, cap=256))
    assert (b, g) == (4, 4)
    assert math.isclose(m["e2el"], 14.19)
    assert math.isclose(m["ttft"], 2.38)
    assert math.isclose(m["tpot"], 0.1181)
    assert math.isclose(m["output_throughput"], 101 / 3.525)


def test_drawn_lengths_desynchronise_a_closed_loop():
    # the first test's load with output lengths drawn per request (SGLang's bench_serving random dataset at its
    # default --random-range-ratio 0.0, a dataset's own lengths): requests finish apart and are replaced one at a
    # time, so G = 1 (not min(4, 8192 // 1000) = 4); its 1,000 tokens take 1 step. The group's own prefill, t_grp,
    # is G's (the caller prices it at one request), the TTFT's weights stay: first wave 0.1 x 4 = 0.4 s,
    # later 0.9 x (2 + 1 x 0.1) = 1.89 s, TTFT 2.29 s; T, E2E and throughput do not depend on G (14.1 s)
    b, g, m = _metrics(Load(1000, 101, concurrency=4, num_prompts=40, cap=256, drawn=True))
    assert (b, g) == (4, 1)
    assert math.isclose(m["ttft"], 2.29)
    assert math.isclose(m["e2el"], 14.1)
    # a long prompt still takes its steps: 20,000 tokens, ceil(20,000 / 8,192) = 3 steps beside decodes
    _, g, m = _metrics(Load(20000, 101, concurrency=2, cap=256, drawn=True))
    assert g == 1 and math.isclose(m["ttft"], 2.3)


def test_closed_loop_over_the_cap_queues():
    # c = 6 over a cap of 4: B = 4, the 2 over it wait (6 - 4) x T = 7.05 s; prompts untold: no first wave
    # TTFT = 2.1 + 0.1 (the missed decode step) + 7.05 = 9.25 s; E2E = 6 x 3.525 + 0.1 = 21.25 s
    b, _, m = _metrics(Load(1000, 101, concurrency=6, cap=4))
    assert b == 4
    assert math.isclose(m["ttft"], 9.25)
    assert math.isclose(m["e2el"], 21.25)


def test_burst_waits_one_request_time_per_finished_request():
    # 10 prompts at once, cap 4: B = 4 start; request j > 4 starts when one finishes, one every T = (4 + 101 x 0.1) / 4
    # = 3.525 s: requests 5..10 wait 1, 2, ..., 6 T, a mean over the 10 of (1 + ... + 6) / 10 = 21 / 10 = 2.1 T
    # = 7.4025 s (the exact (N - B)(N - B + 1) / 2N = 6 x 7 / 20; the continuous (N - B)^2 / 2N would say 1.8 T);
    # 4 of 10 are the first wave
    # the wave's 4 x 1,000 prompt tokens are K = 1 step, whose end returns all four first tokens (4 s):
    # TTFT = 0.4 x 4 + 0.6 x 2.1 + 7.4025 = 10.2625 s; E2E = 7.4025 + 0.4 x a wave request's E2E + 0.6 x 4 x T:
    # its requests decode their L = 100 later tokens after the step (m = (K - 1) / 2 = 0 in the wave),
    # 4 + 100 x 0.1 = 14 s; 7.4025 + 5.6 + 0.6 x 14.1 = 21.4625 s
    # (lengths drawn, not fixed: no refill delay)
    b, _, m = _metrics(Load(1000, 101, rate=math.inf, num_prompts=10, cap=4))
    assert b == 4
    assert math.isclose(m["ttft"], 10.2625)
    assert math.isclose(m["e2el"], 21.4625)


def test_a_burst_of_equal_lengths_refills_as_its_wave_finishes():
    # The burst above with every request 1,000 + 101 tokens: the wave's first request finishes at F1 = its one
    # prefill step (t_wave = 4 s) + 100 decode steps = 14 s; the 6 later requests take turns r = 1, 2, 3, 4, 1, 2
    # of the 4 slots, mean r / B = 13 / 24, so each waits F1 x (1 - 13 / 24) = 6.4167 s more, 0.6 x that over all
    # 10 = 3.85 s: TTFT 10.2625 + 3.85 = 14.1125 s, E2E 21.4625 + 3.85 = 25.3125 s
    _, _, m = _metrics(Load(1000, 101, rate=math.inf, num_prompts=10, cap=4, fixed=True))
    assert math.isclose(m["ttft"], 14.1125)
    assert math.isclose(m["e2el"], 25.3125)


def test_open_loop_requests_arrive_one_by_one():
    # 1 req/s with E2E estimated at 3 s: c = 3 in the system (Little's law), B = 3, no wave, G = 1;
    # one request's 1,000 tokens take one step: TTFT = t_grp + 1 x t_dec = 2.1 s; E2E = 3 x T, T = (4 + 10.1) / 3
    b, g, m = _metrics(Load(1000, 101, rate=1.0, num_prompts=1000, cap=256), e2e=3.0)
    assert (b, g) == (3, 1)
    assert math.isclose(m["ttft"], 2.1)
    assert math.isclose(m["e2el"], 3 * (4 + 10.1) / 3)


def test_a_long_prompt_group_shares_each_of_its_steps_with_decodes():
    # 20,000-token prompts, c = 2: G = max(1, min(2, 8192 // 20000 = 0)) = 1, its prefill takes
    # ceil(20,000 / 8,192) = 3 steps, each with a decode step beside it: 2 + 3 x 0.1 = 2.3 s; and the step its
    # replacement missed: B / G = 2 groups, u = 1 - 1 / 2 = 0.5 of them a chunk of the other's prefill,
    # 0.1 + 0.5 x 2 / 3 = 0.4333 s: TTFT (no wave) = 2.7333 s
    _, g, m = _metrics(Load(20000, 101, concurrency=2, cap=256))
    assert g == 1
    assert math.isclose(m["ttft"], 2.3 + 0.1 + 0.5 * 2 / 3)


def test_poisson_wait_is_the_md1_queue_bounded():
    # M/D/1 (Pollaczek-Khinchine, no service variance): Wq / S = rho / (2 (1 - rho));
    # at rho 0.5 with S = 100 ms: 0.5 x 100 / (2 x 0.5) = 50 ms
    assert math.isclose(arrival_wait(0.5, 1e9) * 0.100, 0.050)
    assert math.isclose(arrival_wait(0.9, 1e9), 4.5)  # 0.9 / 0.2
    assert arrival_wait(0.9, 2.0) == 2.0  # never past the bound
    assert arrival_wait(1.2, 2.0) == 2.0  # overloaded: the bound
    assert arrival_wait(0.0, 2.0) == 0.0


def test_open_loop_adds_the_poisson_wait_for_the_prefill_server():
    # 1 req/s, E2E estimated at 3 s: B = 3 (as above); the prefill server's S = t_wave / B = 4 / 3 s a request.
    # With the previous S estimated at 0.5 s: rho = 1 x 0.5 = 0.5, Wq = 0.5 / (2 x 0.5) = 0.5 S = 0.5 x 4 / 3 s
    # TTFT = 2.1 + 2 / 3 = 2.7667 s; E2E = 14.1 + 2 / 3 = 14.7667 s; TPOT unchanged (14.1 - 2.1) / 100 = 0.12 s
    b, g, cm = combos(Load(1000, 101, rate=1.0, num_prompts=1000, cap=256), 3.0, 0.5)
    m = {k: value(c, T_WAVE, T_DEC, T_GRP) for k, c in cm.items()}
    assert (b, g) == (3, 1)
    assert math.isclose(m["service"], 4 / 3)
    assert math.isclose(m["ttft"], 2.1 + 2 / 3)
    assert math.isclose(m["e2el"], 14.1 + 2 / 3)
    assert math.isclose(m["tpot"], 0.12)


def test_an_overloaded_prefill_server_waits_as_if_the_run_arrived_at_once():
    # rho = 1 x 2 s >= 1: the bound, as if the run's 10 requests had come together: (10 - 1) / 2 = 4.5 S
    # TTFT = 2.1 + 4.5 x 4 / 3 = 8.1 s
    _, _, cm = combos(Load(1000, 101, rate=1.0, num_prompts=10, cap=256), 3.0, 2.0)
    assert math.isclose(value(cm["ttft"], T_WAVE, T_DEC, T_GRP), 8.1)


def test_no_poisson_wait_in_a_closed_loop_or_a_burst():
    closed = Load(1000, 101, concurrency=4, num_prompts=40, cap=256)
    burst = Load(1000, 101, rate=math.inf, num_prompts=10, cap=4)
    for load in (closed, burst):
        assert combos(load, 3.0, 0.5)[2]["ttft"] == combos(load, 3.0)[2]["ttft"]


def test_an_open_loop_past_the_cap_is_overloaded_and_its_queue_grows():
    # cap 4; rho_cap = r / dp x T(cap) = 2 >= 1 (given): B = 4, T = (4 + 101 x 0.1) / 4 = 3.525 s, no Little's law
    # c. The n-th of N = 16 arrivals finds (n - 1) / 2 ahead of it (one slot frees every T): the first 7 find a
    # running slot free, each later one waits (n - 1) / 2 + 1 - 4 request times, a mean (0.5 + 1 + ... + 4.5) / 16 =
    # 1.40625 T. TTFT = t_grp + 1 x t_dec + 1.40625 T = 2.1 + 4.95703125 = 7.05703125 s; E2E = 4 T + 1.40625 T =
    # 5.40625 x 3.525 = 19.05703125 s; tok/s = 101 / T; the prefill server (S = 1 s given, rho = 2 x 1 = 2: overloaded
    # itself) adds no arrival wait on top (not its bound of (16 - 1) / 2 S more)
    load = Load(1000, 101, rate=2.0, num_prompts=16, cap=4)
    b, g, cm = combos(load, 3.0, 1.0, 2.0)
    m = {k: value(c, T_WAVE, T_DEC, T_GRP) for k, c in cm.items()}
    assert (b, g) == (4, 1)
    assert math.isclose(m["ttft"], 7.05703125)
    assert math.isclose(m["e2el"], 19.05703125)
    assert math.isclose(m["output_throughput"], 101 / 3.525)
    # below 1 the open loop is Little's law's as before (test_open_loop_requests_arrive_one_by_one)
    assert combos(load, 3.0, None, 0.99)[2] == combos(load, 3.0)[2]


def test_an_overloaded_run_too_short_to_fill_the_cap_queues_for_no_slot():
    # issue 21: datacrunch's SGLang Llama-3.3-70B at 16 requests/s measured a median TTFT of 0.61 s though its run
    # was overloaded (3,200 requests in 383 s, mean E2E 149 s): its arrivals filled the running set, not a queue.
    # The test's load with N = 7: every request finds a slot (the 8th would wait (8 - 1) / 2 + 1 - 4 = 0.5 T), TTFT =
    # 2.1 s, E2E = 4 T = 14.1 s.
    # With the prefill server keeping up (S = 0.25 s given, rho = 2 x 0.25 = 0.5, Poisson): its M/D/1 wait
    # 0.5 / (2 x 0.5) = 0.5 S, priced at the batch's S = t_wave / B = 1 s: TTFT 2.1 + 0.5 = 2.6 s, E2E 14.6 s
    load = Load(1000, 101, rate=2.0, num_prompts=7, cap=4, arrival_cv2=None)
    cm = combos(load, 3.0, 0.25, 2.0)[2]
    assert math.isclose(value(cm["ttft"], T_WAVE, T_DEC, T_GRP), 2.1)
    assert math.isclose(value(cm["e2el"], T_WAVE, T_DEC, T_GRP), 14.1)
    cm = combos(Load(1000, 101, rate=2.0, num_prompts=7, cap=4), 3.0, 0.25, 2.0)[2]
    assert math.isclose(value(cm["ttft"], T_WAVE, T_DEC, T_GRP), 2.6)
    assert math.isclose(value(cm["e2el"], T_WAVE, T_DEC, T_GRP), 14.6)


def test_the_overload_wait_counts_only_requests_past_the_running_slots():
    # rho 2, N 16, one slot freeing every T: the k-th arrives at (k - 1) / 2 T with (k - 1) / 2 ahead and waits
    # max(0, (k - 1) / 2 + 1 - slots) T. 4 slots: k = 8..16 wait 0.5, 1.0, ..., 4.5, 9 x 5 / 2 = 22.5 in all, a
    # mean 22.5 / 16 = 1.40625 (the fluid's 0.5 x (16 - 8)^2 / 32 = 1.0 was short by 1 / rho a request); 1 slot:
    # D/D/1's (16 - 1) / 2 x 0.5 = 3.75 exactly; 8 slots: only k = 16, 0.5 / 16; 9 slots (k0 past N) or rho 1: none
    assert math.isclose(overload_wait(2.0, 16, 4), 1.40625)
    assert math.isclose(overload_wait(2.0, 16, 1), 3.75)
    assert math.isclose(overload_wait(2.0, 16, 8), 0.5 / 16)
    assert overload_wait(2.0, 16, 9) == 0.0
    assert overload_wait(1.0, 16, 0) == 0.0


def test_the_overload_wait_at_an_endless_rate_is_the_bursts():
    # rho -> inf: every request arrives at once, the j-th past B = 4 slots of N = 10 waits (j - B) T, a mean
    # (N - B)(N - B + 1) / 2N = 6 x 7 / 20 = 2.1 T (kvplan.speed.load's burst), not the fluid's 6^2 / 20 = 1.8
    assert math.isclose(overload_wait(1e12, 10, 4), 2.1, rel_tol=1e-9)


def _simulated(rho: float, n: int, slots: int) -> float:
    """The mean wait, in T, of n requests arriving every 1 / rho T onto `slots` running slots, one freeing at T, 2T,
    ...: event by event, first come first served."""
    used, free, total = 0, slots, 0.0
    for j in range(n):
        t = j / rho
        while used < math.floor(t):  # the frees before this arrival that no waiting request took
            used, free = used + 1, free + 1
        if free:
            free -= 1
        else:  # the next free slot
            used += 1
            total += used - t
    return total / n


@pytest.mark.parametrize(("rho", "n", "slots"),
                         [(1.37, 300, 17), (3.3, 2000, 256), (math.pi, 1000, 1), (1.01, 5000, 7)])
def test_the_overload_wait_is_the_simulated_queues(rho, n, slots):
    assert math.isclose(overload_wait(rho, n, slots), _simulated(rho, n, slots), rel_tol=1e-9)


def test_replicas_no_request_reaches_add_no_throughput():
    # A closed loop of concurrency 1 over 4 data-parallel replicas (the SGLang cookbook's Kimi-K2 latency run:
    # --dp 4 --enable-dp-attention, bench_serving --max-concurrency 1, whose client holds one request in flight,
    # sglang 0.5.6 wheel bench_serving.py L1878 `asyncio.Semaphore(max_concurrency)`): one replica runs B = 1, the
    # other three idle. T = t_wave + 101 x t_dec = 4 + 10.1 = 14.1 s, so 101 / 14.1 = 7.163 tok/s and 1 / 14.1 req/s
    # in all, not 4 x that; at concurrency 2, two replicas: 2 x 101 / 14.1
    _, _, one = _metrics(Load(1000, 101, concurrency=1, cap=256, dp=4))
    assert math.isclose(one["output_throughput"], 101 / 14.1)
    assert math.isclose(one["request_throughput"], 1 / 14.1)
    assert math.isclose(one["total_throughput"], 1101 / 14.1)
    _, _, two = _metrics(Load(1000, 101, concurrency=2, cap=256, dp=4))
    assert math.isclose(two["output_throughput"], 2 * 101 / 14.1)
    # concurrency 8 over 4: every replica runs B = 2, T = 14.1 / 2 = 7.05 s: 4 x 101 / 7.05 tok/s
    _, _, eight = _metrics(Load(1000, 101, concurrency=8, cap=256, dp=4))
    assert math.isclose(eight["output_throughput"], 4 * 101 / 7.05)
    # the latency figures of one request are a replica's own, whatever the idle ones: E2E = c x T = 14.1 s
    assert math.isclose(one["e2el"], _metrics(Load(1000, 101, concurrency=1, cap=256))[2]["e2el"])


def test_a_closed_loop_replacement_waits_out_the_step_it_missed():
    # kubesimplify's vLLM 0.27.1 run (kubesimplify/website@08b151ee:content/blog/running-a-big-llm-across-multiple-gpus-
    # with-vllm.md, Step 4 and 6): --max-num-seqs 32, vllm bench serve --random-input-len 1024 --random-output-len 256
    # --ignore-eos --max-concurrency 32 --num-prompts 640 (equal lengths), vLLM's default 8,192-token step budget.
    # B = 32, G = min(32, 8192 // 1024) = 8: 4 groups, each prefilled in one step; a group's replacement reaches the
    # engine after it started the next step (vllm/v1/engine/core.py run_busy_loop: requests only between steps), so it
    # waits that step: the decode step after the first group's end (t_dec), the prefill of the group before it for the
    # other 3 of 4 (u = 1 - 8 / 32 = 0.75 of t_grp / 1). A later request's TTFT: t_grp + t_dec + t_dec + 0.75 t_grp
    # = 2 + 0.1 + 0.1 + 1.5 = 3.7 s (was 2.1); first wave 32 of 640 = 5%: 8 prompts a step over K = 4 steps, first
    # tokens at the ends of steps 1-4, 8 each: a mean of 2.5 steps of 4, (1 - 8 x 3 / 64) x 4 = 2.5 s
    # TTFT = 0.05 x 2.5 + 0.95 x 3.7 = 3.64 s
    b, g, m = _metrics(Load(1024, 256, concurrency=32, num_prompts=640, cap=32, fixed=True))
    assert (b, g) == (32, 8)
    assert math.isclose(m["ttft"], 0.05 * 2.5 + 0.95 * 3.7)
    # drawn lengths (replaced one at a time), a lone request (the engine idles), a burst, an open loop: no missed step
    for load in (Load(1024, 256, concurrency=32, num_prompts=640, cap=32, drawn=True),
                 Load(1024, 256, concurrency=1, num_prompts=12, cap=32),
                 Load(1024, 256, num_prompts=32, cap=32),
                 Load(1024, 256, rate=1.0, num_prompts=640, cap=32)):
        assert not replaces(load, batch_and_mode(load, 10.0)[2])
