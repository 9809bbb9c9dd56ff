"""Falcon-H1 (`falcon_h1`): attention and a Mamba-2 mixer side by side in every layer.

As vLLM allocates it (v0.11.0 `model_executor/models/falcon_h1.py`): every decoder layer is a
FalconH1ParallelHybrid whose attention caches num_key_value_heads x head_dim keys and values per token
(FullAttentionSpec) and whose MambaMixer2 keeps `MambaStateShapeCalculator.mamba2_state_shape` of
intermediate = mamba_d_ssm (or mamba_expand x hidden_size), mamba_n_groups, mamba_n_heads,
mamba_d_head, mamba_d_state, mamba_d_conv (MambaSpec) - one layer, two caches, on one pipeline stage:
`kvplan.model.recurrent.ParallelHybrid`. Weights as transformers' FalconH1ForCausalLM (q/k/v/o; in_proj to
intermediate + conv_dim + heads, conv1d, dt_bias, A_log, D, the gated norm when mamba_rms_norm,
out_proj with projectors_bias; a gated MLP; two RMSNorms a layer).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import FullAttention
from kvplan.model.recurrent import ParallelHybrid
from kvplan.model.spec import ParamCounts
from kvplan.readers.geometry import read_geometry
from kvplan.readers.states import mamba2_state


def _mixer(cfg, hidden: int) -> tuple[int, int, int, int, int, int]:
    """(intermediate, heads, head_dim, state, groups, kernel) of the Mamba-2 mixer, checked."""
    inner = cfg.int("mamba_d_ssm", default=cfg.int("mamba_expand", default=2, limit="head_dim") * hidden,
                    limit="intermediate_size")
    heads = cfg.int("mamba_n_heads", default=128, limit="num_attention_heads")
    raw = cfg.raw("mamba_d_head", default="auto")
    head_dim = inner // heads if raw == "auto" else cfg.int("mamba_d_head", limit="head_dim")
    if heads * head_dim != inner:
        raise KvplanError(f"{cfg.where}: mamba_n_heads x mamba_d_head ({heads} x {head_dim}) is not the mixer's "
                          f"width {inner} (mamba_d_ssm)", EXIT_USAGE)
    state = cfg.int("mamba_d_state", default=256, limit="head_dim")
    groups = cfg.int("mamba_n_groups", default=1, limit="num_attention_heads")
    kernel = cfg.int("mamba_d_conv", default=4, limit="head_dim")
    return inner, heads, head_dim, state, groups, kernel


def _params(cfg, g: dict, n: int, mixer: tuple) -> ParamCounts:
    h, heads, kv, d = g["hidden"], g["heads"], g["kv_heads"], g["head_dim"]
    inner, m_heads, _, state, groups, kernel = mixer
    conv_dim = inner + 2 * groups * state
    in_width = inner + conv_dim + m_heads
    attention = h * heads * d + 2 * h * kv * d + heads * d * h + h * in_width + inner * h
    small = conv_dim * kernel + 3 * m_heads + 2 * h  # conv weight, dt_bias, A_log, D; two RMSNorms
    small += (inner if cfg.bool("mamba_rms_norm", False) else 0) + (conv_dim
                                                                    if cfg.bool("mamba_conv_bias", True) else 0)
    small += (in_width if cfg.bool("mamba_proj_bias", False) else 0) + (h if cfg.bool("projectors_bias", False) else 0)
    if cfg.bool("attention_bias", False):
        small += heads * d + 2 * kv * d + h
    width = g["intermediate"]
    small += (2 * width + h) if cfg.bool("mlp_bias", False) else 0
    vocab = g["vocab"]
    tied = cfg.bool("tie_word_embeddings", False)
    return ParamCounts(embedding=vocab * h, lm_head=0 if tied else vocab * h, attention=n * attention,
                       mlp=n * 3 * h * width, other=n * small + h)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """(geometry, layers, parameter counts): every layer a ParallelHybrid."""
    g = read_geometry(cfg, model_type)
    n = g["num_layers"]
    # transformers computes layers_block_type (alias layer_types) as "hybrid" for every layer; anything else, or
    # attention on only some layers (attn_layer_indices), is not the layout vLLM's falcon_h1.py builds
    types = cfg.raw("layers_block_type", "layer_types")
    if cfg.raw("attn_layer_indices") is not None or (types is not None and types != ["hybrid"] * n):
        raise KvplanError(f"{cfg.where}: vLLM's Falcon-H1 gives every layer attention and Mamba; this config's "
                          "attn_layer_indices / layers_block_type say otherwise, and kvplan reads only that layout",
                          EXIT_USAGE)
    mixer = _mixer(cfg, g["hidden"])
    _, heads, head_dim, state, groups, kernel = mixer  # its inner width: _params'
    ssm = mamba2_state(cfg, heads, head_dim, state, groups, kernel)
    layer = ParallelHybrid(FullAttention(g["kv_heads"], g["head_dim"]), ssm)
    return g, [layer] * n, _params(cfg, g, n, mixer)
