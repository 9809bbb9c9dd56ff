"""Drawn output lengths (kvplan.speed.figures.drawn_lengths, kvplan.speed.load.group): a corpus point whose output
lengths differ request to request (a random range below 1, SGLang's bench_serving default 0.0 among them, or a
dataset's own lengths) desynchronises a closed loop, so its later requests arrive one at a time (issue 21)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.speed.corpus import case_of, drawn_lengths
from kvplan.speed.load import group
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def _point(**kw) -> dict:
    base = dict(id="p", engine="sglang", version="0.5.13", gpu="h100-sxm", kvplan_model="llama-3.1-8b-instruct",
                concurrency=16, num_prompts=256, metrics={"ttft_ms": {"median": 100.0}})
    return {**base, **kw}


def test_which_points_draw_their_lengths():
    assert not drawn_lengths(_point(isl=1000, osl=1000))  # fixed, as stated
    pinned = {"kind": "random", "random_output_len": 1000, "range_ratio": 1.0}
    assert not drawn_lengths(_point(isl=1000, output_dist=pinned))  # --random-range-ratio 1.0: every row 1,000
    assert drawn_lengths(_point(isl=1000, output_dist={**pinned, "range_ratio": 0.0}))  # the tool's default
    assert drawn_lengths(_point(isl=1000, output_dist={"kind": "random", "random_output_len": 1000,
                                                       "range_ratio": None, "total_output_tokens": 4220}))
    assert drawn_lengths(_point(dataset="sharegpt"))  # a dataset's own lengths


def test_a_default_range_ratio_reads_the_mean_and_one_request_groups():
    # SGLang's compute_random_lens at ratio 0.0: np.random.randint(max(int(1000 x 0), 1), 1000 + 1), uniform over
    # 1..1000; the reader's mean 1000 x (1 + 0) / 2 = 500. A closed loop of 16 at chunk 16,384 would group
    # min(16, 16384 // 500 = 32) = 16 requests with fixed lengths; drawn, one at a time
    dist = {"kind": "random", "random_input_len": 1000, "random_output_len": 1000, "range_ratio": 0.0}
    case, why = case_of(_point(input_dist=dist, output_dist=dist), "s", "")
    assert why == "" and case.load.isl == case.load.osl == 500.0 and case.load.drawn
    assert group(case.load, 16, False) == 1.0
    fixed, _ = case_of(_point(isl=500, osl=500), "s", "")
    assert not fixed.load.drawn and group(replace(fixed.load, chunk=16384), 16, False) == 16.0


def test_the_sglang_cookbook_mi300x_cells_draw_their_lengths():
    # their stated command passes --random-input-len / --random-output-len 1000 and no --random-range-ratio
    # (sgl-project/sglang@f2ef530700616760421c3353ccc5b9a83d8cebd4 minimax-m2.7-benchmarks.jsx; gemma4 at 8d1d5e92)
    cases, _ = speed_cases()
    mine = [c for c in cases if c.source in ("sglang-docs-minimax-m2.7-benchmarks", "sglang-docs-gemma4-benchmarks")]
    assert len(mine) == 12
    assert all(c.load.drawn and c.load.isl == 500.0 and c.load.osl == 500.0 for c in mine)


def test_the_0_5_16_mi300x_gemma4_cells_draw_their_lengths_too():
    # round 38: "random ISL/OSL 8192/1024" and no ratio (the NVIDIA cells of the same file state 1.0); sglang 0.5.16's
    # bench_serving defaults --random-range-ratio to 0.0 (wheel sglang/benchmark/serving.py L2281-2287): means
    # 8192 x (1 + 0) / 2 = 4,096 and 1024 x (1 + 0) / 2 = 512. The table's c4096 median TTFT, 2,645 s, is half a
    # drawn run (4,096 x 512.5 / 401 tok/s = 5,235 s), not half a fixed one (10,460 s).
    cases, _ = speed_cases()
    mine = [c for c in cases if c.source == "sglang-docs-gemma4-benchmarks-v0.5.16"]
    assert len(mine) == 6 and all(c.load.drawn and (c.load.isl, c.load.osl) == (4096.0, 512.0) for c in mine)
    nvidia = [c for c in cases if c.source == "sglang-docs-gemma4-benchmarks-nvidia-v0.5.16"]
    assert nvidia and not any(c.load.drawn for c in nvidia)
