"""Pixtral's vision encoder and Mistral 3's projector (Mistral Small 3.1/3.2, Magistral, Devstral, Ministral 3).

vLLM builds `Mistral3ForConditionalGeneration` (vllm/model_executor/models/mistral3.py at commit
02677fd9d49b6b4b3082967642a0d1ff45c36c0a; the same classes in the v0.8-v0.19 wheels) from a config whose
top-level model_type is `mistral3` and whose `vision_config` is `pixtral`: `PixtralHFVisionModel`
(pixtral.py) built only up to `vision_feature_layer` (`init_vision_tower_for_mistral3`,
`_get_num_hidden_layers`: -1 is every layer) and `Mistral3MultiModalProjector`. transformers'
modeling_pixtral.py / modeling_mistral3.py hold the same tensors (counted on the meta device in
tests/test_towers.py). D = hidden_size, I = intermediate_size, P = patch_size, C = num_channels,
m = spatial_merge_size, T = the text model's hidden size, L = the layers built:

* tower: patch_conv C P^2 x D without bias; ln_pre RMSNorm D; per layer attention_norm and ffn_norm
  (RMSNorm D each), q/k/v/o D x D without bias, a gated MLP gate/up D x I and down I x D without bias.
  The 2-D rotary table is computed, not loaded.
* projector: norm RMSNorm D; patch_merger.merging_layer m^2 D x D without bias; linear_1 D x T and
  linear_2 T x T, with biases when `multimodal_projector_bias`.

Tensor parallelism (vLLM): the attention (QKVParallelLinear + RowParallelLinear), the MLP
(MergedColumnParallelLinear + RowParallelLinear) and the projector's linear_1/linear_2 (Column/Row
parallel) are split over tp ranks; patch_conv, the RMSNorms and the merging layer (plain nn.Linear) are
whole on every rank (`replicated`).
"""

from __future__ import annotations

from kvplan.readers.towers.parts import Towers, _int


def _layers_built(config: dict, n: int) -> int | None:
    """Layers vLLM builds: up to vision_feature_layer (an int; negative counts from the end)."""
    layer = config.get("vision_feature_layer", -1)
    if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer <= n:
        return None  # a list of feature layers widens linear_1: tensors kvplan has not checked
    return n + layer + 1 if layer < 0 else layer


def mistral3(config: dict, text_hidden: int) -> Towers | None:
    """Pixtral tower + Mistral 3 projector, or None when a key kvplan has not checked is set."""
    vc = config["vision_config"]
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    p, c, m = _int(vc, "patch_size"), _int(vc, "num_channels", 3), _int(config, "spatial_merge_size", 2)
    if None in (d, i, n, p, c, m) or not n:
        return None
    built = _layers_built(config, n)
    if built is None:
        return None
    bias = config.get("multimodal_projector_bias", False)
    if not isinstance(bias, bool):
        return None
    patch, norms = c * p * p * d, d + built * 2 * d  # ln_pre and two norms per layer
    split_layers = built * (4 * d * d + 3 * d * i)
    merger = m * m * d * d
    projector = d + merger + (d * text_hidden + text_hidden * text_hidden) + (2 * text_hidden if bias else 0)
    total = patch + norms + split_layers + projector
    replicated = patch + norms + d + merger
    return Towers(total, replicated, "Pixtral vision tower and Mistral 3 projector")
