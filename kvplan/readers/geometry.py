"""The numbers every family shares, read from a config: widths, heads, layers, vocabulary, context.

The common decoder (kvplan.readers.configs) and the families that reuse it (DeepSeek Sparse
Attention, Falcon-H1) read them here.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.intmath import round_up
from kvplan.readers.cfg import Cfg, shown
from kvplan.readers.kv_heads import read_kv_heads


def own_sizes(cfg: Cfg) -> tuple[int, int, int, int]:
    """(hidden_size, num_attention_heads, num_hidden_layers, vocab_size) by their own keys alone, in that order, each
    within its limit: what a family reader of its own (kvplan.readers.families) reads first."""
    return (cfg.int("hidden_size", limit="hidden_size"), cfg.int("num_attention_heads", limit="num_attention_heads"),
            cfg.int("num_hidden_layers", limit="num_hidden_layers"), cfg.int("vocab_size", limit="vocab_size"))


def read_geometry(cfg: Cfg, model_type: str) -> dict:
    """The numbers every family shares: widths, heads, layers, vocabulary, context."""
    hidden = cfg.int("hidden_size", "n_embd", "d_model", limit="hidden_size")
    heads = cfg.int("num_attention_heads", "n_head", "num_heads", limit="num_attention_heads")
    num_layers = cfg.int("num_hidden_layers", "n_layer", "num_layers", limit="num_hidden_layers")
    vocab = cfg.int("vocab_size", "padded_vocab_size", limit="vocab_size")
    notes: list[str] = []
    assumed: list[str] = []  # defaults read in place of a missing key: printed as notes (spec_from_config)
    kv_heads = read_kv_heads(cfg, model_type, heads, assumed, notes)
    if kv_heads > heads:
        raise KvplanError(f"{cfg.where}: num_key_value_heads ({kv_heads}) exceeds num_attention_heads ({heads})",
                          EXIT_USAGE)
    if kv_heads > 0 and heads % kv_heads:  # grouped-query attention: each KV head serves a whole group of query heads
        raise KvplanError(f"{cfg.where}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads "
                          f"({kv_heads}); no engine can group the query heads", EXIT_USAGE)
    if cfg.has("head_dim", "attention_head_dim", "kv_channels"):
        head_dim = cfg.int("head_dim", "attention_head_dim", "kv_channels", limit="head_dim")
        if head_dim * heads != hidden:
            notes.append(f"head_dim {head_dim} is explicit (hidden_size / heads would be {hidden / heads:g})")
    else:
        if hidden % heads:
            raise KvplanError(f"{cfg.where}: hidden_size {hidden} is not divisible by {heads} heads and no head_dim is "
                              "given", EXIT_USAGE)
        head_dim = hidden // heads
    widths = ("intermediate_size", "n_inner", "ffn_hidden_size", "block_ff_dim")
    intermediate = cfg.int(*widths, default=4 * hidden, limit="intermediate_size")
    if not cfg.has(*widths):  # GPT-2's rule for its n_inner: null; any other family's config is missing a key
        assumed.append(f"config.json gives no MLP width (intermediate_size): 4 x hidden_size = {4 * hidden:,} assumed, "
                     "GPT-2's rule")
    if model_type == "lfm2":
        intermediate = lfm2_ff_width(cfg, intermediate)
    positions = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "model_max_length")
    max_context = cfg.int(*positions, default=2048, limit="window")
    if not cfg.has(*positions):
        assumed.append("config.json gives no context length (max_position_embeddings): 2,048 positions assumed")
    experts = cfg.int("num_local_experts", "num_experts", "n_routed_experts", default=0, minimum=0, limit="experts")
    top_k = cfg.int("num_experts_per_tok", "experts_per_token", "moe_topk", default=0, minimum=0, limit="experts")
    if experts:
        expert_width = cfg.int("moe_intermediate_size", "intermediate_size", limit="intermediate_size")
        act_width = expert_width * max(top_k, 1)
    else:
        act_width = intermediate
    return dict(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, num_layers=num_layers,
                vocab=vocab, intermediate=intermediate, max_context=max_context, experts=experts,
                top_k=top_k, act_width=act_width, notes=notes, assumed=assumed)


def lfm2_ff_width(cfg: Cfg, width: int) -> int:
    """LFM2's MLP width as transformers' Lfm2MLP derives it (block_auto_adjust_ff_dim)."""
    if not cfg.bool("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    mult = cfg.raw("block_ffn_dim_multiplier", default=1.0)
    if not isinstance(mult, (int, float)) or isinstance(mult, bool) or not 0 < mult < 1e3:
        raise KvplanError(f"{cfg.where}: block_ffn_dim_multiplier must be a positive number, got {shown(mult)}",
                          EXIT_USAGE)
    step = cfg.int("block_multiple_of", default=256, limit="intermediate_size")
    width = int(mult * width)
    return round_up(width, step)


def mla_widths(cfg: Cfg) -> dict:
    """An MLA layer's per-head widths after decompression (`qk_nope_head_dim`, `v_head_dim`: kv_b_proj's output per
    head, kvplan.model.layers.MLALatent), 0 where the config leaves one out (its prefill then priced as its decode),
    and its query compression (`q_lora_rank`, 0 or absent: none)."""
    return {"qk_nope_head_dim": cfg.int("qk_nope_head_dim", default=0, minimum=0, limit="head_dim"),
            "v_head_dim": cfg.int("v_head_dim", default=0, minimum=0, limit="head_dim"),
            "q_lora_rank": cfg.int("q_lora_rank", default=0, minimum=0, limit="hidden_size")}
