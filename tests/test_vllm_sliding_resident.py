"""vLLM V1's sliding-window groups as a running request holds them (kvplan.engines.vllm.pool.resident_blocks):
the window's blocks, not the chunk-wide worst case vLLM prints its concurrency from; what kvplan.bench.running's cap
divides the pool by."""

from __future__ import annotations

import pytest

from conftest import read_point
from kvplan.bench.running import running
from kvplan.engines import configure
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.request import read_request
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.shape import weight_dtype_of

GPT_OSS = find_in_catalog("gpt-oss-120b")
H100 = find_gpu("h100-sxm")


def capacity(version: str, context: int, opts=None, model=GPT_OSS):
    engine, _ = configure("vllm", version, dict(opts or {}), None)
    dep = engine.deployment(Deployment(tp=1, pp=1, dp=1, ep=1))
    req = read_request(model, context=context, kv_dtype="auto", weight_dtype=weight_dtype_of(None))
    return engine.result(model, H100, dep, req).capacity


def test_a_decoding_request_holds_its_window_in_a_sliding_group():
    # gpt-oss-120b: 36 layers alternating sliding window 128 and full attention, so vLLM 0.10.2's hybrid manager
    # makes one full and one sliding group of 18 layers, 16-token blocks (the plan's "2 x 18").
    # Printed (SlidingWindowSpec.max_memory_usage_bytes, 0.10.2 wheel v1/kv_cache_interface.py L170-188): a
    # 1,000-token request takes cdiv(1000, 16) = 63 full blocks and cdiv(min(128 - 1 + 8192, 1000), 16) + 1 = 64
    # sliding ones: 127. Decoding at 1,000 computed tokens (v1/core/single_type_kv_cache_manager.py L375-391,
    # called first in allocate_slots, v1/core/kv_cache_manager.py L252-253): last_useful_token = 1000 - 128 + 1
    # = 873, so blocks 0 .. 873 // 16 - 1 = 53 are freed (54 of them) and the next token's slots need
    # cdiv(1001, 16) = 63: 63 - 54 = 9 sliding blocks held, 63 + 9 = 72 a request.
    cap = capacity("0.10.2", 1000, {"max_num_batched_tokens": 8192})
    assert cap.max_concurrency == pytest.approx(cap.blocks / 127)
    assert cap.resident == pytest.approx(cap.blocks / 72)
    # under the window nothing is freed: 100 tokens hold cdiv(101, 16) = 7 sliding blocks beside cdiv(100, 16) = 7
    # full ones (vLLM prints cdiv(100, 16) + 1 = 8 + 7 = 15)
    short = capacity("0.10.2", 100, {"max_num_batched_tokens": 8192})
    assert short.resident == pytest.approx(short.blocks / 14)
    assert short.max_concurrency == pytest.approx(short.blocks / 15)


def test_a_model_without_sliding_layers_holds_what_vllm_prints():
    llama = find_in_catalog("llama-3.1-8b-instruct")
    cap = capacity("0.19.0", 8192, model=llama)
    assert cap.resident == pytest.approx(cap.max_concurrency)


def test_the_running_cap_divides_the_pool_by_the_resident_blocks():
    # GPUStack's gpt-oss-120b page's one-H100 vLLM 0.10.2 run at --max-model-len 32768 (tests/fixtures/speed/
    # gpustack-perflab-gpt-oss-120b-h100.yaml), at fixed lengths 215 + 326: each running request holds
    # 215 + 326 / 2 = 378 tokens, cdiv(378, 16) = 24 full blocks and 9 sliding ones (the window, as above): the
    # pool runs blocks / 33 requests, where the printed concurrency's 24 + cdiv(378, 16) + 1 = 49 ran 49 / 33 fewer
    point = {"engine": "vllm", "gpu": "h100-sxm", "version": "0.10.2", "isl": 215, "osl": 326,
             "request_rate": "inf", "num_prompts": 1000, "kvplan_model": "gpt-oss-120b", "gpus": 1, "tp": 1,
             "flags": {"max-model-len": "32768"}, "metrics": {"tpot_ms": 47}}
    c = read_point(point)
    blocks = capacity("0.10.2", 378, {"max_num_batched_tokens": 8192}).blocks
    assert running(c, GPT_OSS, H100).cap == pytest.approx(blocks / 33)
