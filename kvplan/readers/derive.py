"""A spec for a model_type kvplan has no reader for, derived from transformers' own classes.

Used only when the config's keys do not fully determine a standard decoder and the `[transformers]`
extra is installed: the model is built on the meta device (kvplan.readers.hf_meta: no weights, no memory)
and read back: each layer's cache tensors give its kind and shape (keys and values per token,
convolution and recurrent states per sequence), its parameters give the weights by role. What
this cannot know is said in the spec's notes: states are transformers' layout (vLLM's conv state
is one column shorter) and are not assumed to split over tensor-parallel ranks. A layer that
holds both a KV cache and a state, or a sliding layer whose K and V differ, is refused.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import FullAttention, MLALatent, NoCache, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ParamCounts

TOKENS = 8
_LAYER = re.compile(r"layers\.(\d+)\.")


def _shapes(value) -> list[tuple[int, ...]]:
    import torch

    if isinstance(value, torch.Tensor):
        return [tuple(value.shape)] if value.numel() else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _shapes(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _shapes(v)]
    return []


def _layer(cache_layer, i: int, where: str):
    keys, values = _shapes(getattr(cache_layer, "keys", None)), _shapes(getattr(cache_layer, "values", None))
    conv = _shapes(getattr(cache_layer, "conv_states", None))
    rec = _shapes(getattr(cache_layer, "recurrent_states", None))
    conv_n = sum(_prod(s) for s in conv)
    rec_n = sum(_prod(s) for s in rec)
    if keys and (conv_n or rec_n):
        raise KvplanError(f"{where}: layer {i} holds both a KV cache and a state; kvplan has no layer kind for that",
                          EXIT_USAGE)
    if keys:
        _, heads, _, k_dim = keys[0]
        v_dim = values[0][3] if values else 0
        window = getattr(cache_layer, "sliding_window", None)
        if isinstance(window, int) and window > 0:
            if v_dim != k_dim:
                raise KvplanError(f"{where}: layer {i} is a sliding layer with K and V of different widths", EXIT_USAGE)
            return SlidingWindow(heads, k_dim, window)
        if not values:  # one latent per token (MLA as transformers stores it)
            return MLALatent(k_dim, 0)
        return FullAttention(heads, k_dim, v_dim if v_dim != k_dim else 0)
    if conv_n or rec_n:
        return RecurrentState(conv_n, rec_n, 1, "derived")
    return NoCache()


def _prod(shape) -> int:
    n = 1
    for x in shape[1:]:  # drop the batch axis
        n *= x
    return n


def _params(model, hf) -> ParamCounts:
    seen, roles = set(), dict(embedding=0, lm_head=0, attention=0, mlp=0, experts=0, shared_experts=0, router=0,
                              other=0)
    moe_layers: set[str] = set()  # the layer indices that hold routed experts (fused_moe buffers, EP, stage mix)
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        n, lname = p.numel(), name.lower()
        if "embed" in lname:
            roles["embedding"] += n
        elif lname.startswith("lm_head"):
            roles["lm_head"] += n
        elif ".experts." in lname or lname.endswith(".experts") or ".experts_" in lname:
            roles["experts"] += n
            moe_layers.update(_LAYER.findall(lname)[:1])
        elif "shared_expert" in lname:
            roles["shared_experts"] += n
        elif ("router" in lname or lname.endswith(".gate.weight")) and p.dim() == 2:
            roles["router"] += n
        elif p.dim() < 2:
            roles["other"] += n
        elif ".mlp." in lname or "feed_forward" in lname or ".ffn." in lname:
            roles["mlp"] += n
        else:
            roles["attention"] += n
    experts = _first_int(hf, "num_local_experts", "num_experts", "n_routed_experts")
    top_k = _first_int(hf, "num_experts_per_tok", "top_k_experts", "moe_topk")
    active = roles["experts"] * top_k // experts if experts and top_k else roles["experts"]
    return ParamCounts(**roles, experts_active=active, num_experts=experts, experts_per_token=top_k,
                       num_moe_layers=len(moe_layers) if experts else 0)


def _first_int(hf, *names: str) -> int:
    for n in names:
        v = getattr(hf, n, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def derive(config: dict, where: str) -> tuple[dict, list, ParamCounts, str]:
    """(geometry, layers, params, class name) of `config` as transformers builds it on the meta device."""
    import torch
    import transformers

    data = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    verbosity = transformers.logging.get_verbosity()
    try:  # transformers' own deprecation chatter is not the user's business (issue 25: it reached stderr)
        transformers.logging.set_verbosity_error()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf = transformers.AutoConfig.for_model(**data)
            with torch.device("meta"):
                model = transformers.AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
                out = model(input_ids=torch.zeros(1, TOKENS, dtype=torch.long), use_cache=True)
            cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)  # (the old name warns)
    except Exception as exc:  # noqa: BLE001 - a foreign model's failure is the user's answer, in one line
        first = str(exc).splitlines()[0][:100] if str(exc) else ""
        raise KvplanError(f"{where}: transformers could not build or run it on the meta device to derive its layout "
                          f"({type(exc).__name__}: {first}); kvplan does not guess", EXIT_USAGE) from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    cache_layers = getattr(cache, "layers", None)
    if not cache_layers:
        raise KvplanError(f"{where}: transformers returned no per-layer cache to derive a layout from", EXIT_USAGE)
    layers = [_layer(c, i, where) for i, c in enumerate(cache_layers)]
    hidden = _first_int(hf, "hidden_size", "d_model") or 1
    geometry = dict(
        hidden=hidden, heads=_first_int(hf, "num_attention_heads", "num_heads") or 1,
        act_width=_first_int(hf, "intermediate_size") or 4 * hidden, vocab=_first_int(hf, "vocab_size") or 1,
        max_context=_first_int(hf, "max_position_embeddings") or 2048,
        notes=[f"derived from transformers {transformers.__version__} {type(model).__name__} on the meta device: "
               "states in transformers' layout, not split over tensor-parallel ranks"],
    )
    return geometry, layers, _params(model, hf), type(model).__name__


def transformers_knows(model_type: str) -> bool | None:
    """Whether the installed transformers has a config class for `model_type`, read from its auto-mapping
    source files without importing it (importing transformers and torch costs seconds: issue 25, a refusal
    took 5.7 s); None where those files are not where this reads them (then transformers is asked)."""
    spec = importlib.util.find_spec("transformers")  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    auto = Path(list(spec.submodule_search_locations)[0]) / "models" / "auto"
    texts = [f.read_text(errors="replace") for f in (auto / "auto_mappings.py", auto / "configuration_auto.py")
             if f.is_file()]
    if not texts:
        return None
    named = re.compile(r"[\"']" + re.escape(model_type) + r"[\"']\s*[:,]")
    return any(named.search(t) for t in texts)
