"""llama.cpp's serial Gated DeltaNet scan priced at its measured time, outside the fitted coefficients, by hand.

The time (kvplan.speed.ggml_scan): ggml-org/llama.cpp#22587's RTX 5090 microbenchmark at Qwen3.5-35B-A3B's shape,
master column, 279.6 us at 512 tokens and 525.1 us at 1,024: (525.1 - 279.6) / 512 = 245.5 / 512 us a token a layer.
Qwen3.5-35B-A3B (its config: 40 layers, full attention every 4th) has 30 Gated DeltaNet layers of S_v 128.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.fit import PINNED
from kvplan.speed.ggml_scan import SERIAL_STEP_S, scan_seconds
from kvplan.speed.model import StepModel, coefficients, prefill_features, priced, shipped
from kvplan.speed.robust import robust
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features

QWEN35 = find_in_catalog("qwen3.5-35b-a3b")
RTX4090, MI100 = find_gpu("rtx-4090"), find_gpu("mi100")


def shape(gpu, engine="llama.cpp"):
    return shape_for(QWEN35, gpu, weight_dtype="q4_0", engine=engine, date="2026-04-25")


def test_the_measured_time_a_token_a_layer():
    assert SERIAL_STEP_S == pytest.approx(0.4794921875e-6, rel=1e-12)  # 245.5 / 512 us
    # 30 layers x 245.5 / 512 us = 14.384766 us a token on an NVIDIA GPU
    assert scan_seconds(QWEN35.layers, RTX4090) == pytest.approx(30 * 245.5 / 512 * 1e-6, rel=1e-12)


def test_a_pp2048_on_an_rtx_4090_adds_the_measured_time_whatever_the_coefficients():
    # llama-bench pp2048 in one 2,048-token micro-batch (llama.cpp#22298's ub 2048 row): the scan's share is
    # 30 layers x 2,048 tokens x 245.5 / 512 us = 245.5 x 120 us = 29.46 ms exactly, at coefficient 1
    s = shape(RTX4090)
    f = prefill_features(s, 2048, 0, 2048, request=0.0)
    assert f[TERMS.index("measured")] == pytest.approx(29.46e-3, rel=1e-12)
    without = prefill_features(replace(s, measured_s_per_token=0.0), 2048, 0, 2048, request=0.0)
    assert [a for t, a in zip(TERMS, f) if t != "measured"] == [b for t, b in zip(TERMS, without) if t != "measured"]
    shipped_set = coefficients("llama.cpp")
    tripled = tuple(1.0 if t == "measured" else 3.0 * c for t, c in zip(TERMS, shipped_set))
    for coef in (shipped_set, tripled):  # no fitted coefficient scales it (round 43's gemm did: 2.75x, 81.07 ms)
        assert priced(coef, f) - priced(coef, without) == pytest.approx(29.46e-3, rel=1e-9)


def test_the_step_model_adds_it_as_the_features_do():
    s, coef = shape(RTX4090), coefficients("llama.cpp")
    sm = StepModel(s, coef)
    for tokens, seqs in ((1, 1), (512, 1), (2048, 1), (8, 8)):
        pairs = tokens * (tokens + 1) / 2 if seqs == 1 else 2.0 * seqs
        want = priced(coef, features(s, tokens, seqs, 0, pairs))
        assert sm.step(tokens, seqs, 0, pairs) == pytest.approx(want, rel=1e-12)


def test_only_where_the_timed_kernel_runs():
    # HIP on an MI100 (CDNA: 64-lane wavefronts, a different chain): not carried, 0; vLLM runs fla's chunked kernels,
    # priced as FLOPs (kvplan.speed.recurrent), no measured time
    assert shape(MI100).measured_s_per_token == 0.0
    vllm = shape(RTX4090, engine="vllm")
    assert vllm.measured_s_per_token == 0.0 and vllm.recurrent_flops > 0
    assert shape(RTX4090).recurrent_flops == 0.0


def test_a_pinned_column_stays_at_its_floor_and_comes_off_the_measured_figure():
    # measured y = 2 x + f, f a timed kernel's seconds: rows (x / y, f / y). Pinned at 1, the fit gives x's coefficient
    # 2 exactly; fitted freely, f's column could take any share
    data = [(1.0, 0.5), (2.0, 0.1), (0.5, 2.0), (3.0, 1.0)]
    rows = [[x / (2 * x + f), f / (2 * x + f)] for x, f in data]
    coef = robust(rows, [1.0] * len(rows), [0.0, 1.0], pinned=[1])
    assert coef[1] == 1.0
    assert coef[0] == pytest.approx(2.0, rel=1e-6)


def test_every_shipped_set_reads_the_measured_term_at_one():
    assert PINNED == ("measured",)
    for key, entry in shipped()["engines"].items():
        assert entry["coefficients"]["measured"] == 1.0, key
