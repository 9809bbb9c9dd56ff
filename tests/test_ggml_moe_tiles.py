"""llama.cpp's MoE prefill through MMQ: the padded tile columns (kvplan.speed.ggml.padded_expert_flops), by hand.

The rules restate ggml's CUDA/HIP source at ggml-org/ggml@a1fde6fb (the llama.cpp#22298 build): `ggml_cuda_mul_mat_id`
runs one MMQ launch over every expert's tokens past 8 tokens (src/ggml-cuda/ggml-cuda.cu:2501); each expert's tokens
are cut into tiles of `mmq_x` columns, whole tiles computed; `mmq_x` is the smallest width with the fewest tiles for
`ncols_max` (src/ggml-cuda/mmq.cuh:4002-4018), widths in the granularity's steps (mmq.cuh:265-274: 8, then 16 from 48 on
NVIDIA's MMA; 16, then 32 at 128 on AMD's) up to 128 (NVIDIA Turing+) or, on CDNA since llama.cpp#22051
(ggml-org/ggml@db3370a3, 2026-04-19), 64 (mmq.cuh:106-114). `ncols_max` is the micro-batch's tokens since
llama.cpp#15525 (ggml-org/ggml@06034b3c, 2025-08-25); before it the tokens x top-k (b5ed2968 mmq.cuh:2622).

DeepSeek-V2-Lite: 64 routed experts, 6 a token, 26 MoE layers of three 2,048 x 1,408 matrices: one expert's
parameters over the layers 26 x 3 x 2,048 x 1,408 = 224,919,552.
"""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.ggml import AMD_TILES, NVIDIA_TILES, expected_tiles, padded_expert_flops, tile_width
from kvplan.speed.model import StepModel, coefficients, priced
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features

LITE, QWEN35 = find_in_catalog("deepseek-v2-lite"), find_in_catalog("qwen3.5-35b-a3b")
RTX3090, MI100 = find_gpu("rtx-3090"), find_gpu("mi100")
EXPERT = 224_919_552  # one DeepSeek-V2-Lite expert's parameters over its MoE layers (module docstring)


def test_the_tile_width_is_the_smallest_with_the_fewest_tiles():
    # 512 columns: 4 tiles at most width 128, and no narrower width gives 4; 200: 2 tiles from 100 up, the first
    # width on NVIDIA's list past 100 is 112 (after 48 the steps are 16: 64, 80, 96, 112); 16 fits one tile of 16
    assert tile_width(512, NVIDIA_TILES) == 128 and tile_width(200, NVIDIA_TILES) == 112
    assert tile_width(16, NVIDIA_TILES) == 16 and tile_width(9, NVIDIA_TILES) == 16
    # AMD's granularity 16: 9 columns take a 16-wide tile; 2048 on CDNA since #22051 (widths to 64): 64
    assert tile_width(9, AMD_TILES) == 16 and tile_width(2048, tuple(w for w in AMD_TILES if w <= 64)) == 64


def test_expected_tiles_is_the_binomial_expectation_of_the_ceiling():
    # T ~ Binomial(2, 1/2): P(0, 1, 2) = 1/4, 1/2, 1/4. E[ceil(T / 1)] = E[T] = 1; E[ceil(T / 2)] = P(T > 0) = 3/4
    assert expected_tiles(2, 0.5, 1) == pytest.approx(1.0)
    assert expected_tiles(2, 0.5, 2) == pytest.approx(0.75)
    # T ~ Binomial(3, 1/2), width 2: ceil(T / 2) = 0, 1, 1, 2 with P 1/8, 3/8, 3/8, 1/8: 3/8 + 3/8 + 2/8 = 1
    assert expected_tiles(3, 0.5, 2) == pytest.approx(1.0)
    assert expected_tiles(0, 0.5, 2) == 0.0 and expected_tiles(5, 1.0, 2) == 3.0


def test_a_16_token_micro_batch_of_deepseek_v2_lite_on_an_rtx_3090():
    # llama.cpp#15525's build: 16 columns -> mmq_x 16. An expert's tokens T ~ Binomial(16, 6/64); one tile wherever
    # T > 0: P = 1 - (58/64)^16 = 1 - e^(16 ln 0.90625) = 1 - e^-1.57504 = 0.79300. Columns 64 x 0.79300 x 16 =
    # 812.03 against the 16 x 6 = 96 the tokens need: 716.03 padded, x 2 x 224,919,552 = 3.221e11 FLOPs a step
    s = shape_for(LITE, RTX3090, weight_dtype="q4_0", engine="llama.cpp", date="2025-08-25")
    assert (s.num_experts, s.top_k, s.expert_params) == (64, 6, EXPERT)
    assert padded_expert_flops(s, 16) == pytest.approx(716.03 * 2 * EXPERT, rel=1e-4)
    # before #15525 the width was chosen for 16 x 6 = 96 rows: mmq_x 96, 64 x 0.79300 x 96 - 96 = 4,776.2 columns
    before = shape_for(LITE, RTX3090, weight_dtype="q4_0", engine="llama.cpp", date="2025-08-24")
    assert padded_expert_flops(before, 16) == pytest.approx(4776.2 * 2 * EXPERT, rel=1e-4)
    # before llama.cpp#13199 (2025-04-30) each expert ran its own GEMM: not priced; <= 8 tokens: the vector kernel
    assert padded_expert_flops(shape_for(LITE, RTX3090, weight_dtype="q4_0", engine="llama.cpp",
                                         date="2025-04-29"), 16) == 0.0
    assert padded_expert_flops(s, 8) == 0.0


def test_the_padding_is_in_the_gemm_term_at_the_paths_rate_and_the_step_model_agrees():
    s = shape_for(LITE, RTX3090, weight_dtype="q4_0", engine="llama.cpp", date="2025-08-25")
    plain = features(s, 16, 1, 0, 16 * 17 / 2)
    gemm = TERMS.index("gemm")
    # the int8 MMA path at 16 tokens: the RTX 3090 profile's int8 rate, 284 TOPS
    assert s.paths[1].rate == 284e12
    no_tiles = shape_for(LITE, RTX3090, weight_dtype="q4_0", engine="llama.cpp", date="2025-04-29")
    extra = plain[gemm] - features(no_tiles, 16, 1, 0, 16 * 17 / 2)[gemm]
    assert extra == pytest.approx(716.03 * 2 * EXPERT / 284e12, rel=1e-4)  # 1.134 ms a micro-batch at coefficient 1
    coef = coefficients("llama.cpp")
    sm = StepModel(s, coef)
    for tokens in (9, 16, 64, 512):
        want = priced(coef, features(s, tokens, 1, 0, tokens * (tokens + 1) / 2))
        assert sm.step(tokens, 1, 0, tokens * (tokens + 1) / 2) == pytest.approx(want, rel=1e-12)


def test_cdna_tiles_narrow_to_64_with_22051():
    # Qwen3.5-35B-A3B (256 experts, 8 a token; one expert 40 layers x 3 x 2,048 x 512 = 125,829,120 parameters) Q4_0 on
    # an MI100, 2,048 tokens: mmq_x 128 before 2026-04-19, 64 after. An expert's T ~ Binomial(2048, 1/32), mean 64:
    # P(T > 0) = 1 - (31/32)^2048 = 1 - 5e-29, P(T > 64) = 1 - sum over t <= 64 of C(2048, t) (1/32)^t
    # (31/32)^(2048 - t) = 0.46682 (summed with math.comb), P(T > 128) = 2e-13: 1.46682 tiles an expert,
    # 256 x 1.46682 x 64 = 24,032.3 columns against 2,048 x 8 = 16,384: 7,648.3 padded x 2 x 125,829,120 = 1.9248e12
    # FLOPs a micro-batch
    after = shape_for(QWEN35, MI100, weight_dtype="q4_0", engine="llama.cpp", date="2026-04-25")
    early = shape_for(QWEN35, MI100, weight_dtype="q4_0", engine="llama.cpp", date="2026-04-18")
    assert after.paths[1].tiles[0][-1] == 64 and early.paths[1].tiles[0][-1] == 128
    assert after.expert_params == 125_829_120
    assert expected_tiles(2048, 1 / 32, 64) == pytest.approx(1.46682, abs=1e-5)
    assert padded_expert_flops(after, 2048) == pytest.approx(1.9248e12, rel=1e-4)
    # at 128 columns the same tokens need one tile an expert: 256 x 128 - 16,384 = 16,384 padded columns
    assert padded_expert_flops(early, 2048) == pytest.approx(16_384 * 2 * 125_829_120, rel=1e-9)
