"""Counting a multimodal model's vision tower and projector from its config's `vision_config`.

Only towers whose every tensor kvplan knows are counted; any other vision_config returns None and
the caller says the vision weights are not counted. Checked against transformers' own classes
built on the meta device (tests/test_vision_params.py):

* Gemma 3 (`siglip_vision_model`, transformers SiglipVisionModel + Gemma3MultiModalProjector):
  a conv patch embedding 3 x P x P -> D with bias, a learned position table of (image/P)^2 x D,
  per layer two LayerNorms (weight + bias), q/k/v/o D x D with bias and an MLP D -> I -> D with
  biases, a post LayerNorm, the attention-pooling head only when `vision_use_head`; the projector
  is a D x text-hidden matrix plus an RMSNorm of D. gemma-3-27b-it: 416,866,032 + 6,194,304.
* Llama 4 (`llama4_vision_model`, Llama4VisionModel + Llama4MultiModalProjector): a bias-free
  patch linear 3 x P x P -> D, a class embedding D, a position table ((image/P)^2 + 1) x D, pre/post
  LayerNorms, per layer q/k/v/o D x D with bias, an MLP D -> I -> D with biases and two LayerNorms;
  the pixel-shuffle adapter's bias-free MLP I -> projector_input_dim and projector_output_dim ->
  projector_output_dim, and a bias-free projector vision_output_dim -> text hidden. Llama-4-Scout: 850,960,896 + 20,971,520.
"""

from __future__ import annotations


def _int(vc: dict, key: str, default: int | None = None) -> int | None:
    v = vc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 10**7:
        return None
    return v


def vision_params(config: dict, text_hidden: int) -> int | None:
    """Parameters of the vision tower plus projector, or None when kvplan cannot count them exactly."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    kind = vc.get("model_type")
    if kind == "siglip_vision_model" and config.get("model_type") == "gemma3":
        return _siglip(vc, text_hidden)
    if kind == "llama4_vision_model":
        return _llama4(vc, text_hidden)
    return None


def _siglip(vc: dict, text_hidden: int) -> int | None:
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    image, patch, ch = _int(vc, "image_size"), _int(vc, "patch_size"), _int(vc, "num_channels", 3)
    if None in (d, i, n, image, patch, ch) or not patch:
        return None
    if vc.get("vision_use_head", True):
        return None  # SigLIP's attention-pooling head: Gemma 3 ships without it; not counted
    per_layer = 4 * (d * d + d) + (d * i + i) + (i * d + d) + 2 * 2 * d
    tower = ch * patch * patch * d + d + (image // patch) ** 2 * d + n * per_layer + 2 * d
    projector = d * text_hidden + d  # mm_input_projection_weight + mm_soft_emb_norm
    return tower + projector


def _llama4(vc: dict, text_hidden: int) -> int | None:
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    image, patch, ch = _int(vc, "image_size"), _int(vc, "patch_size"), _int(vc, "num_channels", 3)
    p_in, p_out = _int(vc, "projector_input_dim"), _int(vc, "projector_output_dim")
    out = _int(vc, "vision_output_dim")
    if None in (d, i, n, image, patch, ch, p_in, p_out, out) or not patch:
        return None
    if vc.get("multi_modal_projector_bias"):
        return None
    per_layer = 4 * (d * d + d) + (d * i + i) + (i * d + d) + 2 * 2 * d
    positions = (image // patch) ** 2 + 1
    tower = ch * patch * patch * d + d + positions * d + 2 * 2 * d + n * per_layer
    adapter = i * p_in + p_out * p_out  # Llama4VisionMLP2: fc1 I -> p_in, fc2 p_out -> p_out, no biases
    return tower + adapter + out * text_hidden
