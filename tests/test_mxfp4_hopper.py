"""gpt-oss MXFP4 experts as vLLM loads them on Hopper (Triton matmul_ogs), from the layouts' source.

vLLM mxfp4_utils._swizzle_mxfp4 (num_warps 8) puts each expert into triton_kernels' Hopper layouts:
hopper_value.py pads the packed values [K/2, N] to K/2 % 64 and N % 256; hopper_scale.py pads the
scales [N, K/32] to N % 256 and K/32 % 2; the Triton branch turns the biases to fp32.
"""

from __future__ import annotations

from kvplan.catalog import find_in_catalog
from kvplan.engines.vllm_overhead import weights_repack_extra


def test_gpt_oss_20b_one_h100():
    # H = I = 2880, 32 experts x 24 layers, tp 1. Per expert-layer, in bytes:
    #   w13 values 1440 x 5760 -> 1472 x 5888 = 8,667,136; w2 values 1440 x 2880 -> 1472 x 3072 = 4,521,984
    #   w13 scales 5760 x 90 -> 5888 x 90 = 529,920;     w2 scales 2880 x 90 -> 3072 x 90 = 276,480
    #   checkpoint 3 x 2880 x 2880 x 17/32 = 13,219,200; biases to fp32: 2 x (5760 + 2880) = 17,280
    #   extra = 13,995,520 - 13,219,200 + 17,280 = 793,600; x 768 = 609,484,800 B (0.568 GiB).
    # The corpus: 13.64 GiB loaded (llm-d, v0.19.0) and 13.47 (llm-d-benchmark, v0.11.0).
    assert weights_repack_extra(find_in_catalog("gpt-oss-20b"), 1, "h100-sxm") == 793_600 * 768


def test_gpt_oss_20b_tp2_h100_includes_vllms_own_padding():
    # I/tp = 1440 -> 1472 (vLLM's % 64 for Triton) before the layout: w13 1440 x 2944 -> 1472 x 3072,
    # w2 736 x 2880 -> 768 x 3072; scales 2944 x 90 -> 3072 x 90, 2880 x 46 -> 3072 x 46;
    # checkpoint 3 x 1440 x 2880 x 17/32 = 6,609,600; biases 2 x (2944 + 2880) = 11,648.
    per = (1472 * 3072 + 768 * 3072 + 3072 * 90 + 3072 * 46) - 6_609_600 + 11_648
    assert weights_repack_extra(find_in_catalog("gpt-oss-20b"), 2, "h100-sxm") == per * 768


def test_other_gpus_keep_their_backend():
    model = find_in_catalog("gpt-oss-20b")
    assert weights_repack_extra(model, 1, "a100-sxm-80") != weights_repack_extra(model, 1, "h100-sxm")
    assert weights_repack_extra(model, 1, "mi300x") == 0
    assert weights_repack_extra(find_in_catalog("llama-3.1-8b"), 1, "h100-sxm") == 0
