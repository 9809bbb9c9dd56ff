"""A SGLang run that names TensorRT-LLM-gen's fused MoE is priced without the `grouped` term's shortfall.

`--moe-runner-backend flashinfer_trtllm` runs each MoE layer through FlashInfer's trtllm_fp8_block_scale_moe /
trtllm_fp4_block_scale_moe, TensorRT-LLM-gen's fused routing and expert GEMMs
(sgl-project/sglang@dec8155f6d073c78b0c7fd94953b838eccbdf9df:python/sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py,
fused_experts_none_to_flashinfer_trtllm_fp8), not the Triton grouped GEMM whose shortfall at few tokens an expert the
SGLang sets' `grouped` t0 was fitted on (kvplan.speed.terms). InferenceX's DeepSeek-R1 B200 / B300 runs state it.
"""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from kvplan.speed.corpus import own_moe_kernel
from kvplan.speed.terms import TERMS, Shape, features

EXPERTS, GROUPED = TERMS.index("experts"), TERMS.index("grouped")


def test_the_stated_runner_names_trtllm_gen_only_for_sglang():
    sgl = SimpleNamespace(engine="sglang", flags={"moe_runner_backend": "flashinfer_trtllm"})
    assert own_moe_kernel(sgl)
    assert not own_moe_kernel(replace_flags(sgl, {"moe_runner_backend": "triton"}))
    assert not own_moe_kernel(replace_flags(sgl, {}))  # the default is not read as the flag
    assert not own_moe_kernel(SimpleNamespace(engine="vllm", flags=sgl.flags))  # no such flag read for vLLM


def replace_flags(case, flags):
    return SimpleNamespace(engine=case.engine, flags=flags)


def test_grouped_term_is_zero_and_the_expert_read_unchanged():
    # 8 experts, top-2, one expert 1e9 parameters over its layers at 1 byte (fp8): 8e9 bytes; 1 TB/s, 1 PFLOP/s.
    # A decode step of one token touches 8 x (1 - (1 - 2/8)^1) = 2 experts: experts = 2e9 B / 1e12 B/s = 2 ms;
    # grouped = 2 x 2 x 1e9 FLOPs / 1e15 FLOP/s = 4 us (x t0: SGLang before 0.5.14's 247 tokens, 0.99 ms more)
    s = Shape(dense_bytes=0, expert_bytes=8 * 10**9, num_experts=8, top_k=2, expert_params=1e9, layers=1,
              moe_layers=1, bandwidth=1e12, gemm_rate=1e15, bf16_rate=1e15)
    on = features(s, 1, 1, 0, 1)
    assert on[EXPERTS] == pytest.approx(2e-3)
    assert on[GROUPED] == pytest.approx(4e-6)
    off = features(replace(s, grouped_shortfall=False), 1, 1, 0, 1)
    assert off[GROUPED] == 0.0
    assert off[:GROUPED] == on[:GROUPED] and off[GROUPED + 1:] == on[GROUPED + 1:]
