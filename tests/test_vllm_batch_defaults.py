"""vLLM's `vllm serve` defaults for max_num_batched_tokens / max_num_seqs, release by release.

Every expectation is read from `vllm/engine/arg_utils.py` `EngineArgs._set_default_args_v1` in the released
wheels (OPENAI_API_SERVER entries; lines in docs/engines.md section 1), not from kvplan's output:
  0.8.0-0.8.3  "h100"/"h200" in the device name -> 8192, else 2048; max_num_seqs 1024 on every GPU
  0.8.4        same name test; 8192/1024, else 2048/256
  0.8.5        device total >= 70 GiB -> 8192/1024, else 2048/256 (no A100 exception yet)
  0.9.0-0.10.x >= 70 GiB and "a100" not in the name -> 8192/1024, else 2048/256
  0.10.1+      the default max_num_seqs is min(default, max_num_batched_tokens)
"""

from __future__ import annotations

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.planning.deploy import Deployment
from kvplan.engines.vllm import engine as vllm
from kvplan.hardware.gpus import GPU, find_gpu
from kvplan.planning.plan import Request

GIB = 2**30
LLAMA = find_in_catalog("llama-3.1-8b-instruct")


def batch(version: str, gpu, opts=None, context: int = 8192) -> tuple[int, int]:
    gpu = find_gpu(gpu) if isinstance(gpu, str) else gpu
    st = vllm.settings(LLAMA, gpu, Deployment(), Request(context=context), version, opts or {}, {})
    return st.max_num_batched_tokens, st.max_num_seqs


def test_v0_profiles_a_max_model_len_batch():
    # v0.6.6 (V0, no chunked prefill by default): max(max_model_len, 2048), 256 sequences.
    assert batch("0.6.6", "h100", context=32768) == (32768, 256)
    assert batch("0.6.6", "h100", context=1024) == (2048, 256)


@pytest.mark.parametrize("version", ["0.8.0", "0.8.3"])
def test_v080_tier_is_the_device_name_and_seqs_are_1024_everywhere(version):
    # v0.8.0 L1693: "h100" in name or "h200" in name -> 8192; L1715: default_max_num_seqs = 1024 for all.
    assert batch(version, "h100") == (8192, 1024)
    assert batch(version, "h200") == (8192, 1024)
    assert batch(version, "gh200") == (8192, 1024)  # "NVIDIA GH200 480GB" contains "h200"
    assert batch(version, "h20") == (2048, 1024)  # 95 GiB, but "NVIDIA H20" names neither
    # ROCm runs V1 only with VLLM_USE_V1=1 before 0.9.2 (arg_utils v0.8.0 L1598: non-CUDA falls back to V0, whose
    # _set_default_args_v0 leaves max(max_model_len, 2048) and 256 sequences: kvplan.engines.vllm.v0_fallback)
    assert batch(version, "mi300x", {"use_v1": True}) == (2048, 1024)
    assert batch(version, "mi300x") == (8192, 256)
    assert batch(version, "l40s") == (2048, 1024)


def test_v084_tiers_both_by_name():
    # v0.8.4 L1669-1682: the same name test, and max_num_seqs 1024 / 256 with it.
    assert batch("0.8.4", "h100") == (8192, 1024)
    assert batch("0.8.4", "h20") == (2048, 256)
    assert batch("0.8.4", "a100-80") == (2048, 256)


def test_v085_tiers_by_memory_alone():
    # v0.8.5 L1596: device_memory >= 70 * GiB_bytes, no name test: an A100 80GB (79.25 GiB) is large.
    assert batch("0.8.5", "a100-80") == (8192, 1024)
    assert batch("0.8.5", "h20") == (8192, 1024)
    assert batch("0.8.5", "mi300x", {"use_v1": True}) == (8192, 1024)  # V0 without VLLM_USE_V1=1 (L1493)
    assert batch("0.8.5", "l40s") == (2048, 256)
    at, under = GPU.of_memory("x", "X", 70 * GIB, "test"), GPU.of_memory("y", "Y", 70 * GIB - 1, "test")
    assert batch("0.8.5", at) == (8192, 1024) and batch("0.8.5", under) == (2048, 256)


@pytest.mark.parametrize("version", ["0.9.0", "0.10.0", "0.10.2"])
def test_v090_excludes_a100(version):
    # v0.9.0 L1495 (to v0.10.2 L1669): >= 70 GiB and "a100" not in the device name (vLLM PR #17885).
    assert batch(version, "a100-80") == (2048, 256)
    assert batch(version, "h100") == (8192, 1024)
    assert batch(version, "h20") == (8192, 1024)
    assert batch(version, "l40s") == (2048, 256)


def test_v0101_caps_max_num_seqs_by_max_num_batched_tokens():
    # v0.10.1 L1711: max_num_seqs = min(default, max_num_batched_tokens); v0.10.0 L1602 has no cap.
    small = {"max_num_batched_tokens": "128"}
    assert batch("0.10.0", "h100", small) == (128, 1024)
    assert batch("0.10.1", "h100", small) == (128, 128)
    assert batch("0.10.1", "l40s", small) == (128, 128)
