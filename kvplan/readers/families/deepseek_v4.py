"""DeepSeek-V4 (`deepseek_v4`: DeepSeek-V4-Flash, DeepSeek-V4-Pro): compressed attention caches, as vLLM builds them.

Source: vLLM v0.20.0, where DeepSeek-V4 first landed (release notes: "Initial DeepSeek V4 support",
vllm-project/vllm#40860): `model_executor/models/deepseek_v4.py` (DeepseekV4DecoderLayer,
DeepseekV4MLAAttention's modules, DeepseekV4MoE, DeepseekV4Model), with the layer classes of
`model_executor/layers/deepseek_v4_attention.py` and `deepseek_compressor.py` (moved under
`vllm/models/deepseek_v4/` in v0.22.0, the same tensors and caches in v0.22.0 and v0.25.0).

Cache: layer i is a `kvplan.model.compressed.CompressedMLA` of ratio max(1, compress_ratios[i])
(`DeepseekV4DecoderLayer`: 0 means the sliding window only), window `sliding_window`, latent
`head_dim` with `qk_rope_head_dim` rope values, and on ratio-4 layers the indexer's `index_head_dim` keys
("Only C4A uses sparse attention and hence has indexer"). The MTP layer (compress_ratios past
num_hidden_layers) is not read: `--speculative mtp` is refused.

Parameters (D hidden, H heads x hd head_dim, ql q_lora_rank, G o_groups x ol o_lora_rank, E experts of
width I, S shared, k per token, V vocab, hc hc_mult, mix = (2 + hc) hc):
  * attention, quantized: fused_wqa_wkv D x (ql + hd) and, on ratio-4 layers, the indexer's wq_b
    ql x (index_n_heads x index_head_dim), both whole on every rank (`replicated`); wq_b ql x H hd,
    wo_a (H hd / G) x G ol, wo_b G ol x D, split by tp;
  * 16-bit and fp32 small tensors (`other`): attn_sink H, q_norm ql, kv_norm hd, attn/ffn norms 2 D,
    hyper-connections 2 (mix x hc D + mix + 3); compressors (quant_config None) ape ratio x coff hd,
    fused_wkv_wgate D x 2 coff hd, norm hd (coff = 2 for ratio 4, else 1); the indexer's weights_proj
    D x index_n_heads, k_norm LayerNorm 2 index_head_dim and its compressor (ratio 4, head index_head_dim);
    e_score_correction_bias E on the layers past num_hash_layers, a token-to-expert table V x k on the
    first num_hash_layers (int32, counted as one parameter each);
  * router D x E; routed experts E x 3 D I (`expert_dtype: fp4`: vLLM's uint8-packed fp4 with a uint8 scale
    per 32 values, priced as mxfp4); shared experts S x 3 D I;
  * embedding and (untied) lm_head V x D; final norm D; hc_head hc x hc D + hc + 1.
fp32 tensors are priced at 16 bits like every `other` parameter (for DeepSeek-V4-Flash about 70 MB low).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.compressed import CompressedMLA
from kvplan.model.spec import ParamCounts
from kvplan.readers.geometry import read_geometry

FAMILIES = {"deepseek_v4"}
OWNS_INDEXER = True  # sizes the indexer's key cache (kvplan.readers.configs refuses indexers elsewhere)
RATIOS = (1, 4, 128)  # the compressor's block sizes (CompressorStateCache asserts ratio in [4, 128])


def _ratios(cfg, n: int) -> list[int]:
    ratios = cfg.raw("compress_ratios")
    if (not isinstance(ratios, list) or len(ratios) < n
            or any(isinstance(r, bool) or not isinstance(r, int) or max(1, r) not in RATIOS for r in ratios[:n])):
        raise KvplanError(f"{cfg.where}: compress_ratios must list 0, 1, 4 or 128 for each of the {n} layers "
                          "(DeepSeek-V4's compressor supports ratios 4 and 128 only)", EXIT_USAGE)
    return [max(1, r) for r in ratios[:n]]


def read_layers(cfg, n: int) -> list[CompressedMLA]:
    window = cfg.int("sliding_window", limit="window")
    head_dim, rope = cfg.int("head_dim", limit="head_dim"), cfg.int("qk_rope_head_dim", limit="head_dim")
    index = cfg.int("index_head_dim", limit="head_dim")
    if cfg.int("num_key_value_heads", default=1, limit="num_key_value_heads") != 1 or rope >= head_dim:
        raise KvplanError(f"{cfg.where}: DeepSeek-V4 caches one latent head (num_key_value_heads 1) of head_dim "
                          "values, qk_rope_head_dim of them rotated", EXIT_USAGE)
    return [CompressedMLA(r, window, head_dim, rope, index if r == 4 else 0) for r in _ratios(cfg, n)]


def _attention(cfg, g: dict, layer: CompressedMLA) -> tuple[int, int, int]:
    """(quantized linear, of them replicated, 16-bit small) parameters of one layer's attention."""
    d, h, hd = g["hidden"], g["heads"], layer.head_dim
    ql, ol = cfg.int("q_lora_rank", limit="hidden_size"), cfg.int("o_lora_rank", limit="hidden_size")
    groups = cfg.int("o_groups", limit="num_attention_heads")
    if (h * hd) % groups:
        raise KvplanError(f"{cfg.where}: o_groups {groups} does not divide the {h} x {hd} attention outputs",
                          EXIT_USAGE)
    replicated = d * (ql + hd)
    linear = replicated + ql * h * hd + (h * hd // groups) * groups * ol + groups * ol * d
    small = h + ql + hd
    if layer.compress_ratio > 1:
        small += layer.compress_ratio * layer.coff * hd + d * 2 * layer.coff * hd + hd
    if layer.index_head_dim:
        ih, idim = cfg.int("index_n_heads", limit="num_attention_heads"), layer.index_head_dim
        replicated_index = ql * ih * idim
        linear, replicated = linear + replicated_index, replicated + replicated_index
        small += d * ih + 2 * idim + 4 * 2 * idim + d * 2 * 2 * idim + idim
    return linear, replicated, small


def count(cfg, g: dict, layers: list[CompressedMLA]) -> ParamCounts:
    d, n, vocab = g["hidden"], g["num_layers"], g["vocab"]
    experts, top_k = g["experts"], g["top_k"]
    width = cfg.int("moe_intermediate_size", limit="intermediate_size")
    shared = cfg.int("n_shared_experts", default=0, minimum=0, limit="experts")
    hc = cfg.int("hc_mult", default=1, limit="experts")
    hash_layers = cfg.int("num_hash_layers", default=0, minimum=0, limit="num_hidden_layers")
    if not experts or not top_k:
        raise KvplanError(f"{cfg.where}: DeepSeek-V4 routes every layer through n_routed_experts", EXIT_USAGE)
    mix = (2 + hc) * hc
    attention = replicated = other = 0
    for layer in layers:
        linear, rep, small = _attention(cfg, g, layer)
        attention, replicated, other = attention + linear, replicated + rep, other + small
    other += n * (2 * d + 2 * (mix * hc * d + mix + 3))
    other += min(hash_layers, n) * vocab * top_k + max(0, n - hash_layers) * experts
    other += d + hc * hc * d + hc + 1  # final norm, hc_head
    tied = cfg.bool("tie_word_embeddings", False)
    return ParamCounts(
        embedding=vocab * d, lm_head=0 if tied else vocab * d, attention=attention,
        experts=n * experts * 3 * d * width, experts_active=n * top_k * 3 * d * width,
        shared_experts=n * shared * 3 * d * width, router=n * d * experts, other=other, replicated=replicated,
        num_experts=experts, experts_per_token=top_k, num_moe_layers=n)


def quantization(cfg, quant):
    """`expert_dtype: fp4`: the routed experts ship as fp4 with a scale per 32 (vLLM's DeepseekV4 MoE
    method: uint8 weights of half the width, uint8 scales of 1/32), the rest as quantization_config says."""
    if str(cfg.raw("expert_dtype", default="") or "").lower() == "fp4":
        return replace(quant, experts_method="mxfp4")
    return quant


def read(cfg, model_type: str) -> tuple[dict, list, ParamCounts]:
    """(geometry, layers, parameter counts): one CompressedMLA per layer."""
    geometry = read_geometry(cfg, model_type)
    geometry["notes"] = [note for note in geometry["notes"] if not note.startswith("head_dim ")]
    layers = read_layers(cfg, geometry["num_layers"])
    by_ratio = {r: sum(1 for la in layers if la.compress_ratio == r) for r in RATIOS}
    geometry["notes"].append(f"DeepSeek-V4 layers: {by_ratio[1]} window-only, {by_ratio[4]} compressed 1:4 with "
                             f"an indexer, {by_ratio[128]} compressed 1:128")
    return geometry, layers, count(cfg, geometry, layers)
