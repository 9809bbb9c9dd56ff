"""vLLM V0 on an MLA model packs whole prompts into a prefill step as large as the server's max_model_len
(kvplan.engines.scheduler.whole_prompt_budget, kvplan.bench.running.case_packed) and returns each step's first
tokens at its end (kvplan.speed.load.first_wave), read against dstack's DeepSeek-R1 servers."""

from __future__ import annotations

from pathlib import Path

from conftest import read_point, speed_cases
from kvplan.bench.running import running
from kvplan.engines.scheduler import whole_prompt_budget
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, first_wave

R1 = find_in_catalog("deepseek-r1")
SOURCE = "dstack-benchmarks-deepseek-r1-h200-mi300x"


def dstack(point_id: str):
    """One point of dstack's DeepSeek-R1 study (tests/fixtures/speed), read as the corpus reads it."""
    cases, _ = speed_cases()
    return next(c for c in cases if c.source == SOURCE and c.id == point_id)


def test_v0_budget_is_the_servers_length_with_a_2048_floor():
    # vllm 0.7.3 wheel config.py SchedulerConfig.__post_init__ L1533-1536: chunked prefill off, the budget is
    # max(max_model_len, 2048); _schedule_prefills takes whole prompts while SchedulingBudget.can_schedule holds
    # (core/scheduler.py L1148-1151, L69-75). dstack's MI300X server: --max-model-len 32768; its H200 server: none,
    # so DeepSeek-R1's own 163,840.
    assert whole_prompt_budget("vllm", "0.7.3.dev138+g21f6ca217", True, 32768) == 32768
    assert whole_prompt_budget("vllm", "0.7.4.dev181+gf35f8e22", True, 163840) == 163840
    assert whole_prompt_budget("vllm", "0.7.3", True, 1000) == 2048
    assert whole_prompt_budget("vllm", "0.8.0", True, 163840) is None  # V1: chunked prefill, its own budget
    assert whole_prompt_budget("vllm", "0.7.3", False, 163840) is None  # not prefill-first (see PREFILL_FIRST_BEFORE)
    assert whole_prompt_budget("sglang", "0.4.3.post2", True, 163840) is None


def test_dstack_v0_servers_step_at_their_server_length():
    mi300x = running(dstack("mi300x-vllm-3200-800-c4"), R1, find_gpu("mi300x"))
    h200 = running(dstack("h200-vllm-3200-800-c4"), R1, find_gpu("h200-sxm"))
    assert (mi300x.chunk, mi300x.packed, mi300x.waves) == (32768, True, True)
    assert (h200.chunk, h200.packed, h200.waves) == (163840, True, True)
    # the pool is still priced at the resident context (3,200 + 800 / 2), not at the server's length
    assert h200.cap == running(dstack("h200-vllm-3200-800-c64"), R1, find_gpu("h200-sxm")).cap
    sglang = running(dstack("mi300x-sglang-3200-800-c4"), R1, find_gpu("mi300x"))
    assert not sglang.packed


def test_a_stated_step_budget_is_not_replaced():
    point = {"engine": "vllm", "gpu": "h200-sxm", "version": "0.7.4.dev181+gf35f8e22", "isl": 3200, "osl": 800,
             "concurrency": 4, "kvplan_model": "deepseek-r1", "gpus": 8, "tp": 8, "weight_dtype": "fp8",
             "flags": {"max-num-batched-tokens": 16384}, "metrics": {"tpot_ms": 20}}
    c = read_point(point)
    got = running(c, R1, find_gpu("h200-sxm"))
    assert got.chunk == 16384 and not got.packed


def test_a_packed_waves_first_tokens_come_at_each_steps_end():
    # dstack's H200 vLLM at concurrency 4: mean TTFT 975.65 ms, std 10.93 ms, p99 1,030.93 ms
    # (Deepseek-R1/raw_data/online_results.csv): the four prompts' first tokens come together, one step of
    # 4 x 3,200 = 12,800 tokens, so the mean TTFT is the whole wave's prefill (K = 1: (1 + 1) / 2 = 1). One prompt a
    # step would spread them at 1/4, 2/4, 3/4 and 4/4 of the wave, mean (4 + 1) / 8 = 0.625.
    wave = Load(isl=3200, osl=800, concurrency=4, num_prompts=500, chunk=163840, fixed=True, waves=True, packed=True)
    assert first_wave(wave, 4) == (1.0, 0.0, 0.0)
    assert first_wave(Load(isl=3200, osl=800, chunk=3600), 4) == (0.625, 0.0, 0.0)
    # MI300X at concurrency 128, --max-model-len 32768: 32,768 // 3,200 = 10 prompts a step, ceil(128 / 10) = 13
    # steps, the last holding 8: the mean first token (10 x (1 + ... + 12) + 8 x 13) / 128 = 6.906 steps of 13,
    # 1 - 10 x 12 / 256 = 0.531 of the wave ((13 + 1) / 26 = 0.538 were every step full)
    mi = Load(isl=3200, osl=800, concurrency=128, num_prompts=500, chunk=32768, fixed=True, waves=True, packed=True)
    assert abs(first_wave(mi, 128)[0] - (10 * 78 + 8 * 13) / 128 / 13) < 1e-12
    # in waves every wave is the first: TTFT = t_wave, E2E = t_wave + osl x t_dec (B = c), so TPOT is t_dec x 800 / 799
    _, _, got = combos(wave)
    assert got["ttft"][:3] == (1.0, 0.0, 0.0)
    assert abs(got["e2el"][0] - 1.0) < 1e-12 and abs(got["e2el"][1] - 800) < 1e-9
    assert abs(got["tpot"][0]) < 1e-12 and abs(got["tpot"][1] - 800 / 799) < 1e-12
