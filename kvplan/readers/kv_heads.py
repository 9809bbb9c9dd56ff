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
The wrappers kvplan reads (gemma3, llama4, mistral3, qwen3_5, qwen3_5_moe) reach this by their own model_type where
their text_config names none; transformers then builds the text class, whose default is fixed (5.25.0: 4, 8, 8, 4,
2). vLLM reads kimi_k2 and kimi_k25's text through DeepseekV3Config (0.21.0 `transformers_utils/config.py`
_CONFIG_REGISTRY, `configs/kimi_k25.py` L100-103), default 128.
Any other model_type (no reader in kvplan: remote code, or a transformers class kvplan has not read) is planned by
vLLM's fallback, num_attention_heads, with a note that says the class was not read, since its default may be a
fixed count (StableLmConfig's 32, PhimoeConfig's 8).
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
    "gemma3", "llama4", "mistral3", "qwen3_5", "qwen3_5_moe", "kimi_k2", "kimi_k25",
})
# transformers 5.25.0: the model_types kvplan reads whose config class leaves a missing count None, then
# num_attention_heads (LlamaConfig L88-89 and its like)
HEADS_DEFAULT = frozenset({"llama", "phi3", "phi", "cohere", "cohere2", "granite", "granitemoehybrid", "olmo2",
                           "deepseek_v2"})
NO_FIELD = frozenset({"gpt2", "mamba", "mamba2", "falcon_mamba"})  # MHA (or no attention) by architecture
# the model's note (ModelSpec.notes), which `fit --explain` prints under the cache's arithmetic
MHA_RULE = ("KV heads = num_attention_heads: config.json gives no num_key_value_heads (the rule where the config "
            "class leaves it unset)")


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
        rule = (f"transformers' and vLLM's rule for model_type {model_type!r}" if model_type in HEADS_DEFAULT else
                f"vLLM's fallback; kvplan has not read model_type {model_type or '(none)'!r}'s config class, whose "
                "default may be a fixed count instead")
        notes.append(f"config.json gives no num_key_value_heads: planned as multi-head attention, {heads} KV heads "
                     f"(= num_attention_heads, {rule}; a grouped-query checkpoint that dropped the key would be "
                     "planned with a larger cache)")
    return heads
