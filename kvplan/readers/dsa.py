"""DeepSeek Sparse Attention (DSA): DeepSeek-V3.2 (`deepseek_v32`) and GLM-5 (`glm_moe_dsa`).

A DSA model is DeepSeek-V3's MLA decoder with a "lightning indexer" on every layer. The config
says so with `index_head_dim`, `index_n_heads` and `index_topk` (transformers 5.x
`models/deepseek_v32/configuration_deepseek_v32.py`: defaults 128, 64, 2048 and every layer
`indexed_attention`; `models/glm_moe_dsa/configuration_glm_moe_dsa.py`: 128, 32, 2048). vLLM runs both
through `model_executor/models/deepseek_v2.py` (DeepseekV2ForCausalLM with `is_v32 = hasattr(config,
"index_topk")`); each layer caches the MLA latent and the indexer's fp8 keys, sized in
`kvplan.layers.IndexedMLA`. Weights: DeepSeek-V3's (kvplan.params, as `deepseek_v3`) plus the indexer's
wq_b (q_lora_rank x heads x dim), wk (hidden x dim), k_norm (LayerNorm) and weights_proj (hidden x heads).

Refused: a config whose layers do not all run their own indexer (GLM-5.x IndexCache: `indexer_types`
with "shared" entries, `index_topk_freq` > 1, `index_topk_pattern`): which of those layers vLLM gives
an indexer key cache has not been read from its source here, and a guess would be silently wrong.
"""

from __future__ import annotations

from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.layers import IndexedMLA
from kvplan.model import ParamCounts

FAMILIES = {"deepseek_v32", "glm_moe_dsa"}
DSA_KEYS = ("index_head_dim", "index_n_heads", "index_topk")


def _check_every_layer_indexed(cfg, n: int) -> None:
    shared = cfg.raw("indexer_types")
    if shared is not None and (not isinstance(shared, list) or any(t != "full" for t in shared[:n])):
        raise KvplanError(f"{cfg.where}: indexer_types shares the indexer between layers (IndexCache); kvplan has not "
                          "read how vLLM allocates the indexer key cache then, so this model is refused", EXIT_USAGE)
    for key in ("index_topk_pattern", "index_topk_freq"):
        value = cfg.raw(key)
        if value is not None and value != 1:
            raise KvplanError(f"{cfg.where}: {key} = {value!r:.40} shares the indexer between layers (IndexCache); "
                              "kvplan has not read how vLLM allocates it then, so this model is refused", EXIT_USAGE)
    types = cfg.raw("layer_types")
    if types is not None and (not isinstance(types, list) or any(t != "indexed_attention" for t in types[:n])):
        raise KvplanError(f"{cfg.where}: layer_types of a DSA model must all be indexed_attention", EXIT_USAGE)
    mlp = cfg.raw("mlp_layer_types")
    if mlp is not None:
        first = cfg.int("first_k_dense_replace", default=0, minimum=0)
        if mlp[:n] != ["dense"] * min(first, n) + ["sparse"] * max(0, n - first):
            raise KvplanError(f"{cfg.where}: mlp_layer_types differs from first_k_dense_replace = {first}; "
                              "kvplan reads only that layout", EXIT_USAGE)


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """(geometry, layers, parameter counts): every layer an IndexedMLA."""
    from kvplan.configs import read_geometry
    from kvplan.params import count_params

    geometry = read_geometry(cfg, "deepseek_v3")
    # head_dim in a DSA config is the rope slice (transformers sets it to qk_rope_head_dim); MLA ignores it
    geometry["notes"] = [note for note in geometry["notes"] if not note.startswith("head_dim ")]
    n = geometry["num_layers"]
    _check_every_layer_indexed(cfg, n)
    for key in DSA_KEYS:
        cfg.int(key, limit="head_dim" if key == "index_head_dim" else "window")
    layer = IndexedMLA(cfg.int("kv_lora_rank", limit="head_dim"), cfg.int("qk_rope_head_dim", limit="head_dim"),
                       cfg.int("index_head_dim", limit="head_dim"))
    layers = [layer] * n
    return geometry, layers, count_params(cfg, "deepseek_v3", geometry, layers)
