"""TensorRT-LLM's batch waiting holds context requests back to batch them (issue 21): a TTFT cost priced in decode
steps by kvplan.speed.balance.batch_wait, read from a run's batch_wait_timeout_iters / batch_wait_max_tokens_ratio by
kvplan.engines.scheduler.batch_wait_opts (the PyTorch executor's `_schedule` / `_waiting_requests`)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.engines.scheduler import batch_wait_opts
from kvplan.speed.balance import batch_wait, held_steps
from kvplan.speed.fit import Built
from kvplan.speed.load import Load
from conftest import speed_cases

CORPUS = Path(__file__).resolve().parent / "fixtures" / "speed"
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
