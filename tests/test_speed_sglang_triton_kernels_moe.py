"""A SGLang run that names triton_kernels' MoE (`moe_runner_backend: triton_kernel`) is priced without the `grouped`
term's shortfall, as one naming TensorRT-LLM-gen's fused MoE is (tests/test_speed_trtllm_gen_moe.py).

SGLang 0.5.8.post1 (the wheel): an unquantized MoE layer's apply() hands a `triton_kernel` runner to
`srt/layers/moe/moe_runner/triton_kernels.py` (`srt/layers/quantization/unquant.py` L340-351), whose
triton_kernel_fused_experts(_with_bias) runs the expert GEMMs as two matmul_ogs calls over the routing's gather and
scatter indices (`srt/layers/moe/fused_moe_triton/triton_kernels_moe.py` L77-162, L220-306), not the Triton fused_moe
whose per-expert tile padding (moe_align_block_size, `fused_moe.py` L441-443) the SGLang sets' t0 is fitted on.
Scicom's 24 gpt-oss-120b runs (SGLang 0.5.8.post1, bf16 weights) print `"moe_runner_backend": "triton_kernel"` in
each record's server_info.
"""

from dataclasses import replace

import pytest

from kvplan.bench.running import running
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of, own_moe_kernel
from kvplan.speed.fit import Built
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features

EXPERTS, GROUPED = TERMS.index("experts"), TERMS.index("grouped")
# scicom-llm-benchmaxxing-sglang-runpod's A100 TP4 / DP2 point at 1,024 random input tokens, as the corpus reads it
POINT = {"engine": "sglang", "version": "0.5.8.post1", "gpu": "a100-sxm-80", "gpus": 8, "tp": 4, "dp": 2,
         "kvplan_model": "gpt-oss-120b", "weight_dtype": "bf16", "kv_dtype": "auto", "concurrency": 100,
         "num_prompts": 100, "request_rate": "inf",
         "flags": {"tp_size": 4, "dp_size": 2, "mem_fraction_static": 0.9, "context_length": 12000,
                   "chunked_prefill_size": 8192, "cuda_graph_max_bs": 512, "attention_backend": "triton",
                   "moe_runner_backend": "triton_kernel"},
         "input_dist": {"kind": "random", "random_input_len": 1024, "range_ratio": 0.0, "total_input_tokens": 50561},
         "output_dist": {"kind": "random", "random_output_len": 128, "range_ratio": 0.0, "total_output_tokens": 6108},
         "metrics": {"itl_ms": {"mean": 44.46}}}


def test_the_stated_runner_is_read_for_sglang_only():
    case, why = case_of(POINT, "test", "2026-03-11")
    assert case is not None, why
    assert own_moe_kernel(case)
    assert Built(case, running).shape.grouped_shortfall is False
    other, _ = case_of({**POINT, "flags": {**POINT["flags"], "moe_runner_backend": "triton"}}, "test", "2026-03-11")
    assert not own_moe_kernel(other)  # `triton` is SGLang's own fused_moe: the kernel the t0 is fitted on
    assert Built(other, running).shape.grouped_shortfall is True
    unstated, _ = case_of({**POINT, "flags": {}}, "test", "2026-03-11")
    assert not own_moe_kernel(unstated)  # SGLang's own default pick is not read (docs/speed-history.md)


def test_gpt_oss_decode_step_on_a100_tp4_loses_the_grouped_term_only():
    # gpt-oss-120b, one expert a layer: gate_up 2,880 x 5,760 + down 2,880 x 2,880 = 3 x 2,880^2 = 24,883,200
    # weights + 5,760 + 2,880 biases = 24,891,840 parameters; 36 MoE layers over tp 4: 224,026,560 a rank.
    # A decode step of 50 sequences (a DP2 replica's share of concurrency 100) touches, top-4 of 128 experts,
    # 128 x (1 - (124/128)^50) = 128 x (1 - 0.204460) = 101.830 experts a layer; the A100 SXM's measured bf16 GEMM
    # rate 271.2 TFLOP/s: grouped = 101.830 x 2 x 224,026,560 / 271.2e12 = 1.6824e-4 s, which SGLang before
    # 0.5.14's t0 (~227 tokens) made ~38 ms a step, beside an expert read of ~29 ms and a measured mean ITL of 44.46 ms.
    s = shape_for(find_in_catalog("gpt-oss-120b"), find_gpu("a100-sxm-80"), tp=4, weight_dtype="bf16",
                  engine="sglang", version="0.5.8.post1")
    assert s.expert_params == 224_026_560 and s.num_experts == 128 and s.top_k == 4 and s.gemm_rate == 271.2e12
    on = features(s, 50, 50, 50 * 600, 50 * 601)
    assert on[GROUPED] == pytest.approx(101.830 * 2 * 224_026_560 / 271.2e12, rel=1e-4)
    off = features(replace(s, grouped_shortfall=False), 50, 50, 50 * 600, 50 * 601)
    assert off[GROUPED] == 0.0
    assert off[:GROUPED] == on[:GROUPED] and off[GROUPED + 1:] == on[GROUPED + 1:]  # the expert read unchanged
