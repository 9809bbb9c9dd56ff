"""A burst's first-wave prompts share each step's budget with the wave's earlier requests' decode tokens
(kvplan.speed.wave.shared_wave): vLLM's and TensorRT-LLM's schedulers take the running requests first, so the later
prompts of a wave end later than a budget of prompts alone has them. Checked by hand and against simulate's event
simulator (kvplan.simulator.engine, vLLM's v1 scheduler restated step by step)."""

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan import api
from kvplan.bench.running import running
from kvplan.hardware.gpus import find_gpu
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.workload import SimRequest
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.fit import _gpu, _spec
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, first_wave, value
from kvplan.speed.wave import shared_wave
from conftest import speed_cases

S = 0.01  # seconds a step
CORPUS = Path(__file__).resolve().parent / "fixtures" / "speed"


def test_the_decodes_take_the_budget_first_by_hand():
    # 4 prompts of 100 tokens, 3 out (L = 2 later tokens), 200 tokens a step. Prompts alone: 2 end in step 1, 2 in
    # step 2: 1 + 1 + 2 + 2 = 6. Shared: step 1 takes 200 prompt tokens (prompts 1, 2 end); step 2 runs their 2
    # decodes first, 198 prompt tokens (398 in all: prompt 3 ends); step 3 runs 3 decodes (prompts 1 and 2's second
    # later token, prompt 3's first), 197 left, 2 needed: prompt 4 ends. 1 + 1 + 2 + 3 = 7: 7 / 6 later.
    assert shared_wave(4, 100, 3, 200) == pytest.approx(7 / 6)
    # first_wave: q = 200 // 100 = 2 prompts a step over K = 2 steps, 1 - 2 x 1 / 8 = 0.75 of t_wave; shared 0.875
    assert first_wave(Load(100, 3, num_prompts=4, cap=4, chunk=200), 4)[0] == pytest.approx(0.75)
    assert first_wave(Load(100, 3, num_prompts=4, cap=4, chunk=200, mixed=True), 4)[0] == pytest.approx(0.875)
    assert shared_wave(4, 100, 1, 200) == 1.0  # one output token: nobody decodes inside the wave
    assert shared_wave(1, 5000, 100, 512) == 1.0  # a wave of one


def _sim_ttft(n, isl, osl, chunk):
    model = sim_model(api.plan("llama-3.1-8b", "h100", context=isl + osl + 16), find_in_catalog("llama-3.1-8b"),
                      find_gpu("h100"))
    cfg = EngineConfig(max_num_seqs=n, max_num_batched_tokens=chunk, prefix_caching=False)
    out = Engine(replace(model, fixed_step_s=S), cfg).run([SimRequest(i, 0.0, isl, osl) for i in range(n)])
    return out.summary(1e9, 1e9)["latency_s"]["ttft"]["mean"]


def _analytic_ttft(n, isl, osl, chunk, mixed):
    b, g, cm = combos(Load(isl, osl, num_prompts=n, cap=n, chunk=chunk, fixed=True, mixed=mixed))
    return value(cm["ttft"], -(-b * isl // chunk) * S, S, -(-g * isl // chunk) * S)  # every step S


@pytest.mark.parametrize("n, isl, osl, chunk", [(256, 128, 64, 512), (217, 80, 60, 512)])
def test_the_shared_wave_follows_the_simulated_scheduler(n, isl, osl, chunk):
    # 256 prompts of 128 + 64 at 512 a step: 64 steps of prompts alone, the running decodes reach half the budget
    # by the wave's end. Simulated TTFT 39.5 steps; prompts alone 32.5, shared 39.5. dstack's vLLM 0.6.3 shape (217
    # prompts of 80 + 60 at V0's 512): simulated 20.5, alone 17.1, shared 20.0.
    sim = _sim_ttft(n, isl, osl, chunk)
    alone, shared = _analytic_ttft(n, isl, osl, chunk, False), _analytic_ttft(n, isl, osl, chunk, True)
    assert alone < 0.87 * sim and abs(shared / sim - 1) < 0.03


@pytest.mark.parametrize(("source", "point", "mixed"), [
    ("ai-wmx-dev-benchmarks-l4-vllm", "qwen2.5-0.5b-c1", True),  # vLLM 0.23.0, V1: the running requests first
    # TensorRT-LLM 1.2.0rc6.post3: its micro-batch scheduler fills each step's budget with the generation requests first
    ("aiconfigurator-silicon-sample",
     "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c4_tp8_0_ep1_0_1014", True),
    ("etched-trtllm-benchmarks-llama31-70b", "isl128-osl128", True),  # 0.16.0, the pool not sized here: still mixed
    ("qwen3-docs-speed-benchmark-sglang", "qwen3-0.6b-bf16-in1", False),  # SGLang: prefill batches apart from decodes
    # vLLM 0.8.5 falling back to V0 with chunked prefill off (Qwen3-32B): _schedule_default prefills alone
    ("mi100-llm-testing-vllm-benchmarks", "qwen3-32b-c5-v0.8.5", False),
    # V0 (0.7.3) on DeepSeek-R1's MLA: whole prompts packed into prefill-only steps of the server's length
    ("dstack-benchmarks-deepseek-r1-h200-mi300x", "mi300x-vllm-3200-800-c128", False),
])
def test_which_runs_share_the_budget(source, point, mixed):
    # running()'s `mixed` for corpus runs, as sized() sets it from the run's engine, release and settings
    case = next(c for c in speed_cases()[0] if c.source == source and c.id == point)
    got = running(case, _spec(case.model), _gpu(case.gpu))
    assert got is not None and got.mixed is mixed
