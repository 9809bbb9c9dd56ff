"""vLLM's Marlin MoE reads an expert's weights once per block of its rows (kvplan.speed.terms.reread_bytes, priced in
the `experts` term): fused_marlin_moe tiles each expert's rows in blocks of block_size_m, the first of 8, 16, 32, 48,
64 with M x top-k / E / block < 0.9 (vllm-project/vllm@129ab7c60cbb8eb11e875373e67f7e521b74aa30:
vllm/model_executor/layers/fused_moe/fused_marlin_moe.py), and each block's thread blocks stream that expert's weights.
Which GPUs and releases run Marlin is get_mxfp4_backend's (the vllm 0.10.2 / 0.11.0 wheels'
model_executor/layers/quantization/mxfp4.py, restated by kvplan/engines/vllm/mxfp4.py)."""

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import StepModel, priced
from kvplan.speed.mxfp4 import moe_block_m
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, Shape, experts_touched, features

H100, A100, B200 = find_gpu("h100-sxm"), find_gpu("a100-sxm-80"), find_gpu("b200")
EXPERTS = TERMS.index("experts")


def test_marlin_runs_where_get_mxfp4_backend_picks_it():
    # Hopper before 0.12.0: triton_kernels in neither the wheel nor the image, so Marlin; from 0.12.0 Triton (bundled);
    # Ampere always Marlin; compute capability 10.x FlashInfer; vLLM only, and only from gpt-oss's first release 0.10.1
    assert moe_block_m("vllm", H100, "0.11.0") == 64
    assert moe_block_m("vllm", H100, "0.12.0") == 0
    assert moe_block_m("vllm", H100, None) == 0  # a current release
    assert moe_block_m("vllm", A100, "0.11.0") == 64
    assert moe_block_m("vllm", A100, None) == 64
    assert moe_block_m("vllm", B200, "0.11.0") == 0
    assert moe_block_m("vllm", H100, "0.10.0") == 0
    assert moe_block_m("vllm-inprocess", H100, "0.10.2") == 64  # a harness's set reads its engine's rule
    assert moe_block_m("sglang", H100, "0.5.4") == 0


def test_an_expert_is_read_again_for_each_further_block_of_its_rows():
    # 32 experts of 1 MB each on the rank, top-4, blocks of 64 rows, 2 TB/s. A prefill step of 8,192 tokens makes
    # 32,768 rows, 512 blocks; every expert is touched (32 x (1 - (28/32)^8192) = 32.0), read once (32 MB) and then
    # 512 - 32 = 480 times more (480 MB): 512 MB / 2 TB/s = 0.256 ms; without the tiling kernel 32 MB, 0.016 ms
    plain = Shape(dense_bytes=0, expert_bytes=32_000_000, num_experts=32, top_k=4, expert_params=1e6,
                  bandwidth=2e12, gemm_rate=1e15, bf16_rate=1e15)
    tiled = Shape(**{**plain.__dict__, "moe_block_m": 64})
    assert experts_touched(32, 4, 8192) == pytest.approx(32.0)
    assert features(plain, 8192, 1, 0, 0)[EXPERTS] == pytest.approx(0.016e-3)
    assert features(tiled, 8192, 1, 0, 0)[EXPERTS] == pytest.approx(0.256e-3)
    # two such steps (16,384 tokens in steps of 8,192): twice
    assert features(tiled, 16384, 2, 0, 0, steps=2)[EXPERTS] == pytest.approx(0.512e-3)
    # a decode step of 8 sequences: 32 rows, fewer than one block an expert touched: no further read
    assert features(tiled, 8, 8, 0, 0)[EXPERTS] == features(plain, 8, 8, 0, 0)[EXPERTS]


def test_gpt_oss_on_hopper_under_vllm_011_tiles_its_experts():
    gpt_oss = find_in_catalog("gpt-oss-20b")
    assert shape_for(gpt_oss, H100, engine="vllm", version="0.11.0").moe_block_m == 64
    assert shape_for(gpt_oss, H100, engine="vllm", version="0.12.0").moe_block_m == 0
    assert shape_for(gpt_oss, H100, engine="sglang", version="0.5.4").moe_block_m == 0
    assert shape_for(find_in_catalog("qwen3-30b-a3b"), H100, engine="vllm", version="0.11.0").moe_block_m == 0  # bf16


def test_the_simulator_step_model_prices_the_reread_as_the_terms_do():
    s = shape_for(find_in_catalog("gpt-oss-20b"), H100, engine="vllm", version="0.11.0")
    coef = tuple(0.0 if t in ("pstep", "player", "pmoe") else 1.0 for t in TERMS)  # the step model adds those by itself
    sm = StepModel(s, coef)
    for tokens, seqs, ctx, pairs in ((8192, 20, 50_000, 1e7), (8, 8, 8_000, 8_008)):
        assert sm.step(tokens, seqs, ctx, pairs) == pytest.approx(priced(coef, features(s, tokens, seqs, ctx, pairs)),
                                                                  rel=1e-12)
