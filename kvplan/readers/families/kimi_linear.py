"""Kimi Linear (`kimi_linear`): Kimi Delta Attention (KDA) layers between MLA layers.

As vLLM's model_executor/models/kimi_linear.py allocates them:
  * a KDA layer keeps, per sequence, the short-convolution state of q, k and v and a recurrent state
    (mamba_utils.kda_state_shape): conv (conv_kernel - 1) x 3 x num_heads x head_dim / tp in the
    state dtype, and num_heads / tp x head_dim x head_dim values in float32 (kda_state_dtype);
  * an MLA layer caches one latent of kv_lora_rank + qk_rope_head_dim values per token.
Layers come from `linear_attn_config` (kda_layers / full_attn_layers, 1-indexed, as the checkpoint
writes them) or `layer_types`. Weights as transformers' KimiLinearForCausalLM builds them.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import MLALatent
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ParamCounts
from kvplan.readers.states import linear_layer_types

FAMILIES = {"kimi_linear"}
# Kimi K3's text model is a kimi_linear config with keys vLLM's kimi_linear.py (0.19.0) never reads: experts
# run in a latent width (routed_expert_hidden_size, latent_moe_use_norm), block attention residuals
# (attn_res_block_size), a gated MLA output (mla_use_output_gate). They change the weights, so they are refused.
_NOT_READ = ("routed_expert_hidden_size", "latent_moe_use_norm", "attn_res_block_size", "mla_use_output_gate")


def _linear_config(cfg) -> dict:
    lac = cfg.raw("linear_attn_config", default={})
    if not isinstance(lac, dict):
        raise KvplanError(f"{cfg.where}: linear_attn_config must be an object", EXIT_USAGE)
    return lac


def _kinds(cfg, n: int, lac: dict) -> list[str]:
    types = cfg.raw("layer_types")
    if types is None and "full_attn_layers" in lac and "kda_layers" in lac:
        full, kda = lac["full_attn_layers"], lac["kda_layers"]
        if not all(isinstance(x, list) and all(type(i) is int and 1 <= i <= n for i in x) for x in (full, kda)):
            raise KvplanError(f"{cfg.where}: linear_attn_config layers must be 1-based layer numbers up to {n}",
                              EXIT_USAGE)
        if sorted(full + kda) != list(range(1, n + 1)):
            raise KvplanError(f"{cfg.where}: full_attn_layers and kda_layers must cover the {n} layers once",
                              EXIT_USAGE)
        full_set = set(full)
        return ["full" if i + 1 in full_set else "linear" for i in range(n)]
    if types is None:  # KimiLinearConfig's default: every 4th layer (from layer 4) full
        return ["full" if i and i % 4 == 0 else "linear" for i in range(n)]
    return linear_layer_types(cfg, types, n)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    odd = [k for k in _NOT_READ if cfg.raw(k) not in (None, False, 0)]
    if odd:
        raise KvplanError(f"{cfg.where}: this kimi_linear config sets {', '.join(odd)} (Kimi K3's latent experts, "
                          "attention residuals or gated MLA output), which kvplan's Kimi Linear reader does not size; "
                          "refused rather than guessed", EXIT_USAGE)
    h = cfg.int("hidden_size", limit="hidden_size")
    n = cfg.int("num_hidden_layers", limit="num_hidden_layers")
    heads = cfg.int("num_attention_heads", limit="num_attention_heads")
    vocab = cfg.int("vocab_size", limit="vocab_size")
    lac = _linear_config(cfg)
    lin_heads = int(cfg.int("linear_num_heads", default=0, minimum=0, limit="num_attention_heads")
                    or _sub_int(cfg, lac, "num_heads", 32))
    lin_dim = int(cfg.int("linear_head_dim", default=0, minimum=0, limit="head_dim")
                  or _sub_int(cfg, lac, "head_dim", 128))
    kernel = int(cfg.int("linear_conv_kernel_dim", default=0, minimum=0, limit="head_dim")
                 or _sub_int(cfg, lac, "short_conv_kernel_size", 4))
    rank = cfg.int("kv_lora_rank", limit="head_dim")
    rope = cfg.int("qk_rope_head_dim", limit="head_dim")
    nope = cfg.int("qk_nope_head_dim", limit="head_dim")
    v_dim = cfg.int("v_head_dim", limit="head_dim")
    q_rank = cfg.int("q_lora_rank", default=0, minimum=0, limit="hidden_size")
    experts = cfg.int("num_experts", "num_local_experts", limit="experts")
    top_k = cfg.int("num_experts_per_token", "num_experts_per_tok", limit="experts")
    shared_n = cfg.int("num_shared_experts", "n_shared_experts", default=1, minimum=0, limit="experts")
    moe_width = cfg.int("moe_intermediate_size", limit="intermediate_size")
    width = cfg.int("intermediate_size", limit="intermediate_size")
    dense_first = cfg.int("first_k_dense_replace", default=1, minimum=0, limit="num_hidden_layers")
    qkv = lin_heads * lin_dim
    kda = _kda_state(lin_heads, lin_dim, kernel)
    mla = MLALatent(rank, rope, qk_nope_head_dim=nope, v_head_dim=v_dim)
    kinds = _kinds(cfg, n, lac)
    attention = other = replicated = mlp = expert = shared = router = 0
    for i, kind in enumerate(kinds):
        if kind == "linear":  # q, k, v, o; forget gate f_a/f_b; b; output gate g_a/g_b; conv; dt_bias, A_log, o_norm
            attention += 3 * h * qkv + qkv * h + (h * lin_dim + lin_dim * qkv) * 2 + h * lin_heads
            other += 3 * qkv * kernel + qkv + lin_heads + lin_dim
        else:
            q = (h * q_rank + q_rank * heads * (nope + rope)) if q_rank else h * heads * (nope + rope)
            down = h * (rank + rope)
            attention += q + down + rank * heads * (nope + v_dim) + heads * v_dim * h
            replicated += down + (h * q_rank if q_rank else 0)
            other += rank + q_rank
        other += 2 * h
        if i < dense_first:
            mlp += 3 * h * width
        else:
            expert += experts * 3 * h * moe_width
            shared += 3 * h * moe_width * shared_n
            router += h * experts
    moe_layers = n - min(dense_first, n)
    params = ParamCounts(
        embedding=vocab * h, lm_head=0 if cfg.bool("tie_word_embeddings", False) else vocab * h,
        attention=attention, mlp=mlp, experts=expert, experts_active=moe_layers * top_k * 3 * h * moe_width,
        shared_experts=shared, router=router, other=other + h, replicated=replicated,
        num_experts=experts, experts_per_token=top_k, num_moe_layers=moe_layers,
    )
    context = cfg.int("model_max_length", "max_position_embeddings", default=1_048_576, limit="window")
    geometry = dict(hidden=h, heads=heads, act_width=top_k * moe_width, vocab=vocab, notes=[], max_context=context)
    return geometry, [mla if k == "full" else kda for k in kinds], params


def _kda_state(heads: int, head_dim: int, kernel: int) -> RecurrentState:
    """A KDA layer's per-sequence state (module docstring), with its heads' key and value widths (both head_dim)."""
    return RecurrentState((kernel - 1) * 3 * heads * head_dim, heads * head_dim * head_dim, heads, "kda",
                          ssm_dtype="fp32", key_head_dim=head_dim, value_head_dim=head_dim)


def _sub_int(cfg, lac: dict, key: str, default: int) -> int:
    value = lac.get(key, default)
    if type(value) is not int or not 0 < value <= 1 << 16:
        raise KvplanError(f"{cfg.where}: linear_attn_config.{key} must be a positive integer", EXIT_USAGE)
    return value
