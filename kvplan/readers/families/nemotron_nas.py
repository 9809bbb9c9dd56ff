"""Nemotron-NAS (DeciLM: Llama-3.3-Nemotron-Super-49B, Llama-3.1-Nemotron-Ultra-253B, Nemotron-51B).

Every block has its own `block_configs[i]` entry, as vLLM's model_executor/models/nemotron_nas.py
reads it (DeciLMDecoderLayer):
  * attention.no_op: the block has no attention and no cache;
  * otherwise num_kv_heads = num_attention_heads // attention.n_heads_in_group, head_dim =
    hidden_size / num_attention_heads (LlamaAttention);
  * ffn.no_op: no MLP; otherwise a gated MLP of _ffn_mult_to_intermediate_size(ffn_mult) =
    int(2 x ffn_mult x hidden / 3) rounded up to a multiple of 256, or ffn.intermediate_size.
  * replace_with_linear (attention or ffn, Nemotron-51B): the block is one hidden x hidden linear
    map, as DeciLM's own modeling code has it; it caches nothing. vLLM's DeciLM does not build
    such blocks, so kvplan notes it.
The top-level num_key_value_heads is not used: it does not describe the blocks.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.intmath import round_up
from kvplan.model.layers import FullAttention, NoCache
from kvplan.model.spec import ParamCounts
from kvplan.readers.geometry import own_sizes

FAMILIES = {"nemotron-nas", "nemotron_nas", "deci", "deci_lm"}


def _block(cfg, i: int, block, part: str) -> dict:
    sub = block.get(part) if isinstance(block, dict) else None
    if not isinstance(sub, dict):
        raise KvplanError(f"{cfg.where}: block_configs[{i}].{part} must be an object", EXIT_USAGE)
    return sub


def _flag(cfg, i: int, sub: dict, part: str, key: str) -> bool:
    value = sub.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise KvplanError(f"{cfg.where}: block_configs[{i}].{part}.{key} must be true or false", EXIT_USAGE)
    return value


def _ffn_width(cfg, i: int, ffn: dict, hidden: int) -> int:
    if "ffn_mult" in ffn and ffn["ffn_mult"] is not None:
        mult = ffn["ffn_mult"]
        if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 1000:
            raise KvplanError(f"{cfg.where}: block_configs[{i}].ffn.ffn_mult must be a positive number", EXIT_USAGE)
        width = int(2 * mult * hidden / 3)
        return round_up(width, 256)
    width = ffn.get("intermediate_size")
    if isinstance(width, bool) or not isinstance(width, int) or not 0 < width <= 1 << 24:
        raise KvplanError(f"{cfg.where}: block_configs[{i}] has neither ffn_mult nor intermediate_size", EXIT_USAGE)
    return width


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    hidden, heads, n, vocab = own_sizes(cfg)
    blocks = cfg.raw("block_configs")
    if not isinstance(blocks, list) or len(blocks) != n:
        got = len(blocks) if isinstance(blocks, list) else "no"
        raise KvplanError(f"{cfg.where}: block_configs has {got} entries for {n} layers", EXIT_USAGE)
    if hidden % heads:
        raise KvplanError(f"{cfg.where}: hidden_size {hidden} is not divisible by {heads} heads", EXIT_USAGE)
    head_dim = hidden // heads
    layers, notes = [], []
    attention = mlp = other = 0
    widest = 0
    for i, block in enumerate(blocks):
        attn, ffn = _block(cfg, i, block, "attention"), _block(cfg, i, block, "ffn")
        if _flag(cfg, i, attn, "attention", "no_op"):
            layers.append(NoCache())
        elif _flag(cfg, i, attn, "attention", "replace_with_linear"):
            layers.append(NoCache())
            attention += hidden * hidden
            other += hidden
        else:
            group = attn.get("n_heads_in_group")
            if isinstance(group, bool) or not isinstance(group, int) or group < 1 or heads % group:
                raise KvplanError(f"{cfg.where}: block_configs[{i}].attention.n_heads_in_group must divide "
                                  f"{heads} heads, got {group!r:.40}", EXIT_USAGE)
            kv = heads // group
            layers.append(FullAttention(kv, head_dim))
            attention += 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
            other += hidden
        if _flag(cfg, i, ffn, "ffn", "no_op"):
            continue
        other += hidden
        if _flag(cfg, i, ffn, "ffn", "replace_with_linear"):
            mlp += hidden * hidden
        else:
            width = _ffn_width(cfg, i, ffn, hidden)
            widest = max(widest, width)
            mlp += 3 * hidden * width
    if any(_flag(cfg, i, _block(cfg, i, b, p), p, "replace_with_linear") for i, b in enumerate(blocks)
           for p in ("attention", "ffn")):
        notes.append("replace_with_linear blocks (one hidden x hidden map) cache nothing; vLLM's DeciLM "
                     "does not build them")
    tied = cfg.bool("tie_word_embeddings", False)
    params = ParamCounts(embedding=vocab * hidden, lm_head=0 if tied else vocab * hidden,
                         attention=attention, mlp=mlp, other=other + hidden)
    geometry = dict(hidden=hidden, heads=heads, act_width=widest or hidden, vocab=vocab, notes=notes,
                    max_context=cfg.int("max_position_embeddings", default=2048, limit="window"))
    return geometry, layers, params
