"""Layer 3 of 14, readers: everything that turns a config.json into a ModelSpec, and all family knowledge.

The common decoder (configs.py) and its parts (cfg, geometry, states, params, quantization, rope, mtp,
attention_features, block_types, unquantized); towers/ (vision and audio encoders); derive.py and
hf_meta.py (transformers on the meta device); mlp_layout.py (family facts validate asks for). This
module is the registry of family readers in families/, one module each, for families whose layout
the standard keys do not describe.

kvplan.readers.configs reads the common decoder (and the hybrids it has always known); a family whose
config needs its own rules (pure Mamba, Nemotron-NAS block_configs, ...) gets a module in families/
with `read(cfg, model_type)` and registers its model_type in READERS. `unknown_family_keys` is the
policy for a model_type nobody wrote a reader for: kvplan reads it only when every key is one a
standard decoder has; any other key might change the cache layout, and kvplan does not guess.
"""

from __future__ import annotations

import importlib
import re

# model_type -> module of kvplan.readers that reads it (imported only when asked for)
READERS = {"mamba": "mamba", "falcon_mamba": "mamba", "mamba2": "mamba", "nemotron-nas": "nemotron_nas",
           "nemotron_nas": "nemotron_nas",
           "gemma4": "gemma4", "gemma4_text": "gemma4", "minimax_m1": "minimax", "minimax": "minimax",
           "MiniMaxM1": "minimax", "minimax_text_01": "minimax", "kimi_linear": "kimi_linear",
           "deepseek_v32": "dsa", "glm_moe_dsa": "dsa", "falcon_h1": "falcon_h1",
           "mimo_v2_flash": "mimo_v2", "mimo_v2": "mimo_v2",
           "deepseek_v4": "deepseek_v4", "minimax_m3": "unsupported"}


def family_reader(model_type: str):
    """The reader module for this model_type, or None when kvplan.readers.configs' common path reads it."""
    module = READERS.get(model_type)
    return importlib.import_module(f"kvplan.readers.families.{module}") if module else None

# Keys the generic reader sizes a standard decoder from (dense or MoE, GQA, one optional window).
STANDARD_LAYOUT = {
    "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head", "num_heads", "num_hidden_layers",
    "n_layer", "num_layers", "vocab_size", "padded_vocab_size", "num_key_value_heads", "num_kv_heads",
    "n_head_kv", "head_dim", "intermediate_size", "n_inner", "ffn_hidden_size", "max_position_embeddings",
    "n_positions", "max_sequence_length", "seq_length", "model_max_length", "n_ctx", "sliding_window",
    "use_sliding_window", "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
    "moe_intermediate_size", "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace",
    "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob", "tie_word_embeddings",
    "attention_bias", "mlp_bias", "use_qk_norm", "quantization_config", "torch_dtype", "dtype", "layer_types",
    "text_config", "language_config", "llm_config", "num_nextn_predict_layers",
}
# Keys that describe training, tokens, numerics or generation, never a shape.
HARMLESS = {
    "architectures", "model_type", "_name_or_path", "auto_map", "transformers_version", "use_cache",
    "hidden_act", "hidden_activation", "activation_function", "initializer_range", "tokenizer_class",
    "pretraining_tp", "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "id2label",
    "label2id", "task_specific_params", "problem_type", "return_dict", "output_hidden_states",
    "output_attentions", "torchscript", "use_bfloat16", "is_decoder", "add_cross_attention", "max_length",
    "temperature", "top_k", "top_p", "do_sample", "num_beams", "repetition_penalty", "logit_scale",
    "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar", "routed_scaling_factor",
    "scoring_func", "topk_method", "n_group", "topk_group", "router_aux_loss_coef", "aux_loss_alpha",
    "output_router_logits", "seq_aux", "ep_size", "cache_implementation", "num_logits_to_keep",
    "original_max_position_embeddings", "use_mrope", "mrope_section", "quantization",
}
HARMLESS_PATTERNS = re.compile(
    r"(_token_ids?|_dropout|_pdrop|dropout|_eps|_epsilon|^rope_|_init.*|_range|_std|^_|^output_|^use_return"
    r"|_softcapping)$"
    r"|^(rope_|router_|lm_head_|bos_|eos_|pad_|sep_|unk_|vision_|image_|video_|audio_|mm_)")
# layer_types entries a standard decoder may carry.
STANDARD_LAYER_TYPES = {"full_attention", "sliding_attention"}


def unknown_family_keys(data: dict) -> list[str]:
    """Keys of an unknown model_type's config that a standard decoder does not have (sorted)."""
    odd = [k for k in data if k not in STANDARD_LAYOUT and k not in HARMLESS and not HARMLESS_PATTERNS.search(k)]
    types = data.get("layer_types")
    if isinstance(types, list) and not {str(t) for t in types} <= STANDARD_LAYER_TYPES:
        odd.append("layer_types (" + ", ".join(sorted({str(t) for t in types} - STANDARD_LAYER_TYPES))[:60] + ")")
    if data.get("is_encoder_decoder"):
        odd.append("is_encoder_decoder")
    return sorted(odd)
