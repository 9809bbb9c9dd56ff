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


def _layers_built(config: dict, n: int, default: int = -1) -> int | None:
    """Layers vLLM builds: up to vision_feature_layer (an int; negative counts from the end)."""
    layer = config.get("vision_feature_layer", default)
    if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer <= n:
        return None  # a list of feature layers widens linear_1: tensors kvplan has not checked
    return n + layer + 1 if layer < 0 else layer


def _tower(config: dict, feature_layer: int) -> tuple[int, int, int] | None:
    """(the Pixtral tower's parameters, of them whole on every rank, its width D), or None."""
    vc = config["vision_config"]
    d, i, n = _int(vc, "hidden_size"), _int(vc, "intermediate_size"), _int(vc, "num_hidden_layers")
    p, c = _int(vc, "patch_size"), _int(vc, "num_channels", 3)
    if None in (d, i, n, p, c) or not n:
        return None
    built = _layers_built(config, n, feature_layer)
    if built is None:
        return None
    patch, norms = c * p * p * d, d + built * 2 * d  # ln_pre and two norms per layer
    return patch + norms + built * (4 * d * d + 3 * d * i), patch + norms, d


def _mlp(d: int, text_hidden: int, config: dict, bias_default: bool) -> int | None:
    """linear_1 D x T and linear_2 T x T, with biases when multimodal_projector_bias."""
    bias = config.get("multimodal_projector_bias", bias_default)
    if not isinstance(bias, bool):
        return None
    return d * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)


def mistral3(config: dict, text_hidden: int) -> Towers | None:
    """Pixtral tower + Mistral 3 projector, or None when a key kvplan has not checked is set."""
    tower, m = _tower(config, -1), _int(config, "spatial_merge_size", 2)
    if tower is None or m is None:
        return None
    total, replicated, d = tower
    mlp = _mlp(d, text_hidden, config, False)  # transformers Mistral3Config: multimodal_projector_bias False
    if mlp is None:
        return None
    merger = m * m * d * d
    return Towers(total + d + merger + mlp, replicated + d + merger, "Pixtral vision tower and Mistral 3 projector")


def llava(config: dict, text_hidden: int) -> Towers | None:
    """Pixtral-12B in the transformers format (`llava` + `pixtral`, vLLM llava.py: init_vision_tower_for_llava
    builds PixtralHFVisionModel; LlavaMultiModalProjector is linear_1 and linear_2, no norm nor merger).
    transformers LlavaConfig's defaults: vision_feature_layer -2, multimodal_projector_bias True."""
    tower = _tower(config, -2)
    if tower is None:
        return None
    total, replicated, d = tower
    mlp = _mlp(d, text_hidden, config, True)
    return None if mlp is None else Towers(total + mlp, replicated, "Pixtral vision tower and LLaVA projector")
