"""DeepSeek Sparse Attention (DSA): DeepSeek-V3.2 (`deepseek_v32`) and GLM-5 (`glm_moe_dsa`).

A DSA model is DeepSeek-V3's MLA decoder with a "lightning indexer" on every layer. The config
says so with `index_head_dim`, `index_n_heads` and `index_topk` (transformers 5.x
`models/deepseek_v32/configuration_deepseek_v32.py`: defaults 128, 64, 2048 and every layer
`indexed_attention`; `models/glm_moe_dsa/configuration_glm_moe_dsa.py`: 128, 32, 2048). vLLM runs both
through `model_executor/models/deepseek_v2.py` (DeepseekV2ForCausalLM with `is_v32 = hasattr(config,
"index_topk")`); each layer caches the MLA latent and the indexer's fp8 keys, sized in
`kvplan.model.layers.IndexedMLA`. Weights: DeepSeek-V3's (kvplan.readers.params, as `deepseek_v3`) plus the indexer's
wq_b (q_lora_rank x heads x dim), wk (hidden x dim), k_norm (LayerNorm) and weights_proj (hidden x heads).

GLM-5.2's IndexCache (`index_topk_freq` > 1 or `index_topk_pattern`): only some layers run an indexer,
the others reuse the top-k of the last one that did. vLLM (deepseek_v2.py at commit
002d6073aa034d4f5545d45021b0e56d1f3c3593, DeepseekV2MLAAttention.__init__) builds an Indexer, and with
it the indexer key cache, on backbone layer i unless it skips top-k there:
  * no pattern: skip when max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0 (offset default 2);
  * a pattern: skip when pattern[i] == "S" (layers past the pattern's end run their indexer).
A skipping layer is an IndexedMLA with index_head_dim 0: its latent is still DSA's (fp8_ds_mla under an
fp8 cache), it holds no indexer keys and has no indexer weights. vLLM does not read `indexer_types`;
a config whose `indexer_types` disagrees with the rule above is refused, not guessed.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import IndexedMLA
from kvplan.model.spec import ParamCounts
from kvplan.readers.geometry import mla_widths, read_geometry
from kvplan.readers.params import count_params

FAMILIES = {"deepseek_v32", "glm_moe_dsa"}
OWNS_INDEXER = True  # sizes the indexer's key cache (kvplan.readers.configs refuses indexers elsewhere)
DSA_KEYS = ("index_head_dim", "index_n_heads", "index_topk")


def _indexer_owners(cfg, n: int) -> list[bool]:
    """Per backbone layer: whether vLLM builds it an indexer (and an indexer key cache)."""
    freq = cfg.int("index_topk_freq", default=1, limit="num_hidden_layers")
    offset = cfg.int("index_skip_topk_offset", default=2, minimum=0, limit="num_hidden_layers")
    pattern = cfg.raw("index_topk_pattern")
    if pattern is None:
        owners = [max(i - offset + 1, 0) % freq == 0 for i in range(n)]
    elif isinstance(pattern, (str, list)) and all(p in ("F", "S") for p in pattern):
        owners = [i >= len(pattern) or pattern[i] != "S" for i in range(n)]
    else:
        raise KvplanError(f"{cfg.where}: index_topk_pattern must be letters F (own indexer) or S (shared), "
                          f"got {pattern!r:.40}", EXIT_USAGE)
    listed = cfg.raw("indexer_types")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) < n or not all(t in ("full", "shared") for t in listed[:n]):
            raise KvplanError(f"{cfg.where}: indexer_types must list full or shared for each of the {n} layers",
                              EXIT_USAGE)
        if [t == "full" for t in listed[:n]] != owners:
            raise KvplanError(f"{cfg.where}: indexer_types disagrees with index_topk_freq / index_skip_topk_offset / "
                              "index_topk_pattern, which vLLM follows; refused rather than guessed", EXIT_USAGE)
    return owners


def _check_layout(cfg, n: int) -> None:
    types = cfg.raw("layer_types")
    if types is not None and (not isinstance(types, list) or any(t != "indexed_attention" for t in types[:n])):
        raise KvplanError(f"{cfg.where}: layer_types of a DSA model must all be indexed_attention", EXIT_USAGE)
    mlp = cfg.raw("mlp_layer_types")
    if mlp is not None:
        first = cfg.int("first_k_dense_replace", default=0, minimum=0)
        if not isinstance(mlp, list) or mlp[:n] != ["dense"] * min(first, n) + ["sparse"] * max(0, n - first):
            raise KvplanError(f"{cfg.where}: mlp_layer_types differs from first_k_dense_replace = {first}; "
                              "kvplan reads only that layout", EXIT_USAGE)


def _refuse_unread_pool_keys(cfg) -> None:
    """Keys that change what the engines allocate, which kvplan does not size: planned without them a pool would be
    silently wrong. `index_kpool` > 1 pools the indexer's keys (SGLang pages 64 x index_kpool tokens, 0.5.23
    arg_groups/model_overrides/deepseek_v2.py L160-173; vLLM's pooled-state indexer caches); `learnable_sink` makes
    SGLang keep the cache in bfloat16 whatever the GPU (0.5.20 on; 0.5.23 arg_groups/overrides.py L491-546)."""
    pool = cfg.raw("index_kpool")
    if pool is not None and pool != 1:
        raise KvplanError(f"{cfg.where}: index_kpool = {pool!r} pools the DSA indexer's keys (pages of 64 x "
                          "index_kpool tokens), a pool kvplan does not size; this model is refused", EXIT_USAGE)
    if cfg.raw("learnable_sink"):
        raise KvplanError(f"{cfg.where}: learnable_sink changes the DSA cache's dtype (SGLang forces bfloat16 from "
                          "0.5.20), which kvplan does not read; this model is refused", EXIT_USAGE)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """(geometry, layers, parameter counts): every layer an IndexedMLA."""
    geometry = read_geometry(cfg, "deepseek_v3")
    # head_dim in a DSA config is the rope slice (transformers sets it to qk_rope_head_dim); MLA ignores it
    geometry["notes"] = [note for note in geometry["notes"] if not note.startswith("head_dim ")]
    n = geometry["num_layers"]
    _check_layout(cfg, n)
    _refuse_unread_pool_keys(cfg)
    for key in DSA_KEYS:
        cfg.int(key, limit="head_dim" if key == "index_head_dim" else "window")
    latent = (cfg.int("kv_lora_rank", limit="head_dim"), cfg.int("qk_rope_head_dim", limit="head_dim"))
    topk = cfg.int("index_topk", limit="window")
    widths = mla_widths(cfg)
    owner = IndexedMLA(*latent, cfg.int("index_head_dim", limit="head_dim"), topk,
                       cfg.int("index_n_heads", limit="head_dim"), **widths)
    sharer = IndexedMLA(*latent, 0, topk, 0, **widths)
    owners = _indexer_owners(cfg, n)
    layers = [owner if own else sharer for own in owners]
    if not all(owners):
        geometry["notes"].append(f"IndexCache: {sum(owners)} of {n} layers run a DSA indexer and cache its keys")
    return geometry, layers, count_params(cfg, "deepseek_v3", geometry, layers)
