"""Qwen3.5's vision transformer and Kimi-K2.5's MoonViT, as vLLM 0.19 builds them.

* Qwen3.5 (vllm/model_executor/models/qwen3_5.py v0.19.0: Qwen3_5ForConditionalGeneration and the
  MoE variant build qwen3_vl.py's Qwen3_VisionTransformer). D = hidden_size, I = intermediate_size,
  depth layers, P = patch_size, T = temporal_patch_size, C = in_channels, m = spatial_merge_size,
  out = out_hidden_size: a Conv3d patch embedding C T P^2 x D with bias; a learned position table
  num_position_embeddings x D; per block two LayerNorms (weight + bias), qkv D x 3D and proj D x D with
  biases, an MLP D -> I -> D with biases; the patch merger: a LayerNorm of D, fc1 m^2 D x m^2 D and fc2
  m^2 D x out with biases; one more merger per `deepstack_visual_indexes` entry (its LayerNorm over
  m^2 D). Column/row-parallel linears: split over tp (mm_encoder_tp_mode "data" not modelled).
  transformers' Qwen3_5VisionModel on the meta device: 460,730,096 for Qwen3.5-27B.
* Kimi-K2.5 (kimi_k25.py + kimi_k25_vit.py v0.19.0: MoonViT3dPretrainedModel + KimiK25MultiModalProjector).
  D = hidden_size, I = intermediate_size, P = patch_size, H x W = init_pos_emb_height x width (the
  published file spells them vt_hidden_size, ...: read either, refused when both differ): a Conv2d
  3 P^2 x D with bias; a position table H x W x D; per block two LayerNorms, wqkv D x 3D and wo D x D
  with biases, an MLP D -> I -> D with biases; a final LayerNorm. The projector (ReplicatedLinear:
  whole on every tp rank): a LayerNorm of D, linear_1 m D x m D and linear_2 m D x mm_hidden with
  biases, m = the merge kernel's area; mm_hidden is the text hidden size unless the config sets
  another (vLLM's KimiK25Config replaces one equal to D). The temporal sin-cos table is a computed buffer.
"""

from __future__ import annotations

from kvplan.readers.towers.parts import _int, vit_block


def _merger(wide: int, out: int) -> int:
    """A patch merger's two linear layers with biases: wide -> wide -> out."""
    return (wide * wide + wide) + (wide * out + out)


def qwen3_5(vc: dict) -> int | None:
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "depth")
    p, t, c = _int(vc, "patch_size"), _int(vc, "temporal_patch_size", 2), _int(vc, "in_channels", 3)
    m, out, pos = _int(vc, "spatial_merge_size", 2), _int(vc, "out_hidden_size"), _int(vc, "num_position_embeddings")
    deep = vc.get("deepstack_visual_indexes") or []
    if None in (d, i, n, p, t, c, m, out, pos) or not isinstance(deep, list):
        return None
    wide = m * m * d
    merger = _merger(wide, out)
    return (c * t * p * p * d + d + pos * d + n * vit_block(d, i)
            + merger + 2 * d + len(deep) * (merger + 2 * wide))


def _either(vc: dict, key: str) -> int | None:
    """`key` or the published file's `vt_key`; None when missing or when both are set and differ."""
    a, b = _int(vc, key), _int(vc, "vt_" + key)
    if (key in vc and a is None) or ("vt_" + key in vc and b is None) or (a is not None and b is not None and a != b):
        return None
    return a if a is not None else b


def moonvit(vc: dict, text_hidden: int) -> tuple[int, int] | None:
    """(tower, projector) of Kimi-K2.5."""
    d, i, n = _either(vc, "hidden_size"), _either(vc, "intermediate_size"), _either(vc, "num_hidden_layers")
    p, h, w = _int(vc, "patch_size"), _int(vc, "init_pos_emb_height"), _int(vc, "init_pos_emb_width")
    merge = vc.get("merge_kernel_size")
    if (None in (d, i, n, p, h, w) or not isinstance(merge, list) or len(merge) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < 64 for x in merge)
            or vc.get("mm_projector_type", "patchmerger") != "patchmerger"
            or vc.get("pos_emb_type", "divided_fixed") != "divided_fixed"):
        return None
    mm = _int(vc, "mm_hidden_size", d)
    if mm is None:
        return None
    mm = text_hidden if mm == d else mm
    tower = 3 * p * p * d + d + h * w * d + n * vit_block(d, i) + 2 * d
    wide = merge[0] * merge[1] * d
    projector = 2 * d + _merger(wide, mm)
    return tower, projector
