"""A `deepseek2` GGUF's metadata (DeepSeek-V2, V2-Lite, V3, R1) as the config.json it was converted from, in the MLA
form llama.cpp runs today; the other forms refused with the reason.

llama.cpp reads these keys for LLM_ARCH_DEEPSEEK2 in llama_model::load_hparams (ggml-org/llama.cpp src/llama-model.cpp,
the `case LLM_ARCH_DEEPSEEK2` block: `is_lite = (hparams.n_layer == 27)`; keys named in src/llama-arch.cpp
LLM_KV_NAMES): `leading_dense_block_count` (config first_k_dense_replace), `attention.q_lora_rank` (not read for the
27-layer V2-Lite, whose query is one `attn_q` matrix), `attention.kv_lora_rank`, `attention.key_length_mla` /
`attention.value_length_mla` (optional there), `expert_feed_forward_length` (moe_intermediate_size),
`expert_shared_count`, `expert_weights_scale`, `expert_gating_func` (absent: softmax, "for compatibility with existing
DeepSeek V2 and V2.5 GGUFs"; 2, sigmoid, is V3/R1, whose router has a score-correction bias `exp_probs_b`), and the
common `expert_count`, `expert_used_count`, `rope.dimension_count` (qk_rope_head_dim), `feed_forward_length`.

The MLA form: a file written since llama.cpp stores the latent (its convert splits kv_b_proj into `attn_k_b` /
`attn_v_b`) has `attention.key_length` = kv_lora_rank + rope (576 on V3), `attention.value_length` = kv_lora_rank
(512), one KV head, and the per-head widths in `key_length_mla` = qk_nope + rope (192) and `value_length_mla` =
v_head_dim (128). Its cache per token and layer is the latent and the rope key, 576 values, which kvplan's llama.cpp
engine sizes from the MLA layer (kvplan.engines.llamacpp: K only now, a V of kv_lora_rank too in its older versions).
An older file without `key_length_mla` (key_length 192, value_length 128, `attn_kv_b`) is refused: llama.cpp runs it
without the latent cache (src/models/deepseek2.cpp llm_build_deepseek2: `is_mla = (hparams.n_embd_head_k_mla != 0 &&
hparams.n_embd_head_v_mla != 0)`, otherwise the head sizes "when treating as MHA", 192 / 128 a head cached for every
head), and kvplan does not plan that form. A file declaring `nextn_predict_layers` is refused too:
llama.cpp's converter leaves DeepSeek-V3's MTP layer out of the file (DeepseekV2Model `skip_mtp = True`: "skip
Multi-Token Prediction (MTP) layers", tensors of model.layers.N with N >= num_hidden_layers dropped; ggml-org/llama.cpp
convert_hf_to_gguf.py, conversion/deepseek.py in its newer tree), so block_count is the config's 61 and kvplan plans
no MTP module; a file that keeps the layer lays its blocks out differently. The parameters the layout implies are
checked against the file's tensors (kvplan.sources.gguf, within 1 %), which a file holding V3's MTP layer fails (14B
of 671B, 2 %: deepseek-ai/DeepSeek-V3 README, "671B of the Main Model weights and 14B of the ... MTP Module").
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError

_SOFTMAX, _SIGMOID = 1, 2  # llama.cpp llama_expert_gating_func_type


def deepseek2_config(k, tensors: dict[str, tuple[int, ...]]) -> dict:
    """The config.json of a `deepseek2` file whose `{arch}.<key>` values `k` (readers.gguf.Keys) reads."""
    def refuse(why: str) -> KvplanError:
        return KvplanError(f"{k.where}: {why}; refused rather than planned as another layout", EXIT_USAGE)

    if f"{k.arch}.attention.key_length_mla" not in k.meta:
        raise refuse(f"{k.arch}.attention.key_length_mla is missing: an older DeepSeek GGUF (before llama.cpp stored "
                     "the MLA latent), which llama.cpp runs with a per-head K and V cache kvplan does not plan; "
                     "re-download a current conversion")
    if k.int("nextn_predict_layers", 0):
        raise refuse(f"{k.arch}.nextn_predict_layers declares multi-token-prediction layers in the file, a layout "
                     "kvplan does not read from a GGUF file")
    layers, rope, rank = k.int("block_count"), k.int("rope.dimension_count"), k.int("attention.kv_lora_rank")
    heads = k.per_layer("attention.head_count", layers)
    k_mla, v_mla = k.int("attention.key_length_mla"), k.int("attention.value_length_mla")
    latent = (k.int("attention.key_length"), k.int("attention.value_length"), k.per_layer(
        "attention.head_count_kv", layers))
    if latent != (rank + rope, rank, 1) or not 0 < rope < k_mla:
        raise refuse(f"{k.arch}: key_length / value_length / head_count_kv {latent} are not the MLA latent's "
                     f"({rank + rope}, {rank}, 1) for kv_lora_rank {rank} and rope {rope}, or key_length_mla {k_mla} "
                     "is not above the rope width")
    gating = k.int("expert_gating_func", _SOFTMAX)
    if gating not in (_SOFTMAX, _SIGMOID):
        raise refuse(f"{k.arch}.expert_gating_func {gating} is neither softmax (1) nor sigmoid (2)")
    config = {
        "model_type": "deepseek_v3" if gating == _SIGMOID else "deepseek_v2", "architectures": [f"gguf:{k.arch}"],
        "hidden_size": k.int("embedding_length"), "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": heads, "kv_lora_rank": rank, "qk_rope_head_dim": rope, "qk_nope_head_dim": k_mla - rope,
        "v_head_dim": v_mla, "intermediate_size": k.int("feed_forward_length"),
        "moe_intermediate_size": k.int("expert_feed_forward_length"), "n_routed_experts": k.int("expert_count"),
        "num_experts_per_tok": k.int("expert_used_count"), "n_shared_experts": k.int("expert_shared_count"),
        "first_k_dense_replace": k.int("leading_dense_block_count"), "moe_layer_freq": 1,
        "num_nextn_predict_layers": 0, **k.common(tensors),
    }
    if "blk.0.attn_q_a.weight" in tensors:  # a compressed query (V2, V3, R1); V2-Lite's is one attn_q matrix
        config["q_lora_rank"] = k.int("attention.q_lora_rank")
    return config
