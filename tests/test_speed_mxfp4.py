"""The precision SGLang's MXFP4 MoE kernels multiply in, by GPU and release (kvplan.speed.mxfp4), and the GEMM rate a
Shape reads with it. The rules are read in the sglang 0.5.1.post3, 0.5.4.post2, 0.5.6 and 0.5.23 wheels (the module's
docstring); the rates are the GPU profiles' (their measured matmul rate, MAMF, as each profile's comment states)."""

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.mxfp4 import mxfp4_precision
from kvplan.speed.shape import shape_for

GPT_OSS = find_in_catalog("gpt-oss-120b")


def test_sglang_runs_mxfp4_experts_at_bf16_off_blackwell_and_fp8_on_it():
    # Hopper and Ampere: triton_kernels (or the bf16 upcast) with bf16 activations (0.5.4.post2 server_args.py
    # L972-973 "use bf16 for mxfp4 triton kernels"); compute capability 10.x: flashinfer_mxfp4, its activations
    # quantized to MXFP8 (0.5.1.post3 mxfp4.py L639-640, 0.5.6 L636-637): an FP8 x FP4 MMA
    assert mxfp4_precision("sglang", find_gpu("h100-sxm"), "0.5.4.post2") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("a100-sxm-80"), "0.5.4.post2") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("b200"), "0.5.1.post3") == "fp8"
    assert mxfp4_precision("sglang", find_gpu("b200"), None) == "fp8"  # 0.5.23 gpt_oss.py L65-66: the same
    # compute capability 12.0: is_sm100_supported() only in 0.5.1.post3 (server_args.py L2259), is_blackwell_supported()
    # (10 or 12) from 0.5.4.post2 (L951)
    assert mxfp4_precision("sglang", find_gpu("rtx-5090"), "0.5.1.post3") == "bf16"
    assert mxfp4_precision("sglang", find_gpu("rtx-5090"), "0.5.6") == "fp8"
    assert mxfp4_precision("sglang", find_gpu("h100-sxm"), "0.4.9") is None  # before gpt-oss (0.5.0): no rule
    assert mxfp4_precision("vllm", find_gpu("h100-sxm"), "0.11.0") is None  # not read for vLLM here


def test_the_shape_reads_the_rate_of_that_precision():
    # H100 SXM's measured bf16 rate 794.5 T (its profile: 80% of the datasheet's 989 T); B200's measured fp8 rate
    # 3,432.5 T (76% of 4,500 T), not its FP4 one; an engine without a rule keeps the weight dtype's own (on H100,
    # no FP4: the fp8 rate, above the bf16 one)
    h100, b200 = find_gpu("h100-sxm"), find_gpu("b200")
    assert shape_for(GPT_OSS, h100, engine="sglang", version="0.5.3rc0").gemm_rate == 794.5e12
    assert shape_for(GPT_OSS, b200, engine="sglang", version="0.5.6").gemm_rate == 3432.5e12
    assert shape_for(GPT_OSS, h100, engine="vllm").gemm_rate > 794.5e12
    # a dense bf16 model is not touched
    llama = find_in_catalog("llama-3.1-8b-instruct")
    assert shape_for(llama, h100, engine="sglang").gemm_rate == shape_for(llama, h100, engine="vllm").gemm_rate
