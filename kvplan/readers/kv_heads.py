"""How many KV heads a config declares, and what a config that declares none is planned as.

vLLM reads the count from transformers' config object (`n_head_kv`, `num_kv_heads`, `num_key_value_heads`,
`multi_query_group_num`, else num_attention_heads: vLLM 0.19.0 wheel `transformers_utils/
model_arch_config_convertor.py` get_total_num_kv_heads L71-86; Falcon's `multi_query` L357-373). Where config.json
leaves the key out, that object holds its class's default, which is not one rule (transformers 5.25.0
`models/*/configuration_*.py`):
  * `None`, then num_attention_heads: LlamaConfig (`configuration_llama.py` L68, L88-89), Phi-3, Cohere, Granite,
    OLMo-2, DeepSeek-V2, ...: multi-head attention, by transformers' rule rather than by the config's word, so kvplan
    plans it and says so (a grouped-query checkpoint that dropped the key would be planned with a cache
    heads / kv_heads times its own);
  * a fixed count: MistralConfig's 8 (`configuration_mistral.py` L67), Qwen2's 32, Gemma's 16, Starcoder2's 2,
    FalconConfig's `multi_query` True (one head), ...: the engines would use that count, not num_attention_heads,
    and kvplan does not carry those defaults by release, so such a config is refused;
  * no such field (GPT-2, Mamba): multi-head attention is the architecture; nothing to say.
A model_type transformers has no class for (remote code, or none) is read by vLLM's fallback, num_attention_heads,
and said, as for the first kind.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.readers.cfg import Cfg

KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
# transformers 5.25.0: the model_types kvplan reads whose config class gives a missing KV-head count a fixed default
FIXED_DEFAULT = frozenset({
    "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text",
    "qwen3_5_moe_text", "gemma", "gemma2", "gemma3_text", "gemma4_text", "starcoder2", "glm4", "glm4_moe", "gpt_oss",
    "jamba", "kimi_linear", "lfm2", "llama4_text", "mimo_v2_flash", "minimax", "nemotron_h", "exaone", "falcon_h1",
    "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4", "falcon", "RefinedWeb", "RefinedWebModel",
})
NO_FIELD = frozenset({"gpt2", "mamba", "mamba2", "falcon_mamba"})  # MHA (or no attention) by architecture
# the model's note (ModelSpec.notes), which `fit --explain` prints under the cache's arithmetic
MHA_RULE = "KV heads = num_attention_heads: config.json gives no num_key_value_heads (transformers' rule)"


def read_kv_heads(cfg: Cfg, model_type: str, heads: int, notes: list[str], spec_notes: list[str]) -> int:
    """The config's KV-head count; where it gives none, multi-head attention (one KV head per query head) with a
    notice (`notes`) and the model's note (`spec_notes`, MHA_RULE), or a refusal where transformers' class would give
    a fixed count instead (this module's docstring)."""
    if cfg.has(*KEYS):
        return cfg.int(*KEYS, limit="num_key_value_heads")
    if cfg.has("multi_query"):  # Falcon-7B's multi-query attention, unless its new decoder architecture
        if cfg.bool("multi_query", False) and not cfg.bool("new_decoder_architecture", False):
            return 1
    elif model_type in FIXED_DEFAULT:
        raise KvplanError(f"{cfg.where}: gives no num_key_value_heads; transformers' {model_type} config then takes "
                          "its class default, a fixed count rather than num_attention_heads, which the engines read "
                          "and kvplan does not carry: add the key", EXIT_USAGE)
    if model_type not in NO_FIELD:
        spec_notes.append(MHA_RULE)
        notes.append(f"config.json gives no num_key_value_heads: planned as multi-head attention, {heads} KV heads "
                     f"(= num_attention_heads, transformers' and vLLM's rule for model_type {model_type or '(none)'!r}"
                     "; a grouped-query checkpoint that dropped the key would be planned with a larger cache)")
    return heads
