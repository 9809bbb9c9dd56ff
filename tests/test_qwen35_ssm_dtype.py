"""Qwen3.5's Gated DeltaNet recurrent state in the config's mamba_ssm_dtype (float32), as vLLM 0.17+ keeps it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError
from kvplan.model.layers import Kind
from kvplan.model.recurrent import state_bytes

ROOT = Path(__file__).resolve().parents[1]
QWEN35_27B = ROOT / "scripts" / "catalog_extra" / "Qwen__Qwen3.5-27B.json"
QWEN3_NEXT = ROOT.parent / "shared" / "configs" / "Qwen__Qwen3-Next-80B-A3B-Thinking.json"


def _state_per_sequence(config: dict, tp: int = 1) -> int:
    from kvplan.core.dtypes import canonical_kv_dtype

    spec, _ = spec_from_config(config, "test")
    bf16 = canonical_kv_dtype("auto", spec.dtype)
    return sum(state_bytes(la, tp, bf16) for la in spec.layers if la.kind == Kind.STATE)


def test_qwen35_recurrent_state_is_float32_conv_state_bf16():
    # Qwen3.5-27B text_config: 48 Gated DeltaNet layers, 16 key heads and 48 value heads of 128, kernel 4,
    # mamba_ssm_dtype float32. vLLM: Qwen3_5ForConditionalGenerationConfig copies it into
    # mamba_ssm_cache_dtype; gated_delta_net_state_dtype gives (conv: model dtype, temporal: float32).
    # conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 values x 2 B = 61,440; ssm 48 x 128 x 128 = 786,432 x 4 B
    # = 3,145,728: 3,207,168 B per layer, 48 x = 153,944,064 B per sequence (78,446,592 all in bf16).
    config = json.loads(QWEN35_27B.read_text())
    assert config["text_config"]["mamba_ssm_dtype"] == "float32"
    assert _state_per_sequence(config) == 48 * (3 * 10240 * 2 + 48 * 128 * 128 * 4) == 153_944_064
    # tp 4: conv 7,680 values x 2 B, ssm 12 value heads x 128 x 128 x 4 B = 786,432 -> 48 x 801,792.
    assert _state_per_sequence(config, 4) == 48 * (3 * 10240 // 4 * 2 + 12 * 128 * 128 * 4)
    # Without the key (or "auto") vLLM keeps --mamba-ssm-cache-dtype auto: the model dtype.
    for value in (None, "auto", "bfloat16"):
        c = copy.deepcopy(config)
        if value is None:
            del c["text_config"]["mamba_ssm_dtype"]
        else:
            c["text_config"]["mamba_ssm_dtype"] = value
        assert _state_per_sequence(c) == 48 * (3 * 10240 + 48 * 128 * 128) * 2 == 78_446_592


def test_bad_mamba_ssm_dtype_is_refused():
    config = json.loads(QWEN35_27B.read_text())
    config["text_config"]["mamba_ssm_dtype"] = 32
    with pytest.raises(KvplanError, match="mamba_ssm_dtype must be a dtype name"):
        spec_from_config(config, "test")


@pytest.mark.skipif(not QWEN3_NEXT.exists(), reason="../shared/configs (Qwen3-Next's config.json) is absent")
def test_qwen3_next_has_no_such_hook():
    # vLLM registers the hook for the Qwen3.5 architectures only (models/config.py MODELS_CONFIG_MAP); a
    # Qwen3-Next config carrying the key still gets --mamba-ssm-cache-dtype auto: bf16. 36 of its 48 layers
    # are Gated DeltaNet: conv 3 x (2 x 16 x 128 + 32 x 128) = 24,576 values, ssm 32 x 128 x 128.
    config = json.loads(QWEN3_NEXT.read_text())
    plain = _state_per_sequence(config)
    config["mamba_ssm_dtype"] = "float32"
    assert _state_per_sequence(config) == plain == 36 * (3 * 8192 + 32 * 128 * 128) * 2


def test_vllm_block_grows_with_the_float32_state():
    # vLLM pads the attention block until its page covers the Mamba page (models/config.py
    # HybridAttentionMambaModelConfig, after the Qwen3.5 hook): Qwen3.5-27B at tp 1, bf16 KV of
    # 4 heads x 256 x 2 x 2 B = 4,096 B per token: 16 x cdiv(3,207,168, 16 x 4,096) = 16 x 49 = 784 tokens
    # (400 with a bf16 state); page 784 x 4,096 = 3,211,264 B.
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.planning.deploy import Deployment
    from kvplan.core.dtypes import canonical_kv_dtype
    from kvplan.engines.vllm.engine import settings
    from kvplan.engines.vllm.pool import build_pool
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Request

    model = find_in_catalog("qwen3.5-27b")
    bf16 = canonical_kv_dtype("auto", model.dtype)
    st = settings(model, find_gpu("h100"), Deployment(), Request(context=32768), "0.19.0")
    pool = build_pool(model.layers, 1, bf16, bf16, st)
    assert pool.block_size == 784
    assert {b.page for b in pool.buckets} == {784 * 4096}


def test_bundled_397b_entry_keeps_the_float32_state():
    # The catalog's Qwen3.5-397B-A17B is now built from huggingface.co/Qwen/Qwen3.5-397B-A17B config.json as
    # ai-dynamo/aiconfigurator@095f58a5 vendors it (aic-core/src/aiconfigurator_core/model_configs/
    # Qwen--Qwen3.5-397B-A17B_config.json: text_config.mamba_ssm_dtype "float32"; the older copy it replaced
    # lacked the key, so the state was priced in bf16, x2 too small). 45 Gated DeltaNet layers, 16 key heads and
    # 64 value heads of 128, kernel 4. At tp 8: conv 3 x (2 x 16 x 128 + 64 x 128) / 8 = 4,608 values x 2 B = 9,216;
    # ssm 8 value heads x 128 x 128 x 4 B = 524,288 -> 533,504 B a layer, 45 x = 24,007,680 B a sequence
    # (12,211,200 in bf16). vLLM's attention block (2 KV heads over 8 ranks: 1 head x 256 x 2 x 2 B = 1,024 B a
    # token) covers one layer's state page: 16 x cdiv(533,504, 16 x 1,024) = 16 x 33 = 528 tokens (272 in bf16).
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.planning.deploy import Deployment
    from kvplan.core.dtypes import canonical_kv_dtype
    from kvplan.engines.vllm.engine import settings
    from kvplan.engines.vllm.pool import build_pool
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Request

    model = find_in_catalog("qwen3.5-397b-a17b")
    bf16 = canonical_kv_dtype("auto", model.dtype)
    assert sum(state_bytes(la, 8, bf16) for la in model.layers if la.kind == Kind.STATE) == 24_007_680
    st = settings(model, find_gpu("h200"), Deployment(8), Request(context=32768), "0.19.0")
    pool = build_pool(model.layers, 8, bf16, bf16, st)
    assert pool.block_size == 528
