"""llama.cpp's matrix-multiply paths on CUDA and ROCm: which kernel a step's weight GEMMs run on, at which rate.

ggml picks a kernel per weight matrix by its GGUF type, the tokens of the micro-batch (ne11, at most n_ubatch,
512 by default) and the GPU's architecture (`ggml_cuda_should_use_mmq`, ggml/src/ggml-cuda/mmq.cu; cited at
ggml-org/ggml, which syncs that directory of ggml-org/llama.cpp):

* MMQ with int8 tensor cores: the activations are quantized to q8_1 and multiplied with the quantized weights
  by int8 MMA, so the GEMM runs at the profile's int8 rate. NVIDIA Turing and newer (compute capability >= 7.5)
  take it for every MMQ type at every batch since llama.cpp#7676 ('CUDA: use tensor cores for MMQ', merged
  2024-06-10; ggml-org/ggml@c570abcd src/ggml-cuda/mmq.cu; now `turing_mma_available(cc)`,
  ggml-org/ggml@d99724f2 src/ggml-cuda/mmq.cu:312). AMD CDNA (MFMA) since llama.cpp#14624 (merged 2025-07-26,
  ggml-org/ggml@ae9a8738 src/ggml-cuda/mmq.cu:309): CDNA3 always; CDNA1/2 at ne11 <= 128, for q4_0/q4_1/q5_0/q5_1
  always, for q4_K/q5_K at ne11 <= 256 (ggml-org/ggml@d99724f2 src/ggml-cuda/mmq.cu:327-346). AMD RDNA3 (WMMA,
  gfx11) since llama.cpp#17576 ('HIP: enable WMMA-MMQ INT kernels for RDNA 3', merged 2025-12-05,
  ggml-org/ggml@b96dffa0 src/ggml-cuda/mmq.cu:309 and common.cuh:296, `amd_wmma_available` now RDNA3 too): MMQ's
  tiles multiply by V_WMMA_I32_16X16X16_IU8 (ggml-org/ggml@d99724f2 src/ggml-cuda/mma.cuh:1326-1331), at the
  profile's int8 (IU8 WMMA) rate, for every type; since llama.cpp#18537 (merged 2026-01-06, ggml-org/ggml@803885a3
  src/ggml-cuda/mmq.cu:335-357) Q2_K, Q6_K, IQ2_XS and IQ2_S only at ne11 <= 128, and on RDNA3.5 (gfx115x) since
  #18666 (2026-01-10) Q6_K at ne11 <= 256 and IQ2_XS / IQ2_S always (ggml-org/ggml@d99724f2 mmq.cu:347-368).
  A model of 64 experts or more takes MMQ whatever the type (line 352); kvplan does not split that case out.
* MMQ or MMVQ on dp4a (no int8 MMA: Volta, CDNA from #11601 to #14624, RDNA3 before #17576: ggml-org/ggml@b3166ace
  src/ggml-cuda/mmq.cu:315 and, from 2024-06-26, ggml-org/ggml@5378ea0d mmq.cu:117 `cc < CC_RDNA3 || ne11 < 64`) below
  a batch of 64 (`MMQ_DP4A_MAX_BATCH_SIZE`,
  src/ggml-cuda/mmq.cuh:8; before #7676 `MMQ_MAX_BATCH_SIZE` 32, ggml-org/ggml@4c3ba529 src/ggml-cuda.cu:1925 and
  src/ggml-cuda/common.cuh:165), and MMVQ at 8 tokens or fewer: priced at the rate every engine's GEMM term
  reads for these weights (bf16, fp16 where the profile gives no bf16), as before: profiles carry no dp4a rate,
  and at such batches the weights' read dominates the step.
* Dequantize + cuBLAS/rocBLAS: at larger batches on those parts (and every quantized GEMM of an NVIDIA part
  with FP16 tensor cores before #7676), each micro-batch converts the whole weight matrix to fp16 in a scratch
  buffer and multiplies in fp16 (`ggml_cuda_mul_mat_cublas`; CUBLAS_COMPUTE_16F for F16,
  ggml-org/ggml@d99724f2 src/ggml-cuda/ggml-cuda.cu:1397): the GEMM at the fp16 rate (on GeForce the
  profile's fp16 is the FP16-accumulate rate cuBLAS runs at), plus 2 bytes written and 2 read per weight
  each micro-batch. fp16 weights run cuBLAS directly, bf16 weights at the bf16 rate.
* AMD before the int8 matrix paths, by build. ggml sent every AMD part below RDNA3 to MMQ at every batch (`return cc <
  CC_RDNA3 || ne11 < MMQ_DP4A_MAX_BATCH_SIZE`, ggml-org/ggml@939a16f8 src/ggml-cuda/mmq.cu:153, the build b3891 ran;
  before 2024-06-26, MMQ_BOUND_SINCE, the HIP branch of `ggml_cuda_mul_mat` withheld MMQ from RDNA3 alone,
  `use_mul_mat_q && min_compute_capability < CC_RDNA3`, ggml-org/ggml@a59a24f9 src/ggml-cuda.cu:1917, so RDNA3 ran
  rocBLAS from 9 tokens), its dot products by `ggml_cuda_dp4a`, `__builtin_amdgcn_sdot4` on AMD (939a16f8
  src/ggml-cuda/common.cuh:281). llama.cpp#10498 (2024-11-27, ggml-org/ggml@ae386e3e mmq.cu:151, `cc != CC_CDNA`)
  meant to send gfx908 (CDNA1) to rocBLAS from 64 tokens, but an AMD cc was then 100 x major + 10 x minor, 900 for
  gfx908, so it matched nothing until llama.cpp#11244 (2025-01-27, ggml-org/ggml@53c2ce7a ggml-cuda.cu
  `ggml_cuda_parse_id`: "The value provided by minor doesn't include stepping for AMD") read gfx908 as 0x908;
  llama.cpp#11601 (2025-02-02, ggml-org/ggml@d500f8d9 mmq.cu:151, `GGML_CUDA_CC_IS_CDNA`) sent every CDNA part
  (gfx90a, gfx942) there too. Its rocBLAS GEMM takes F16 operands (F32 output on CDNA, `prefer_f32_output`,
  ggml-org/ggml@d99724f2 src/ggml-cuda/ggml-cuda.cu:1512), priced at the profile's fp16 rate, CDNA's datasheet
  rating FP16 MFMA with its one (FP32) accumulator. A build running dp4a MMQ at 64 tokens and past needs a vector
  int8 (dp4a) rate: no datasheet states one (the MI300X's gives matrix INT8 only) and v_dot4_i32_i8's issue rate per
  CU is on none either, so none is derived and no profile carries one: that path is unpriced (`missing` "dp4a"; a
  llama-bench prefill of such a build is skipped with that reason); below 64 tokens it is priced as the vector
  kernels above. A build with
  GGML_HIP_NO_MMQ_MFMA keeps CDNA off MFMA after #14624 (`amd_mfma_available` false, ggml-org/ggml@d99724f2
  src/ggml-cuda/common.cuh:332-338: dp4a MMQ below 64, rocBLAS from 64, mmq.cu:383); kvplan cannot see build flags
  and prices the default build.

Attention (`attention_rate`): on NVIDIA, llama.cpp's FlashAttention kernel for Turing and newer (fattn-mma-f16, since
llama.cpp#11583, ggml-org/ggml@0f36dae8, 2025-02-03) multiplies K.Q into float tiles and V.softmax into half2 tiles,
whatever precision the graph asks (ggml-org/ggml@0371845c src/ggml-cuda/fattn-mma-f16.cuh:782-795, `T_C_KQ` float,
`T_C_VKQ` half2; mma.cuh:725 `mma.sync...f16.f16.f16.f16`, :799 `...f32.f16.f16.f32`; fattn.cu:279-300 picks it on
Turing and newer for all but one-token batches), and without FlashAttention the graph asks F32 for K.Q
(`ggml_mul_mat_set_prec(kq, GGML_PREC_F32)`, so CUBLAS_COMPUTE_32F) and the default for V.softmax
(CUBLAS_COMPUTE_16F: ggml-org/llama.cpp@00395eb285c7c6821ff372e3ca41dae9da33c2c7 src/llama-graph.cpp
`build_attn_mha`): half its FLOPs accumulate in FP32, half in FP16. Where a GeForce profile's `fp16` is the
FP16-accumulate headline (`fp16_accumulates_fp16`) and its `bf16` the FP32-accumulate rate, the pair takes
1 / bf16 + 1 / fp16 seconds for two FLOPs: 2 / (1 / bf16 + 1 / fp16) FLOP/s (RTX 4090: 2 x 165.2 x 330.3 /
495.5 = 220.2 T); on other parts the two rates are one. The wmma kernel before 2025-02-03 accumulated K.Q in FP16
unless the graph asked F32 (ggml-org/ggml@475e0122 src/ggml-cuda/fattn-wmma-f16.cu:16-86): such builds are priced
as the same split, an assumption.

Without FlashAttention (`score_bytes_per_flop`): llama.cpp's graph materializes each layer's scores, `kq =
ggml_mul_mat(k, q)` in F32 ([n_kv, n_tokens, n_head]), `ggml_soft_max_ext(kq, mask, ...)`, then `ggml_mul_mat(v, kq)`
(ggml-org/llama.cpp@00395eb285c7c6821ff372e3ca41dae9da33c2c7 src/llama-graph.cpp `build_attn_mha`, its `else` of
`use_flash_attn`), and the CUDA/HIP backend runs both products as batched cuBLAS GEMMs, converting the F32 scores to
F16 first ("general KQ + KQV multi-batch without FlashAttention", ggml-org/ggml@c1afe76e src/ggml-cuda/ggml-cuda.cu:2052
-2055; the conversion of src1, :1857-1870; F32 output where the graph asks GGML_PREC_F32, :1895-1901): per score 4 bytes
written by K.Q, 4 read and 4 written by the softmax, 4 read and 2 written by the conversion, 2 read by V.softmax, 20 in
all (SCORE_BYTES; the mask, one row per token for all heads, left out). Every query of a micro-batch scores every cached
cell of the view, its own micro-batch's later tokens too (masked after the product), so a micro-batch of q tokens of
one sequence forms q x (q - 1) / 2 pairs past the causal ones the attention term counts (kvplan.speed.terms.features
adds them to the scores, not to the FLOPs). llama-bench's `cmd_params_defaults` kept `flash_attn` { false } after
llama.cpp#15434 (2025-08-30) made FlashAttention the default of the other tools: llama.cpp#23714 (`Support -fa auto in
llama-bench`, opened 2026-05-26: "The default is still kept as -fa off") flipped it to LLAMA_FLASH_ATTN_TYPE_AUTO in
commit aa46bda89, which a build of 2026-06-12 (e37abd6b5) holds (a user's bisection of that build's pp512 drop to
aa46bda89); the b8407 build's (March 2026) `llama-bench -h` still printed `-fa, --flash-attn <0|1> (default: 0)`.
kvplan dates the switch at 2026-06-12 (FA_DEFAULT_SINCE); a run stating nothing between 2026-05-28 (the review asking
for it) and that day cannot be told and is read as off. A run that states `fa` (or `flash_attn`), or whose fixture
infers it (a FlashAttention kernel's own before/after table), is read as stated (`materializes_scores`).

MoE prefill through MMQ (`padded_expert_flops`): past the vector kernel (<= 8 tokens), `ggml_cuda_mul_mat_id` runs
one MMQ launch over every expert's tokens (`ggml_cuda_mul_mat_q(ctx, src0, src1, ids, dst)`, ggml-org/ggml@a1fde6fb,
the llama.cpp#22298 build, src/ggml-cuda/ggml-cuda.cu:2501; since llama.cpp#13199, ggml-org/ggml@b5ed2968, 2025-04-30:
before it each expert ran a GEMM of its own tokens, whose tile fits them to a granularity step, not priced). The kernel
cuts each expert's tokens into tiles of `mmq_x` columns and computes whole tiles (the `vec_dot_*_mma` loops run j0 over
all mmq_x; a tile past the expert's tokens is skipped, a1fde6fb src/ggml-cuda/mmq.cuh:3540), and `mmq_x` is chosen once
for the launch: the smallest width with the fewest tiles for `ncols_max` columns (mmq.cuh:4002-4018), widths in steps
of the granularity (8, then 16 from 48 on NVIDIA's MMA; 16, then 32 at 128 on AMD's MFMA / WMMA:
`mmq_get_granularity_host`, mmq.cuh:265-274) up to `get_mmq_x_max_host` (mmq.cuh:106-114): 128 on NVIDIA Turing+ and
AMD WMMA; on CDNA's MFMA 128 until llama.cpp#22051 (ggml-org/ggml@db3370a3, 2026-04-19), 64 since (the per-type
configs of ggml-org/ggml@d99724f2 keep 16-64 for Q4_0 and Q4_K on CDNA, mmq-config-cdna.cuh, and 8-128 on Ampere,
mmq-config-ampere.cuh). `ncols_max` is the micro-batch's tokens (ne12) since llama.cpp#15525 (ggml-org/ggml@06034b3c,
2025-08-25, 'better tile sizes'); before it the tokens x top-k rows (ncols_y, b5ed2968 src/ggml-cuda/mmq.cuh:2622); on
RDNA3.0 since llama.cpp#28552 the tokens an expert gets on average, ceil(tokens x k / E) (`ncols_opt`, its diff at
mmq.cu:251; dated at its last comment, 2026-09-08, its merge commit not read; RDNA4 alike, not modelled here). So an
expert given T tokens computes ceil(T / mmq_x) x mmq_x columns; under uniform routing T ~ Binomial(tokens, k / E), so
E x E[ceil(T / mmq_x)] x mmq_x columns in all against the tokens x k the step needs: the difference, 2 x one expert's
parameters a column, is priced at the path's rate in the `gemm` term. Not priced: the shared-memory limit on the width
(smpbo), a dense GEMM's own padding (the corpus's micro-batches are whole tiles), and the MoE of CDNA1/2 or RDNA3 past
their dequantizing bound (where more than 64 experts keep MMQ).

`paths(...)` gives a Shape's `paths`: GemmPath(first tokens per step, FLOP/s, extra bytes per step, MoE tiles)
entries, ascending, the tiles (widths, what the width is chosen for: `_tiles`) where the MoE runs MMQ's MMA kernels, ()
elsewhere; a step of n tokens takes the last entry whose first is <= n (`entry_at`). A llama-bench
test's micro-batch is its -ub clamped to its -b (`micro_batch`), as llama_context runs it. A rate the profile lacks
is not priced at zero: `missing` names it, and the corpus skips such a point.
Metal and CPU backends are not modelled (the corpus has no llama-bench pp point on them).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from kvplan.hardware.facts import parse_capability
from kvplan.model.layers import attending
from kvplan.speed.compute_dtype import bf16_apart, split_accumulate

MMVQ_MAX = 8  # mmvq.cuh MMVQ_MAX_BATCH_SIZE: a step of <= 8 tokens runs the vector kernel
DP4A_BELOW = 64  # mmq.cuh MMQ_DP4A_MAX_BATCH_SIZE (since 2024-06); before: MMQ_MAX_BATCH_SIZE 32 (<= 32)
NVIDIA_MMA_SINCE = "2024-06-10"  # llama.cpp#7676 merged: int8 MMA MMQ on Turing+
CDNA_MMA_SINCE = "2025-07-26"  # llama.cpp#14624 merged: MFMA MMQ on CDNA
CDNA1_BLAS_SINCE = "2025-01-27"  # llama.cpp#11244: gfx908's cc read whole, so #10498's rocBLAS-from-64 matches it
CDNA_BLAS_SINCE = "2025-02-02"  # llama.cpp#11601: every CDNA part to rocBLAS from 64 tokens (GGML_CUDA_CC_IS_CDNA)
MMQ_BOUND_SINCE = "2024-06-26"  # ggml_cuda_should_use_mmq's dp4a bound (ggml@5378ea0d); before it RDNA3 ran no MMQ
DP4A = "dp4a"  # the rate a dp4a MMQ path at 64 tokens and past needs: no datasheet, so no profile, states one
RDNA3_MMA_SINCE = "2025-12-05"  # llama.cpp#17576 merged: WMMA int8 MMQ on RDNA3
RDNA3_TUNED_SINCE = "2026-01-06"  # llama.cpp#18537 merged: Q2_K / Q6_K / IQ2_XS / IQ2_S to rocBLAS past 128 on RDNA3
RDNA3_5_SINCE = "2026-01-10"  # llama.cpp#18666 merged: RDNA3.5's own bounds for Q6_K and the IQ2 types
SCORE_BYTES = 20  # bytes moved per attention score without FlashAttention (module docstring)
FA_DEFAULT_SINCE = "2026-06-12"  # llama-bench's fa default auto (llama.cpp#23714), in a build by then
MOE_MMQ_SINCE = "2025-04-30"  # llama.cpp#13199: one MMQ launch over every expert's tokens (module docstring)
NCOLS_MAX_SINCE = "2025-08-25"  # llama.cpp#15525: the MoE tile chosen by the micro-batch's tokens, not tokens x top-k
CDNA_X64_SINCE = "2026-04-19"  # llama.cpp#22051: CDNA's widest MMQ tile 128 -> 64 columns
RDNA3_MEAN_SINCE = "2026-09-08"  # llama.cpp#28552: RDNA3.0's MoE tile by an expert's mean tokens (its last comment)
NVIDIA_TILES = (8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128)  # granularity 8, 16 from 48 (Turing+ MMA)
AMD_TILES = (16, 32, 48, 64, 80, 96, 112, 128)  # granularity 16, 32 at 128 (MFMA / WMMA)
MMQ_TYPES = frozenset({"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4", "nvfp4", "q2_k", "q3_k", "q4_k", "q5_k",
                       "q6_k", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq4_xs", "iq4_nl",
                       "q3_k_m", "q4_k_m", "q5_k_m"})  # mmq.cu's switch; a _K_M mix is its k-quant types


class GemmPath(NamedTuple):
    """One kernel path of a Shape's `paths` (module docstring)."""

    first: int  # the fewest tokens per step that take it
    rate: float  # FLOP/s its weight GEMMs run at
    extra_bytes: int  # bytes a step moves beside the weights (a dequantizing path's fp16 copy, written and read)
    tiles: tuple  # (widths, what the width is chosen for) where the MoE runs MMQ's MMA kernels; (): none


def built_since(date: str | None, day: str) -> bool:
    """Whether a build of `date` (None: the current one) is of `day` or later."""
    return not date or str(date)[:10] >= day  # no date: the current build


def _cdna_dp4a_only(arch: str, date: str | None) -> bool:
    """Whether a CDNA build before CDNA_MMA_SINCE ran dp4a MMQ at every batch (module docstring): every CDNA part
    before CDNA1_BLAS_SINCE, CDNA2 and newer (not gfx908, "cdna") until CDNA_BLAS_SINCE."""
    return not built_since(date, CDNA1_BLAS_SINCE) or (arch != "cdna" and not built_since(date, CDNA_BLAS_SINCE))


def _cdna_mmq(arch: str, wd: str, n: int) -> bool:
    if arch == "cdna3":
        return True
    return n <= 128 or wd in ("q4_0", "q4_1", "q5_0", "q5_1") or (n <= 256 and wd in ("q4_k", "q5_k", "q4_k_m",
                                                                                          "q5_k_m"))


def _rdna3_mmq_last(cc, wd: str, date: str | None) -> int | None:
    """The largest ne11 an RDNA3 part runs MMQ at for weights of `wd` (None: every batch), by build; RDNA3.5 is
    gfx115x, (11, 5) as parse_capability reads it."""
    rdna3_5 = bool(cc) and cc >= (11, 5) and built_since(date, RDNA3_5_SINCE)
    if not built_since(date, RDNA3_TUNED_SINCE):
        return None
    if wd == "q2_k":
        return 128
    if wd == "q6_k":
        return 256 if rdna3_5 else 128
    if wd in ("iq2_xs", "iq2_s"):
        return None if rdna3_5 else 128
    return None


def _rdna3(cc, wd: str, date: str | None, vector: GemmPath, fp16: float, rate_of, dequant: GemmPath):
    """(paths, missing) on RDNA3 (WMMA, gfx11): dp4a MMQ below 64 then dequantize + rocBLAS before #17576; WMMA int8
    MMQ past the vector kernels since, to rocBLAS past a type's bound (_rdna3_mmq_last)."""
    if not built_since(date, RDNA3_MMA_SINCE):  # before MMQ_BOUND_SINCE no MMQ on RDNA3: rocBLAS past the vector kernel
        first = DP4A_BELOW if built_since(date, MMQ_BOUND_SINCE) else MMVQ_MAX + 1
        return (vector, dequant._replace(first=first)), "" if fp16 else "fp16"
    int8 = rate_of("int8")
    by_mean = bool(cc) and cc < (11, 5) and built_since(date, RDNA3_MEAN_SINCE)
    out = [vector, GemmPath(MMVQ_MAX + 1, int8, 0, _tiles(AMD_TILES, date, by_mean))]
    last = _rdna3_mmq_last(cc, wd, date)
    if last:
        out.append(dequant._replace(first=last + 1))
    return tuple(out), "" if int8 and fp16 else "int8" if fp16 else "fp16"


def attention_rate(gpu, rate_of) -> float:
    """FLOP/s llama.cpp's attention runs at on `gpu` (`rate_of` as for `paths`): half its FLOPs at the FP32-accumulate
    rate (`bf16`), half at the FP16-accumulate one (`fp16`) on an NVIDIA profile whose `fp16` is the FP16-accumulate
    headline and which states both; the fp16 reading, where it reads one, where the datasheet rates bf16 apart from
    fp16 with one accumulator (kvplan.speed.compute_dtype.bf16_apart: the MI100, 184.6 against 92.3 T): its operands
    are F16 (the F16 cache; without FlashAttention K.Q and V.softmax are rocBLAS calls on F16 inputs, F32 output on
    CDNA, ggml-org/ggml@3132422f ggml-cuda.cu:1288-1298 and its batched path), none bf16; which kernel FlashAttention
    runs on CDNA is not read. The bf16 reading elsewhere."""
    fp32, fp16 = rate_of("bf16"), rate_of("fp16")
    if split_accumulate(gpu) and fp32 and fp16:
        return 2.0 / (1.0 / fp32 + 1.0 / fp16)
    return fp16 if bf16_apart(gpu) and fp16 else fp32


def paths(gpu, weight_dtype: str | None, dense_params: float, rate_of, date: str | None = None):
    """(paths, missing) for llama.cpp on `gpu` with weights of `weight_dtype` (None: the checkpoint's 16 bits):
    `dense_params` the weights a dequantizing step converts on this rank, `rate_of(precision)` the FLOP/s the
    terms read (kvplan.speed.compute_dtype.read_flops; 0 where the profile has none). ((), "") where the rules do not
    apply (another vendor or architecture: RDNA1/2/4, Vega, Intel, ...): the step keeps the Shape's own GEMM rate."""
    wd = (weight_dtype or "fp16").lower()
    vendor, arch = str(gpu.vendor or "").upper(), str(gpu.architecture or "").lower()
    fp16 = rate_of("fp16") or rate_of("bf16")
    vec = rate_of("bf16")  # the dp4a / MMVQ kernels: the GEMM term's usual rate (no dp4a rate in a profile)
    vector = GemmPath(0, vec, 0, ())
    if vendor not in ("NVIDIA", "AMD"):
        return (), ""
    if wd in ("fp16", "f16", "bf16"):  # cuBLAS/rocBLAS on the weights as stored
        rate = rate_of("bf16") if wd == "bf16" else fp16
        return (GemmPath(0, rate, 0, ()),), "" if rate else "fp16"
    if wd not in MMQ_TYPES:
        return (), ""
    cc = parse_capability(gpu.compute_capability)
    dequant = GemmPath(0, fp16, int(4 * dense_params), ())  # fp16 copy written and read each micro-batch
    if vendor == "NVIDIA" and cc:
        if cc >= (7, 5) and built_since(date, NVIDIA_MMA_SINCE):
            int8 = rate_of("int8")
            mma = GemmPath(MMVQ_MAX + 1, int8, 0, _tiles(NVIDIA_TILES, date))
            return (vector, mma), "int8" if not int8 else "" if vec else "bf16"
        if cc >= (7, 0):  # FP16 tensor cores: dp4a MMQ below the bound, dequantize + cuBLAS above
            first = DP4A_BELOW if built_since(date, NVIDIA_MMA_SINCE) else 33
            return (vector, dequant._replace(first=first)), "" if fp16 else "fp16"
        return (vector,), "" if vec else "bf16"
    if vendor == "AMD" and arch.startswith("cdna"):
        if built_since(date, CDNA_MMA_SINCE):
            int8 = rate_of("int8")
            widths = tuple(w for w in AMD_TILES if w <= 64) if built_since(date, CDNA_X64_SINCE) else AMD_TILES
            out = [vector, GemmPath(MMVQ_MAX + 1, int8, 0, _tiles(widths, date))]
            last = next((n for n in (129, 257) if not _cdna_mmq(arch, wd, n)), None)
            if last:  # CDNA1/2 past MMQ's batch bound for this type: dequantize + rocBLAS
                out.append(dequant._replace(first=last))
            return tuple(out), "" if int8 and fp16 else "int8" if fp16 else "fp16"
        if _cdna_dp4a_only(arch, date):  # dp4a MMQ at every batch: no profile rates dp4a, so past 64 unpriced
            return (vector, GemmPath(DP4A_BELOW, 0.0, 0, ())), DP4A
        return (vector, dequant._replace(first=DP4A_BELOW)), "" if fp16 else "fp16"
    if vendor == "AMD" and arch == "rdna3":
        return _rdna3(cc, wd, date, vector, fp16, rate_of, dequant)
    return (), ""


def _tiles(widths: tuple, date: str | None, by_mean: bool = False) -> tuple:
    """A path's MoE tiles from a build of `date`: (widths, what the width is chosen for: the micro-batch's "tokens",
    before NCOLS_MAX_SINCE its tokens x top-k "rows", or where `by_mean` (RDNA3.0 since RDNA3_MEAN_SINCE) the
    tokens an expert gets on average, "mean"); () before MOE_MMQ_SINCE."""
    if not built_since(date, MOE_MMQ_SINCE):
        return ()
    return widths, "mean" if by_mean else "tokens" if built_since(date, NCOLS_MAX_SINCE) else "rows"


def tile_width(columns: float, widths: tuple) -> int:
    """The `mmq_x` ggml picks for `columns`: the smallest width with the fewest tiles (mmq.cuh:4002-4018)."""
    return min(widths, key=lambda w: (math.ceil(columns / w), w))


@lru_cache(maxsize=4096)
def expected_tiles(tokens: int, share: float, width: int) -> float:
    """E[ceil(T / width)] for T ~ Binomial(tokens, share), one expert's tokens under uniform routing: the sum over
    j >= 0 of P(T > j x width)."""
    if tokens <= 0 or share <= 0.0:
        return 0.0
    if share >= 1.0:
        return float(math.ceil(tokens / width))
    log_pmf, odds, cdf, tiles = tokens * math.log1p(-share), math.log(share / (1.0 - share)), 0.0, 0.0
    for t in range(tokens):  # P(T = t) by the recurrence P(t + 1) = P(t) x (n - t) / (t + 1) x p / (1 - p)
        cdf += math.exp(log_pmf)
        if t % width == 0:
            tiles += max(0.0, 1.0 - cdf)  # P(T > t) at t = j x width
        if cdf > 1.0 - 1e-15:  # the tail past here adds nothing a float holds
            break
        log_pmf += math.log((tokens - t) / (t + 1)) + odds
    return tiles


def entry_at(paths: tuple, per_step: float) -> GemmPath | None:
    """The `paths` entry a step of `per_step` tokens takes (the last whose first token count is <= per_step), or
    None where there is none (kvplan.speed.terms.path_at reads its rate and bytes, padded_expert_flops its tiles)."""
    return next((e for e in reversed(paths) if per_step >= e.first), None)


def padded_expert_flops(s, per_step: float) -> float:
    """FLOPs the MoE's MMQ computes past its tokens' own in a step of `per_step` tokens on Shape `s` (module
    docstring): 2 x one expert's parameters x (E x E[ceil(T / mmq_x)] x mmq_x - tokens x k); 0 where the step's path
    has no MoE tiles or the model no experts."""
    entry = entry_at(s.paths, per_step) if s.num_experts else None
    tiles = entry.tiles if entry else ()
    if not tiles or not s.top_k:
        return 0.0
    widths, chosen_for = tiles
    n = max(1, round(per_step))
    width = tile_width({"rows": n * s.top_k, "mean": math.ceil(n * s.top_k / s.num_experts)}.get(chosen_for, n), widths)
    columns = s.num_experts * expected_tiles(n, s.top_k / s.num_experts, width) * width
    return 2.0 * s.expert_params * max(0.0, columns - n * s.top_k)


# llama-bench's default -b (cmd_params_defaults n_batch { 2048 }, ggml-org/llama.cpp@050fc7f3
# tools/llama-bench/llama-bench.cpp), which it passes to the context as n_batch beside n_ubatch (to_llama_cparams).
LLAMA_BENCH_BATCH = 2048


def micro_batch(ubatch: int, batch: int | None) -> int:
    """The micro-batch a llama-bench test runs: its -ub, clamped to its -b (LLAMA_BENCH_BATCH where unstated).
    llama_context's constructor takes `n_ubatch = min(n_batch, n_ubatch)` (ggml-org/llama.cpp@4c7103b9
    src/llama-context.cpp:101, n_batch first clamped to n_ctx at :91), while llama-bench prints the -ub asked: an
    `n_ubatch` of 4,096 at the default -b ran 2,048-token micro-batches (llama.cpp#14624's MI100 table)."""
    return min(ubatch, batch or LLAMA_BENCH_BATCH)


def materializes_scores(flags: dict, date: str | None) -> bool:
    """Whether a llama.cpp run attends without FlashAttention, its scores materialized (module docstring): as its
    `fa` / `flash_attn` flag states (0 / off / false: without; auto resolves to FlashAttention on the backends priced
    here), else as the build's default, without before FA_DEFAULT_SINCE (no date: the current build, with)."""
    stated = next((flags[k] for k in ("fa", "flash_attn") if k in flags), None)
    if stated is not None:
        return str(stated).strip().lower() in ("0", "off", "false")
    return not built_since(date, FA_DEFAULT_SINCE)


def score_bytes_per_flop(spec, tp: int, attn_flops_per_pair: float) -> float:
    """Bytes the materialized scores move per attention FLOP the Shape prices (its `attn_flops_per_pair` over the same
    pairs): SCORE_BYTES per query head on the rank in each attention layer, over those FLOPs (SCORE_BYTES / (4 x head
    dim) where every layer's head dim is one); 0 for a model without attention FLOPs."""
    layers = len(attending(spec.layers, tp))  # as shape.attention_flops counts them
    return SCORE_BYTES * spec.num_attention_heads / tp * layers / attn_flops_per_pair if attn_flops_per_pair else 0.0
