"""Nemotron-H's per-layer list `layers_block_type`, read as the `hybrid_override_pattern` string.

Newer Nemotron-H checkpoints (Nemotron 3 Ultra 550B-A55B, Nemotron 3.5 Lightning) write the layer layout
the way transformers 5's NemotronHConfig stores it (models/nemotron_h/configuration_nemotron_h.py,
transformers 5.24.0): a list `layers_block_type` (alias `layer_types`) of "mamba", "attention", "mlp" and
"moe" (or their newer names "linear_attention" and "full_attention", `remap_legacy_layer_types`), and no
`hybrid_override_pattern` or `num_hidden_layers`: the layer count is the list's length, and the old
pattern is the property `_list_to_pattern` makes of it (M, *, -, E). vLLM builds the model from that
property (model_executor/models/nemotron_h.py v0.19.0: `config.hybrid_override_pattern[layer_idx]`, and
`len(config.hybrid_override_pattern)` layers), so kvplan restates the list as that string before its
common reader (kvplan.readers.configs, kvplan.readers.params) reads the layers.

A nemotron_h config with neither key is refused: transformers' default list (4 layers) and vLLM's own
config class default (52 layers) disagree, and reading every layer as attention would be silently wrong.
A config whose list and pattern, or list and num_hidden_layers, disagree is refused too (transformers
takes the list, an engine reading the pattern would build another model).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError

_SYMBOL = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}
_MAX_LAYERS = 10_000  # kvplan.readers.configs' limit on num_hidden_layers


def nemotron_h_layout(data: dict, where: str) -> dict:
    """The config with its block list restated as hybrid_override_pattern and num_hidden_layers (nemotron_h only)."""
    if data.get("model_type") != "nemotron_h":
        return data
    key = "layers_block_type" if "layers_block_type" in data else "layer_types" if "layer_types" in data else None
    pattern = data.get("hybrid_override_pattern")
    if key is None:
        if pattern is None:
            raise KvplanError(f"{where}: a nemotron_h config needs hybrid_override_pattern or layers_block_type to say "
                              "which layers are Mamba, attention, MLP or MoE; kvplan does not guess", EXIT_USAGE)
        return data
    types = data[key]
    if not isinstance(types, list) or not 0 < len(types) <= _MAX_LAYERS:
        raise KvplanError(f"{where}: {key} must be a list of 1 to {_MAX_LAYERS:,} layer types", EXIT_USAGE)
    unknown = sorted({repr(t)[:30] for t in types if not isinstance(t, str) or t not in _SYMBOL})
    if unknown:
        raise KvplanError(f"{where}: {key} has unknown entr{'y' if len(unknown) == 1 else 'ies'} "
                          f"{', '.join(unknown[:3])} (nemotron_h layers are {', '.join(sorted(_SYMBOL))})", EXIT_USAGE)
    restated = "".join(_SYMBOL[t] for t in types)
    if pattern is not None and pattern != restated:
        raise KvplanError(f"{where}: hybrid_override_pattern and {key} describe different layers; refused rather "
                          "than guessed which one an engine builds", EXIT_USAGE)
    layers = data.get("num_hidden_layers")
    if layers is not None and layers != len(types):
        raise KvplanError(f"{where}: num_hidden_layers is {layers!r:.20} but {key} lists {len(types)} layers; refused "
                          "rather than guessed which one an engine builds", EXIT_USAGE)
    out = {k: v for k, v in data.items() if k != "layer_types"}
    return {**out, "hybrid_override_pattern": restated, "num_hidden_layers": len(types)}
