"""Gemma 4 (`gemma4`, `gemma4_text`): local and global layers of different shapes, KV sharing, K = V.

As vLLM's model_executor/models/gemma4.py allocates the cache (Gemma4DecoderLayer, Gemma4Attention):
  * sliding layers: num_key_value_heads x head_dim, window `sliding_window`;
  * full layers: head_dim `global_head_dim`; with `attention_k_eq_v` the KV heads are
    `num_global_key_value_heads` (else num_key_value_heads). K = V only spares the v_proj weights:
    vLLM loads K into both slots and caches K and V as for any layer (2 x heads x dim per token);
  * the last `num_kv_shared_layers` layers reuse the cache of the last earlier layer of their type
    (kv_sharing_target_layer_name): they hold no cache of their own.
Weights follow transformers' Gemma4TextModel (no k/v projections on shared layers, no v_proj on
K = V layers, per-layer embeddings when hidden_size_per_layer_input > 0, the optional MoE block).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import FullAttention, NoCache, SlidingWindow
from kvplan.model.spec import ParamCounts
from kvplan.readers.geometry import own_sizes

FAMILIES = {"gemma4", "gemma4_text"}


def _layer_types(cfg, n: int) -> list[str]:
    types = cfg.raw("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    if (not isinstance(types, list) or len(types) < n
            or not set(map(str, types[:n])) <= {"sliding_attention", "full_attention"}):
        raise KvplanError(f"{cfg.where}: layer_types must list sliding_attention / full_attention for {n} layers",
                          EXIT_USAGE)
    types = list(types[:n])
    types[-1] = "full_attention"  # transformers' Gemma4TextConfig forces the last layer global
    return types


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    h, heads, n, vocab = own_sizes(cfg)
    kv = cfg.int("num_key_value_heads", limit="num_key_value_heads")
    d = cfg.int("head_dim", limit="head_dim")
    types = _layer_types(cfg, n)
    k_eq_v = cfg.bool("attention_k_eq_v", False)
    gd = cfg.int("global_head_dim", limit="head_dim") if "full_attention" in types else d
    gkv = cfg.int("num_global_key_value_heads", "num_key_value_heads", limit="num_key_value_heads") if k_eq_v else kv
    window = cfg.int("sliding_window", limit="window")
    if cfg.raw("use_bidirectional_attention") == "all":
        window = window // 2 + 1  # Gemma4TextConfig: exclusive bounds for bidirectional attention
    shared = cfg.int("num_kv_shared_layers", default=0, minimum=0, limit="num_hidden_layers")
    if shared >= n:
        raise KvplanError(f"{cfg.where}: num_kv_shared_layers {shared} leaves no layer with a cache of its own",
                          EXIT_USAGE)
    first_shared = n - shared
    if shared and set(types[first_shared:]) - set(types[:first_shared]):
        raise KvplanError(f"{cfg.where}: a shared layer's type has no earlier layer to share a cache with", EXIT_USAGE)
    width = cfg.int("intermediate_size", limit="intermediate_size")
    ple = cfg.int("hidden_size_per_layer_input", default=0, minimum=0, limit="hidden_size")
    moe = cfg.bool("enable_moe_block", False)
    experts = cfg.int("num_experts", limit="experts") if moe else 0
    top_k = cfg.int("top_k_experts", limit="experts") if moe else 0
    moe_width = cfg.int("moe_intermediate_size", limit="intermediate_size") if moe else 0
    layers, attention, mlp, other = [], 0, 0, 0
    for i, kind in enumerate(types):
        full = kind == "full_attention"
        dim, kv_heads = (gd, gkv) if full else (d, kv)
        is_shared = i >= first_shared
        if is_shared:
            layers.append(NoCache())
        else:
            layers.append(FullAttention(kv_heads, dim) if full else SlidingWindow(kv_heads, dim, window))
        attention += 2 * h * heads * dim  # q_proj, o_proj
        other += dim + 4 * h  # q_norm; input, post-attention, pre- and post-feedforward norms
        if not is_shared:
            attention += h * kv_heads * dim * (1 if full and k_eq_v else 2)
            other += dim  # k_norm (v_norm has no weight)
        mlp += 3 * h * width * (2 if is_shared and cfg.bool("use_double_wide_mlp", False) else 1)
        if ple:
            mlp += 2 * h * ple
            other += h
    expert_params = experts * 3 * h * moe_width * n
    params = ParamCounts(
        embedding=vocab * h
        + (cfg.int("vocab_size_per_layer_input", default=vocab, limit="vocab_size") * n * ple if ple else 0),
        lm_head=0 if cfg.bool("tie_word_embeddings", True) else vocab * h,
        attention=attention, mlp=mlp + (h * n * ple if ple else 0),
        experts=expert_params, experts_active=top_k * 3 * h * moe_width * n,
        router=(h * experts + h + experts) * n if moe else 0,
        other=other + (3 * h * n if moe else 0) + (ple if ple else 0) + h,
        num_experts=experts, experts_per_token=top_k, num_moe_layers=n if moe else 0,
    )
    notes = []
    if k_eq_v:
        notes.append("attention_k_eq_v: the checkpoint has no v_proj on global layers; vLLM still caches K and V")
    if shared:
        notes.append(f"the last {shared} layers reuse earlier layers' KV cache")
    geometry = dict(hidden=h, heads=heads, act_width=width + top_k * moe_width, vocab=vocab, notes=notes,
                    max_context=cfg.int("max_position_embeddings", default=131_072, limit="window"))
    return geometry, layers, params
