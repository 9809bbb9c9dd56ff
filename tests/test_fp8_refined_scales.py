"""vLLM 0.29.0+ refines a block-FP8 MoE checkpoint's expert scales to a finer square block where each rank's expert
shard is not whole 128-blocks (kvplan.engines.fp8_blocks.refined_scale_bytes): the scale parameters are allocated on
the finer grid (0.33.0 wheel `quantization/fp8.py` Fp8MoEMethod.create_weights L554-564 and L619-632,
`fused_moe/oracle/fp8.py` refine_fp8_moe_block_shape L292-320), so a rank holds more scale bytes than its 1/tp share
of the checkpoint's, booked as weights as loaded and said as an assumption.

Qwen3-235B-A22B-FP8 (94 MoE layers, 128 experts of 1536, hidden 4096) at tp 8: shard 192, block gcd(128, 192, 4096)
= 64. Per layer and rank, refined: 128 experts x (w13 2 x cdiv(192, 64) x cdiv(4096, 64) + w2 64 x 3) = 128 x 576
scales x 4 B = 294,912 B; the 1/8 share of the checkpoint's: 128 x (2 x 12 x 32 + 32 x 12) x 4 B / 8 = 589,824 / 8 =
73,728 B; +221,184 B a layer, x 94 = 20,791,296 B (19.83 MiB) a rank."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.engines import fp8_blocks, resolve_engine
from kvplan.engines.vllm.engine import _overhead_terms
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H200 = find_gpu("h200-sxm")
BASE = find_in_catalog("qwen3-235b-a22b")
FP8 = dataclasses.replace(BASE, name="qwen3-235b-a22b-fp8", quantization=Quantization("fp8", 128, quant_method="fp8"))


@pytest.mark.parametrize("dep, version, expected", [
    (Deployment(8), (0, 29, 0), 20_791_296),
    (Deployment(8), (0, 33, 0), 20_791_296),
    (Deployment(8, pp=2), (0, 33, 0), 10_395_648),  # 47 layers a stage: 221,184 x 47
    (Deployment(4), (0, 33, 0), 0),  # shard 384 = 3 x 128: the checkpoint's blocks
    (Deployment(8, ep=8), (0, 33, 0), 0),  # whole experts under expert parallelism
])
def test_refined_scale_bytes_by_hand(dep, version, expected):
    assert fp8_blocks.refined_scale_bytes(FP8, dep, version) == expected


def test_unrefined_models_add_nothing():
    assert fp8_blocks.refined_scale_bytes(BASE, Deployment(8), (0, 33, 0)) == 0  # bf16: no block scales


def test_the_plan_books_them_as_weights_and_says_so(monkeypatch):
    engine = resolve_engine("vllm", "0.33.0", [])
    res = engine.result(FP8, H200, Deployment(8), Request(context=8192))
    said = [w for w in res.plan.warnings if "refines the experts' FP8 block scales to 64 x 64" in str(w)]
    assert len(said) == 1
    monkeypatch.setattr(fp8_blocks, "refined_scale_bytes", lambda model, dep, version: 0)
    _overhead_terms.cache_clear()  # the terms are worked out once per plan
    without = engine.result(FP8, H200, Deployment(8), Request(context=8192))
    _overhead_terms.cache_clear()  # nothing computed without the term outlives this test
    assert res.plan.weight_bytes_per_gpu - without.plan.weight_bytes_per_gpu == 20_791_296


def test_pipeline_stages_count_their_own_moe_layers():
    """DeepSeek-V3 block FP8 (../shared/configs/deepseek-ai__DeepSeek-V3.json: 61 layers, the first 3 dense, 58 MoE;
    256 experts of 2,048; hidden 7,168) over tp 8 x dp 4 = 32 ranks: shard 64, block gcd(128, 64, 7,168) = 64. A MoE
    layer on a rank, refined: 256 x (2 x 1 x 112 + 112 x 1) x 4 B = 344,064 B; the 1/32 share of the checkpoint's
    256 x (2 x 16 x 56 + 56 x 16) x 4 B = 2,752,512 B is 86,016: +258,048 B a MoE layer. pp 2 cuts 31 + 30 layers,
    3 dense + 28 MoE and 30 MoE: 30 layers' worth, not min(31, 58) = 31."""
    dsv3 = find_in_catalog("deepseek-v3")
    fp8 = dataclasses.replace(dsv3, quantization=Quantization("fp8", 128, quant_method="fp8"))
    assert fp8_blocks.refined_scale_bytes(fp8, Deployment(8, pp=2, dp=4), (0, 33, 0)) == 30 * 258_048
    assert fp8_blocks.refined_scale_bytes(fp8, Deployment(8, dp=4), (0, 33, 0)) == 58 * 258_048
