"""The MI100's measured FP16 GEMM rate and what reads it (kvplan.speed.compute_dtype.read_flops, kvplan.speed.ggml).

ROCm/Tensile#2087 (ROCm 6.3, MI100): rocblas-bench gemm_ex, transposeA T, m 4096 x n 512 x k 4096, f16 inputs, f32
output and compute, "about 90 TFlops" (AMD reproduced 92); with f16 output about 14. That is the call ggml makes on
CDNA for a dequantized or fp16 weight (cublasGemmEx, CUDA_R_16F in, CUDA_R_32F out, CUBLAS_COMPUTE_32F:
ggml-org/ggml@3132422f src/ggml-cuda/ggml-cuda.cu:1288-1298) at a 4096-row weight and llama-bench's 512-token
micro-batch. The datasheet (ROCm docs/conceptual/gpu-arch/mi100.md): FP16 184.6, BF16 92.3, INT8 184.6 TFLOPS.
"""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.compute_dtype import ggml_rate_of, read_flops
from kvplan.speed.ggml import attention_rate, paths


def test_the_mi100_reads_its_measured_fp16_and_the_same_share_for_int8_and_bf16():
    mi100 = find_gpu("mi100")
    assert read_flops(mi100, "fp16") == 90e12  # measured
    assert read_flops(mi100, "int8") == 90e12  # datasheet int8 = fp16 (184.6): the measured rate itself
    # bf16 is rated apart (92.3, half the fp16): the measured fp16 does not stand for it; its share does,
    # 92.3 x 90 / 184.6 = 45 TFLOP/s
    assert read_flops(mi100, "bf16") == pytest.approx(45e12)


def test_a_measured_bf16_still_stands_for_fp16_where_the_datasheet_rates_them_alike():
    # H100 SXM: bf16 = fp16 = 989.4 T datasheet, MAMF bf16 794.5: both read 794.5, as before
    h100 = find_gpu("h100-sxm")
    assert read_flops(h100, "bf16") == read_flops(h100, "fp16") == 794.5e12


def test_llama_cpp_attention_on_the_mi100_runs_at_the_fp16_rate_not_the_bf16_one():
    # its K, V (F16 cache) and scores run F16 operands with F32 accumulate: the fp16 reading, 90 T, not bf16's 45 T;
    # on a part rating the two alike the one rate (H100 SXM: 794.5)
    mi100, h100 = find_gpu("mi100"), find_gpu("h100-sxm")
    assert attention_rate(mi100, ggml_rate_of(mi100)) == 90e12
    assert attention_rate(h100, ggml_rate_of(h100)) == 794.5e12


def test_before_14624_a_q4_0_prefill_on_the_mi100_dequantizes_to_rocblas_at_the_measured_rate():
    # llama.cpp#14624's 'rocblas code path' (2025-07-22, before its 2025-07-26 merge): from 64 tokens each micro-batch
    # converts the weights to fp16 (2 bytes written, 2 read: 4 x 6.5e9 = 26e9 bytes) and runs rocBLAS at 90 T;
    # below 64 tokens the dp4a / MMVQ proxy, the bf16 reading (45 T)
    mi100 = find_gpu("mi100")
    steps, missing = paths(mi100, "q4_0", 6.5e9, ggml_rate_of(mi100), "2025-07-22")
    assert missing == ""
    assert steps[0].first == 0 and steps[0].rate == pytest.approx(45e12) and steps[0].extra_bytes == 0
    assert steps[1] == (64, 90e12, 26_000_000_000, ())  # rocBLAS: no MMQ tiles (kvplan.speed.ggml)
