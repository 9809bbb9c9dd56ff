"""SGLang's recurrent states priced as its pool holds them when a run states no --mamba-ssm-dtype.

SGLang pools the recurrent (temporal) states in --mamba-ssm-dtype: float32 by default up to 0.5.8
(sglang 0.5.8.post1 wheel, `srt/server_args.py` L497 `mamba_ssm_dtype: str = "float32"`); from 0.5.9 the flag has no
default (0.5.9 `srt/server_args.py` L522 `Optional[str] = None`) and the config's `mamba_ssm_dtype` is read, float32
where it has none (0.5.10 `srt/configs/mamba_utils.py` L47-105, mamba2_state_dtype; Qwen3-Next's config passes itself,
`srt/configs/qwen3_next.py` L301). Qwen3-Next's config.json has no such key, so its states are float32 at every
release, while the model (and vLLM's mamba_ssm_cache_dtype 'auto') is bfloat16: the speed fit, and a plan's roofline
and calibrated lines, read the pool's dtype (`Request.ssm_dtype`, set by SGLang's request step).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.case_request import case_ssm_dtype
from kvplan.bench.running import running
from kvplan.engines.sglang.mamba import StateSettings, pool_ssm_dtype, ssm_dtype_of
from kvplan.model.recurrent import RecurrentState
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.fit import Built, _gpu, _spec
from conftest import speed_cases

MODEL = "qwen3-next-80b-a3b-thinking"
# Qwen/Qwen3-Next-80B-A3B-Thinking config.json: num_hidden_layers 48, full_attention_interval 4, so 36 Gated DeltaNet
# layers; linear_num_value_heads 32, linear_key_head_dim 128, linear_value_head_dim 128: 32 x 128 x 128 = 524,288
# recurrent values a layer; linear_conv_kernel_dim 4, linear_num_key_heads 16: a conv window of
# (4 - 1) x (2 x 16 x 128 + 32 x 128) = 3 x 8,192 = 24,576 values, bf16 (SGLANG_MAMBA_CONV_DTYPE).
FP32_STATE = 36 * (524_288 * 4 + 24_576 * 2)  # 77,266,944 B a sequence: SGLang's pool, no flag
BF16_STATE = 36 * (524_288 * 2 + 24_576 * 2)  # 39,518,208 B: the model dtype (vLLM's 'auto'), or the flag bfloat16


def _cases(source: str):
    cases, _ = speed_cases()
    return [c for c in cases if c.source == source]


def test_the_cookbook_runs_are_priced_in_float32():
    # sgl-cookbook-qwen3-coder-next: SGLang 0.5.8+, tp 2, no --mamba-ssm-dtype; each rank holds half the heads
    case = _cases("sgl-cookbook-qwen3-coder-next")[0]
    assert case.tp == 2 and "mamba_ssm_dtype" not in (case.flags or {})
    assert case_ssm_dtype(case, _spec(case.model), _gpu(case.gpu)) == "fp32"
    assert Built(case, running).shape.state_bytes_per_seq == FP32_STATE // 2 == 38_633_472
    assert Built(case).shape.state_bytes_per_seq == BF16_STATE // 2 == 19_759_104  # no engine rules: the model's own


def test_a_stated_dtype_still_wins():
    case = _cases("sgl-cookbook-qwen3-coder-next")[0]
    told = replace(case, flags={**(case.flags or {}), "mamba_ssm_dtype": "bfloat16"})
    assert Built(told, running).shape.state_bytes_per_seq == BF16_STATE // 2


def test_a_plans_lines_read_the_pools_bytes():
    from kvplan import api
    from kvplan.hardware.gpus import find_gpu
    from kvplan.speed.plan import plan_shape
    kw = dict(context=8192, batch=8, tp=2)
    plain = api.plan(MODEL, "h200", engine="sglang", engine_version="0.5.8", **kw)
    told = api.plan(MODEL, "h200", engine="sglang", engine_version="0.5.8",
                    engine_opts={"mamba_ssm_dtype": "bfloat16"}, **kw)
    vllm = api.plan(MODEL, "h200", engine="vllm", **kw)
    # vLLM's request step states its pool's type too: Qwen3-Next has no hook, 'auto' is the conv state's, the model's
    # bf16 (kvplan.engines.vllm.ssm_dtype)
    assert (plain.request.ssm_dtype, told.request.ssm_dtype, vllm.request.ssm_dtype) == ("fp32", "bf16", "bf16")
    spec, gpu = find_in_catalog(MODEL), find_gpu("h200")
    shapes = [plan_shape(p, spec, gpu, e).state_bytes_per_seq for p, e in ((plain, "sglang"), (told, "sglang"),
                                                                          (vllm, "vllm"))]
    assert shapes == [FP32_STATE // 2, BF16_STATE // 2, BF16_STATE // 2]
    # the roofline's decode step reads 8 sequences' states a rank: 8 x (38,633,472 - 19,759,104) = 150,994,944 B more
    # in float32, at the H200 profile's 4.8 TB/s
    more = 8 * (FP32_STATE - BF16_STATE) // 2
    assert more == 150_994_944
    assert plain.decode_step_seconds - told.decode_step_seconds == pytest.approx(more / gpu.bandwidth_bytes_per_s)
    assert told.decode_step_seconds == pytest.approx(vllm.decode_step_seconds)


def test_the_configs_dtype_counts_from_0_5_9():
    layer = RecurrentState(3, 8, 1, "gated_deltanet", ssm_dtype="bf16")  # a config stating bfloat16
    old, new = (StateSettings(v, "", None, 0.9, None, True, 1) for v in ((0, 5, 8), (0, 5, 9)))
    assert (ssm_dtype_of(layer, old).name, ssm_dtype_of(layer, new).name) == ("fp32", "bf16")
    told = replace(old, ssm_dtype="float16")
    assert ssm_dtype_of(layer, told).name == "fp16"
    assert pool_ssm_dtype(find_in_catalog(MODEL), new) == "fp32"  # Qwen3-Next's config has none
    assert pool_ssm_dtype(find_in_catalog("llama-3.1-8b"), new) == ""
