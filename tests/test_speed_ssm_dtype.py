"""A run that states SGLang's --mamba-ssm-dtype: its recurrent states priced and pooled in that dtype.

SGLang's Gated DeltaNet decode kernel loads each sequence's state from the pool in the pool's element type and stores
it back once a step in that type (sgl-project/sglang@f1dea624c8f596e1a789784fce46f6f3b77c0be4:python/sglang/srt/
layers/attention/fla/fused_sigmoid_gating_recurrent.py L75-85, L145-156), and the pool is allocated in
--mamba-ssm-dtype where the run gives it (kvplan.engines.sglang.mamba). The SGLang cookbook's Qwen3.5 FP8 cells on
H200 state bfloat16 (tests/fixtures/speed/sglang-docs-qwen3.5-benchmarks-v0.5.16.yaml).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.model.layers import FullAttention
from kvplan.model.recurrent import ParallelHybrid, RecurrentState, with_ssm_dtype
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.fit import Built
from kvplan.speed.ssm_dtype import stated_ssm_dtype
from kvplan.speed.shape import model_terms
from conftest import speed_cases

SOURCE = "sglang-docs-qwen3.5-benchmarks-v0.5.16"

# Qwen/Qwen3.5-35B-A3B's config.json: 40 layers, full attention every 4th, so 30 Gated DeltaNet layers, each
# 32 value heads x 128 key dims x 128 value dims = 524,288 recurrent values and a conv window of
# (4 - 1) x (2 x 16 key heads x 128 + 32 x 128) = 3 x 8,192 = 24,576 values (bf16: SGLang's conv dtype);
# mamba_ssm_dtype float32.
FP32_STATE = 30 * (524_288 * 4 + 24_576 * 2)  # 64,389,120 bytes a sequence
BF16_STATE = 30 * (524_288 * 2 + 24_576 * 2)  # 32,931,840


def test_the_state_bytes_follow_the_stated_dtype():
    spec = find_in_catalog("qwen3.5-35b-a3b")
    assert model_terms(spec)["state_bytes_per_seq"] == FP32_STATE == 64_389_120
    bf16 = replace(spec, layers=tuple(with_ssm_dtype(layer, "bfloat16") for layer in spec.layers))
    assert model_terms(bf16)["state_bytes_per_seq"] == BF16_STATE == 32_931_840


def test_only_state_layers_change():
    attn = FullAttention(4, 128)
    state = RecurrentState(conv_elements=3, ssm_elements=8, num_heads=1, ssm_dtype="fp32")
    assert with_ssm_dtype(attn, "bfloat16") is attn
    assert with_ssm_dtype(state, "bfloat16").ssm_dtype == "bfloat16"
    hybrid = with_ssm_dtype(ParallelHybrid(attn, state), "float16")  # Falcon-H1: its mixer's state
    assert hybrid.state.ssm_dtype == "float16" and hybrid.attention is attn


def test_the_corpus_cells_that_state_it_are_priced_and_sized_so():
    cases, _ = speed_cases()
    cell = next(c for c in cases if c.source == SOURCE and c.id == "h200-35b-fp8-tp1-c1024")
    assert stated_ssm_dtype(cell.flags) == "bfloat16" and stated_ssm_dtype({}) == ""
    stated = Built(cell, running)
    assert stated.shape.state_bytes_per_seq == BF16_STATE
    plain = Built(replace(cell, flags={k: v for k, v in cell.flags.items() if k != "mamba_ssm_dtype"}), running)
    assert plain.shape.state_bytes_per_seq == FP32_STATE
    # half the state a slot: SGLang's state pool holds more requests in the same memory, so the running cap rises
    assert stated.load.cap > plain.load.cap * 1.5


# A plan's speed figures read the state dtype its engine pools in (kvplan.speed.plan via Request.ssm_dtype, set by
# SGLang's `request` step from --engine-opt mamba_ssm_dtype). Hand arithmetic, Qwen3.5-35B-A3B (config above):
# 30 GDN layers x 32 x 128 x 128 = 15,728,640 recurrent values a sequence, 4 B each (the config's float32) =
# 62,914,560 B, 2 B each (bfloat16) = 31,457,280 B; the conv window's 30 x 24,576 x 2 B = 1,474,560 B unchanged.
SSM_FP32 = 30 * 32 * 128 * 128 * 4  # 62,914,560
SSM_BF16 = 30 * 32 * 128 * 128 * 2  # 31,457,280
CONV = 30 * 24_576 * 2  # 1,474,560


def _plans():
    from kvplan import api
    kw = dict(context=8192, batch=8, engine="sglang", engine_version="0.5.16")
    return (api.plan("qwen3.5-35b-a3b", "h200", **kw),
            api.plan("qwen3.5-35b-a3b", "h200", engine_opts={"mamba_ssm_dtype": "bfloat16"}, **kw))


def test_a_plans_speed_prices_the_state_in_its_pools_dtype():
    from kvplan.hardware.gpus import find_gpu
    from kvplan.speed.plan import DecodeSteps, plan_decode_seconds, plan_shape
    spec, gpu = find_in_catalog("qwen3.5-35b-a3b"), find_gpu("h200")
    plain, bf16 = _plans()
    assert plain.request.ssm_dtype == "fp32" and bf16.request.ssm_dtype == "bf16"  # the pool's: float32 unless told
    a, b = (plan_shape(p, spec, gpu, "sglang").state_bytes_per_seq for p in (plain, bf16))
    assert (a, b) == (SSM_FP32 + CONV, SSM_BF16 + CONV) == (64_389_120, 32_931_840)
    assert a - b == SSM_FP32 // 2  # the decode step's recurrent-state bytes halve
    slow, fast = (plan_decode_seconds(p, spec, gpu, "sglang") for p in (plain, bf16))
    assert fast < slow  # fewer bytes a step: the calibrated step is shorter
    steps = DecodeSteps("sglang")  # a sweep's path gives the same figures, each plan its own dtype
    assert (steps.seconds(plain, spec, gpu), steps.seconds(bf16, spec, gpu)) == pytest.approx((slow, fast), rel=1e-12)


def test_the_states_keep_the_model_dtype_under_an_fp8_kv_cache():
    # SGLang keeps the conv states in SGLANG_MAMBA_CONV_DTYPE, bfloat16 unless set (sgl-project/sglang@02e208de:
    # python/sglang/srt/configs/mamba_utils.py#L47-68), vLLM in mamba_cache_dtype 'auto' = the model dtype
    # (vllm-project/vllm@02d71083:vllm/model_executor/layers/mamba/mamba_utils.py#L96-109): not the KV cache's fp8.
    # Qwen3.5-35B-A3B under --kv-cache-dtype fp8: 30 x (524,288 x 4 + 24,576 x 2) = 64,389,120 B, as under bf16
    # (an fp8 conv state would have given 30 x (524,288 x 4 + 24,576 x 1) = 63,651,840).
    spec = find_in_catalog("qwen3.5-35b-a3b")
    assert model_terms(spec, kv_dtype="fp8")["state_bytes_per_seq"] == FP32_STATE == 64_389_120
    assert model_terms(spec, kv_dtype="fp8")["kv_bytes_per_token"] * 2 == model_terms(spec)["kv_bytes_per_token"]
