"""vLLM V0 replays its CUDA graph for decode steps within max_seq_len_to_capture: no `layer` cost there (issue 21).

V0's model runner uses a captured graph only for a decode-only batch whose longest sequence is within
max_seq_len_to_capture (default 8,192, vllm 0.7.3 `engine/arg_utils.py` L137; the batch rule `worker/model_runner.py`
L761-769, docs/speed.md "The dstack what-ran row" (4)) and never under enforce_eager; a step with prompt tokens runs
eagerly. The `layer` term is the cost of a step's layers launched from the host, none where a graph replays
(kvplan.speed.terms.replays_graph), as llama.cpp's graphs already are.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import read_point, speed_cases
from kvplan.bench.running import case_graph, running
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.terms import TERMS, Shape

LLAMA = find_in_catalog("llama-3.1-8b-instruct")


def test_a_v0_decode_step_within_the_capture_length_launches_no_layer():
    # Llama-3.1-8B's 32 layers, V0's default 8,192: a decode step of 4 sequences holding 4 x 8,000 = 32,000 cached
    # tokens (8,000 each, within) replays its graph, layer 0; at 4 x 8,200 = 32,800 (8,200 each, past it) it is
    # launched, 32 x 1 step = 32; a step with prompt tokens (a 1,000-token prefill) is always launched, 32
    s = Shape(dense_bytes=0, layers=32, bandwidth=1e12, graph_context=8192)
    assert dict(zip(TERMS, speed.decode_features(s, 4, 8_000)))["layer"] == 0
    assert dict(zip(TERMS, speed.decode_features(s, 4, 8_200)))["layer"] == 32
    assert dict(zip(TERMS, speed.prefill_features(s, 1_000)))["layer"] == 32
    # a Shape without the limit (V1, another engine): every step launched, as before
    plain = Shape(dense_bytes=0, layers=32, bandwidth=1e12)
    assert dict(zip(TERMS, speed.decode_features(plain, 4, 8_000)))["layer"] == 32


def test_the_step_model_agrees():
    # layer 0.2 ms: 32 x 0.2 = 6.4 ms past the capture length, 0 within it; the simulator's decode(4) the same
    coef = [0.0] * len(TERMS)
    coef[TERMS.index("layer")] = 0.0002
    s = Shape(dense_bytes=0, layers=32, bandwidth=1e12, graph_context=8192)
    m = speed.StepModel(s, tuple(coef))
    for each, want in ((8_000, 0.0), (8_200, 0.0064)):
        assert m.step(4, 4, 4 * each, 4 * each + 4) == pytest.approx(want)
        assert m.decode(4)(4 * each) == pytest.approx(want)
        assert speed.priced(coef, speed.decode_features(s, 4, each)) == pytest.approx(want)


def _point(flags, version="0.7.3", isl=1000, osl=1000):
    return read_point({"engine": "vllm", "gpu": "h100-sxm", "version": version, "isl": isl, "osl": osl,
                       "concurrency": 8, "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "tp": 1,
                       "flags": dict(flags), "metrics": {"tpot_ms": 20}})


def test_the_capture_length_a_run_states():
    # the default 8,192; dstack's 405B MI300X server states --max-seq-len-to-capture 16384; within the server's
    # length (V0 ModelConfig: min(max_seq_len_to_capture, max_model_len)); a stated 0 is 0 (every step eager), and
    # 0.4.1's name for it, max_context_len_to_capture (vllm 0.4.1 sdist engine/arg_utils.py L47), is read too
    assert case_graph(_point({}), LLAMA)[0] == 8192
    assert case_graph(_point({"max-seq-len-to-capture": 16384}), LLAMA)[0] == 16384
    assert case_graph(_point({}), replace(LLAMA, max_model_len=4096))[0] == 4096
    assert case_graph(_point({"max_seq_len_to_capture": 0}), LLAMA)[0] == 0
    assert case_graph(_point({"max_context_len_to_capture": 2048}, version="0.4.1"), LLAMA)[0] == 2048


def test_the_largest_captured_batch_by_release():
    # vllm 0.4.1 sdist worker/model_runner.py L37-39: _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in 1..32],
    # so its last is 8 x 32 = 256, and L483 `batch_size <= _BATCH_SIZES_TO_CAPTURE[-1]`; 0.5.5 the same (L64-66,
    # L635). From 0.6.0 the limit is max_num_seqs padded up to a captured size (0.6.0 L669), never below the running
    # cap: no limit of its own (0)
    assert case_graph(_point({}, version="0.4.1"), LLAMA)[1] == 256
    assert case_graph(_point({}, version="0.5.5"), LLAMA)[1] == 256
    assert case_graph(_point({}, version="0.6.0"), LLAMA)[1] == 0
    assert case_graph(_point({}, version="0.7.3"), LLAMA)[1] == 0


def test_a_decode_batch_past_the_largest_captured_is_launched():
    # 300 sequences of 1,000 cached tokens (within 8,192) under 0.4.1's 256: launched, 32 layers x 1 step = 32;
    # 256 of them: replayed, 0
    s = Shape(dense_bytes=0, layers=32, bandwidth=1e12, graph_context=8192, graph_batch=256)
    assert dict(zip(TERMS, speed.decode_features(s, 300, 1_000)))["layer"] == 32
    assert dict(zip(TERMS, speed.decode_features(s, 256, 1_000)))["layer"] == 0
    assert dict(zip(TERMS, speed.decode_features(replace(s, graph_batch=0), 300, 1_000)))["layer"] == 0


def test_only_a_v0_run_carries_it():
    # vLLM 0.7.3 runs V0 (V1 the default from 0.8.0); 0.19.0 runs V1, whose piecewise graph leaves attention outside
    h100 = find_gpu("h100-sxm")
    assert running(_point({}), LLAMA, h100).graph_context == 8192
    assert running(_point({}, version="0.19.0"), LLAMA, h100).graph_context == 0


def test_an_unsized_v0_run_carries_it_too():
    # the corpus's V0 runs at 0.4.x that running() does not size (zhjunqin's RTX 3090 at 0.4.1 x 5, MLPerf v4.1's
    # 0.4.3 on ROCm x 2) still replay their graph: 0.4.x's default 8,192 (within the server's length) and batch
    # limit 256 (test_the_largest_captured_batch_by_release), for every one of them
    cases = [c for c in speed_cases()[0] if c.engine == "vllm" and str(c.version).startswith("0.4.")]
    assert len(cases) >= 7
    for c in cases:
        spec = find_in_catalog(c.model)
        got = running(c, spec, find_gpu(c.gpu))
        assert (got.graph_context, got.graph_batch) == (min(8192, spec.max_model_len or 8192), 256)
