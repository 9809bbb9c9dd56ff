"""The cost per MoE layer of a prefill step (`pmoe`, issue 21): which steps carry it and how many layers they count.

Why a term of its own: a prefill step runs without a CUDA graph in SGLang and TensorRT-LLM's PyTorch backend, and an
MoE block launches many more kernels than a dense MLP, so DeepSeek's 58 MoE layers pay a host cost a dense model of
as many layers does not (kvplan.speed.eras, ENGINE_TERMS).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.eras import unused_terms
from kvplan.speed.shape import model_terms
from kvplan.speed.terms import TERMS, Shape

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "configs"


def test_deepseek_v3s_moe_layers_per_prefill_step():
    # DeepSeek-V3's config.json (deepseek-ai/DeepSeek-V3, ../shared/configs): num_hidden_layers 61,
    # first_k_dense_replace 3, moe_layer_freq 1, so layers 3..60 are MoE: 61 - 3 = 58 MoE layers on every rank
    # (tensor parallelism splits a layer, not the stack).
    spec = find_in_catalog("deepseek-v3")
    terms = model_terms(spec, tp=8)
    assert (terms["layers"], terms["moe_layers"]) == (61, 58)
    s = Shape(**terms, bandwidth=4.8e12, gemm_rate=1e15, bf16_rate=1e15, link_bandwidth=4.5e11)
    # one prompt of 20,000 tokens in chunks of 8,192: ceil(20,000 / 8,192) = 3 prefill steps x 58 = 174
    f = dict(zip(TERMS, speed.prefill_features(s, 20_000)))
    assert (f["pstep"], f["player"], f["pmoe"]) == (3, 3 * 61, 174)
    # a decode step is no prefill batch: none
    assert dict(zip(TERMS, speed.decode_features(s, 64, 2_000)))["pmoe"] == 0


def test_the_config_the_test_reads_says_58():
    # the catalog's DeepSeek-V3 against the config.json it restates, where the shared folder is present
    path = SHARED / "deepseek-ai__DeepSeek-V3.json"
    if not path.is_file():
        pytest.skip("../shared/configs is not present in this checkout")
    c = json.loads(path.read_text())
    moe = sum(1 for i in range(c["num_hidden_layers"])
              if i >= c["first_k_dense_replace"] and i % c["moe_layer_freq"] == 0)
    assert moe == 58 == find_in_catalog("deepseek-v3").params.num_moe_layers


def test_a_dense_model_pays_none_and_the_step_model_agrees():
    # Qwen3-8B has no MoE layer: its prefill steps carry no pmoe; an MoE Shape's simulator step adds
    # pmoe x moe_layers to a step with prompt tokens only (1 ms x 58 = 58 ms), as features x coefficients does
    dense = Shape(dense_bytes=0, layers=36, bandwidth=1e12)
    assert dict(zip(TERMS, speed.prefill_features(dense, 1_000)))["pmoe"] == 0
    moe = Shape(dense_bytes=0, layers=61, moe_layers=58, bandwidth=1e12)
    coef = [0.0] * len(TERMS)
    coef[TERMS.index("pmoe")] = 0.001
    sm = speed.StepModel(moe, tuple(coef))
    assert sm.step(1_008, 9, 8_000, 8_008, 1) == pytest.approx(0.058)
    assert sm.step(8, 8, 8_000, 8_008) == 0.0
    assert speed.priced(coef, speed.prefill_features(moe, 1_000)) == pytest.approx(0.058)


def test_only_sglang_and_trtllm_pytorch_fit_it():
    # the engines whose prefill steps run without a CUDA graph (kvplan.speed.eras.ENGINE_TERMS)
    for key in ("sglang", "sglang<0.5.14", "trtllm"):
        assert "pmoe" not in unused_terms(key), key
    for key in ("vllm", "vllm-inprocess", "trtllm-engine", "trtllm<1.0", "llama.cpp"):
        assert "pmoe" in unused_terms(key), key
