"""vLLM before 0.7.1 caches an MLA model's layers decompressed (kvplan.speed.mlaform.as_run,
kvplan.engines.vllm.pre_mla; issue 21).

Sources: vLLM's MLA came in 0.7.1 (vllm-project/vllm#12601). Neural Magic's blog "Enhancing DeepSeek Models with MLA
and FP8 Optimizations in vLLM" (2025-02-04, https://neuralmagic.com/blog/enhancing-deepseek-models-with-mla-and-fp8-
optimizations-in-vllm/), against v0.7.0 on 8 x H200: "token capacity expanded from 54,560 to 512,000". What 0.7.0 ran:
`DeepseekV2Attention`, `Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)` with V zero-padded to
qk_head_dim (read at vllm-project/vllm@002d6073aa034d4f5545d45021b0e56d1f3c3593:
vllm/model_executor/models/deepseek_v2.py, where it serves a config run without MLA). DeepSeek-R1's config.json: 61
layers, 128 heads, qk_nope 128, rope 64, v 128, kv_lora_rank 512.
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.vllm import pre_mla
from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import FullAttention, Kind, MLALatent, decompressed
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.mlaform import as_run, caches_latent
from kvplan.speed.shape import shape_for

BLOG_070_TOKENS = 54_560  # the blog's v0.7.0 token capacity on 8 x H200


def _plan(version: str):
    engine = resolve_engine("vllm", version=version)
    return engine.plan(find_in_catalog("deepseek-r1"), find_gpu("h200"), Deployment(8), Request(163_840))


def test_release_rule():
    # 0.7.0 and before: no MLA kernel; 0.7.1 on: the latent; other engines keep their own MLA rules
    assert not caches_latent("vllm", "0.7.0") and not caches_latent("vllm", "0.6.6.post1")
    assert caches_latent("vllm", "0.7.1") and caches_latent("vllm", None) and caches_latent("sglang", "0.4.0")


def test_layer_decompressed():
    # K = qk_nope 128 + rope 64 = 192 per head; V 128 padded to 192 (vLLM) or kept at 128 (pad_v False)
    mla = MLALatent(512, 64, qk_nope_head_dim=128, v_head_dim=128)
    assert decompressed(mla, 128, True) == FullAttention(128, 192, 192)
    assert decompressed(mla, 128, False) == FullAttention(128, 192, 128)
    with pytest.raises(KvplanError):  # the per-head widths not read: not sized
        decompressed(MLALatent(512, 64), 128, True)


def test_block_bytes_070_and_071():
    # 0.7.0, tp 8: 16 heads a rank x (192 + 192) x 2 B x 61 layers = 749,568 B a token; 16-token blocks 11,993,088 B
    # 0.7.1: the latent, 576 x 2 B x 61 = 70,272 B a token; 1,124,352 B a block (10.7 x less)
    old, new = _plan("0.7.0"), _plan("0.7.1")
    assert old.kv_bytes_per_token_per_gpu == 749_568 and new.kv_bytes_per_token_per_gpu == 70_272
    assert old.kv_bytes_per_token_per_gpu * 16 == 11_993_088


def test_070_pool_beside_the_blog():
    # The blog's 54,560 tokens are 3,410 blocks of 16, a budget of 3,410 x 11,993,088 = 40,896,430,080 B (38.09 GiB) a
    # GPU at the decompressed width; at the latent's 70,272 B a token the same budget would hold 581,973 tokens, so
    # only the decompressed form fits the figure. kvplan at `vllm serve`'s defaults (the blog's flags are not stated):
    # 46.08 GiB a GPU, 66,000 tokens, 21% over the blog's; the latent form planned 545,568 (10x over)
    tokens = _plan("0.7.0").kv_cache_tokens
    assert BLOG_070_TOKENS < tokens < 1.25 * BLOG_070_TOKENS


def test_step_shape_reads_the_expanded_cache():
    # the step-time model's KV bytes a token on a rank follow the release: 749,568 B at 0.7.0, 70,272 B at 0.7.1
    r1 = find_in_catalog("deepseek-r1")
    gpu = find_gpu("h200")
    old = shape_for(r1, gpu, tp=8, engine="vllm", version="0.7.0")
    new = shape_for(r1, gpu, tp=8, engine="vllm", version="0.7.1")
    assert old.kv_bytes_per_token == 749_568 and new.kv_bytes_per_token == 70_272


def test_note_and_untouched_models():
    r1 = find_in_catalog("deepseek-r1")
    note = pre_mla.note(r1, "0.7.0")
    assert "0.7.1" in note and "128 KV heads x 192" in note and pre_mla.note(r1, "0.7.1") == ""
    llama = find_in_catalog("llama-3.1-8b")
    assert as_run(llama, "vllm", "0.6.3") is llama  # no MLA layer: the model itself
    assert not any(layer.kind == Kind.MLA for layer in as_run(r1, "vllm", "0.7.0").layers)


def test_indexed_mla_refused_before_the_kernel():
    # DeepSeek-V3.2's layers hold an indexer cache beside the latent: no release without MLA ever ran them
    engine = resolve_engine("vllm", version="0.7.0")
    with pytest.raises(KvplanError, match="later release"):
        engine.plan(find_in_catalog("deepseek-v3.2"), find_gpu("h200"), Deployment(8), Request(32_768))
