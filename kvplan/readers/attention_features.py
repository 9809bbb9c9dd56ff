"""The attention features a config implies beyond its cache's shape, set on the layers read from it.

kvplan.model.layers.ATTENTION_FEATURES says what they are and why an engine cares; this module says which
configs have them (MiMo-V2 names its sinks in its own keys: kvplan.readers.families.mimo_v2).
  * sinks: gpt-oss gives every attention layer a learned sink per head with no config key saying so
    (vLLM `model_executor/models/gpt_oss.py` OAIAttention: `self.sinks`, passed as Attention(sinks=);
    transformers' GptOssAttention likewise).
  * mm_prefix: vLLM's ModelConfig.is_mm_prefix_lm (`config/model.py`, v0.17.0 L1119-1131, v0.19.0
    L1195-1208): the config's own `is_mm_prefix_lm`, else a top-level model_type among bagel, gemma3,
    molmo2 and paligemma. Gemma 3 with its vision tower is `gemma3`; the text-only Gemma 3 1B
    (`gemma3_text`) is not one.
  * output_gate: Qwen3-Next and Qwen3.5's `attn_output_gate` (true unless the config says not: vLLM's
    Qwen3NextAttention reads getattr(config, "attn_output_gate", True) and builds qkv_proj with
    total_num_heads x (1 + attn_output_gate) query heads, 0.33.0 wheel `models/qwen3_next.py` L317-325).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.model.layers import FullAttention, SlidingWindow
from kvplan.readers.states import output_gated

SINKS_ON_EVERY_LAYER = frozenset({"gpt_oss"})  # model_types whose attention layers all carry sinks
MM_PREFIX_LM = frozenset({"bagel", "gemma3", "molmo2", "paligemma"})  # vLLM's fallback list (v0.19.0)


def with_attention_features(cfg, model_type: str, top_model_type: str, layers: list) -> list:
    """`layers` with the features the config implies set on its attention layers (the others unchanged).

    `cfg` reads the (merged) config, `model_type` is the language model's, `top_model_type` the
    config's own top-level one (a multimodal wrapper's, which vLLM's is_mm_prefix_lm reads)."""
    sinks = model_type in SINKS_ON_EVERY_LAYER
    mm_prefix = cfg.bool("is_mm_prefix_lm", top_model_type in MM_PREFIX_LM)
    gate = output_gated(cfg, model_type)
    if not (sinks or mm_prefix or gate):
        return layers

    def featured(layer):
        if not isinstance(layer, (FullAttention, SlidingWindow)):
            return layer
        layer = replace(layer, sinks=layer.sinks or sinks, mm_prefix=layer.mm_prefix or mm_prefix)
        return replace(layer, output_gate=True) if gate and isinstance(layer, FullAttention) else layer

    return [featured(layer) for layer in layers]
