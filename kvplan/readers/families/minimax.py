"""MiniMax-M1 / MiniMax-Text-01 (`minimax_m1`, transformers' `minimax`): lightning attention + softmax.

`attn_type_list` (the published configs) or `layer_types` (transformers' MiniMaxConfig) say which
layers are lightning (linear) attention and which softmax attention. As vLLM allocates them
(model_executor/models/minimax_text_01.py, MiniMaxText01LinearAttention.get_state_shape ->
mamba_utils.linear_attention_state_shape): a lightning layer keeps one state of
(num_attention_heads / tp) x head_dim x head_dim values per sequence, in the model's dtype
(linear_attention_state_dtype), and nothing per token; a softmax layer caches K and V of
num_key_value_heads x head_dim per token. Weights as transformers' MiniMaxForCausalLM (qkv_proj,
output_gate, out_proj and a norm on lightning layers; Mixtral-style experts on every layer).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import FullAttention
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ParamCounts
from kvplan.readers.states import linear_layer_types

FAMILIES = {"minimax_m1", "minimax", "MiniMaxM1", "minimax_text_01"}


def _kinds(cfg, n: int) -> list[str]:
    listed = cfg.raw("attn_type_list")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) < n or \
                not all(type(x) is int and x in (0, 1) for x in listed[:n]):
            raise KvplanError(f"{cfg.where}: attn_type_list must give 0 (lightning) or 1 (softmax) for {n} layers",
                              EXIT_USAGE)
        return ["linear" if x == 0 else "full" for x in listed[:n]]
    types = cfg.raw("layer_types")
    if types is None:  # MiniMaxConfig's default: even layers full, odd layers linear
        return ["full" if (i + 1) % 2 else "linear" for i in range(n)]
    return linear_layer_types(cfg, types, n)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    h = cfg.int("hidden_size", limit="hidden_size")
    heads = cfg.int("num_attention_heads", limit="num_attention_heads")
    kv = cfg.int("num_key_value_heads", default=heads, limit="num_key_value_heads")
    n = cfg.int("num_hidden_layers", limit="num_hidden_layers")
    vocab = cfg.int("vocab_size", limit="vocab_size")
    d = cfg.int("head_dim", default=h // heads, limit="head_dim")
    experts = cfg.int("num_local_experts", limit="experts")
    top_k = cfg.int("num_experts_per_tok", limit="experts")
    width = cfg.int("intermediate_size", limit="intermediate_size")
    if cfg.int("shared_intermediate_size", default=0, minimum=0, limit="intermediate_size"):
        raise KvplanError(f"{cfg.where}: MiniMax shared experts (shared_intermediate_size > 0) are not modelled",
                          EXIT_USAGE)
    kinds = _kinds(cfg, n)
    lightning = RecurrentState(0, heads * d * d, heads, "linear_attention", key_head_dim=d, value_head_dim=d)
    softmax = FullAttention(kv, d)
    layers = [softmax if k == "full" else lightning for k in kinds]
    attention = other = 0
    for k in kinds:
        if k == "full":
            attention += 2 * h * heads * d + 2 * h * kv * d
        else:
            attention += 3 * h * heads * d + 2 * h * heads * d  # qkv_proj; output_gate and out_proj
            other += heads * d  # the lightning output norm
        other += 2 * h
    per_expert = 3 * h * width
    params = ParamCounts(
        embedding=vocab * h, lm_head=0 if cfg.bool("tie_word_embeddings", False) else vocab * h,
        attention=attention, experts=n * experts * per_expert, experts_active=n * top_k * per_expert,
        router=n * h * experts, other=other + h, num_experts=experts, experts_per_token=top_k, num_moe_layers=n,
    )
    geometry = dict(hidden=h, heads=heads, act_width=top_k * width, vocab=vocab, notes=[],
                    max_context=cfg.int("max_position_embeddings", default=131_072, limit="window"))
    return geometry, layers, params
