"""GeForce cards' two tensor accumulators in the speed terms (issue 21, round 34), by hand.

A GeForce card multiplies 16-bit matrices at twice the rate when it accumulates in FP16 as when it accumulates in FP32
(RTX 4090: 330.3 against 165.2 TFLOP/s dense, NVIDIA Ada whitepaper, the profile's notes). Who accumulates how:

* vLLM, SGLang, TensorRT-LLM: PyTorch's half and bfloat16 GEMMs ask cuBLAS for FP32 compute unless
  allow_fp16_accumulation is set (pytorch/pytorch@0040fe0d0ed6a2400c7aa65a5fdf352b81c88b1e
  aten/src/ATen/cuda/CUDABlas.cpp `gemm_internal_cublas_half_helper`, compute_type CUDA_R_32F), so their 16-bit
  FLOPs run at the FP32-accumulate (bf16) rate (kvplan.speed.compute_dtype.sixteen_bit).
* llama.cpp: F16 and dequantized weights through cuBLAS with CUBLAS_COMPUTE_16F on NVIDIA (ggml-org/ggml@55bc9320
  src/ggml-cuda/ggml-cuda.cu:1326; CUBLAS_COMPUTE_32F only on CDNA / RDNA4, :1303-1312, and for BF16 weights,
  :1274): the fp16 headline; its attention half and half (kvplan.speed.ggml's docstring: FlashAttention's K.Q in
  float tiles, V.softmax in half2 tiles).

Llama-3.1-8B: 13,959,176,192 FLOPs a token besides the LM head (tests/test_speed_ggml.py's docstring), 524,288
attention FLOPs a query-key pair (4 x 32 heads x 128 x 32 layers).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.compute_dtype import compute_line
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import gemm_seconds, path_at

SPEC = find_in_catalog("llama-3.1-8b")
FLOPS = 13_959_176_192


def test_llamacpp_attention_takes_half_its_flops_at_each_accumulator_on_the_4090():
    rtx = find_gpu("rtx-4090")
    # 2 FLOPs take 1 / 165.2 + 1 / 330.3 ps: 2 x 165.2 x 330.3 / 495.5 = 109,131.12 / 495.5 = 220.2444 T
    lcpp = shape_for(SPEC, rtx, engine="llama.cpp", weight_dtype="q4_0")
    assert lcpp.bf16_rate == pytest.approx(220.2444e12, rel=1e-6)
    # vLLM's FlashAttention accumulates in FP32: the profile's measured torch.mm bf16 rate, 164.81 T (round 34,
    # tests/test_geforce_matmul.py); llama.cpp's kernels keep the datasheet's two rates (shape.ggml_rate_of)
    assert shape_for(SPEC, rtx, engine="vllm").bf16_rate == 164.81e12
    line = compute_line("bf16", rtx, None, ggml=True)
    assert "220.2 TFLOP/s" in line and "half its FLOPs at 165.2 and half at 330.3" in line


def test_a_3090_given_its_fp32_accumulate_rate_prices_each_engine_at_its_own_accumulator():
    # the RTX 3090 with its whitepaper BF16 / FP32-accumulate 71.2 T beside the 142 T headline (not in the shipped
    # profile: docs/speed-history.md, 'consumer cards' FP32-accumulate rates'); a 2,048-token prefill's GEMMs,
    # 13,959,176,192 x 2,048 = 28,588,392,841,216 FLOPs: 0.401522 s at 71.2 T under vLLM, 0.201327 s at 142 T
    # through llama.cpp's cuBLAS path (F16 weights)
    base = find_gpu("rtx-3090")
    rtx = replace(base, dense_flops={**base.dense_flops, "bf16": 71.2e12}, achieved_dense_flops={})
    vllm = shape_for(SPEC, rtx, engine="vllm")
    lcpp = shape_for(SPEC, rtx, engine="llama.cpp", weight_dtype="fp16")
    assert vllm.gemm_rate == 71.2e12 and path_at(lcpp, 2048)[0] == 142e12
    assert gemm_seconds(vllm, 2048, 0, vllm.gemm_rate) == pytest.approx(0.401522, rel=1e-5)
    assert gemm_seconds(lcpp, 2048, 0, path_at(lcpp, 2048)[0]) == pytest.approx(0.201327, rel=1e-5)
    # attention: 2 x 71.2 x 142 / 213.2 = 20,220.8 / 213.2 = 94.844 T; bf16 weights through cuBLAS at FP32: 71.2
    assert lcpp.bf16_rate == pytest.approx(94.8443e12, rel=1e-5)
    assert path_at(shape_for(SPEC, rtx, engine="llama.cpp", weight_dtype="bf16"), 2048)[0] == 71.2e12
    # as shipped (the headline alone), one rate for both: nothing is split
    assert shape_for(SPEC, base, engine="llama.cpp", weight_dtype="q4_0").bf16_rate == 142e12


def test_one_accumulator_rate_leaves_the_attention_alone():
    gpu = find_gpu("h100-sxm")  # datacenter NVIDIA
    assert (shape_for(SPEC, gpu, engine="llama.cpp", weight_dtype="q4_0").bf16_rate
            == shape_for(SPEC, gpu, engine="vllm").bf16_rate)
    # AMD: the MI100 rates fp16 apart from bf16 (184.6 and 92.3 T datasheet); llama.cpp's attention runs F16 operands,
    # so it matches vLLM serving in half (its measured fp16, 90 T), not in the config's bf16 (that share, 45 T)
    gpu = find_gpu("mi100")
    assert (shape_for(SPEC, gpu, engine="llama.cpp", weight_dtype="q4_0").bf16_rate
            == shape_for(SPEC, gpu, engine="vllm", compute="half").bf16_rate == 90e12)
    # a GeForce profile with the headline only and no measurement: one rate for both
    rtx = replace(find_gpu("rtx-5090"), achieved_dense_flops={}, achieved_dense_flops_source=None)
    assert (shape_for(SPEC, rtx, engine="llama.cpp", weight_dtype="q4_0").bf16_rate
            == shape_for(SPEC, rtx, engine="vllm").bf16_rate == 419.2e12)


def test_the_5090s_fp8_rate_is_its_fp32_accumulate_one():
    # RTX Blackwell whitepaper Table 3 as transcribed: FP8 with FP32 accumulate 419/838, with FP16 accumulate
    # 838/1676 (dense/sparse); vLLM's sm120 FP8 GEMM accumulates in float: an FP8 GEMM at 419.2 T, not 838.4
    rtx = find_gpu("rtx-5090")
    assert rtx.dense_flops["fp8"] == 419.2e12
    assert shape_for(SPEC, rtx, engine="vllm", weight_dtype="fp8").gemm_rate == 419.2e12
