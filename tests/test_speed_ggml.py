"""llama.cpp's GEMM paths in the speed terms (kvplan.speed.ggml), by hand.

The rules restate ggml's `ggml_cuda_should_use_mmq` (ggml-org/ggml@d99724f2 src/ggml-cuda/mmq.cu:259-384, 2026-08-21:
int8-MMA MMQ on NVIDIA cc >= 7.5 at every batch, line 312; on parts with FP16 tensor cores but no int8 MMA, MMQ only
below MMQ_DP4A_MAX_BATCH_SIZE = 64, line 325 and mmq.cuh:8; before llama.cpp#7676, merged 2024-06-10, MMQ only at
ne11 <= 32 where tensor cores exist, ggml-org/ggml@4c3ba529 src/ggml-cuda.cu:1925, common.cuh:165). Rates are the
profiles' datasheet fields: RTX 4090 bf16 165.2, fp16 (FP16 accumulate) 330.3, int8 660.6 TFLOP/s; V100 PCIe fp16 112.

Llama-3.1-8B's non-embedding parameters: 32 layers x (q 4096^2 + k, v 2 x 4096 x 1024 + o 4096^2 + MLP
3 x 4096 x 14336 = 218,103,808) = 6,979,321,856, + LM head 4096 x 128,256 = 525,336,576, + norms (2 x 32 + 1) x 4096
= 266,240: 7,504,924,672; 2 FLOPs each: 15,009,849,344 FLOPs a token, of which the LM head's 1,050,673,152 run for
the sampled positions only (one a micro-batch here: llama-bench's pp test marks no output, so llama.cpp outputs the
last token's logits, kvplan.speed.terms.head_rows): 13,959,176,192 a token besides. A GGUF file quantizes its output
layer (Q6_K), so the head runs on the path's kernel at its rate; with one row it is a vector product (<= 8 rows: MMVQ),
with no fp16 copy of its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.coverage import unrated as unrated_note
from kvplan.speed.corpus import read_corpus
from kvplan.speed.fit import build_all, prefill_unrated
from kvplan.speed.bench_load import Load
from kvplan.speed.model import StepModel, coefficients, priced, step_seconds
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features, path_at, roofline

SPEC = find_in_catalog("llama-3.1-8b")
RTX4090, V100 = find_gpu("rtx-4090"), find_gpu("v100-pcie-32")
FLOPS = 13_959_176_192  # per token, the LM head apart, above
HEAD = 1_050_673_152  # the LM head's, per sampled position
GEMM, WEIGHTS = TERMS.index("gemm"), TERMS.index("weights")


def _pp512(shape):
    return features(shape, 512, 1, 256, 512 * 513 / 2, steps=1)  # one 512-token micro-batch, llama-bench pp512


def test_q4_k_pp512_runs_mmq_at_the_int8_rate_on_an_rtx_4090():
    s = shape_for(SPEC, RTX4090, weight_dtype="q4_k", engine="llama.cpp")
    assert (s.flops_per_token, s.head_flops, s.plain_head) == (FLOPS, HEAD, False)
    # 13,959,176,192 x 512 + 1,050,673,152 = 7.148e12 FLOPs at 660.6e12 OP/s = 10.82 ms (at the bf16 rate 43.27 ms;
    # with the head on all 512 tokens it was 11.63 ms)
    assert _pp512(s)[GEMM] == pytest.approx((FLOPS * 512 + HEAD) / 660.6e12)
    assert _pp512(s)[GEMM] == pytest.approx(10.82e-3, rel=1e-3)
    # decode (1 token) and micro-batches of <= 8 run the vector kernels: the GEMM term's usual bf16 rate
    assert path_at(s, 8)[0] == 165.2e12 and path_at(s, 9)[0] == 660.6e12
    # no fp16 copy on this path: the weights term is the Q4_K bytes once per step
    assert _pp512(s)[WEIGHTS] == pytest.approx(s.dense_bytes / s.bandwidth)
    # without the engine, the shape is every engine's (the bf16 rate, measured by torch.mm: 164.81 T; no paths)
    plain = shape_for(SPEC, RTX4090, weight_dtype="q4_k")
    assert plain.paths == () and _pp512(plain)[GEMM] == pytest.approx((FLOPS * 512 + HEAD) / 164.81e12)


def test_volta_dequantizes_to_fp16_from_64_tokens_and_adds_the_copy():
    s = shape_for(SPEC, V100, weight_dtype="q5_0", engine="llama.cpp")
    copy = 4 * FLOPS // 2  # 2 bytes written + 2 read per weight but the head's: 27,918,352,384 bytes a micro-batch
    assert path_at(s, 63) == (112e12, 0)  # dp4a MMQ below 64
    assert path_at(s, 64) == (112e12, copy)  # cuBLAS fp16 from 64
    f = _pp512(s)
    assert f[GEMM] == pytest.approx((FLOPS * 512 + HEAD) / 112e12)
    assert f[WEIGHTS] == pytest.approx((s.dense_bytes + 27_918_352_384) / s.bandwidth)


def test_before_7676_an_rtx_4090_dequantized_above_32_tokens_at_the_fp16_accumulate_rate():
    s = shape_for(SPEC, RTX4090, weight_dtype="q4_0", engine="llama.cpp", date="2024-01-10")
    assert path_at(s, 32)[1] == 0 and path_at(s, 33) == (330.3e12, 4 * FLOPS // 2)
    after = shape_for(SPEC, RTX4090, weight_dtype="q4_0", engine="llama.cpp", date="2024-06-10")
    assert path_at(after, 512) == (660.6e12, 0)
    # fp16 weights run cuBLAS directly at the fp16 rate, with no copy
    f16 = shape_for(SPEC, RTX4090, weight_dtype="fp16", engine="llama.cpp")
    assert path_at(f16, 512) == (330.3e12, 0)


def test_a_rate_the_profile_lacks_is_named_not_priced_at_zero():
    no_int8 = replace(RTX4090, dense_flops={k: v for k, v in RTX4090.dense_flops.items() if k != "int8"})
    s = shape_for(SPEC, no_int8, weight_dtype="q4_k", engine="llama.cpp")
    assert s.rate_missing == "int8"
    assert prefill_unrated(s, Load(512, 0, bench="pp", ubatch=512))  # the corpus skips such a pp point
    assert not prefill_unrated(s, Load(0, 128, bench="tg"))  # decode runs the vector kernels
    assert not prefill_unrated(shape_for(SPEC, RTX4090, weight_dtype="q4_k", engine="llama.cpp"),
                               Load(512, 0, bench="pp"))


def test_step_model_and_roofline_read_the_paths_as_features_does():
    s = shape_for(SPEC, V100, weight_dtype="q4_0", engine="llama.cpp")
    coef = coefficients("llama.cpp")
    sm = StepModel(s, coef)
    for tokens in (1, 8, 9, 63, 64, 512):
        want = priced(coef, features(s, tokens, 1, 1000, tokens * 1000))
        assert sm.step(tokens, 1, 1000, tokens * 1000) == pytest.approx(want, rel=1e-12)
        assert step_seconds(s, "llama.cpp", tokens, 1, 1000, tokens * 1000) == pytest.approx(want, rel=1e-12)
    # the roofline knows no engine's kernels: the same bound with or without the paths
    plain = replace(s, paths=())
    assert roofline(s, 512, 1, 256, 512 * 256) == roofline(plain, 512, 1, 256, 512 * 256)


def test_other_vendors_keep_every_engines_gemm_term():
    # ggml's CUDA/HIP rules say nothing of a Gaudi: no paths, the GEMM at the Shape's own rate
    for wd in ("q4_k", "fp16"):
        s = shape_for(SPEC, find_gpu("gaudi2"), weight_dtype=wd, engine="llama.cpp")
        assert s.paths == () and s.rate_missing == ""


def test_a_plan_on_a_profile_without_the_rate_says_so():
    no_int8 = replace(RTX4090, dense_flops={k: v for k, v in RTX4090.dense_flops.items() if k != "int8"})
    (line,) = unrated_note("llama.cpp", no_int8, "q4_k_m")
    assert "no int8 rate" in line and "priced at zero" in line
    assert unrated_note("llama.cpp", RTX4090, "q4_k_m") == []
    assert unrated_note("vllm", no_int8, "q4_k_m") == []  # other engines' GEMM term reads bf16, as before


# RDNA3 (ggml-org/ggml@b96dffa0 src/ggml-cuda/mmq.cu:309, llama.cpp#17576 merged 2025-12-05: `amd_wmma_available`
# includes RDNA3, MMQ at every batch on V_WMMA_I32_16X16X16_IU8, mma.cuh:1326-1331 at d99724f2; before it,
# ggml-org/ggml@b3166ace mmq.cu:315: dp4a MMQ below 64, dequantize + rocBLAS from 64; since #18537, 2026-01-06,
# ggml-org/ggml@803885a3 mmq.cu:347-353: Q2_K, Q6_K, IQ2_XS, IQ2_S only at ne11 <= 128).
XTX = find_gpu("rx-7900-xtx")


def test_the_7900_xtx_int8_rate_is_its_wmma_iu8_rate():
    # 96 CUs x 512 IU8 ops per CU per clock (RDNA3's WMMA, as its FP16) x 2.5e9 Hz = 122,880e9 OP/s = 122.88 T
    assert XTX.dense_flops["int8"] == 96 * 512 * 2_500_000_000 == 122_880_000_000_000
    # the W7900: the same 96 CUs at 2.495 GHz = 122.63 T; the profile keeps AMD's rounded 122.64 T, as its fp16
    w7900 = find_gpu("radeon-pro-w7900").dense_flops
    assert w7900["int8"] == w7900["fp16"] == pytest.approx(96 * 512 * 2_495_000_000, rel=1e-4)


def test_rdna3_q4_k_runs_wmma_int8_mmq_at_every_batch_since_17576():
    s = shape_for(SPEC, XTX, weight_dtype="q4_k_m", engine="llama.cpp")  # no date: the current build
    assert s.rate_missing == "" and path_at(s, 8) == (122.88e12, 0) and path_at(s, 9) == (122.88e12, 0)
    assert path_at(s, 1024) == (122.88e12, 0)  # no fp16 copy at any micro-batch
    # pp512: (13,959,176,192 x 512 + 1,050,673,152) FLOPs / 122.88e12 = 58.17 ms
    assert _pp512(s)[GEMM] == pytest.approx(58.17e-3, rel=1e-3)
    assert _pp512(s)[WEIGHTS] == pytest.approx(s.dense_bytes / s.bandwidth)


def test_rdna3_before_17576_dequantized_from_64_tokens():
    s = shape_for(SPEC, XTX, weight_dtype="q4_k_m", engine="llama.cpp", date="2025-11-30")
    copy = 4 * FLOPS // 2  # 2 bytes written + 2 read per weight but the head's: 27,918,352,384 bytes a micro-batch
    assert path_at(s, 63) == (122.88e12, 0) and path_at(s, 64) == (122.88e12, copy)
    assert path_at(shape_for(SPEC, XTX, weight_dtype="q4_k_m", engine="llama.cpp", date="2025-12-05"), 64)[1] == 0


def test_rdna3_q6_k_goes_to_rocblas_past_128_tokens_since_18537():
    s = shape_for(SPEC, XTX, weight_dtype="q6_k", engine="llama.cpp")
    assert path_at(s, 128)[1] == 0 and path_at(s, 129)[1] == 4 * FLOPS // 2
    dec = shape_for(SPEC, XTX, weight_dtype="q6_k", engine="llama.cpp", date="2026-01-01")  # #17576, not #18537
    assert path_at(dec, 1024)[1] == 0
    # RDNA3.5 (gfx1151: (11, 5)) keeps Q6_K on MMQ to 256 since #18666 (2026-01-10)
    strix = replace(XTX, compute_capability="gfx1151")
    assert path_at(shape_for(SPEC, strix, weight_dtype="q6_k", engine="llama.cpp"), 256)[1] == 0
    assert path_at(shape_for(SPEC, strix, weight_dtype="q6_k", engine="llama.cpp"), 257)[1] == 4 * FLOPS // 2


def test_rdna3_without_an_int8_rate_says_so():
    no_int8 = replace(XTX, dense_flops={k: v for k, v in XTX.dense_flops.items() if k != "int8"})
    assert shape_for(SPEC, no_int8, weight_dtype="q4_k_m", engine="llama.cpp").rate_missing == "int8"


def test_cdna3_quantized_prefill_is_priced_at_its_int8_rate():
    # CDNA3's int8 MFMA rate is in its profiles (ROCm's mi300.md table: Matrix INT8 2614.9 T on the MI300X), so a
    # llama.cpp Q4_K_M prefill there is priced, not left at zero with a note
    for key in ("mi300x", "mi325x"):
        assert unrated_note("llama.cpp", find_gpu(key), "q4_k_m") == []


# CDNA before llama.cpp#14624 by build (kvplan.speed.ggml's docstring): dp4a MMQ at every batch (`cc < CC_RDNA3 ||
# ne11 < 64`, ggml-org/ggml@939a16f8 src/ggml-cuda/mmq.cu:153, b3891's build) until llama.cpp#11244 (2025-01-27) made
# #10498's gfx908 exclusion match and #11601 (2025-02-02) sent every CDNA part to rocBLAS from 64 tokens. MI300X
# datasheet: bf16 = fp16 = 1307.4 T, int8 2614.9 T; measured bf16 668.4 T (MAMF), a share of 668.4 / 1307.4.
MI300X, MI100 = find_gpu("mi300x"), find_gpu("mi100")


def test_mi300x_at_b3891_runs_dp4a_mmq_at_every_batch_and_its_prefill_is_unpriced():
    s = shape_for(SPEC, MI300X, weight_dtype="q4_0", engine="llama.cpp", date="2024-10-09")
    assert s.rate_missing == "dp4a"
    assert path_at(s, 512) == (0.0, 0)  # no rocBLAS copy: the same dp4a kernel, at a rate no profile gives
    assert path_at(s, 63) == (668.4e12, 0)  # below 64 priced as the vector kernels (the bf16 rate, measured)
    assert prefill_unrated(s, Load(512, 0, bench="pp", ubatch=512))  # the corpus skips pp512 with the reason
    assert not prefill_unrated(s, Load(0, 128, bench="tg"))  # tg128 runs MMVQ, priced as before


def test_cdna1_leaves_dp4a_at_11244_and_every_cdna_part_at_11601():
    copy = 4 * FLOPS // 2  # the rocBLAS path's fp16 copy, 2 bytes written and 2 read a weight but the head's
    for date, mi100_blas, mi300x_blas in (("2024-12-15", False, False), ("2025-01-30", True, False),
                                          ("2025-03-15", True, True)):
        mi100 = shape_for(SPEC, MI100, weight_dtype="q4_0", engine="llama.cpp", date=date)
        mi300x = shape_for(SPEC, MI300X, weight_dtype="q4_0", engine="llama.cpp", date=date)
        assert (path_at(mi100, 64)[1] == copy, mi100.rate_missing == "") == (mi100_blas, mi100_blas), date
        assert (path_at(mi300x, 64)[1] == copy, mi300x.rate_missing == "") == (mi300x_blas, mi300x_blas), date


def test_one_mi300x_pp512_steps_matmul_time_by_build():
    # 2025-03-15 (after #11601, before #14624): dequantize + rocBLAS at the fp16 rate, the datasheet's 1307.4 T at the
    # measured bf16 share = 668.4 T: (13,959,176,192 x 512 + 1,050,673,152) = 7,148,148,883,456 FLOPs / 668.4e12 =
    # 10.694 ms, and the fp16 copy 27,918,352,384 bytes beside the weights
    s = shape_for(SPEC, MI300X, weight_dtype="q4_0", engine="llama.cpp", date="2025-03-15")
    assert _pp512(s)[GEMM] == pytest.approx(7_148_148_883_456 / 668.4e12) == pytest.approx(10.694e-3, rel=1e-4)
    assert _pp512(s)[WEIGHTS] == pytest.approx((s.dense_bytes + 27_918_352_384) / s.bandwidth)
    # since #14624 (CDNA3: MFMA int8 MMQ at every batch): 2614.9 T x 668.4 / 1307.4 = 1336.85 T, so 5.347 ms, no copy
    now = shape_for(SPEC, MI300X, weight_dtype="q4_0", engine="llama.cpp")
    int8 = 2614.9e12 * 668.4 / 1307.4
    assert _pp512(now)[GEMM] == pytest.approx(7_148_148_883_456 / int8) == pytest.approx(5.347e-3, rel=1e-3)


def test_rdna3_before_the_dp4a_bound_ran_rocblas_past_the_vector_kernel():
    # before 2024-06-26 the HIP branch withheld MMQ from RDNA3 (ggml-org/ggml@a59a24f9 src/ggml-cuda.cu:1917)
    s = shape_for(SPEC, XTX, weight_dtype="q4_0", engine="llama.cpp", date="2024-01-28")
    assert path_at(s, 8)[1] == 0 and path_at(s, 9) == (122.88e12, 4 * FLOPS // 2)
    assert path_at(shape_for(SPEC, XTX, weight_dtype="q4_0", engine="llama.cpp", date="2024-08-05"), 9)[1] == 0


def test_the_corpus_skips_the_mi300x_b3891_prefill_points_with_the_reason():
    # llm-tracker's MI300X page (b3891, 2024-10-09): pp512 without and with -fa 1 skipped, tg128 both priced
    cases, _ = read_corpus(Path(__file__).parent / "fixtures" / "speed")
    built, skipped = build_all([c for c in cases if c.source == "llm-tracker-mi300x-llamacpp"], running)
    assert skipped == {"GPU profile has no dp4a rate (llama.cpp's GEMM path)": 2}
    assert sorted(b.case.load.bench for b in built) == ["tg", "tg"]
