"""gpt-oss MXFP4 experts as vLLM loads them on Hopper (Triton matmul_ogs), from the layouts' source.

vLLM mxfp4_utils._swizzle_mxfp4 (num_warps 8) puts each expert into triton_kernels' Hopper layouts:
hopper_value.py pads the packed values [K/2, N] to K/2 % 64 and N % 256; hopper_scale.py pads the
scales [N, K/32] to N % 256 and K/32 % 2; the Triton branch turns the biases to fp32.
"""

from __future__ import annotations

from kvplan.sources.catalog import find_in_catalog
from kvplan.engines.vllm.overhead import weights_repack_extra
from kvplan.hardware.gpus import find_gpu


def test_gpt_oss_20b_one_h100():
    # H = I = 2880, 32 experts x 24 layers, tp 1. Per expert-layer, in bytes:
    #   w13 values 1440 x 5760 -> 1472 x 5888 = 8,667,136; w2 values 1440 x 2880 -> 1472 x 3072 = 4,521,984
    #   w13 scales 5760 x 90 -> 5888 x 90 = 529,920;     w2 scales 2880 x 90 -> 3072 x 90 = 276,480
    #   checkpoint 3 x 2880 x 2880 x 17/32 = 13,219,200; biases to fp32: 2 x (5760 + 2880) = 17,280
    #   extra = 13,995,520 - 13,219,200 + 17,280 = 793,600; x 768 = 609,484,800 B (0.568 GiB).
    # The corpus: 13.64 GiB loaded (llm-d, v0.19.0) and 13.47 (llm-d-benchmark, v0.11.0).
    assert weights_repack_extra(find_in_catalog("gpt-oss-20b"), 1, find_gpu("h100-sxm")) == 793_600 * 768


def test_gpt_oss_20b_tp2_h100_includes_vllms_own_padding():
    # I/tp = 1440 -> 1472 (vLLM's % 64 for Triton) before the layout: w13 1440 x 2944 -> 1472 x 3072,
    # w2 736 x 2880 -> 768 x 3072; scales 2944 x 90 -> 3072 x 90, 2880 x 46 -> 3072 x 46;
    # checkpoint 3 x 1440 x 2880 x 17/32 = 6,609,600; biases fp32 at the padded shape, 4 x (2944 + 2880) = 23,296,
    # less the checkpoint's bf16 2 x (2880 + 2880) = 11,520: 11,776 (create_weights allocates the bias at the padded
    # I too; 11,648 before, which widened the padded bias without counting its bf16 padding, 128 B an expert-layer).
    per = (1472 * 3072 + 768 * 3072 + 3072 * 90 + 3072 * 46) - 6_609_600 + 11_776
    assert weights_repack_extra(find_in_catalog("gpt-oss-20b"), 2, find_gpu("h100-sxm")) == per * 768


def test_a100_marlin_padding_is_vllms_create_weights_arithmetic():
    # An A100 (SM80) has no Triton MXFP4 path ((9,0) <= capability < (11,0) is required): vLLM picks
    # Marlin, and Mxfp4MoEMethod.create_weights (mxfp4.py, commit 007d5005) pads I/tp to a multiple of
    # 128 and H to 256 ("the moe marlin kernel requires n % 256 == 0 and k % 128 == 0").
    # gpt-oss-20b, tp 1: I = 2880 -> 2944, H = 2880 -> 3072. Per expert-layer, bytes (uint8 values hold
    # two fp4, one uint8 scale per 32, bf16 biases):
    #   padded:     w13 2x2944 x (1536 + 96) = 9,609,216; bias 2 x 2 x 2944 = 11,776;
    #               w2 3072 x (1472 + 92) = 4,804,608; bias 2 x 3072 = 6,144        -> 14,431,744
    #   checkpoint: w13 2x2880 x (1440 + 90) = 8,812,800; bias 11,520;
    #               w2 2880 x (1440 + 90) = 4,406,400; bias 5,760                   -> 13,236,480
    #   extra 1,195,264 x 32 experts x 24 layers = 917,962,752 B (0.855 GiB).
    model = find_in_catalog("gpt-oss-20b")
    assert 9_609_216 + 11_776 + 4_804_608 + 6_144 - (8_812_800 + 11_520 + 4_406_400 + 5_760) == 1_195_264
    assert weights_repack_extra(model, 1, find_gpu("a100-sxm-80")) == 1_195_264 * 768
    # tp 2 on A100: I/tp = 1440 -> 1536 (% 128), H 2880 -> 3072:
    #   padded 2x1536x1632 + 4x1536 + 3072x(768 + 48) + 6144 = 5,013,504 + 6,144 + 2,506,752 + 6,144
    #   checkpoint 2x1440x1530 + 4x1440 + 2880x(720 + 45) + 5760 = 4,406,400 + 5,760 + 2,203,200 + 5,760
    per = (5_013_504 + 6_144 + 2_506_752 + 6_144) - (4_406_400 + 5_760 + 2_203_200 + 5_760)
    assert weights_repack_extra(model, 2, find_gpu("a100-sxm-80")) == per * 768


def test_other_gpus_keep_their_backend():
    model = find_in_catalog("gpt-oss-20b")
    assert weights_repack_extra(model, 1, find_gpu("mi300x")) == 0
    assert weights_repack_extra(find_in_catalog("llama-3.1-8b"), 1, find_gpu("h100-sxm")) == 0
