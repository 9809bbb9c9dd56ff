"""A finite run's drain (kvplan.speed.load: `drain_steps`, the throughputs of `combos`): a client that sends n
requests, all at once or c at a time, times the run until its last request returns (`benchmark` and
`calculate_metrics` of vllm-project/vllm@009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1:vllm/benchmarks/serve.py and of
sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:python/sglang/bench_serving.py), so where output lengths
are drawn the run lasts until the longest ends: D = osl sqrt(3 cv^2) decode steps past the mean output, the top of a
uniform law. Hand arithmetic on both clients' random ranges, and the step count against simulate's event simulator
(every step the same time s)."""

import math
import random
from dataclasses import replace

from kvplan import api
from kvplan.hardware.gpus import find_gpu
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.workload import SimRequest
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.bench_load import Load, drain_steps
from kvplan.speed.load import combos, value
from kvplan.speed.spread import symmetric_cv2, uniform_cv2

S = 0.01  # seconds a step


def test_drain_is_the_top_of_the_clients_random_range():
    # sglang.bench_serving, --random-output-len 400 at its default range ratio 0: uniform on [0, 400] as kvplan reads
    # it, mean 200, cv^2 = 1 / 3 (uniform_cv2(0)); the longest ends at 400, D = 200 x sqrt(3 / 3) = 200 steps past
    # the mean
    load = Load(200, 200, num_prompts=1000, cap=1000, drawn=True, out_cv2=uniform_cv2(0.0))
    assert math.isclose(drain_steps(load, 200), 200.0)
    # ratio 0.5: uniform on [200, 400], mean 300, cv^2 = 0.25 / (3 x 2.25) = 1 / 27: D = 300 x sqrt(1 / 9) = 100
    assert math.isclose(drain_steps(replace(load, out_cv2=uniform_cv2(0.5)), 300), 100.0)
    # vllm bench serve, --random-output-len 300 --random-range-ratio 0.5: uniform on [150, 450], cv^2 = 0.25 / 3:
    # D = 300 x sqrt(0.25) = 150, to 450
    assert math.isclose(drain_steps(replace(load, out_cv2=symmetric_cv2(0.5)), 300), 150.0)
    # every request the same length, or a spread not known: no drain
    assert drain_steps(replace(load, drawn=False), 200) == 0.0
    assert drain_steps(replace(load, out_cv2=0.0), 200) == 0.0


def test_a_bursts_throughput_waits_for_its_longest_request():
    # 1,000 requests of 200 + 200 (drawn on [0, 400]) at once, all running (cap 1,000); t_wave 8 s, t_dec 0.1 s.
    # Its GPU time per request T = (8 + 200 x 0.1) / 1,000 = 28 ms; the run lasts 8 + (200 + 200) x 0.1 = 48 s:
    # 200,000 tokens / 48 s = 4,166.7 output tok/s (T alone said 200,000 / 28 = 7,142.9), 1,000 / 48 = 20.83
    # requests/s; the latencies are per request and do not move
    load = Load(200, 200, num_prompts=1000, cap=1000, drawn=True, out_cv2=uniform_cv2(0.0))
    _, _, cm = combos(load)
    assert math.isclose(value(cm["output_throughput"], 8.0, 0.1), 200_000 / 48)
    assert math.isclose(value(cm["request_throughput"], 8.0, 0.1), 1000 / 48)
    _, _, fixed = combos(replace(load, drawn=False, out_cv2=0.0))
    assert math.isclose(value(fixed["output_throughput"], 8.0, 0.1), 200_000 / 28)
    for m in ("ttft", "tpot", "e2el"):
        assert cm[m] == combos(replace(load, out_cv2=0.0))[2][m]


def test_a_closed_loop_drains_once_and_an_open_loop_not():
    # a closed loop of 64 over 1,000 drawn requests (on [0, 400], mean 200): the steady state's T = (t_wave + 200
    # t_dec) / 64 a request, and the run's last requests end D = 200 steps past the mean once, 200 / 1,000 = 0.2
    # decode steps a request: (1 / 64, 200 / 64 + 0.2); the same lengths at 10 requests/s (an open loop): T alone
    load = Load(200, 200, concurrency=64, num_prompts=1000, cap=256, drawn=True, out_cv2=uniform_cv2(0.0))
    assert combos(load)[2]["output_throughput"][:3] == (1 / 64, 200 / 64 + 0.2, 0.0)
    _, _, cm = combos(replace(load, concurrency=None, rate=10.0), e2e_estimate=6.4)  # c = 10 x 6.4 = 64 running
    assert cm["output_throughput"][:3] == (1 / 64, 200 / 64, 0.0)


def test_drain_against_the_simulator():
    # 256 requests of 512 prompt tokens, outputs 1 + 399 i // 255 (1..400, mean 200.0, cv^2 0.334) in a shuffled
    # order, all running (cap 256), chunk 2,048: a wave of K = 256 x 512 / 2,048 = 64 prefill steps, then the
    # requests end one by one, the last about 400 steps after its prefill. Simulated (vLLM's scheduler, every step
    # S): 453 steps; analytic, the wave's 64 steps and osl + D = 200.0 + 200.0 x sqrt(3 x 0.334) = 400.3 decode
    # steps: 464.3; without the drain 264.0 (453 / 264 = 1.72)
    n, isl, cap, chunk = 256, 512, 256, 2048
    outs = [1 + (i * 399) // (n - 1) for i in range(n)]
    random.Random(0).shuffle(outs)
    mean = sum(outs) / n
    cv2 = sum((o - mean) ** 2 for o in outs) / n / mean ** 2
    model = sim_model(api.plan("llama-3.1-8b", "h100", context=isl + 416), find_in_catalog("llama-3.1-8b"),
                      find_gpu("h100"))
    cfg = EngineConfig(max_num_seqs=cap, max_num_batched_tokens=chunk, prefix_caching=False)
    run = Engine(replace(model, fixed_step_s=S), cfg).run([SimRequest(i, 0.0, isl, o) for i, o in enumerate(outs)])
    sim = run.summary(1e9, 1e9)["throughput"]["requests_per_s"]
    load = Load(isl, mean, num_prompts=n, cap=cap, chunk=chunk, drawn=True, out_cv2=cv2)
    _, _, cm = combos(load)
    t_wave = -(-n * isl // chunk) * S
    ana = value(cm["request_throughput"], t_wave, S)
    assert abs(ana / sim - 1) < 0.05
    _, _, flat = combos(replace(load, out_cv2=0.0))
    assert value(flat["request_throughput"], t_wave, S) / sim > 1.5  # T alone: 1.72x the simulated rate


def test_the_drain_is_shared_by_the_replicas_a_run_keeps_busy():
    # a closed loop of 1 over 4 data-parallel replicas, 100 drawn requests (on [0, 400], mean 200): one replica runs
    # them one by one (B = 1: T = t_wave + 200 t_dec), the other three idle, and the run ends D = 200 steps past the
    # mean once over its 100 requests: 200 x 1 / 100 = 2 decode steps a request, (1, 200 + 2, 0), 1 x 200 tokens
    load = Load(200, 200, concurrency=1, num_prompts=100, cap=256, dp=4, drawn=True, out_cv2=uniform_cv2(0.0))
    assert combos(load)[2]["output_throughput"] == (1.0, 202.0, 0.0, 200.0)
    # at concurrency 8 every replica is busy: 4 x 200 tokens, B = 2 a replica, the drain 200 x 4 / 100 = 8 steps
    busy = combos(replace(load, concurrency=8))[2]["output_throughput"]
    assert busy == (0.5, 100.0 + 8.0, 0.0, 800.0)
