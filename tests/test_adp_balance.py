"""TensorRT-LLM's attention-DP balancing: the engine rule (kvplan.engines.scheduler.balance_iters) and the mean wait
it adds before a request's prefill (kvplan.speed.balance), as the speed fit's load prices it (kvplan.speed.load)."""

from pathlib import Path

import pytest

from kvplan.bench.running import Running, case_balance, running
from kvplan.engines.scheduler import balance_iters
from kvplan.speed.balance import arrivals, balance_wait, held_back
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos
from conftest import speed_cases

# TensorRT-LLM 1.x's PyTorch executor, py_executor.py `_balance_adp_requests` (kvplan.engines.scheduler's citation):
# every iteration in which some attention-DP rank has no context request, no rank schedules its context requests and
# a count goes up by one; they are released where the count reaches attention_dp_config.timeout_iters, or where every
# rank has one (then after batching_wait_iters more iterations); each release sets the count to 0.
ON = {"attention_dp_enable_balance": True, "attention_dp_timeout_iters": 60, "attention_dp_batching_wait_iters": 0}


def test_the_rule_reads_the_runs_attention_dp_config():
    assert balance_iters("trtllm", ON, True) == (60, 0)
    # AttentionDpConfig's defaults where the balance is on but not sized: timeout_iters 50, batching_wait_iters 10
    # (NVIDIA/TensorRT-LLM@0004396720054fd8e205cbf616f21f0b57c6b412:tensorrt_llm/llmapi/llm_args.py)
    assert balance_iters("trtllm", {"attention_dp_enable_balance": "true"}, True) == (50, 10)
    assert balance_iters("trtllm", ON, False) is None  # no attention DP: `_balance_adp_requests` is not called
    assert balance_iters("trtllm", {**ON, "attention_dp_enable_balance": False}, True) is None  # off by default
    assert balance_iters("trtllm", {}, True) is None
    assert balance_iters("vllm", ON, True) is None  # no such rule
    # the nested YAML form trtllm-bench's perf-overview pages write (extra_llm_api_options' attention_dp_config)
    nested = {"enable_attention_dp": True,
              "attention_dp_config": {"enable_balance": True, "timeout_iters": 60, "batching_wait_iters": 0}}
    assert balance_iters("trtllm", nested, True) == (60, 0)


def test_a_timeout_that_always_binds_releases_on_a_clock():
    # no rank ever has a context request before the count reaches T = 60: a release every 60 iterations, and a
    # request arriving at a uniform time in between waits 60 / 2 = 30 iterations on average
    assert balance_wait(8, 0.0, 60, 0) == 30.0
    # InferenceX's 1k/8k DeepSeek-R1 run at concurrency 256 on 8 ranks (inferencex-run-21484110885): 32 requests a
    # rank of 7,372.5 output tokens, 32 / 7,372.5 = 0.00434 arrivals a rank an iteration; all 8 ranks have one within
    # 60 iterations with probability (1 - e^(-0.00434 x 60))^8 = 0.229^8 = 7.6e-6: the clock, 30 iterations
    assert arrivals(32, 7372.5) == pytest.approx(0.004340, rel=1e-3)
    assert balance_wait(8, arrivals(32, 7372.5), 60, 0) == pytest.approx(30.0, abs=0.01)


def test_fast_arrivals_wait_for_the_last_rank():
    # two ranks, 1 arrival an iteration each, no timeout in reach (T = 20, P(M > 20) = 1 - (1 - e^-20)^2 = 4e-9): the
    # cycle is M, the later of two Exp(1) first arrivals: E[M] = 1 + 1/2 = 1.5, Var[M] = 1 + 1/4 = 1.25,
    # E[M^2] = 1.25 + 1.5^2 = 3.5; the length-biased half cycle E[M^2] / (2 E[M]) = 3.5 / 3 = 1.1667
    assert balance_wait(2, 1.0, 20, 0) == pytest.approx(3.5 / 3, rel=1e-3)
    # arrivals so fast that every rank has one at once: the cycle is the batching wait W = 10, a mean wait of W / 2
    assert balance_wait(2, 1e6, 50, 10) == pytest.approx(5.0, abs=0.05)
    assert balance_wait(1, 1.0, 50, 10) == 0.0 and held_back(8, None, 16, 1000) == 0.0  # nothing held


def test_the_load_adds_the_wait_to_a_staggered_requests_ttft_and_e2e():
    # a closed loop of 128 over 8 ranks (16 running a rank), 1,000 / 1,000 tokens, no first wave counted (no prompts
    # told): TTFT and E2E carry the held wait in decode steps, TPOT = (E2E - TTFT) / 999 does not move
    plain = Load(isl=1000, osl=1000, concurrency=128, cap=256, dp=8)
    held = Load(isl=1000, osl=1000, concurrency=128, cap=256, dp=8, balance=(60, 0))
    wait = balance_wait(8, 16 / 1000, 60, 0)
    a, b = combos(plain)[2], combos(held)[2]
    assert b["ttft"][1] - a["ttft"][1] == pytest.approx(wait)
    assert b["e2el"][1] - a["e2el"][1] == pytest.approx(wait)
    assert b["tpot"] == pytest.approx(a["tpot"])
    assert b["output_throughput"] == a["output_throughput"]


def test_a_wave_carries_the_wait_in_its_ttft_as_in_its_e2e():
    # the held wait comes before a request's prefill (the engine holds context requests: TensorRT-LLM's blog 10,
    # "Increased TTFT due to strategic waiting"), so where a closed loop of equal lengths runs in waves (`waves`:
    # every wave's TTFT the first wave's) it is in TTFT as in E2E, and TPOT does not move (issue 21, loadfix34: the
    # wave's TTFT left it out while E2E added it). 16 over 2 ranks, 8 running a rank, 1,000 / 100,000 tokens:
    # 8 / 100,000 = 8e-5 arrivals a rank an iteration, both ranks have one within T = 60 with probability
    # (1 - e^(-0.0048))^2 = 2.3e-5: the clock, 60 / 2 = 30 iterations. (No engine kvplan knows runs waves under
    # attention DP, kvplan.engines.scheduler.runs_waves, so no corpus figure moves.)
    plain = Load(isl=1000, osl=100000, concurrency=16, cap=256, dp=2, fixed=True, waves=True)
    held = Load(isl=1000, osl=100000, concurrency=16, cap=256, dp=2, fixed=True, waves=True, balance=(60, 0))
    wait = balance_wait(2, 8 / 100000, 60, 0)
    assert wait == pytest.approx(30.0, abs=0.01)
    a, b = combos(plain)[2], combos(held)[2]
    assert b["ttft"][1] - a["ttft"][1] == pytest.approx(wait)
    assert b["e2el"][1] - a["e2el"][1] == pytest.approx(wait)
    assert b["ttft"][0] == pytest.approx(a["ttft"][0])  # the first wave's prefill, as before
    assert b["tpot"] == pytest.approx(a["tpot"])


def test_the_speed_fit_reads_it_from_the_corpus_sized_or_not():
    cases, _ = speed_cases()
    by_id = {(c.source, c.id): c for c in cases}
    # InferenceX's script sets attention_dp_config {enable_balance: true, batching_wait_iters: 0, timeout_iters: 60}
    # on its attention-DP runs (the fixture's `inferred: flags`)
    dpa = by_id[("inferencex-run-26016880548", "tp8ep8-dpa-1k1k-c128")]
    assert case_balance(dpa) == (60, 0)
    assert case_balance(by_id[("inferencex-run-26016880548", "tp4-1k1k-c4")]) is None  # no attention DP
    # a 1.3.0rc14 run whose pool kvplan's TensorRT-LLM rules do not size still carries the scheduler rule
    got = running(dpa, None, None)
    assert isinstance(got, Running) and got.balance == (60, 0)


def test_mlperf_deepseek_r1_runs_state_the_harness_balance():
    # NVIDIA's MLPerf v5.1 harness writes its runtime flags adp_balancing_enable / _timeout_iters /
    # _batching_wait_iters into trtllm-serve's attention_dp_config wherever enable_attention_dp is set
    # (mlcommons/inference_results_v5.1@965182b03376a00fcae415c54e560e1c83937932:closed/NVIDIA/code/llmlib/config.py,
    # TrtllmExtraYAMLConfig._generate_extra_config_yaml; defaults True / 500 / 10); the Server configs set 9 / 3
    # (closed/NVIDIA/configs/B200-SXM-180GBx8/Server/deepseek-r1.py) and 6 / 2
    # (closed/CoreWeave/configs/GB300-NVL8-CoreWeave/Server/deepseek-r1.py), the Offline ones keep 500 / 10
    cases, _ = speed_cases()
    by_id = {c.id: c for c in cases if c.source == "mlperf-inference-v5.1"}
    assert case_balance(by_id["nvidia-b200-sxm-180gbx8_trt-deepseek-r1-server"]) == (9, 3)
    assert case_balance(by_id["coreweave-gb300-nvl8-coreweave_trt-deepseek-r1-server"]) == (6, 2)
    assert case_balance(by_id["nvidia-b200-sxm-180gbx8_trt-deepseek-r1-offline"]) == (500, 10)
    # CoreWeave's runtime max_num_tokens, 6,656 in both configs, is what launch_server.py passes as --max_num_tokens
    # (the build flag's 3,456 / 4,608 do not reach the PyTorch backend)
    assert by_id["coreweave-gb300-nvl8-coreweave_trt-deepseek-r1-server"].flags["max_num_tokens"] == "6656"
    # B200 Server at 5 requests/s over 8 ranks, 3,748.44 tokens a request, ~155 running a rank (Little's law on the
    # run's own mean latency, 5 x 248.9 s / 8): 155 / 3,748.44 = 0.0414 arrivals a rank an iteration; every rank
    # has one within T = 9 iterations with probability (1 - e^(-0.0414 x 9))^8 = 0.311^8 = 8.8e-5, so the timeout
    # binds: a release every 9 iterations, a mean wait of 9 / 2 = 4.5 (at 66 ms an iteration, ~300 ms of TTFT)
    assert balance_wait(8, arrivals(155, 3748.44), 9, 3) == pytest.approx(4.5, abs=0.01)
