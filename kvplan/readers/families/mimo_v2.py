"""Xiaomi MiMo-V2-Flash (`mimo_v2_flash`, `mimo_v2`): sliding and full layers of their own shapes, K wider than V.

As vLLM allocates the cache (vllm-project/vllm `vllm/model_executor/models/mimo_v2_flash.py` at commit
01ed47b4166b26251895a9c298352fcdb2385149, MiMoV2FlashDecoderLayer and MiMoV2Attention, with
`vllm/model_executor/layers/attention/attention.py` Attention.get_kv_cache_spec and
`vllm/v1/kv_cache_interface.py`, which give FullAttentionSpec and SlidingWindowSpec a `head_size_v`):
  * `hybrid_layer_pattern[i]` is 1 for a sliding-window layer, 0 for a full one;
  * a sliding layer caches `swa_num_key_value_heads` heads of keys `swa_head_dim` wide and values
    `swa_v_head_dim` wide, over a window of `sliding_window_size` tokens;
  * a full layer caches `num_key_value_heads` heads of keys `head_dim` and values `v_head_dim` wide;
  * per token and rank a layer holds max(1, kv_heads // tp) x (head_size + head_size_v) values
    (QKVParallelLinear replicates KV heads when tp exceeds them).
vLLM builds these Attention layers without the engine's cache config (the decoder layer passes none), so
it caches them in the model's dtype whatever `--kv-cache-dtype` says: `--engine vllm` sizes them so
(`KV_CACHE_DTYPE_IGNORED` in kvplan/engines/vllm/cache_dtype.py), kvplan's own rules size the dtype asked for.
Weights as vLLM loads them: qkv_proj hidden x (heads x head_dim + kv x (head_dim + v_head_dim)) and
o_proj (heads x v_head_dim) x hidden per layer, a dense MLP where `moe_layer_freq[i]` is 0, else routed
experts with a sigmoid gate and its correction bias; one attention-sink bias per head on sliding
layers (`add_swa_attention_sink_bias`) and on full ones (`add_full_attention_sink_bias`). MTP weights
are not loaded (vLLM skips them).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import FullAttention, SlidingWindow
from kvplan.model.spec import ParamCounts

FAMILIES = {"mimo_v2_flash", "mimo_v2"}


def _flags(cfg, key: str, n: int) -> list[int]:
    values = cfg.raw(key)
    if not isinstance(values, list) or len(values) < n or not all(type(v) is int and v in (0, 1) for v in values[:n]):
        raise KvplanError(f"{cfg.where}: {key} must list 0 or 1 for each of the {n} layers", EXIT_USAGE)
    return list(values[:n])


def _moe_layers(cfg, n: int) -> list[int]:
    freq = cfg.raw("moe_layer_freq")
    if type(freq) is int:  # vLLM's is_moe_layer: an integer moe_layer_freq makes no layer MoE
        return [0] * n
    return _flags(cfg, "moe_layer_freq", n)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    h = cfg.int("hidden_size", limit="hidden_size")
    n = cfg.int("num_hidden_layers", limit="num_hidden_layers")
    vocab = cfg.int("vocab_size", limit="vocab_size")
    shapes = {}
    for local, prefix in ((True, "swa_"), (False, "")):
        heads = cfg.int(f"{prefix}num_attention_heads", limit="num_attention_heads")
        kv = cfg.int(f"{prefix}num_key_value_heads", limit="num_key_value_heads")
        if kv > heads or heads % kv:
            raise KvplanError(f"{cfg.where}: {prefix}num_key_value_heads {kv} must divide "
                              f"{prefix}num_attention_heads {heads}", EXIT_USAGE)
        d = cfg.int(f"{prefix}head_dim", limit="head_dim")
        dv = cfg.int(f"{prefix}v_head_dim", default=d, limit="head_dim")
        shapes[local] = (heads, kv, d, dv)
    window = cfg.int("sliding_window_size", limit="window")
    pattern = _flags(cfg, "hybrid_layer_pattern", n)
    moe = _moe_layers(cfg, n)
    width = cfg.int("intermediate_size", limit="intermediate_size")
    experts = cfg.int("n_routed_experts", limit="experts") if any(moe) else 0
    top_k = cfg.int("num_experts_per_tok", limit="experts") if any(moe) else 0
    moe_width = cfg.int("moe_intermediate_size", limit="intermediate_size") if any(moe) else 0
    if any(moe) and cfg.int("n_shared_experts", default=0, minimum=0, limit="experts"):
        raise KvplanError(f"{cfg.where}: MiMo-V2 shared experts are not in vLLM's MiMoV2MoE; refused", EXIT_USAGE)
    sinks = {True: cfg.bool("add_swa_attention_sink_bias", False),
             False: cfg.bool("add_full_attention_sink_bias", False)}
    layers, attention, mlp, other = [], 0, 0, 0
    for local, sparse in zip((p == 1 for p in pattern), moe):
        heads, kv, d, dv = shapes[local]
        attn = SlidingWindow(kv, d, window, dv, sinks[local]) if local else FullAttention(kv, d, dv, sinks[local])
        layers.append(attn)
        attention += h * (heads * d + kv * (d + dv)) + heads * dv * h
        other += 2 * h + (heads if sinks[local] else 0)
        if not sparse:
            mlp += 3 * h * width
    moe_layers = sum(moe)
    params = ParamCounts(
        embedding=vocab * h, lm_head=0 if cfg.bool("tie_word_embeddings", False) else vocab * h,
        attention=attention, mlp=mlp, experts=moe_layers * experts * 3 * h * moe_width,
        experts_active=moe_layers * top_k * 3 * h * moe_width, router=moe_layers * (h * experts + experts),
        other=other + h, num_experts=experts, experts_per_token=top_k, num_moe_layers=moe_layers,
    )
    notes = ["vLLM's mimo_v2_flash.py caches K and V in the model dtype whatever --kv-cache-dtype says"]
    geometry = dict(hidden=h, heads=shapes[False][0], act_width=max(top_k * moe_width, width), vocab=vocab,
                    notes=notes, max_context=cfg.int("max_position_embeddings", default=32_768, limit="window"))
    return geometry, layers, params
