"""transformers' own view of a model's cache, from a model built on the meta device (no weights, no memory).

Needs the `[transformers]` extra; torch and transformers are imported only here, inside functions.
`cache_profile` builds the model from its config.json with transformers' config class on the
"meta" device, runs a forward pass of T and 2T tokens (shapes only: nothing is computed or
allocated) and reads, layer by layer, what the returned cache holds: values that grow with the
sequence (keys and values) and values that do not (convolution and recurrent states).
`compare` puts that beside kvplan's reading (kvplan models check). transformers lays out some
states differently from vLLM (a Mamba conv state keeps conv_kernel columns, vLLM conv_kernel - 1),
so states are reported, and only the growing part must agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError

TOKENS = 8  # below any real sliding window, so per-token values are not clipped


@dataclass(frozen=True)
class LayerCache:
    per_token: int  # cache values one more token adds (keys + values)
    fixed: int  # values that do not grow (conv and recurrent states)
    kind: str  # transformers' cache layer class


def _numel(value) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, dict):
        return sum(_numel(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_numel(v) for v in value)
    return 0


_FIELDS = ("keys", "values", "conv_states", "recurrent_states", "key_cache", "value_cache", "ssm_states",
           "compressed_kv", "indexer_keys")


def _run(config: dict, tokens: int) -> list[tuple[int, str]]:
    import torch
    import transformers

    data = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    data = {**data}
    model_type = data.get("model_type") or config.get("model_type")
    try:
        hf = transformers.AutoConfig.for_model(**data)
    except (ValueError, KeyError) as exc:
        raise KvplanError(f"transformers {transformers.__version__} has no config class for model_type "
                          f"{model_type!r} ({str(exc).splitlines()[0][:80]})", EXIT_USAGE) from None
    with torch.device("meta"):
        try:
            # bf16, as checkpoints ship: some expert kernels (grouped mm) accept no other dtype
            model = transformers.AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
            out = model(input_ids=torch.zeros(1, tokens, dtype=torch.long), use_cache=True)
        except Exception as exc:  # noqa: BLE001 - any failure of a foreign model is reported, not raised
            raise KvplanError(f"transformers could not build or run {model_type!r} on the meta device: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}",
                              EXIT_ERROR) from None
    cache = getattr(out, "past_key_values", None)
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise KvplanError(f"transformers returned no per-layer cache for {model_type!r}", EXIT_ERROR)
    return [(sum(_numel(getattr(layer, f, None)) for f in _FIELDS), type(layer).__name__) for layer in layers]


def cache_profile(config: dict) -> list[LayerCache]:
    """Per decoder layer, what transformers' cache holds for one sequence (batch 1)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise KvplanError("this needs transformers and torch: pip install 'kvplan[transformers]'", EXIT_USAGE) from None
    a, b = _run(config, TOKENS), _run(config, 2 * TOKENS)
    if len(a) != len(b):
        raise KvplanError("transformers' cache changed its number of layers between runs", EXIT_ERROR)
    out = []
    for (n1, kind), (n2, _) in zip(a, b):
        per_token = (n2 - n1) // TOKENS
        out.append(LayerCache(per_token, n1 - per_token * TOKENS, kind))
    return out


@dataclass(frozen=True)
class Row:
    layers: str  # "0-3, 7"
    kvplan_per_token: int
    hf_per_token: int
    kvplan_state: int
    hf_state: int

    @property
    def agrees(self) -> bool:
        return self.kvplan_per_token == self.hf_per_token and bool(self.kvplan_state) == bool(self.hf_state)


def _ranges(idx: list[int]) -> str:
    parts, start = [], None
    for i, x in enumerate(idx):
        if start is None:
            start = x
        if i + 1 == len(idx) or idx[i + 1] != x + 1:
            parts.append(f"{start}" if start == x else f"{start}-{x}")
            start = None
    return ", ".join(parts)


def compare(spec, hf: list[LayerCache]) -> list[Row]:
    """kvplan's layers beside transformers', grouped by identical figures (at tp 1)."""
    if len(hf) != spec.num_layers:
        raise KvplanError(f"transformers caches {len(hf)} layers, kvplan reads {spec.num_layers}", EXIT_ERROR)
    groups: dict[tuple, list[int]] = {}
    for i, (layer, h) in enumerate(zip(spec.layers, hf)):
        held = layer.tokens_held(TOKENS)
        key = (layer.elements_per_token(1) if held else 0, h.per_token, layer.state_elements(1), h.fixed)
        groups.setdefault(key, []).append(i)
    return [Row(_ranges(idx), *key) for key, idx in groups.items()]
