"""The recurrent state a decode step reads and writes back, in the dtype the engine holds it (kvplan.speed.shape
.state_shift), and SGLang's state-pool flags a corpus run stated reaching its running cap (kvplan.bench.running)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.bench.running import rules_version, running
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of, state_dtype
from kvplan.speed.shape import shape_for

H200 = find_gpu("h200-sxm")
# Qwen/Qwen3.5-35B-A3B config.json: 40 layers, full_attention_interval 4 (30 Gated DeltaNet layers),
# linear_num_value_heads 32, linear_num_key_heads 16, linear_key_head_dim = linear_value_head_dim = 128,
# linear_conv_kernel_dim 4, mamba_ssm_dtype float32. One layer, one sequence, tp 1:
#   recurrent values 32 x 128 x 128 = 524,288 (x 4 B fp32 = 2,097,152 B; x 2 B bf16 = 1,048,576 B)
#   conv values (2 x 16 x 128 + 32 x 128) x (4 - 1) = 24,576 (x 2 B = 49,152 B)
QWEN35_35B = find_in_catalog("qwen3.5-35b-a3b")
FP32_STATE = 30 * (49_152 + 2_097_152)  # 64,389,120 B
BF16_STATE = 30 * (49_152 + 1_048_576)  # 32,931,840 B


def test_a_stated_ssm_dtype_halves_the_state_a_decode_step_moves():
    # SGLang's decode kernel loads each running sequence's state from the pool (h0_source) and stores it back in
    # the pool's dtype (sgl-project/sglang@f1dea624c8f596e1a789784fce46f6f3b77c0be4:python/sglang/srt/layers/
    # attention/fla/fused_sigmoid_gating_recurrent.py, fused_sigmoid_gating_delta_rule_update_kernel: tl.load of
    # p_h0, then tl.store(p_h0, b_h.to(p_h0.dtype.element_ty))); --mamba-ssm-dtype bfloat16 allocates that pool
    # in bf16 (kvplan.engines.sglang.mamba)
    assert shape_for(QWEN35_35B, H200, engine="sglang").state_bytes_per_seq == FP32_STATE
    assert shape_for(QWEN35_35B, H200, engine="sglang", ssm_dtype="bfloat16").state_bytes_per_seq == BF16_STATE


def point(flags, version="0.5.16", date=""):
    p = {"engine": "sglang", "gpu": "h200-sxm", "version": version, "isl": 8192, "osl": 1024, "concurrency": 1024,
         "kvplan_model": "qwen3.5-35b-a3b", "gpus": 1, "tp": 1, "flags": flags, "metrics": {"tpot_ms": 30}}
    c, why = case_of(p, "test", date)
    assert c is not None, why
    return c


def test_the_state_pool_flags_a_run_stated_set_its_running_cap():
    # SGLang 0.5.16 with the radix cache on sizes max_mamba_cache_size = rest x 0.9 / 1.9 / slot bytes and runs
    # slots // 5 requests (3 + the extra_buffer pair; kvplan.engines.sglang.mamba): a bf16 slot
    # (32,931,840 B against 64,389,120 B, 1.955x fewer bytes) runs about 1.955x the requests where the state binds
    fp32 = running(point({}), QWEN35_35B, H200).cap
    bf16 = running(point({"mamba-ssm-dtype": "bfloat16"}), QWEN35_35B, H200).cap
    assert state_dtype(point({"mamba-ssm-dtype": "bfloat16"})) == "bfloat16"
    assert bf16 / fp32 == pytest.approx(FP32_STATE / BF16_STATE, rel=0.03)
    # with the radix cache off a request holds one slot and --max-running-requests sizes the pool (0.5.10+)
    off = running(point({"disable-radix-cache": True, "max-running-requests": 128}), QWEN35_35B, H200).cap
    assert off == 128


def test_a_version_that_is_no_release_reads_as_its_era_does():
    # "main branch (as stated)" of an undated run is the current era (kvplan.speed.eras.era_of), so the current
    # release's rules size it; a dated run of an older era keeps its text (the rules refuse it: plain estimate)
    current = point({}, version="main branch (as stated)")
    assert current.era == "sglang" and rules_version(current) is None
    older = point({}, version="main branch (as stated)", date="2026-03-11")
    assert older.era == "sglang<0.5.14" and rules_version(older) == "main branch (as stated)"
    assert rules_version(replace(current, version="0.5.16")) == "0.5.16"
