"""The plan's arithmetic: budgets, pages, tensor/pipeline parallelism, max context, roofline.

Expected numbers are worked by hand in the comments from the inputs each test sets up (an exact
KV budget via kv_cache_memory_bytes, a GPU profile written in the test), not read back from kvplan.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16, FP8
from kvplan.core.errors import KvplanError
from kvplan.planning.deploy import Deployment, candidate_deployments, split_layers
from kvplan.engines import resolve_engine
from kvplan.planning.plan import Request, expected_experts_touched

plan = resolve_engine().plan

from conftest import shared_config


class FakeGPU:
    key = "test-gpu"
    name = "Test GPU"
    memory_usable_bytes = 80 * 2**30
    bandwidth_bytes_per_s = 2 * 10**12


def llama70b():
    return spec_from_config(shared_config("meta-llama__Meta-Llama-3.1-70B"), "llama-70b")[0]


def test_exact_budget_gives_exact_concurrency_and_tokens():
    # vLLM log (shared/engine_logs.yaml): Mistral-Small-24B, block 128, 1,444 blocks = 184,832 tokens.
    # 163,840 B/token x 128 tokens = 20,971,520 B per block; budget = 1,444 blocks exactly.
    cfg = {"model_type": "mistral", "hidden_size": 5120, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "num_hidden_layers": 40, "vocab_size": 131072, "intermediate_size": 32768,
           "max_position_embeddings": 131072}
    spec = spec_from_config(cfg, "ms24")[0]
    req = Request(context=16000, kv_dtype=BF16, block_size=128, kv_cache_memory_bytes=1444 * 20_971_520)
    p = plan(spec, FakeGPU(), Deployment(), req)
    assert p.kv_cache_tokens == 184_832
    # vLLM logs "Maximum concurrency for 16000 tokens: 11.55x" = 1444 / cdiv(16000, 128) = 1444 / 125
    assert p.max_concurrency == 1444 // 125 == 11


def test_tensor_parallel_splits_heads_and_replicates_when_short():
    spec = llama70b()
    req = Request(context=4096, kv_dtype=BF16, kv_cache_memory_bytes=2**36)
    # 8 KV heads over tp=4: 2 heads per rank -> 80 x 2 x 2 x 128 x 2 B = 81,920 B/token per GPU
    assert plan(spec, FakeGPU(), Deployment(4), req).kv_bytes_per_token_per_gpu == 81_920
    # tp=16 > 8 KV heads: each rank keeps one head (replicated) -> 40,960 per GPU, 16 x that in all
    p = plan(spec, FakeGPU(), Deployment(16), req)
    assert p.kv_bytes_per_token_per_gpu == 40_960 and p.kv_bytes_per_token == 16 * 40_960


def test_mla_latent_is_replicated_on_every_rank():
    spec = spec_from_config(shared_config("deepseek-ai__DeepSeek-V3"), "dsv3")[0]
    p = plan(spec, FakeGPU(), Deployment(8), Request(context=4096, kv_dtype=BF16, kv_cache_memory_bytes=2**34))
    assert p.kv_bytes_per_token_per_gpu == 61 * 576 * 2  # tp does not divide the latent
    assert p.kv_bytes_per_token == 8 * 61 * 576 * 2


def test_pipeline_parallel_splits_layers():
    spec = llama70b()
    assert split_layers(80, 3) == [(0, 27), (27, 54), (54, 80)]
    p = plan(spec, FakeGPU(), Deployment(1, 2), Request(context=4096, kv_dtype=BF16, kv_cache_memory_bytes=2**34))
    assert p.kv_bytes_per_token_per_gpu == 40 * 2 * 8 * 128 * 2  # half the layers per stage


def test_pages_round_up_each_sequence():
    spec = llama70b()
    req = Request(context=17, kv_dtype=BF16, block_size=16, kv_cache_memory_bytes=2**34)
    # 17 tokens take two 16-token pages: 32 x 327,680 B
    assert plan(spec, FakeGPU(), Deployment(), req).kv_bytes_per_sequence == 32 * 327_680


class BigGPU(FakeGPU):
    memory_usable_bytes = 192 * 2**30  # room for the 70B's 131 GiB of bf16 weights beside a 10 GiB cache


def test_max_context_is_the_longest_that_fits():
    spec = llama70b()
    budget = 10 * 2**30
    p = plan(spec, BigGPU(), Deployment(), Request(context=4096, batch=2, kv_dtype=BF16, kv_cache_memory_bytes=budget))
    # 2 sequences x ceil16(S) x 327,680 B <= 10 GiB -> ceil16(S) <= 16,384 -> S = 16,384
    assert p.max_context == 16_384 and p.max_context_limited_by == "memory"
    # fp8 halves the cache: 32,768
    p8 = plan(spec, BigGPU(), Deployment(), Request(context=4096, batch=2, kv_dtype=FP8, kv_cache_memory_bytes=budget))
    assert p8.max_context == 32_768
    # On 80 GiB the weights and that budget cannot start: no context at all (issue 25 item 7), not 16,384
    small = plan(spec, FakeGPU(), Deployment(),
                 Request(context=4096, batch=2, kv_dtype=BF16, kv_cache_memory_bytes=budget))
    assert (small.fits, small.max_concurrency, small.max_context) == (False, 0, 0)


def test_budget_line_by_line():
    spec = replace(llama70b(), checkpoint_bytes=None)
    req = Request(context=4096, kv_dtype=BF16, gpu_memory_utilization=0.9, overhead_bytes=2**30)
    p = plan(spec, FakeGPU(), Deployment(4), req)
    # weights 70,553,706,496 params x 2 B = 141,107,412,992 B; per rank: embedding and head split by 4, the
    # norms (replicated) are 161 x 8192 params x 2 B = 2,637,824 B on every rank.
    assert p.weight_bytes == 141_107_412_992
    replicated = 161 * 8192 * 2
    assert p.weight_bytes_per_gpu == (141_107_412_992 - replicated) // 4 + replicated
    assert p.kv_memory_bytes_per_gpu == int(80 * 2**30 * 0.9) - p.weight_bytes_per_gpu - 2**30


def test_decode_roofline_reads_weights_and_cache():
    spec = replace(llama70b(), checkpoint_bytes=None)
    req = Request(context=4096, batch=4, kv_dtype=BF16, kv_cache_memory_bytes=2**36)
    p = plan(spec, FakeGPU(), Deployment(), req)
    # one GPU: all weights except the input embedding table (a lookup reads one row) + 4 x 4096 x 327,680 B
    embedding = 128_256 * 8192 * 2
    step = (141_107_412_992 - embedding + 4 * 4096 * 327_680) / 2e12
    assert p.decode_step_seconds == pytest.approx(step, rel=1e-9)
    assert p.decode_tokens_per_second == pytest.approx(4 / step)


def test_moe_decode_reads_only_touched_experts():
    assert expected_experts_touched(8, 2, 1) == pytest.approx(2)  # one token touches its top-k
    assert expected_experts_touched(256, 8, 1000) == pytest.approx(256, rel=1e-6)  # a big batch touches all


def test_deployment_validation():
    spec = llama70b()
    with pytest.raises(KvplanError, match="does not divide"):
        plan(spec, FakeGPU(), Deployment(3), Request(context=10))
    deps = candidate_deployments(spec)
    assert deps[0] == Deployment(1, 1) and Deployment(8, 2) in deps
