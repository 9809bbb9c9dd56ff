"""SGLang's MXFP4 experts as loaded (kvplan/engines/sglang/loaded.py): gpt-oss-20b's published config
(openai/gpt-oss-20b config.json: hidden_size 2880, intermediate_size 2880 per expert, 32 local experts,
24 layers, every one MoE) priced by hand from SGLang's Mxfp4MoEMethod shapes, and the log it explains.
"""

from __future__ import annotations

from conftest import corpus_record, training_log
from kvplan.engines import resolve_engine
from kvplan.engines.sglang.loaded import mxfp4_extra
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30
GPT_OSS_20B = find_in_catalog("gpt-oss-20b")


def test_flashinfer_padding_on_blackwell_by_hand():
    # flashinfer_mxfp4 (compute capability 10): I = H = 2880 padded to 3072, biases fp32.
    # as loaded, one expert of one layer:
    #   w13 2*3072 x (3072/2 + 3072/32) = 6144 x 1632 = 10,027,008; bias fp32 6144 x 4 = 24,576
    #   w2  3072 x (3072/2 + 3072/32)   = 3072 x 1632 =  5,013,504; bias fp32 3072 x 4 = 12,288  -> 15,077,376
    # as stored: w13 5760 x (1440 + 90) = 8,812,800; bias bf16 11,520; w2 2880 x 1530 = 4,406,400;
    #   bias 5,760 -> 13,236,480
    # (15,077,376 - 13,236,480) x 32 experts x 24 layers = 1,840,896 x 768 = 1,413,808,128 B (1.317 GiB)
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("b200")) == 1_413_808_128


def test_flashinfer_padding_under_tp4():
    # I/tp = 720 -> 768, H 2880 -> 3072: as loaded 1536 x 1632 + 1536 x 4 + 3072 x (384 + 24) + 3072 x 4
    #   = 2,506,752 + 6,144 + 1,253,376 + 12,288 = 3,778,560; stored: the rank's share of the checkpoint's values and
    #   scales, 3 x 720 x 2880 x 17/32 = 3,304,800 (720 / 32 = 22.5 scale blocks of w2: half a block is the rank's),
    #   + bf16 biases 2 x (1440 + 2880) = 8,640 = 3,313,440 -> 465,120 x 768 = 357,212,160 B (358,318,080 when the
    #   half block was dropped from the share, 1,440 B an expert-layer counted as padding)
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("b200"), tp=4) == 357_212_160


def test_hopper_triton_layouts_hold_one_copy_of_the_scales():
    # triton_kernels on Hopper: I = 2880 (a multiple of 32); values [round_up(K/2, 64), round_up(N, 256)]:
    #   w13 1472 x 5888 = 8,667,136, w2 1472 x 3072 = 4,521,984; swizzled scales [round_up(N, 256), K/32]:
    #   5888 x 90 + 3072 x 90 = 806,400; biases fp32 (5760 + 2880) x 4 = 34,560 -> 14,030,080 - 13,236,480
    #   = 793,600 x 768 = 609,484,800 B. One copy of the scales, as vLLM's logs of the same calls show:
    #   gpt-oss-120b (36 layers x 128 experts, the same expert shapes) on one H100 under vLLM 0.11.0 and 0.14.1,
    #   "Model loading took 64.38 GiB" (llm-d-benchmark@2593348 empirical-vllm-memory-results.md, vllm#33155):
    #   the checkpoint's 65,248,815,744 B (60.77 GiB) + 3.41 GiB of layouts at I padded to 64 = 64.2 GiB. Priced
    #   with a second copy (777,600 B an expert, 3.34 GiB over 4,608 experts) it would load at 67.5 GiB or more,
    #   past SGLang 0.5.3's 0.835 x 79.19 = 66.1 GiB static share, though GPUStack served it on one H100 under
    #   SGLang 0.5.3rc0 at its defaults
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("h100-sxm")) == 609_484_800


def test_strided_triton_layouts_on_ampere_add_only_the_fp32_biases():
    # triton_kernels off Hopper / SM100 (Ampere, Ada): StridedLayout's swizzle_data returns a view
    # (triton_kernels tensor_details/layout_details/strided.py: `return data`), so values and scales stay the
    # checkpoint's storage, held once; biases bf16 -> fp32 add 2 x (2 x 2880 + 2880) = 17,280 B an expert
    # -> 17,280 x 32 experts x 24 layers = 13,271,040 B (the old rule counted the scales twice: +597,196,800 B)
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("a100-sxm-80")) == 13_271_040
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("rtx-4090")) == 13_271_040


def test_nothing_added_where_sglang_keeps_the_checkpoint_layout():
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("a100-sxm-80"), tp=2, ep=2) == 0  # ep > 1: another backend, not read
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("mi300x")) == 0  # not NVIDIA
    assert mxfp4_extra(GPT_OSS_20B, find_gpu("b200"), version="0.4.9") == 0  # before gpt-oss was served
    assert mxfp4_extra(find_in_catalog("qwen3-30b-a3b"), find_gpu("b200")) == 0  # not MXFP4


def test_kvcached_198_gpt_oss_on_blackwell_within_three_percent():
    # ovg-project/kvcached#198: "Load weight end. type=GptOssForCausalLM ... mem usage=14.53 GB" (GB = GiB), a
    # ~178 GiB GPU (B200). The checkpoint alone is 11.8 % low; with the flashinfer layout 2.5 % low (the rest,
    # 0.37 GiB, is not in SGLang's source: allocator segments left from the per-expert shuffles, unpriced).
    rec = corpus_record("sglang-kvcached-198-gpt-oss-20b")
    printed = float(rec["figures"]["weights_mem_usage_gb"]) * GIB
    res = resolve_engine("sglang", "0.5.3").result(GPT_OSS_20B, find_gpu(rec["gpu_inferred"]), Deployment(1, 1),
                                                   Request(context=4096))
    loaded, stored = res.plan.weight_bytes_per_gpu, res.plan.weight_bytes_per_gpu - res.settings["loaded_extra"]
    assert (stored - printed) / printed < -0.10
    assert -0.03 < (loaded - printed) / printed < 0


def test_tp_inferred_from_the_weights_as_loaded_not_the_checkpoint():
    # The same log has no tp line. Its 14.53 GiB against gpt-oss-20b split 1 way: the checkpoint alone is
    # 11.8 % low (above), outside the 5 % the inference allows, so the old code said "no split matches; tp 1
    # assumed" while the weights row (as loaded) sat at -2.5 %. As loaded, tp 1 matches and is said so.
    from kvplan.engines.logparse import parse_log
    from kvplan.engines.reconcile import reconcile
    rec = parse_log(training_log("sglang-kvcached-198-gpt-oss-20b"))
    res = reconcile(rec, GPT_OSS_20B, find_gpu("b200"), "0.5.3", None, None)
    assert any("tp 1 inferred" in n for n in res.notes), res.notes
    assert not any("no split of the weights" in n for n in res.notes)
    assert any("tp 1 (inferred from the weights)" in n for n in res.notes), res.notes
