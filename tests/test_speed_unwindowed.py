"""A corpus run whose engine applied none of the model's sliding windows (`sliding_window: none`): the model is priced
as that engine ran it, every local layer a full-attention one (kvplan.model.spec.ModelSpec.without_windows)."""

from pathlib import Path

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import FullAttention, SlidingWindow
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of
from kvplan.speed.fit import OVERHEAD_BYTES, Built
from kvplan.speed.shape import shape_for
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"

# mistralai/Mistral-7B-v0.1's config.json: num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 over
# num_attention_heads 32 = head dim 128, sliding_window 4096. One token's K and V at one byte (an FP8 cache):
# 32 x 8 x 128 x 2 x 1 = 65,536 B.
FP8_TOKEN = 32 * 8 * 128 * 2


def test_without_windows_holds_the_whole_sequence():
    spec = find_in_catalog("mistral-7b-v0.1")
    assert {type(l) for l in spec.layers} == {SlidingWindow}
    full = spec.without_windows()
    assert {type(l) for l in full.layers} == {FullAttention} and len(full.layers) == 32
    # at 20,000 + 2,000 tokens a layer holds all 22,000, not the window's 4,096
    assert spec.layers[0].tokens_held(22_000) == 4_096 and full.layers[0].tokens_held(22_000) == 22_000
    assert full.params == spec.params  # the same weights
    gpu = find_gpu("h100-sxm")
    windowed = shape_for(spec, gpu, weight_dtype="fp8", kv_dtype="fp8")
    unwindowed = shape_for(full, gpu, weight_dtype="fp8", kv_dtype="fp8")
    assert windowed.kv_bytes_per_token == 0 and windowed.kv_windows == ((FP8_TOKEN, 4_096),)
    assert unwindowed.kv_bytes_per_token == FP8_TOKEN and unwindowed.kv_windows == ()


def _point(**kw):
    # trtllm-perf-overview-v0.17, Mistral 7B on one H100 at 20000/2000, FP8 (TensorRT-LLM 0.17's engine flow)
    p = {"engine": "trtllm", "version": "0.17", "harness": "trtllm-bench", "gpu": "h100-sxm",
         "kvplan_model": "mistral-7b-v0.1", "weight_dtype": "fp8", "kv_dtype": "fp8", "gpus": 1, "tp": 1,
         "isl": 20000, "osl": 2000, "request_rate": "inf", "num_prompts": 1000,
         "metrics": {"output_throughput": 1373.24}}
    p.update(kw)
    return p


def test_sliding_window_none_prices_the_whole_sequence():
    c, why = case_of(_point(sliding_window="none"), "t", "")
    assert c is not None, why
    assert not c.windowed and case_of(_point(), "t", "")[0].windowed
    b = Built(c)
    assert b.shape.kv_windows == () and b.shape.kv_bytes_per_token == FP8_TOKEN
    # TensorRT-LLM 0.17 is outside kvplan's TensorRT-LLM memory rules, so the plain estimate sizes the batch: 0.9 of
    # the GPU less the weights and 2 GiB, over 22,000 tokens x 65,536 B = 1,441,792,000 B a request (GUARANTEED_NO_EVICT
    # reserves ISL + OSL): about 47 requests on an H100 (85.0 GB usable), where the 4,096-token window left the
    # engine's default limit, 2,048, binding
    room = find_gpu("h100-sxm").memory_usable_bytes * 0.9 - b.shape.dense_bytes - OVERHEAD_BYTES
    assert b.load.cap == pytest.approx(room / 1_441_792_000)
    assert 45 < b.load.cap < 48
    assert Built(case_of(_point(), "t", "")[0]).load.cap == 2048


def test_sliding_window_takes_only_none():
    with pytest.raises(ValueError, match="sliding_window"):
        case_of(_point(sliding_window="4096"), "t", "")


def test_trtllm_engine_flow_mistral_points_run_without_the_window():
    # every Mistral 7B point of the TensorRT engine flow's perf overviews states it, 9 lengths a GPU column: v0.17's
    # 5 columns (45), v0.15's 6 (H100 FP8 and Mixed, A100-SXM4, A100-PCIE, L40S, GH200: 54) and v0.14's 6 (H200,
    # H100 FP8 and FP16, A100-SXM4, A100-PCIE, L40S: 54); no other point does
    cases, _ = speed_cases()
    off = [c for c in cases if not c.windowed]
    assert {(c.source, c.model) for c in off} == {(f"trtllm-perf-overview-v{v}", "mistral-7b-v0.1")
                                                 for v in ("0.17", "0.15", "0.14")}
    count = {v: sum(c.source == f"trtllm-perf-overview-v{v}" for c in off) for v in ("0.17", "0.15", "0.14")}
    assert count == {"0.17": 45, "0.15": 54, "0.14": 54}
