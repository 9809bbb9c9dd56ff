"""Measured matmul rates for the GeForce and workstation profiles (issue 21, round 34), by hand.

Source: zzc0721/torch-performance-test-data @9d828276 (2026-01-12) database.md; its test.py at that commit times
torch.mm of two randn square matrices (1024 to 10240) over 30 iterations by CUDA events after 10 warm-up, 2 N^3 FLOPs
an iteration, and reports each precision's best size. Where a part has several rows, the profile takes the median row
(the lower of the middle two). The same method beside the MAMF table (not used, a cross-check): H100 SXM BF16 797.51
and 783.66 against MAMF's 794.5; A100 SXM4 80GB 264.53 against 271.2.

A GeForce card's torch.mm bf16 accumulates in FP32, the rate vLLM's, SGLang's and TensorRT-LLM's 16-bit GEMMs run at
(kvplan.speed.compute_dtype); llama.cpp's cuBLAS path asks CUBLAS_COMPUTE_16F there and keeps the datasheet's
FP16-accumulate headline (kvplan.speed.shape.ggml_rate_of). Llama-3.1-8B: 13,959,176,192 GEMM FLOPs a token besides
the LM head (tests/test_achieved_flops.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.core.errors import KvplanError
from kvplan.hardware.gpu_profile import parse_profile
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.compute_dtype import read_flops
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import gemm_seconds, path_at

SPEC = find_in_catalog("llama-3.1-8b")
PREFILL = 13_959_176_192 * 2048  # a 2,048-token prefill's GEMM FLOPs: 28,588,392,841,216


def test_a_3090_prices_vllm_at_its_measured_fp32_accumulate_rate_and_llamacpp_at_its_headline():
    # rows 'NVIDIA RTX 3090 24GB' 76.34, 'NVIDIA GeForce RTX 3090 24GB' 76.68, 'NVIDIA GeForce RTX 3090' 76.58 TFLOPS
    # BF16: the median, 76.58 T (108% of the whitepaper's FP32-accumulate 71.2 at its rated 1.695 GHz boost)
    rtx = find_gpu("rtx-3090")
    assert dict(rtx.achieved_dense_flops) == {"bf16": 76_580 * 10**9}
    vllm = shape_for(SPEC, rtx, engine="vllm")
    assert vllm.gemm_rate == vllm.bf16_rate == 76.58e12
    # 28,588,392,841,216 / 76.58e12 = 0.373314 s, where the 142 T headline gave 0.201327 s
    assert gemm_seconds(vllm, 2048, 0, vllm.gemm_rate) == pytest.approx(0.373314, rel=1e-5)
    # llama.cpp: F16 weights through cuBLAS with FP16 compute at the 142 T headline; its attention at it too (the
    # profile states no datasheet FP32-accumulate rate to split with)
    lcpp = shape_for(SPEC, rtx, engine="llama.cpp", weight_dtype="fp16")
    assert path_at(lcpp, 2048)[0] == 142e12 and lcpp.bf16_rate == 142e12
    assert gemm_seconds(lcpp, 2048, 0, path_at(lcpp, 2048)[0]) == pytest.approx(0.201327, rel=1e-5)
    assert shape_for(SPEC, rtx, engine="vllm").peak_bf16_rate == 142e12  # the roofline stays on the datasheet


def test_a_5090_and_a_4090_read_their_medians():
    # 5090: rows 236.03, 242.18, 221.65, 240.05 TFLOPS BF16 -> 221.65 < 236.03 < 240.05 < 242.18, the lower middle
    # 236.03 T (113% of the whitepaper's 209.5); 4090 24 GB: 170.06, 173.31, 162.39, 163.09, 165.71, 164.81 -> the
    # lower middle 164.81 T (99.8% of its FP32-accumulate 165.2)
    r5090, r4090 = find_gpu("rtx-5090"), find_gpu("rtx-4090")
    assert read_flops(r5090, "bf16") == 236.03e12 and read_flops(r4090, "bf16") == 164.81e12
    assert shape_for(SPEC, r5090, engine="vllm").gemm_rate == 236.03e12
    # 28,588,392,841,216 / 236.03e12 = 0.121122 s (0.068198 s at the 419.2 T headline)
    s = shape_for(SPEC, r5090, engine="vllm")
    assert gemm_seconds(s, 2048, 0, s.gemm_rate) == pytest.approx(0.121122, rel=1e-5)
    assert shape_for(SPEC, r5090, engine="llama.cpp", weight_dtype="q4_0").bf16_rate == 419.2e12


def test_datacenter_and_workstation_parts_read_their_rows_and_fp8_at_the_share():
    # L40S row 269.15 T BF16 (74% of 362.05): an FP8 GEMM at 733 x 269.15 / 362.05 = 544.916 T; L4 70.89 T (59% of
    # 121): FP8 242 x 70.89 / 121 = 141.78 T; T4 FP16 41.91, 42.71, 41.93 -> 41.93 T (no BF16: read for bf16)
    assert read_flops(find_gpu("l40s"), "fp8") == pytest.approx(544.9163e12, rel=1e-6)
    assert read_flops(find_gpu("l4"), "fp8") == pytest.approx(141.78e12, rel=1e-9)
    assert read_flops(find_gpu("t4"), "bf16") == 41.93e12
    # rows 'NVIDIA RTX PRO 6000 Blackwell Server Edition' BF16 409.42 T (88% of 467.8) and 'NVIDIA RTX A6000' BF16
    # 123.34 T (80% of its datasheet's 154.8, stated as fp16 alone), one row each
    assert read_flops(find_gpu("rtx-pro-6000-server"), "bf16") == 409.42e12
    assert read_flops(find_gpu("rtx-a6000"), "bf16") == 123.34e12


def test_a_measured_bf16_rate_on_an_fp16_only_profile_is_checked_against_that_figure():
    text = (Path(__file__).resolve().parents[1] / "kvplan" / "hardware" / "profiles" / "rtx-3090.yaml").read_text()
    too_fast = re.sub(r"^  bf16: 76580000000000", "  bf16: 142000000000001", text, flags=re.M)
    with pytest.raises(KvplanError) as err:
        parse_profile(too_fast, "x.yaml")
    said = "'achieved_dense_flops.bf16' (142000000000001) exceeds 'dense_flops.fp16' (142000000000000)"
    assert said in str(err.value)
    # with no 16-bit datasheet rate at all, the measured one stands in (as on GB10: kvplan/hardware/profiles/README.md,
    # Achieved matmul rate), uncapped, and is what the speed terms read
    no_fp16 = parse_profile(re.sub(r"^  fp16: 142000000000000.*\n", "", text, flags=re.M), "x.yaml")
    assert not no_fp16.dense_flops.get("fp16") and read_flops(no_fp16, "bf16") == 76_580_000_000_000
