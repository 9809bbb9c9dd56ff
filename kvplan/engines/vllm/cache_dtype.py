"""vLLM models that cache K/V in the model dtype whatever `--kv-cache-dtype` says, from their model files.

A model file that builds its Attention layers without the engine's cache config leaves Attention with
cache_config None, whose kv_cache_dtype is then "auto" (the model dtype). `--engine vllm` sizes such a
cache in the model dtype and says so in a note; kvplan's own rules size the dtype asked for.
"""

from __future__ import annotations

import dataclasses

# architecture -> why (vllm-project/vllm source)
KV_CACHE_DTYPE_IGNORED = {
    # vllm/model_executor/models/mimo_v2_flash.py at commits 01ed47b4 and 91cf2f13 (the newest stored):
    # MiMoV2FlashDecoderLayer builds MiMoV2Attention without cache_config, so Attention(cache_config=None)
    "MiMoV2FlashForCausalLM": "mimo_v2_flash.py builds its attention without the cache config",
}


def as_cached(req, model):
    """`req` with the KV dtype vLLM caches this model in: None (the model's own) where the flag is ignored."""
    if model.architecture in KV_CACHE_DTYPE_IGNORED:
        return dataclasses.replace(req, kv_dtype=None)
    return req


def notes(model, kv_dtype) -> tuple[str, ...]:
    """The note a plan of this model carries under vLLM (empty where vLLM honours --kv-cache-dtype)."""
    why = KV_CACHE_DTYPE_IGNORED.get(model.architecture)
    return (f"vLLM caches this model's K/V in {kv_dtype.name} whatever --kv-cache-dtype says ({why})",) if why else ()
