"""Gemma 4's vision and audio towers and their embedders, as vLLM 0.19 loads them.

vllm/model_executor/models/gemma4_mm.py (v0.19.0) Gemma4ForConditionalGeneration.__init__ builds
the vision tower with transformers' `AutoModel.from_config(config.vision_config)` (Gemma4VisionModel)
and `embed_vision`, and, when `audio_config` is not null, `AutoModel.from_config(config.audio_config)`
(Gemma4AudioModel) and `embed_audio`. Both towers are plain torch modules and the embedders'
projection a ReplicatedLinear: every tensor-parallel rank holds all of them whole. Each embedder is a
bias-free linear (vision: hidden_size, audio: output_proj_dims) -> text hidden and an RMSNorm without
a weight. Only `--limit-mm-per-prompt` 0 for every modality of a tower skips it (interfaces.py
_mark_tower_model), which kvplan does not model.

The tensors, from transformers' modeling_gemma4.py (5.x), counted on the meta device in
tests/test_vision_params.py; "clip" = the four scalar buffers (input/output min/max) a
Gemma4ClippableLinear loads from the checkpoint when `use_clipped_linears`:

* vision, D = hidden_size, I = intermediate_size, P = patch_size, S = position_embedding_size:
  patch linear 3 P^2 x D (no bias), position table 2 x S x D; per layer q (heads x head_dim), k and v
  (kv_heads x head_dim), o, all from/to D without bias, q/k RMSNorms of head_dim, four RMSNorms of D,
  a gated MLP gate/up D x I and down I x D, 7 clippable linears; std_bias + std_scale (2 D) when
  `standardize`. The rotary inverse frequencies are computed, not loaded (a few fp32 values).
* audio, D = hidden_size, c0, c1 = subsampling_conv_channels, k = conv_kernel_size: two 3 x 3 convs
  1 -> c0 -> c1 without bias, each with a LayerNorm weight; input linear (c0 / 4) c1 x D; per layer two
  macaron feed-forwards (D x 4D and 4D x D, two RMSNorms each), q/k/v/post D x D, a relative-position
  key projection D x D, a per-dim scale of D / heads, a light conv (D x 2D start, depthwise D x k, D x D
  end, two RMSNorms) and three RMSNorms; 10 clippable linears; the output projection D x out + out.
"""

from __future__ import annotations

from kvplan.readers.towers.parts import Towers, _int


def towers(config: dict, text_hidden: int) -> Towers | None:
    """Gemma 4's towers + embedders, all replicated over tp; None when any is not understood."""
    vc, ac = config.get("vision_config"), config.get("audio_config")
    if not isinstance(vc, dict) or vc.get("model_type") != "gemma4_vision":
        return None
    vision = _vision(vc)
    if vision is None:
        return None
    total, what = vision + _int(vc, "hidden_size") * text_hidden, "vision tower and embedder"
    if ac is not None:
        audio = _audio(ac) if isinstance(ac, dict) and ac.get("model_type") == "gemma4_audio" else None
        if audio is None:
            return None
        total += audio + _int(ac, "output_proj_dims") * text_hidden
        what = "vision and audio towers and their embedders"
    return Towers(total, total, what)


def _vision(vc: dict) -> int | None:
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    heads, patch, pos = _int(vc, "num_attention_heads"), _int(vc, "patch_size"), _int(vc, "position_embedding_size")
    if None in (d, i, n, heads, patch, pos) or not heads:
        return None
    hd = _int(vc, "head_dim", d // heads)
    kv = _int(vc, "num_key_value_heads", heads)
    if hd is None or kv is None or vc.get("attention_bias") or vc.get("layer_types") is not None:
        return None  # biases or per-layer kinds: tensors kvplan has not checked
    clip = 4 * 7 if vc.get("use_clipped_linears") else 0
    per_layer = (2 * d * heads * hd + 2 * d * kv * hd  # q, o and k, v
                 + 2 * hd + 4 * d + 3 * d * i + clip)  # q/k norms, four norms, gated MLP
    standardize = 2 * d if vc.get("standardize") else 0
    return 3 * patch * patch * d + 2 * pos * d + n * per_layer + standardize


def _audio(ac: dict) -> int | None:
    d, n, heads = _int(ac, "hidden_size"), _int(ac, "num_hidden_layers"), _int(ac, "num_attention_heads")
    k, out = _int(ac, "conv_kernel_size"), _int(ac, "output_proj_dims")
    ch = ac.get("subsampling_conv_channels")
    if (None in (d, n, heads, k, out) or not heads or not isinstance(ch, list) or len(ch) != 2
            or not all(isinstance(c, int) and not isinstance(c, bool) and 0 < c <= 10**5 for c in ch)):
        return None
    c0, c1 = ch
    clip = 4 * 10 if ac.get("use_clipped_linears") else 0
    feed_forward = 2 * (2 * 4 * d * d + 2 * d)
    attention = 5 * d * d + d // heads
    light_conv = 3 * d * d + d * k + 2 * d
    per_layer = feed_forward + attention + light_conv + 3 * d + clip
    subsample = (9 * c0 + c0) + (9 * c0 * c1 + c1) + (c0 // 4) * c1 * d
    return subsample + n * per_layer + d * out + out
