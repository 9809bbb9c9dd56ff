"""Counting a model's parameters from its config, by role, layer by layer.

Checked against published checkpoint sizes (tests/test_params.py): the sums here reproduce the
safetensors totals of Llama 3.1 8B/70B and Llama 2 7B exactly, and the model cards' rounded totals
and active counts of the MoE models (Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss, Llama 4).
Multi-token-prediction layers (DeepSeek `num_nextn_predict_layers`) are not counted: engines
load them only for speculative decoding.
"""

from __future__ import annotations

from kvplan.core.intmath import cdiv
from kvplan.model.layers import ChunkedLocal, FullAttention, IndexedMLA, LayerSpec, MLALatent, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ParamCounts
from kvplan.readers.states import QWEN3_5, mamba2_dims, output_gated

# Families whose MLP is up -> act -> down (two matrices) rather than gated (three).
_UNGATED = {"gpt2", "falcon", "RefinedWebModel", "RefinedWeb", "starcoder2", "nemotron_h", "phi", "gpt_bigcode"}
# Families whose config class ties the LM head to the embedding unless told otherwise.
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "gpt2", "falcon", "RefinedWebModel",
                    "RefinedWeb", "starcoder2", "cohere", "cohere2", "lfm2"}
_QKV_BIAS = {"qwen2", "qwen2_moe", "starcoder2", "gpt2"}
_QK_NORM = {"qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text", "olmo2", "lfm2", *QWEN3_5}


def _is_moe_layer(cfg, model_type: str, i: int) -> bool:
    if model_type in ("deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25",
                      "glm4_moe") or cfg.has("first_k_dense_replace"):
        first = cfg.int("first_k_dense_replace", default=0, minimum=0)
        return i >= first and i % cfg.int("moe_layer_freq", default=1) == 0
    if model_type in ("llama4", "llama4_text"):
        step = cfg.int("interleave_moe_layer_step", default=1)
        return i % step == step - 1
    if model_type == "jamba" or cfg.has("expert_layer_period"):
        return i % cfg.int("expert_layer_period", default=2) == cfg.int("expert_layer_offset", default=1, minimum=0)
    only_dense = cfg.int_list("mlp_only_layers")
    step = cfg.int("decoder_sparse_step", default=1)
    return i not in only_dense and (i + 1) % step == 0


def _attention_params(cfg, model_type: str, g: dict, layer: LayerSpec) -> tuple[int, int, int]:
    """(linear params, replicated linear params, small 16-bit params) of one layer's mixer."""
    h = g["hidden"]
    if isinstance(layer, MLALatent):
        heads = g["heads"]
        nope = cfg.int("qk_nope_head_dim", limit="head_dim")
        v_dim = cfg.int("v_head_dim", limit="head_dim")
        q_rank = cfg.int("q_lora_rank", default=0, minimum=0, limit="hidden_size")
        qk = heads * (nope + layer.qk_rope_head_dim)
        q_down = h * q_rank if q_rank else 0
        q_up = q_rank * qk if q_rank else h * qk
        kv_down = h * (layer.kv_lora_rank + layer.qk_rope_head_dim)
        kv_up = layer.kv_lora_rank * heads * (nope + v_dim)
        out = heads * v_dim * h
        norms = q_rank + layer.kv_lora_rank
        linear, replicated = q_down + q_up + kv_down + kv_up + out, q_down + kv_down
        # DSA indexer (vLLM deepseek_v2.py Indexer): all replicated
        if isinstance(layer, IndexedMLA) and layer.index_head_dim:
            ih, idim = cfg.int("index_n_heads", limit="num_attention_heads"), layer.index_head_dim
            indexer = q_rank * ih * idim + h * idim  # wq_b, wk
            linear, replicated = linear + indexer, replicated + indexer
            norms += 2 * idim + h * ih  # k_norm (LayerNorm weight + bias), weights_proj (quant_config=None)
        return linear, replicated, norms
    if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):
        heads, kv, d = g["heads"], layer.num_kv_heads, layer.head_dim
        # Qwen3-Next and Qwen3.5 gate the attention output: q_proj is doubled (attn_output_gate)
        gate = 2 if output_gated(cfg, model_type) else 1
        linear = h * heads * d * gate + 2 * h * kv * d + heads * d * h
        small = 0
        bias = cfg.bool("attention_bias", False) or cfg.bool("use_bias", False) or cfg.bool("bias", False)
        if bias or model_type in _QKV_BIAS:
            small += heads * d + 2 * kv * d
        if bias and model_type not in ("glm4_moe", "qwen2", "qwen2_moe") or model_type in ("gpt2", "starcoder2"):
            small += h
        if cfg.bool("use_qk_norm", model_type in _QK_NORM) and model_type not in ("llama4", "llama4_text"):
            small += 2 * d  # Llama 4's QK norm is a weightless L2 norm (transformers Llama4TextL2Norm)
        if model_type == "gpt_oss":
            small += heads  # attention sinks
        return linear, 0, small
    if isinstance(layer, RecurrentState):
        return _recurrent_params(cfg, g, layer)
    return 0, 0, 0


def _recurrent_params(cfg, g: dict, layer: RecurrentState) -> tuple[int, int, int]:
    h = g["hidden"]
    if layer.variant == "gated_deltanet":
        kh, vh = cfg.int("linear_num_key_heads"), cfg.int("linear_num_value_heads")
        kd, vd = cfg.int("linear_key_head_dim"), cfg.int("linear_value_head_dim")
        kernel = cfg.int("linear_conv_kernel_dim", default=4)
        key, value = kh * kd, vh * vd
        linear = h * (2 * key + 2 * value) + h * 2 * vh + value * h
        small = (2 * key + value) * kernel + 2 * vh + vd
        return linear, 0, small
    if layer.variant == "short_conv":  # LFM2: in_proj h -> 3h, depthwise conv, out_proj h -> h
        kernel = cfg.int("conv_L_cache", default=3)
        small = h * kernel + (5 * h if cfg.bool("conv_bias", False) else 0)
        return h * 3 * h + h * h, 0, small
    if layer.variant == "mamba2":
        heads, head_dim, state, groups, kernel = mamba2_dims(cfg, h)
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * state
        in_width = 2 * inner + 2 * groups * state + heads
        linear = h * in_width + inner * h
        small = conv_dim * kernel + 3 * heads + inner  # conv weight, dt_bias, A_log, D, gated norm
        if cfg.bool("use_conv_bias", True) and cfg.bool("mamba_conv_bias", True):
            small += conv_dim
        if cfg.bool("mamba_proj_bias", False):
            small += in_width + h
        return linear, 0, small
    inner = cfg.int("mamba_expand", default=2) * h  # Mamba1 (Jamba)
    state = cfg.int("mamba_d_state", "ssm_state_size", default=16)
    kernel = cfg.int("mamba_d_conv", "conv_kernel", default=4)
    dt_rank = cfg.int("mamba_dt_rank", default=cdiv(h, 16))
    linear = h * 2 * inner + inner * (dt_rank + 2 * state) + dt_rank * inner + inner * h
    small = inner * (kernel + 1) + inner + inner * state + inner
    if cfg.raw("model_type") == "jamba":  # JambaMambaMixer normalises dt, B and C
        small += dt_rank + 2 * state
    return linear, 0, small


def count_params(cfg, model_type: str, g: dict, layers: list[LayerSpec]) -> ParamCounts:
    h, vocab, experts, top_k = g["hidden"], g["vocab"], g["experts"], g["top_k"]
    gated = model_type not in _UNGATED
    mats = 3 if gated else 2
    attention = replicated = other = mlp = expert = expert_active = shared = router = moe_layers = biases = 0
    norm_width = 2 * h if model_type in ("gpt2", "falcon", "RefinedWebModel", "starcoder2", "cohere") else h
    norms_per_layer = 4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2
    if model_type in ("falcon", "RefinedWebModel", "nemotron_h", "cohere"):
        norms_per_layer = 1
    expert_width = cfg.int("moe_intermediate_size", "intermediate_size", default=g["intermediate"])
    dense_width = cfg.int("intermediate_size_mlp", "intermediate_size", default=g["intermediate"])
    if model_type == "lfm2":
        dense_width = g["intermediate"]
    if model_type == "granitemoehybrid":  # Granite 4: every layer's dense MLP is its shared_mlp
        dense_width = cfg.int("shared_intermediate_size", limit="intermediate_size")
    pattern = cfg.raw("hybrid_override_pattern")
    for i, layer in enumerate(layers):
        lin, rep, small = _attention_params(cfg, model_type, g, layer)
        attention += lin
        replicated += rep
        other += small + norms_per_layer * norm_width
        # The pattern covers the decoder's layers; layers past it (the MTP modules mtp.py appends) are the
        # family's own (issue 25: a GLM-4.5 config with a 92-entry pattern and its MTP layer was an IndexError).
        if isinstance(pattern, str) and i < len(pattern):
            if pattern[i] == "-":  # Nemotron-H: MLP-only block
                mlp += mats * h * g["intermediate"]
            elif pattern[i] == "E":  # Nemotron 3: a MoE block (ungated experts, one shared expert)
                e = _nemotron_moe(cfg, h, experts, top_k)
                expert, expert_active, router, shared, mlp = (
                    expert + e[0], expert_active + e[1], router + e[2], shared + e[3], mlp + e[4])
                moe_layers += 1
            continue
        if experts and _is_moe_layer(cfg, model_type, i):
            moe_layers += 1
            per_expert = mats * h * expert_width
            if model_type == "gpt_oss":
                per_expert += 2 * expert_width + h  # gate_up and down biases, stored in bf16
                biases += experts * (2 * expert_width + h)
            expert += experts * per_expert
            expert_active += top_k * per_expert
            biased = model_type in ("gpt_oss", "deepseek_v3", "kimi_k2", "kimi_k25", "glm4_moe")
            router += h * experts + (experts if biased else 0)
            shared += _shared_expert_params(cfg, model_type, h, expert_width, mats)
        elif model_type != "nemotron_h":
            mlp += mats * h * dense_width
            if not gated and model_type in ("gpt2", "starcoder2"):
                other += dense_width + h  # MLP biases
    embedding = vocab * h
    if model_type == "gpt2":
        embedding += cfg.int("n_positions", "max_position_embeddings", default=1024) * h
    tied = cfg.bool("tie_word_embeddings", cfg.bool("tie_embedding", model_type in _TIED_BY_DEFAULT))
    return ParamCounts(
        embedding=embedding,
        lm_head=0 if tied else vocab * h,
        attention=attention,
        mlp=mlp,
        experts=expert,
        experts_active=expert_active,
        shared_experts=shared,
        router=router,
        other=other + norm_width,  # + final norm
        replicated=replicated,
        num_experts=experts,
        experts_per_token=top_k,
        num_moe_layers=moe_layers,
        expert_biases=biases,
    )


def _nemotron_moe(cfg, h: int, experts: int, top_k: int) -> tuple[int, int, int, int, int]:
    """(experts, active experts, router, shared expert, latent projections) of one Nemotron-H 'E' block.

    transformers' NemotronHMoE: experts of up and down projections (moe_intermediate_size) on the
    hidden size, or on moe_latent_size with two latent projections around them; a router of
    n_routed_experts x hidden; a shared NemotronHMLP of moe_shared_expert_intermediate_size.
    """
    width = cfg.int("moe_intermediate_size", limit="intermediate_size")
    latent = cfg.int("moe_latent_size", default=0, minimum=0, limit="hidden_size")
    per_expert = 2 * (latent or h) * width
    shared = 2 * h * cfg.int("moe_shared_expert_intermediate_size", default=0, minimum=0, limit="intermediate_size")
    return experts * per_expert, top_k * per_expert, h * experts, shared, 2 * h * latent


def _shared_expert_params(cfg, model_type: str, h: int, expert_width: int, mats: int) -> int:
    width, gate = shared_expert_width(cfg, model_type, expert_width)
    return mats * h * width + (h if gate else 0)


def shared_expert_width(cfg, model_type: str, expert_width: int) -> tuple[int, bool]:
    """The intermediate width of one MoE layer's shared expert(s), fused as one MLP, and whether a gate of hidden
    inputs scales it (Qwen2-MoE's shared_expert_gate); (0, False) where the layer has none."""
    if cfg.has("n_shared_experts"):  # DeepSeek, GLM-4.5, Kimi K2
        return cfg.int("n_shared_experts", minimum=0) * expert_width, False
    if model_type == "granitemoehybrid":  # shared_mlp beside the MoE block, no gate
        return cfg.int("shared_intermediate_size", limit="intermediate_size"), False
    if cfg.has("shared_expert_intermediate_size"):  # Qwen2-MoE, Qwen3-Next: one shared expert + its gate
        width = cfg.int("shared_expert_intermediate_size", minimum=0)
        return width, bool(width)
    if model_type in ("llama4", "llama4_text"):  # one shared expert of intermediate_size
        return cfg.int("intermediate_size"), False
    return 0, False
