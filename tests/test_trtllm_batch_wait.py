"""TensorRT-LLM's batch waiting holds context requests back to batch them (issue 21): a TTFT cost priced in decode
steps by kvplan.speed.balance.batch_wait, read from a run's batch_wait_timeout_iters / batch_wait_max_tokens_ratio by
kvplan.engines.scheduler.batch_wait_opts (the PyTorch executor's `_schedule` / `_waiting_requests`)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from kvplan.bench.running import running
from kvplan.engines.scheduler import batch_wait_opts
from kvplan.speed.balance import batch_wait, held_steps, released
from kvplan.speed.fit import Built
from kvplan.speed.bench_load import Load
from kvplan.speed.load import group
from conftest import speed_cases

FLAGS = {"batch_wait_timeout_iters": 40, "batch_wait_max_tokens_ratio": 0.8}


def test_the_options_as_the_executor_reads_them():
    assert batch_wait_opts("trtllm", FLAGS, attention_dp=False) == (40, 0.8)
    assert batch_wait_opts("trtllm", FLAGS, attention_dp=True) is None  # `not self.enable_attention_dp`
    # either at 0 releases at once (a count >= 0 iterations, tokens >= 0), so nothing is held
    assert batch_wait_opts("trtllm", {**FLAGS, "batch_wait_max_tokens_ratio": 0}, False) is None
    assert batch_wait_opts("trtllm", {**FLAGS, "batch_wait_timeout_iters": 0}, False) is None
    assert batch_wait_opts("trtllm", {}, False) is None
    assert batch_wait_opts("vllm", FLAGS, False) is None


def test_the_timeout_alone():
    # no token threshold in reach: a cycle lasts T = 40 iterations from its first request, which waits all of it,
    # and at 0.1 arrivals an iteration 4 more arrive, uniformly over it, waiting 20 each on average:
    # (40 + 4 x 20) / (1 + 4) = 24 iterations, T (1 + rate T / 2) / (1 + rate T)
    assert batch_wait(0.1, 40, 1e9) == pytest.approx(24.0, rel=1e-4)
    assert batch_wait(0.0, 40, 5) == pytest.approx(40.0)  # a lone arrival waits out the timeout


def test_a_threshold_of_two_prompts():
    # k = 2: the second arrival releases both (it waits 0), else the timeout does: the first waits min(T, S), S the
    # exponential gap, E = (1 - e^-rate T) / rate = (1 - e^-4) / 0.1 = 9.8168; requests a cycle 1 + P(S <= T) =
    # 2 - e^-4 = 1.9817; mean 9.8168 / 1.9817 = 4.954 iterations
    want = (1 - math.exp(-4)) / 0.1 / (2 - math.exp(-4))
    assert batch_wait(0.1, 40, 1.5) == pytest.approx(want, rel=1e-4)
    assert batch_wait(0.1, 40, 1.0) == 0.0 and batch_wait(0.1, 0, 5) == 0.0  # one prompt crosses it; no timeout


def test_a_run_stating_it_is_priced_with_it():
    # InferenceX's DeepSeek-R1 FP8 run at 128 requests, 1k / 1k (run 21484110885): batch_wait_timeout_iters 40,
    # batch_wait_max_tokens_ratio 0.8 over max_num_tokens 8,192: the release needs 0.8 x 8,192 = 6,553.6 tokens, the
    # other running requests' one each (held_steps' `running` counts the held one: 127 - 1 = 126) and
    # (6,553.6 - 126) / 921.5 = 6.975, so 7 prompts. Arrivals at 127 / 921.5 an iteration (Little's law), a cycle
    # released by its 7th prompt or 40 iterations after its first: a Monte Carlo of that rule apart from the code
    # (400,000 cycles, each request's wait from its arrival to the release, averaged) gives 18.70 iterations
    case = next(c for c in speed_cases()[0] if c.source == "inferencex-run-21484110885"
                and c.id == "tp8-1k1k-c128")
    load = Built(case, running).load
    assert (load.batch_wait, load.chunk) == ((40, 0.8), 8192)
    rate = 127 / case.load.osl  # Little's law: 127 running requests of osl tokens, one token an iteration
    assert held_steps(load, 127) == pytest.approx(batch_wait(rate, 40, (6553.6 - 126) / case.load.isl))
    assert held_steps(load, 127) == pytest.approx(18.70, abs=0.05)
    assert held_steps(load, 1) == 0.0  # a lone request finds no generation request to wait beside
    assert held_steps(replace(load, batch_wait=None), 127) == 0.0
    assert held_steps(Load(921.5, 921.5, 128, chunk=8192), 127) == 0.0


def test_the_release_prefills_its_cycle_together():
    # `_waiting_requests` hands back every held context request at once, so they share one forward: a cycle releases
    # G = 1 + min(N(T), k - 1). 11 running requests of 110 output tokens: 0.1 arrivals an iteration; T = 20, so
    # N(T) ~ Poisson(2); 0.26 x 1,000 tokens less the 10 others' = 250 = 2.5 prompts of 100: k = 3.
    # P(N = 0) = e^-2 = 0.13534, P(N = 1) = 2 e^-2 = 0.27067, P(N >= 2) = 0.59399: E[G] = 0.13534 + 2 x 0.27067 +
    # 3 x 0.59399 = 2.45866, E[G^2] = 0.13534 + 4 x 0.27067 + 9 x 0.59399 = 6.56403; a request's group (length-biased)
    # 6.56403 / 2.45866 = 2.6697
    load = Load(100, 110, 16, chunk=1000, batch_wait=(20, 0.26), drawn=True)
    assert released(load, 11) == pytest.approx(2.6697, abs=1e-4)
    assert group(load, 11, False) == pytest.approx(2.6697, abs=1e-4)  # the prompts its prefill step is priced with
    assert released(load, 1) == 1.0 and released(replace(load, batch_wait=None), 11) == 1.0
    assert released(replace(load, batch_wait=(20, 0.01)), 11) == 1.0  # one prompt crosses the threshold: none held
    assert group(replace(load, batch_wait=None), 11, False) == 1.0  # drawn lengths without it: one at a time


def test_the_run_stating_it_prefills_six_prompts_together():
    # the InferenceX point above (k = 7, 127 / 921.5 arrivals an iteration, T = 40): a Monte Carlo of the release
    # rule apart from the code (400,000 cycles: the first arrival, then exponential gaps until the 7th prompt or
    # iteration 40; sum G^2 / sum G) gives 6.152 prompts a request's prefill step carries, not 1
    case = next(c for c in speed_cases()[0] if c.source == "inferencex-run-21484110885"
                and c.id == "tp8-1k1k-c128")
    load = Built(case, running).load
    assert released(load, 127) == pytest.approx(6.152, abs=0.01)
