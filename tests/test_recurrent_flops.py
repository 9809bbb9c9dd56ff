"""A Gated DeltaNet layer's chunked recurrence in the GEMM term (issue 21, round 41, kvplan.speed.recurrent), by hand.

fla's chunk_gated_delta_rule forward (fla-org/flash-linear-attention@f03cb3ae: chunk_scaled_dot_kkt, recompute_w_u,
chunk_gated_delta_rule_fwd_h, chunk_fwd_o; vendored by SGLang and vLLM), chunks of C = 64, per value head and token:
K K^T 2 C d_k, w 2 C d_k, u 2 C d_v, v_new 2 d_k d_v, state 2 d_k d_v, q h 2 d_k d_v, q K^T 2 C d_k, A v_new 2 C d_v.

Qwen3-Next-80B-A3B (its config.json: linear_num_value_heads 32, linear_key_head_dim 128, linear_value_head_dim 128,
48 layers, full_attention_interval 4, so 36 Gated DeltaNet layers):
  one value head: 6 x 64 x 128 + 4 x 64 x 128 + 6 x 128 x 128 = 49,152 + 32,768 + 98,304 = 180,224 FLOPs a token
  one layer: 32 x 180,224 = 5,767,168; at tp 2 (16 value heads a rank) 2,883,584
  the model: 36 x 5,767,168 = 207,618,048 FLOPs a token (about 3.2% of its 2 x 3.25 B active parameters' 6.5 GFLOP)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.model.recurrent import recurrent_states
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.recurrent import gdn_flops_per_head, recurrent_flops
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import Shape, gemm_seconds

NEXT = find_in_catalog("qwen3-next-80b-a3b-thinking")


def test_one_value_head_and_one_layer_of_qwen3_next_by_the_kernels_dots():
    assert gdn_flops_per_head(128, 128) == 180_224
    one = recurrent_states(NEXT.layers)[:1]  # one Gated DeltaNet layer
    assert recurrent_flops(one) == 5_767_168
    assert recurrent_flops(one, tp=2) == 2_883_584  # its 32 value heads split 16 a rank


def test_the_whole_model_counts_its_36_linear_layers_only():
    assert len(recurrent_states(NEXT.layers)) == 36
    assert recurrent_flops(NEXT.layers) == 207_618_048


def test_models_without_a_chunked_recurrent_layer_spend_none():
    assert recurrent_flops(find_in_catalog("llama-2-7b-hf").layers) == 0
    jamba = find_in_catalog("ai21-jamba-1.5-mini")  # Mamba-1: a selective scan, no chunked kernel (docstring)
    assert recurrent_states(jamba.layers) and recurrent_flops(jamba.layers) == 0


def test_the_recurrence_runs_at_the_16_bit_rate_whatever_the_weights():
    s = Shape(dense_bytes=0, flops_per_token=1e9, gemm_rate=4e12, bf16_rate=1e12)
    base = gemm_seconds(s, 100.0, 0.0, s.gemm_rate)  # 1e9 x 100 / 4e12 = 0.025 s
    with_state = gemm_seconds(replace(s, recurrent_flops=2e8), 100.0, 0.0, s.gemm_rate)
    assert base == 0.025
    assert with_state - base == pytest.approx(0.02)  # 2e8 x 100 / 1e12: 0.02 s at bf16_rate, not at the fp8 GEMM's 4e12


def test_engine_shapes_carry_it_and_llama_cpp_does_not():
    gpu = find_gpu("h200-sxm")
    assert shape_for(NEXT, gpu, tp=2, engine="vllm").recurrent_flops == 207_618_048 / 2
    qwen35 = find_in_catalog("qwen3.5-35b-a3b")
    # llama.cpp scans the tokens one by one in FP32 (ggml's GATED_DELTA_NET): no chunked FLOPs priced
    assert shape_for(qwen35, find_gpu("rtx-4090"), engine="llama.cpp", weight_dtype="q4_0").recurrent_flops == 0
