"""Pure state-space models: Mamba-1 (`model_type: mamba`, and `falcon_mamba`) and Mamba-2 (`mamba2`), no attention.

Falcon-Mamba is Mamba-1 with weightless RMS norms on B, C and dt (transformers' FalconMambaMixer, mixer_rms_eps):
the same keys, weights and state; vLLM's registry maps FalconMambaForCausalLM to its mamba.py MambaForCausalLM.

Every layer keeps one fixed state per sequence, shaped as vLLM allocates it
(vllm/model_executor/layers/mamba/mamba_utils.py, MambaStateShapeCalculator):
  * Mamba-1 (mamba1_state_shape): conv (intermediate / tp, conv_kernel - 1) and
    ssm (intermediate / tp, state_size), with intermediate = intermediate_size (= expand x hidden).
  * Mamba-2 (mamba2_state_shape): conv (conv_kernel - 1, (intermediate + 2 x n_groups x state_size) / tp)
    and ssm (num_heads / tp, head_dim, state_size), intermediate = num_heads x head_dim (expand x hidden).
Keys are transformers' MambaConfig / Mamba2Config's; their defaults are used when a key is absent,
as transformers does. Weights follow transformers' MambaMixer / Mamba2Mixer, one RMSNorm per block.
"""

from __future__ import annotations

from kvplan.core.intmath import cdiv
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ParamCounts
from kvplan.readers.states import mamba2_state

FAMILIES = {"mamba", "falcon_mamba", "mamba2"}


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """(geometry, layers, parameter counts) of a pure Mamba-1 or Mamba-2 config."""
    hidden = cfg.int("hidden_size", "d_model", limit="hidden_size")
    n = cfg.int("num_hidden_layers", "n_layer", limit="num_hidden_layers")
    vocab = cfg.int("vocab_size", limit="vocab_size")
    kernel = cfg.int("conv_kernel", default=4, limit="head_dim")
    expand = cfg.int("expand", default=2, limit="head_dim")
    mamba1 = model_type != "mamba2"
    if mamba1:
        state = cfg.int("state_size", default=16, limit="head_dim")
        inner = cfg.int("intermediate_size", default=expand * hidden, limit="intermediate_size")
        raw_rank = cfg.raw("time_step_rank", default="auto")
        dt_rank = cdiv(hidden, 16) if raw_rank == "auto" else cfg.int("time_step_rank", limit="hidden_size")
        layer = RecurrentState((kernel - 1) * inner, inner * state, inner, "mamba")
        linear = hidden * 2 * inner + inner * (dt_rank + 2 * state) + dt_rank * inner + inner * hidden
        small = inner * kernel + inner + inner + inner * state + inner  # conv w + b, dt bias, A_log, D
        heads, tied_default = inner, True
    else:
        heads = cfg.int("num_heads", limit="num_attention_heads")
        head_dim = cfg.int("head_dim", default=64, limit="head_dim")
        state = cfg.int("state_size", default=128, limit="head_dim")
        groups = cfg.int("n_groups", default=8, limit="num_attention_heads")
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * state
        layer = mamba2_state(cfg, heads, head_dim, state, groups, kernel)
        linear = hidden * (2 * inner + 2 * groups * state + heads) + inner * hidden
        small = conv_dim * (kernel + 1) + 3 * heads + inner  # conv w + b, dt_bias, A_log, D, gated norm
        tied_default = False
    in_width = 2 * inner if mamba1 else 2 * inner + 2 * groups * state + heads
    if cfg.bool("use_bias", False):  # in_proj and out_proj biases
        small += in_width + hidden
    if not cfg.bool("use_conv_bias", True):
        small -= inner if mamba1 else conv_dim
    tied = cfg.bool("tie_word_embeddings", tied_default)
    params = ParamCounts(
        embedding=vocab * hidden, lm_head=0 if tied else vocab * hidden,
        attention=n * linear, other=n * (small + hidden) + hidden,
    )
    geometry = dict(hidden=hidden, heads=heads, act_width=2 * inner, vocab=vocab,
                    max_context=cfg.int("max_position_embeddings", default=2048, limit="window"),
                    notes=[] if cfg.has("max_position_embeddings") else
                    ["no max_position_embeddings: vLLM's default max_model_len 2048 is the limit"])
    return geometry, [layer] * n, params
