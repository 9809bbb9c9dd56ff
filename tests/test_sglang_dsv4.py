"""SGLang's DeepSeek-V4 rules (kvplan.engines.sglang.dsv4): its running limit and chunk per DP worker.

Expected figures are hand arithmetic from the published DeepSeek-V4-Flash config (tests/fixtures/families/
deepseek-v4-flash.json: 43 layers, 21 of ratio 4 and 20 of ratio 128, head_dim 512 with qk_rope_head_dim 64,
sliding_window 128, index_head_dim 128) and the sglang 0.5.15 wheel (sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64):
arg_groups/deepseek_v4_hook.py L49-50 (max_running_requests 256),
model_executor/model_runner_kv_cache_mixin.py L1232-1235 (// dp_size per worker), server_args.py L4899-4902 (the
chunk // dp_size under DP attention).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.scheduler import model_limits
from kvplan.engines.sglang import dsv4
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import find_in_catalog

FIX = Path(__file__).parent / "fixtures" / "families" / "deepseek-v4-flash.json"


def flash():
    spec, _ = spec_from_config(json.loads(FIX.read_text()), "deepseek-v4-flash")
    return spec


def test_running_limit_by_release_dp_and_flag():
    layers = flash().layers
    assert dsv4.running_limit("0.5.15", layers, 1, None) == 256  # the hook's default, one worker
    assert dsv4.running_limit("0.5.15.post1", layers, 4, None) == 64  # 256 // dp 4 per DP-attention worker
    assert dsv4.running_limit("0.5.15", layers, 4, 64) == 64  # --max-running-requests 256 stated, // 4
    assert dsv4.running_limit("0.5.14", layers, 1, None) is None  # a release not read
    assert dsv4.running_limit("0.5.15", find_in_catalog("llama-3.1-8b").layers, 1, None) is None


def test_model_limits_engine_and_chunk():
    layers = flash().layers
    # B200 (chunked_prefill_size 16384 by memory) at dp 4: 16384 // 4 = 4096 tokens a worker's step
    assert model_limits("sglang", "0.5.15", layers, 4, None, {"chunked_prefill_size": 16384}) == (64, 4096)
    assert model_limits("sglang", "0.5.15", layers, 1, None, {"chunked_prefill_size": 8192}) == (256, 8192)
    assert model_limits("vllm", "0.22.0", layers, 1, None, {"max_num_batched_tokens": 8192}) is None


def test_the_speed_fit_prices_a_cookbook_cell_at_sglangs_limit():
    # The cookbook's B200 cell (tests/fixtures/speed/sglang-docs-deepseek-v4-benchmarks.yaml, b200-fp4-ht-c1024):
    # --tp 4 --dp 4 --enable-dp-attention, no --max-running-requests, SGLang 0.5.15: each of the 4 DP workers runs
    # 256 // 4 = 64 requests, and takes SGLang's B200 chunk (16,384 by memory) // 4 = 4,096 tokens a step.
    # Its H200 tp-4 cell (no DP attention) runs the whole 256 at 8,192 tokens a step (141 GiB < 160 GiB).
    from kvplan.bench.running import running
    from kvplan.hardware.gpus import find_gpu
    from kvplan.speed.corpus import case_of

    v4 = find_in_catalog("deepseek-v4-flash")
    base = {"engine": "sglang", "version": "0.5.15", "isl": 8192, "osl": 1024, "concurrency": 1024,
            "kvplan_model": "deepseek-v4-flash", "kv_dtype": "fp8", "weight_dtype": "mxfp4", "metrics": {"tpot_ms": 70}}
    b200, _ = case_of({**base, "gpu": "b200", "gpus": 4, "tp": 4, "dp": 4, "ep": 4,
                       "flags": {"tp": 4, "dp": 4, "enable_dp_attention": True}}, "test", "")
    r = running(b200, v4, find_gpu("b200"))
    assert (r.cap, r.chunk) == (64, 4096)
    h200, _ = case_of({**base, "gpu": "h200-sxm", "gpus": 4, "tp": 4, "flags": {"tp": 4}}, "test", "")
    r = running(h200, v4, find_gpu("h200-sxm"))
    assert (r.cap, r.chunk) == (256, 8192)
    old, _ = case_of({**base, "version": "0.5.14", "gpu": "h200-sxm", "gpus": 4, "tp": 4, "flags": {"tp": 4}}, "test",
                     "")
    r = running(old, v4, find_gpu("h200-sxm"))  # a release not read: the plain estimate stays (no cap, no chunk),
    assert (r.cap, r.chunk) == (None, None) and r.joins_late  # with SGLang's scheduler rule (kvplan.engines.joining)
