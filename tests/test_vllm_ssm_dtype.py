"""vLLM's recurrent-state types by release, layer kind and option (kvplan.engines.vllm.ssm_dtype).

Rules read in the wheels (the module docstring cites each line): NemotronH has no config hook before 0.13.0 (the
temporal state in the conv state's type, the model dtype), from 0.13.0 the config's mamba_ssm_cache_dtype else
float16, from 0.20.0 else float32; Gated DeltaNet reads mamba_ssm_cache_dtype from 0.17.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.readers.configs import spec_from_config
from conftest import speed_cases

NANO = "nvidia-nemotron-3-nano-30b-a3b-bf16"
FIXTURE = Path(__file__).parent / "fixtures" / "families" / "nemotron-3-nano-30b-a3b.json"
# NVIDIA-Nemotron-3-Nano-30B-A3B config.json: 23 Mamba-2 layers (M in hybrid_override_pattern), 64 heads x 64 head
# dim = 4,096 wide, n_groups 8, ssm_state_size 128, conv_kernel 4: conv 3 x (4,096 + 2 x 8 x 128) = 18,432 values
# (bf16, the model dtype); temporal 64 x 64 x 128 = 524,288 values, mamba_ssm_cache_dtype float32.
NANO_FP32 = 23 * (18_432 * 2 + 524_288 * 4)  # 49,082,368 B a sequence
NANO_16 = 23 * (18_432 * 2 + 524_288 * 2)  # 24,965,120 B (bf16 or fp16)
# Qwen3-Next-80B-A3B config.json: 48 layers, full_attention_interval 4 -> 36 Gated DeltaNet layers; 16 key heads x
# 128, 32 value heads x 128, conv kernel 4: conv 3 x (2 x 16 x 128 + 32 x 128) = 24,576 values, temporal
# 32 x 128 x 128 = 524,288 values; the config states no state type (bf16 model).
NEXT_BF16 = 36 * (24_576 * 2 + 524_288 * 2)  # 39,518,208 B
NEXT_FP32 = 36 * (24_576 * 2 + 524_288 * 4)  # 77,266,944 B


def _plan(model, version: str, **opts):
    return api.plan(model, "h200", context=8192, batch=8, engine="vllm", engine_version=version,
                    engine_opts=opts)


def test_nemotron3_nano_by_release():
    old, mid, new = _plan(NANO, "0.12.0"), _plan(NANO, "0.15.0"), _plan(NANO, "0.20.0")
    assert (old.request.ssm_dtype, mid.request.ssm_dtype, new.request.ssm_dtype) == ("bf16", "fp32", "fp32")
    # one sequence's bytes differ by the temporal state alone: 23 x 524,288 x 2 B = 24,117,248
    assert mid.kv_bytes_per_sequence_per_gpu - old.kv_bytes_per_sequence_per_gpu == NANO_FP32 - NANO_16 == 24_117_248
    assert new.kv_bytes_per_sequence_per_gpu == mid.kv_bytes_per_sequence_per_gpu
    assert old.max_concurrency > mid.max_concurrency
    assert any("no config hook before 0.13.0" in w.message for w in old.warnings)


def test_a_silent_config_is_float16_before_0_20_0():
    config = json.loads(FIXTURE.read_text())
    config.pop("mamba_ssm_cache_dtype")
    spec, _ = spec_from_config(config, "nano-silent")
    layer = next(layer for layer in spec.layers if getattr(layer, "variant", "") == "mamba2")
    assert (layer.ssm_dtype, layer.ssm_dtype_default) == ("fp32", True)
    p15, p20 = _plan(spec, "0.15.0"), _plan(spec, "0.20.0")
    assert (p15.request.ssm_dtype, p20.request.ssm_dtype) == ("fp16", "fp32")
    assert p20.kv_bytes_per_sequence_per_gpu - p15.kv_bytes_per_sequence_per_gpu == NANO_FP32 - NANO_16


def test_the_option_wins_and_is_checked_by_release():
    flagged = _plan(NANO, "0.19.1", mamba_ssm_cache_dtype="float16")
    plain = _plan(NANO, "0.19.1")
    assert flagged.request.ssm_dtype == "fp16"
    assert plain.kv_bytes_per_sequence_per_gpu - flagged.kv_bytes_per_sequence_per_gpu == NANO_FP32 - NANO_16
    assert _plan(NANO, "0.12.0", mamba_ssm_cache_dtype="float32").request.ssm_dtype == "fp32"
    with pytest.raises(KvplanError, match="float16"):
        _plan(NANO, "0.12.0", mamba_ssm_cache_dtype="float16")  # float16 is a choice from 0.13.0
    with pytest.raises(KvplanError, match="0.11.0"):
        _plan(NANO, "0.10.1", mamba_cache_dtype="float32")


def test_gated_deltanet_reads_the_option_from_0_17_0():
    model = "qwen3-next-80b-a3b-thinking"
    before = _plan(model, "0.15.0", mamba_ssm_cache_dtype="float32")
    after = _plan(model, "0.19.1", mamba_ssm_cache_dtype="float32")
    plain = _plan(model, "0.19.1")
    assert (before.request.ssm_dtype, after.request.ssm_dtype, plain.request.ssm_dtype) == ("bf16", "fp32", "bf16")
    assert after.kv_bytes_per_sequence_per_gpu - plain.kv_bytes_per_sequence_per_gpu == NEXT_FP32 - NEXT_BF16
    assert before.kv_bytes_per_sequence_per_gpu == plain.kv_bytes_per_sequence_per_gpu
    # the conv option moves both states where the temporal one is 'auto': 36 x (24,576 + 524,288) x 2 B more
    conv32 = _plan(model, "0.19.1", mamba_cache_dtype="float32")
    assert conv32.kv_bytes_per_sequence_per_gpu - plain.kv_bytes_per_sequence_per_gpu == 36 * 548_864 * 2


def test_the_speed_fit_keeps_the_readers_type_for_vllm_runs():
    from kvplan.bench.running import running
    from kvplan.speed.fit import Built

    cases, _ = speed_cases()
    case = next(c for c in cases if c.source == "vllm-recipes-nemotron3-nano-h200")
    assert case.version == "0.12.0"
    assert Built(case, running).shape.state_bytes_per_seq == NANO_FP32  # not the 0.12.0 pool's NANO_16


def _family(name: str):
    return spec_from_config(json.loads((FIXTURE.parent / name).read_text()), name)[0]


def test_kinds_that_never_read_the_temporal_option():
    # KDA: conv states in mamba_cache_dtype, the recurrent one float32 whatever the options (kda_state_dtype);
    # lightning attention: one state in mamba_cache_dtype, float32 refused by vLLM (linear_attention_state_dtype)
    kda = _family("kimi-linear-default.json")
    plain = api.plan(kda, "h200", context=4096, tp=8, engine="vllm", engine_version="0.19.1")
    told = api.plan(kda, "h200", context=4096, tp=8, engine="vllm", engine_version="0.19.1",
                    engine_opts={"mamba_ssm_cache_dtype": "float16"})
    assert plain.request.ssm_dtype == told.request.ssm_dtype == ""
    assert plain.kv_bytes_per_sequence_per_gpu == told.kv_bytes_per_sequence_per_gpu
    assert any("not read for this kind" in w.message for w in told.warnings)
    with pytest.raises(KvplanError, match="lightning attention"):
        api.plan(_family("minimax-m1.json"), "h200", context=4096, tp=8, engine="vllm", engine_version="0.19.1",
                 engine_opts={"mamba_cache_dtype": "float32"})
