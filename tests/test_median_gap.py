"""A run whose only TPOT-like figure is the median ITL (kvplan.speed.figures.median_gap, kvplan.speed.load's "median
ITL"): sglang.bench_serving pools every request's gaps and takes their median, so on an engine that runs its prefill
batches apart (SGLang's default, `waves`) the figure is one decode step, not the mean gap the TPOT line prices."""

import math
from dataclasses import replace
from pathlib import Path

from kvplan.speed.corpus import median_gap, targets
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, value
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"
T_WAVE, T_DEC, T_GRP = 4.0, 0.1, 2.0


def test_only_a_median_itl_is_a_median_gap():
    assert median_gap({"itl_ms": {"median": 159.0}, "ttft_ms": {"median": 91282.2}})
    assert not median_gap({"itl_ms": {"mean": 260.0, "median": 159.0}})  # the mean is read (targets)
    assert not median_gap({"tpot_ms": {"median": 39.1}, "itl_ms": {"median": 30.0}})  # a TPOT is read first
    assert not median_gap({"ttft_ms": {"median": 1.0}, "output_throughput": 100.0})  # no gap figure at all
    assert not median_gap({"itl_ns": 5e7})  # one value of unstated statistic: kept as the mean
    assert not median_gap({"itl_ms": {"median": 10.0}, "per_user_output_throughput": 50.0})


def test_datacrunch_median_itl_is_not_its_mean_gap():
    # datacrunch-research/h200-benchmarks@c091ef530a525d2e788bc41c39a4450b09c9f2ad:sglang/outputs, Llama-3.3-70B on
    # 4 x H200, SGLang, 3,000 random prompts at once (tests/fixtures/speed/datacrunch-h200-sglang-outputs.yaml, first
    # point): median_itl_ms 159.01, mean_e2e_latency_ms 224,918.8, median_ttft_ms 91,282.2, 1,544,818 output tokens.
    # Mean output 1,544,818 / 3,000 = 514.94 tokens; the mean gap is about (224.92 - 91.28) / 513.94 = 0.260 s
    # (the median TTFT standing for the mean), 1.64x the median's 0.159 s: the figure is not the mean ITL.
    mean_gap = (224.9188 - 91.2822) / (1_544_818 / 3000 - 1)
    assert math.isclose(mean_gap, 0.2600, abs_tol=5e-4)
    assert math.isclose(mean_gap / 0.15901, 1.635, abs_tol=5e-3)
    cases, _ = speed_cases()
    case = next(c for c in cases if c.id == "l33-70b-tp4-offline-random-1024x1024-rinf")
    assert case.load.median_gap
    assert math.isclose(case.targets["tpot"], 0.15901175909675658)
    gpustack = next(c for c in cases if c.source == "gpustack-perflab-qwen3-14b-h100" and c.id == "L122-sglang")
    assert not gpustack.load.median_gap  # mean ITL printed: the pooled mean stays the figure
    assert math.isclose(targets({"itl_ms": {"median": 159.0}}, 4)["tpot"], 0.159)


def test_median_gap_of_an_engine_that_prefills_apart_is_one_decode_step():
    # a burst of 3,000 requests of 500 in / 515 out over a cap of 1,350 on SGLang (`waves`): the mean gap is the
    # TPOT line, (E2E - TTFT) / 514, which carries the prefills run between decode steps; the median gap is one
    # decode step: t_dec = 0.1 s exactly, whatever t_wave and t_grp are.
    load = Load(500, 515, num_prompts=3000, cap=1350, drawn=True, out_cv2=1 / 3, waves=True)
    _, _, mean = combos(load)
    _, _, med = combos(replace(load, median_gap=True))
    assert med["tpot"] == (0.0, 1.0, 0.0, 0.0)
    assert value(med["tpot"], T_WAVE, T_DEC, T_GRP) == T_DEC
    assert value(mean["tpot"], T_WAVE, T_DEC, T_GRP) > T_DEC  # the mean holds the prefills (t_wave's share)
    for m in ("ttft", "e2el", "output_throughput"):  # only the gap figure changes
        assert med[m] == mean[m]


def test_median_gap_of_an_engine_that_mixes_prompt_chunks_keeps_the_mean():
    # not `waves` (vLLM, TensorRT-LLM, SGLang with mixed chunks): any decode step may carry a prompt chunk, so the
    # median gap is not priced apart: the mean line stands
    load = Load(500, 515, num_prompts=3000, cap=1350, drawn=True, out_cv2=1 / 3)
    assert combos(replace(load, median_gap=True))[2]["tpot"] == combos(load)[2]["tpot"]
