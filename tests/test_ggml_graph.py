"""llama.cpp's CUDA / HIP graph replay by build (kvplan.speed.ggml_graph): the `layer` term only in the steps a build
launches from the host, by hand.

The rules restate ggml's graph checks (ggml-org/ggml@e12eff0b src/ggml-cuda.cu:2480-2546, llama.cpp#6766 of
2024-05-08: compute capability 8.0 and newer, no split buffer, no MUL_MAT_ID, no ADD of more than one token's rows;
llama.cpp#13014 of 2025-04-22: a MUL_MAT_ID of one token replays; llama.cpp#19645 of 2026-02-17: steps of any size;
llama.cpp#25749 of 2026-07-16: Volta and Turing; HIP: GGML_HIP_GRAPHS off until llama.cpp#22254 of 2026-04-23).
Compute capabilities are the profiles' fields: RTX 4090 8.9, RTX 3090 8.6, V100 7.0; Llama 2 7B has 32 layers
(its config.json's num_hidden_layers).
"""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.ggml_graph import EVERY, graph_tokens
from kvplan.speed.model import StepModel, coefficients, decode_features, prefill_features, priced
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features

LAYER = TERMS.index("layer")
LLAMA2_7B = find_in_catalog("llama-2-7b-hf")
RTX4090, RTX3090, V100 = find_gpu("rtx-4090"), find_gpu("rtx-3090"), find_gpu("v100-pcie-16")
MI300X, W7900, GAUDI2 = find_gpu("mi300x"), find_gpu("radeon-pro-w7900"), find_gpu("gaudi2")


def test_which_builds_replay_a_graph_by_gpu():
    assert (RTX4090.compute_capability, V100.compute_capability) == ("8.9", "7.0")
    # NVIDIA Ampere and newer: none before #6766, one-token steps from it, every step from #19645
    assert graph_tokens(RTX4090, "2024-01-28") == 0  # llm-tracker's b1988 build
    assert graph_tokens(RTX4090, "2024-05-08") == 1
    assert graph_tokens(RTX4090, "2025-08-02") == 1  # llama.cpp#15035's branch
    assert graph_tokens(RTX4090, "2026-02-17") == EVERY
    assert graph_tokens(RTX4090, None) == EVERY  # a plan: the current build
    # Volta: below #6766's compute capability 8.0 until #25749
    assert graph_tokens(V100, "2025-03-06") == 0 and graph_tokens(V100, "2026-07-16") == EVERY
    # AMD: no HIP graph in a default build until #22254, whatever the part
    assert graph_tokens(MI300X, "2024-10-09") == 0 and graph_tokens(W7900, "2026-04-22") == 0
    assert graph_tokens(MI300X, "2026-04-23") == graph_tokens(W7900, None) == EVERY
    # a row-split model (tp > 1) and a backend kvplan does not read replay none
    assert graph_tokens(RTX4090, None, tp=2) == 0 and graph_tokens(GAUDI2, None) == 0


def test_a_model_with_experts_replays_from_13014():
    assert graph_tokens(RTX4090, "2025-04-21", moe=True) == 0
    assert graph_tokens(RTX4090, "2025-04-22", moe=True) == 1
    assert graph_tokens(RTX4090, "2025-04-21", moe=False) == 1
    moe = shape_for(find_in_catalog("gpt-oss-20b"), RTX4090, weight_dtype="mxfp4", engine="llama.cpp",
                    date="2025-03-01")
    assert moe.num_experts == 32 and moe.graph_tokens == 0


def test_the_layer_term_counts_only_the_steps_launched_from_the_host():
    # MI300X at llm-tracker's b3891 (2024-10-09): every kernel launched from the host, 32 layers a step
    hip = shape_for(LLAMA2_7B, MI300X, weight_dtype="q4_0", engine="llama.cpp", date="2024-10-09")
    assert hip.graph_tokens == 0 and hip.layers == 32
    assert decode_features(hip, 1, 64)[LAYER] == 32
    # RTX 4090 at 2025-08-02: a tg step (one token) replays its graph, no layer term
    cuda = shape_for(LLAMA2_7B, RTX4090, weight_dtype="q4_0", engine="llama.cpp", date="2025-08-02")
    assert cuda.graph_tokens == 1 and decode_features(cuda, 1, 64)[LAYER] == 0
    # a pp512 at -ub 512 in one micro-batch of 512 tokens: launched (32); at -ub 1, 512 one-token steps: replayed
    assert prefill_features(cuda, 512, chunk=512, request=0.0)[LAYER] == 32
    assert prefill_features(cuda, 512, chunk=1, request=0.0)[LAYER] == 0
    # pp4096 at -ub 512 on the MI300X: 8 micro-batches x 32 layers
    assert prefill_features(hip, 4096, chunk=512, request=0.0)[LAYER] == 8 * 32
    # every other engine's Shape keeps the term in every step (graph_tokens 0)
    vllm = shape_for(LLAMA2_7B, RTX4090, engine="vllm")
    assert vllm.graph_tokens == 0 and features(vllm, 1, 1, 64, 65)[LAYER] == 32


def test_the_shipped_layer_cost_is_fitted_and_the_step_model_folds_it():
    coef = coefficients("llama.cpp")
    layer = coef[LAYER]
    assert layer > 0  # fitted on the graphless steps of the training split (docs/speed.md)
    hip = shape_for(LLAMA2_7B, MI300X, weight_dtype="q4_0", engine="llama.cpp", date="2024-10-09")
    cuda = shape_for(LLAMA2_7B, RTX4090, weight_dtype="q4_0", engine="llama.cpp", date="2025-08-02")
    now = shape_for(LLAMA2_7B, RTX4090, weight_dtype="q4_0", engine="llama.cpp")
    # the same step with and without its graph differs by the 32 layers' launch cost
    graphless = shape_for(LLAMA2_7B, RTX4090, weight_dtype="q4_0", engine="llama.cpp", date="2024-01-28")
    gap = priced(coef, decode_features(graphless, 1, 64)) - priced(coef, decode_features(cuda, 1, 64))
    assert gap == pytest.approx(32 * layer)
    for s in (hip, cuda, now):  # the simulator's folded step equals the terms, one token and 512
        sm = StepModel(s, coef)
        assert sm.step(1, 1, 64, 65) == pytest.approx(priced(coef, features(s, 1, 1, 64, 65)))
        assert sm.decode(1)(64) == pytest.approx(priced(coef, features(s, 1, 1, 64, 65)))
        assert sm.step(512, 1, 0, 512 * 513 / 2, prefill_pairs=512 * 513 / 2) == pytest.approx(
            priced(coef, features(s, 512, 1, 0, 512 * 513 / 2, prefill_pairs=512 * 513 / 2)))
