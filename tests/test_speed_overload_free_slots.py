"""An overloaded open loop too short to fill its running cap (kvplan.speed.load: `batch_and_mode`, `open_wait`): it
runs its N requests, not the cap, and where its slots stay free through the run it queues for its prefills, checked
by hand arithmetic on made-up step costs (t_wave 4 s, t_dec 0.1 s, t_grp 2 s, as tests/test_speed_load.py).
What showed it: TensorRT-LLM's 0.17 perf overview (Triton, 0.14.0) ran 500 requests of Llama-3.1-70B at 467 / 256
tokens, TP4 on an H100, at 32 requests/s, 16 a second served, and measured a mean ITL of 86 ms, the same as its burst
of the same 500 (85 ms): at most 500 ran, where kvplan's cap is 669 (its H200 rows: 1,658 and 2,048, 83 ms measured);
and a mean TTFT of 1,229 ms, where the burst's 9,123 ms says about 18 s of prefill for 500 prompts, 36 ms a prompt,
past the 31 ms between arrivals: the prefill server, not a slot, is what those arrivals wait for."""

import math

from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, value

T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0


def _at(load: Load, service: float, rho_cap: float) -> tuple[float, dict]:
    b, _, cm = combos(load, 3.0, service, rho_cap)
    return b, {m: value(c, T_WAVE, T_DEC, T_GRP) for m, c in cm.items()}


def test_an_overloaded_run_of_fewer_requests_than_its_cap_runs_them_all_not_the_cap():
    # rho_cap 2, N 8 over one replica, cap 16: B = min(16, 8) = 8 (was the cap, 16: more running than the run sent);
    # N 32: the cap, 16; N untold (MLPerf's): the cap; two replicas, N 8: 4 each
    assert _at(Load(1000, 101, rate=2.0, num_prompts=8, cap=16), 0.25, 2.0)[0] == 8
    assert _at(Load(1000, 101, rate=2.0, num_prompts=32, cap=16), 0.25, 2.0)[0] == 16
    assert _at(Load(1000, 101, rate=2.0, cap=16), 0.25, 2.0)[0] == 16
    assert _at(Load(1000, 101, rate=2.0, num_prompts=8, cap=16, dp=2), 0.25, 2.0)[0] == 4


def test_an_overloaded_loop_with_free_slots_queues_for_its_prefills():
    # rate 2, cap 4, N 7, rho_cap 2: the k-th finds (k - 1) / 2 ahead and waits max(0, (k - 1) / 2 + 1 - 4) T, none
    # to k = 7 (the 8th would wait 0.5 T): every request finds a slot (no slot queue), B 4.
    # Prefill server S = 0.75 s (given): rho = 2 x 0.75 = 1.5 >= 1, past its capacity, so D/D/1's growing queue,
    # (N - 1) / 2 x (1 - 1 / rho) = 3 x 1/3 = 1 S whatever the arrival process (Poisson here), priced at
    # S = t_wave / B = 4 / 4 = 1 s: + 1 s on the staggered TTFT t_grp + 1 step x t_dec = 2.1 s and on
    # E2E c T = 4 x (4 + 101 x 0.1) / 4 = 14.1 s
    b, got = _at(Load(1000, 101, rate=2.0, num_prompts=7, cap=4), 0.75, 2.0)
    assert b == 4
    assert math.isclose(got["ttft"], 2.1 + 1.0)
    assert math.isclose(got["e2el"], 14.1 + 1.0)
    # the prefill server keeping up (S 0.25 s, rho 0.5): its M/D/1 wait as before, 0.5 / (2 x 0.5) = 0.5 S = 0.5 s
    assert math.isclose(_at(Load(1000, 101, rate=2.0, num_prompts=7, cap=4), 0.25, 2.0)[1]["ttft"], 2.6)


def test_an_overloaded_loop_whose_slots_fill_keeps_the_slot_queue_alone():
    # N 16: the slot queue, k = 8..16 waiting 0.5, 1, ..., 4.5 T, a mean 22.5 / 16 = 1.40625 T, T = 14.1 / 4 = 3.525 s
    # (kvplan.speed.queueing.overload_wait); the prefill server's queue (rho 1.5) is not added beside it: TTFT
    # 2.1 + 1.40625 x 3.525 = 7.05703125 s
    assert math.isclose(_at(Load(1000, 101, rate=2.0, num_prompts=16, cap=4), 0.75, 2.0)[1]["ttft"], 7.05703125)
