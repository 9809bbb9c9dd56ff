"""Reading a Hugging Face `config.json` into a ModelSpec: the list of layer specs and the weights.

This is where planners usually go wrong, so every rule here names the config keys it reads:
`head_dim` is honoured when given (Qwen3, Gemma, GLM-4.5 and gpt-oss set one that differs from
hidden / heads); `use_sliding_window: false` switches a window off; `layer_types`,
`sliding_window_pattern`, `hybrid_override_pattern`, `full_attention_interval` and
`attn_layer_period` lay out hybrids; MLA keeps one latent of kv_lora_rank + qk_rope_head_dim.
Parameter counting lives in kvplan.readers.params; this module decides what each layer is.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.layers import ChunkedLocal, FullAttention, LayerSpec, MLALatent, NoCache, SlidingWindow
from kvplan.model.spec import ModelSpec
from kvplan.readers import family_reader, unknown_family_keys
from kvplan.readers.attention_features import with_attention_features
from kvplan.readers.block_scales import with_block_shapes
from kvplan.readers.block_types import nemotron_h_layout
from kvplan.readers.cfg import Cfg, _Missing, check_shapes, dtype_note, read_dtype, shown, unwrap_text_config
from kvplan.readers.derive import derive, transformers_knows
from kvplan.readers.geometry import mla_widths, read_geometry
from kvplan.readers.kv_quant import read_checkpoint_kv
from kvplan.readers.mtp import read_mtp
from kvplan.readers.params import count_params
from kvplan.readers.quantization import read_quantization
from kvplan.readers.rope import read_rope_scaling, rope_cache_elems
from kvplan.readers.states import gated_deltanet_state, mamba_state, short_conv_state
from kvplan.readers.towers.vision import price_towers

# Families whose reader is written down here; any other model_type with the standard keys is
# read by the generic path (and the caller says so).
KNOWN_FAMILIES = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "phi", "deepseek_v2", "deepseek_v3",
    "kimi_k2", "gpt_oss", "glm4_moe", "glm4", "cohere", "cohere2", "falcon", "RefinedWebModel",
    "RefinedWeb", "gpt2", "nemotron_h", "jamba", "llama4", "llama4_text", "starcoder2", "yi",
    "mistral3", "olmo2", "granite", "internlm2", "exaone",
    "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "granitemoehybrid", "lfm2",
    "kimi_k25",
}


def spec_from_config(config: dict, name: str, *, source: str = "config.json",
                     towers_in_checkpoint: bool = False) -> tuple[ModelSpec, list[str]]:
    """Parse a config.json dict into a ModelSpec. Returns the spec and notices for the user.

    A declared vision/audio tower kvplan cannot count is refused (kvplan.readers.towers.vision.price_towers), unless
    `towers_in_checkpoint`: the caller sets the checkpoint's tensor bytes, which carry it."""
    if not isinstance(config, dict):
        raise KvplanError(f"{source}: expected a JSON object, got {type(config).__name__}", EXIT_USAGE)
    check_shapes(config, source)
    data, nested = unwrap_text_config(config)
    if nested:
        check_shapes(data, source)
    data = nemotron_h_layout(data, source)  # transformers 5's layers_block_type list as the pattern
    cfg = Cfg(data, source)
    notices: list[str] = dtype_note(cfg)
    model_type = str(data.get("model_type") or config.get("model_type") or "")
    dsa = [k for k in ("index_head_dim", "index_n_heads", "index_topk") if data.get(k) is not None]
    if dsa and model_type == "deepseek_v3":  # vLLM reads any config with index_topk as V3.2 (deepseek_v2.py is_v32)
        model_type = "deepseek_v32"
    family = family_reader(model_type)
    derived = None
    if model_type not in KNOWN_FAMILIES and family is None:
        derived = derive_unknown_layout(config, data, model_type, source)
        if derived is None:
            notices.append(f"model_type {model_type or '(none)'!r} has no dedicated reader; every key is a standard "
                           "decoder's, read with the standard keys")
        else:
            notices.append(f"model_type {model_type!r} has no reader in kvplan: its layout is derived from "
                           f"transformers' {derived[3]} built on the meta device (torch and transformers "
                           "imported for it: seconds, not the tenths a bundled model takes)")
    if dsa and not getattr(family, "OWNS_INDEXER", False):
        # an indexer key cache beside the attention cache, in a family no reader sizes (or refuses) it for
        raise KvplanError(f"{source}: {dsa[0]} declares a DeepSeek Sparse Attention indexer, whose key cache "
                          "kvplan does not size yet; it would be under-counted, so this model is refused", EXIT_USAGE)
    try:
        if derived is not None:
            geometry, layers, params = derived[:3]
        elif family is not None:
            geometry, layers, params = family.read(cfg, model_type)
        else:
            geometry = read_geometry(cfg, model_type)
            layers = read_layers(cfg, model_type, geometry)
            _refuse_cacheless(layers, source)  # before count_params, whose missing-key errors would hide why
            params = count_params(cfg, model_type, geometry, layers)
        _refuse_cacheless(layers, source)
        layers = with_attention_features(cfg, model_type, str(config.get("model_type") or ""), layers)
        try:  # the drafter sizes nothing unless --speculative asks for it: a key it cannot read is a note
            mtp_layers, mtp_params, mtp_notes = read_mtp(cfg, model_type, geometry, layers)
        except (KvplanError, _Missing) as exc:
            why = exc.message if isinstance(exc, KvplanError) else f"missing key {' / '.join(exc.names)}"
            mtp_layers, mtp_params, mtp_notes = (), None, [f"multi-token-prediction layers not read ({why}); "
                                                           f"{arg('speculative')} mtp is refused for this model"]
        notices += mtp_notes
    except _Missing as missing:
        raise KvplanError(
            f"{source}: missing key {' / '.join(missing.names)} (needed to size the model)", EXIT_USAGE
        ) from None
    notices += geometry.get("assumed", [])
    arch = _architecture(config, data)
    towers, tower_notes, tower_notice = price_towers(config, arch, geometry["hidden"], source,
                                                       in_checkpoint=towers_in_checkpoint)
    if towers.params:
        params = replace(params, vision=towers.params, vision_replicated=towers.replicated)
    if tower_notice:
        notices.append(tower_notice)
    heads = [getattr(la, "attention", la) for la in layers]  # Falcon-H1's ParallelHybrid: its attention half
    head_dim = next((getattr(la, "head_dim", 0) for la in heads if getattr(la, "head_dim", 0)), 0)
    rope = rope_cache_elems(data, model_type, head_dim)
    spec = ModelSpec(
        name=name,
        layers=tuple(layers),
        params=params,
        num_attention_heads=geometry["heads"],
        hidden_size=geometry["hidden"],
        intermediate_size=geometry["act_width"],
        vocab_size=geometry["vocab"],
        max_context=geometry["max_context"],
        dtype=read_dtype(cfg),
        quantization=getattr(family, "quantization", lambda _c, q: q)(cfg, read_quantization(cfg, params, layers)),
        rope_cache_elems=rope,
        rope_scaling=read_rope_scaling(data, model_type),
        family=model_type,
        architecture=arch,
        mla_kv_heads=_mla_kv_heads(cfg, geometry),
        notes=(*geometry["notes"], *tower_notes),
        source=source,
        vision_dims=_vision_dims(config) if towers.params else (),
        mm_tokens_per_image=_int_field(config, "mm_tokens_per_image") if towers.params else 0,
        mtp_layers=mtp_layers,
        mtp_params=mtp_params,
        checkpoint_kv=read_checkpoint_kv(cfg),
    )
    spec = with_block_shapes(spec)  # a block-FP8 checkpoint's tensor shapes, its scales counted tensor by tensor
    return spec, [*notices, *spec.quantization.notes]


def _architecture(config: dict, data: dict) -> str:
    """The config's first `architectures` entry (the outer config's, else the text config's), "" where none."""
    arch = config.get("architectures") or data.get("architectures") or [""]
    return str(arch[0]) if isinstance(arch, list) and arch else str(arch)


def _mla_kv_heads(cfg: Cfg, geometry: dict) -> int:
    """An MLA config's num_key_value_heads where it is not num_attention_heads (ModelSpec.mla_kv_heads), else 0; 0
    too where a family's own geometry carries no KV head count."""
    kv = geometry.get("kv_heads", 0)
    return kv if cfg.has("kv_lora_rank") and kv and kv != geometry["heads"] else 0


def _int_field(config: dict, key: str) -> int:
    """A non-negative integer field of the config as written, 0 where it is absent or not one."""
    v = config.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31 else 0


def _vision_dims(config: dict) -> tuple[int, ...]:
    """The vision_config's (num_hidden_layers, hidden_size) as written, 0 where a key is absent (Qwen's ViTs
    write `depth`); () when there is no vision_config dict."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return ()
    return tuple(v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
                 for v in (vc.get("num_hidden_layers"), vc.get("hidden_size")))


def _refuse_cacheless(layers, source: str) -> None:
    if all(layer.kind == "none" for layer in layers):
        raise KvplanError(f"{source}: no layer attends or keeps a state (every layer is MLP/MoE); "
                          "not a decoder kvplan can plan", EXIT_USAGE)


def derive_unknown_layout(config: dict, data: dict, model_type: str, source: str):
    """None when the keys fully determine a standard decoder; else transformers' layout, or a refusal.

    With the [transformers] extra the layout is derived from transformers' own classes on the meta
    device (kvplan.readers.derive); without it, or when transformers has no class for the model_type
    either, kvplan exits 2 naming the keys it does not understand.
    """
    odd = unknown_family_keys(data)
    if not odd:
        return None
    more = f" and {len(odd) - 5} more" if len(odd) > 5 else ""
    why = (f"{source}: model_type {model_type or '(none)'!r} has no reader in kvplan and its config has keys a "
           f"standard decoder does not ({', '.join(odd[:5])}{more}); kvplan does not guess a cache layout")
    if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None:
        raise KvplanError(f"{why}. Install the [transformers] extra (pip install 'kvplan[transformers]') to derive "
                          "it from transformers' own classes, or ask for a reader", EXIT_USAGE)
    if transformers_knows(model_type) is False:  # decided before importing transformers or torch
        raise KvplanError(f"{why}, and the installed transformers has no class for it either; ask for a reader",
                          EXIT_USAGE)
    import transformers

    if model_type not in transformers.CONFIG_MAPPING:
        raise KvplanError(f"{why}, and transformers {transformers.__version__} has no class for it either; "
                          "ask for a reader", EXIT_USAGE)
    return derive(config, source)


def _attention_kinds(cfg: Cfg, model_type: str, n: int, max_context: int) -> list[str]:
    """Per layer one of: full, sliding, chunked, linear, mamba, mlp (the order of the model)."""
    pattern = _hybrid_pattern(cfg, n)
    types = cfg.raw("layer_types")
    if types is not None and not isinstance(types, list):
        raise KvplanError(f"{cfg.where}: layer_types must be a list, got {shown(types)}", EXIT_USAGE)
    if types:
        if len(types) < n:
            raise KvplanError(f"{cfg.where}: layer_types has {len(types)} entries for {n} layers", EXIT_USAGE)
        names = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear",
                 "chunked_attention": "chunked", "mamba": "mamba", "attention": "full", "conv": "short_conv"}
        unknown = sorted({str(t) for t in types[:n]} - set(names))
        if unknown:
            raise KvplanError(f"{cfg.where}: unknown layer_types entry {unknown[0]!r}", EXIT_USAGE)
        return [names[t] for t in types[:n]]
    if model_type == "lfm2" and cfg.has("full_attn_idxs"):  # LFM2's older spelling of layer_types
        full = set(cfg.int_list("full_attn_idxs"))
        return ["full" if i in full else "short_conv" for i in range(n)]
    if pattern:  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        table = {"M": "mamba", "*": "full", "-": "mlp", "E": "mlp"}
        return [table[c] for c in pattern]
    if model_type == "qwen3_next" or cfg.has("full_attention_interval"):
        k = cfg.int("full_attention_interval", default=4)
        return ["full" if (i + 1) % k == 0 else "linear" for i in range(n)]
    if model_type == "jamba" or cfg.has("attn_layer_period"):
        period = cfg.int("attn_layer_period", default=8)
        offset = cfg.int("attn_layer_offset", default=4, minimum=0)
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    if model_type in ("llama4", "llama4_text") and cfg.has("attention_chunk_size"):
        rope = cfg.raw("no_rope_layers")  # 1 = layer uses RoPE (and chunked attention), 0 = global NoPE
        if not isinstance(rope, list) or len(rope) < n:
            interval = cfg.int("no_rope_layer_interval", default=4)
            rope = [int((i + 1) % interval != 0) for i in range(n)]
        return ["chunked" if rope[i] else "full" for i in range(n)]
    window = cfg.raw("sliding_window")
    if window is None or model_type == "llama4" or not cfg.bool("use_sliding_window", True):
        return ["full"] * n
    if model_type == "gemma2":  # even layers local, odd global (transformers Gemma2)
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if model_type in ("gemma3", "gemma3_text"):
        p = cfg.int("sliding_window_pattern", default=6)
        return ["sliding" if (i + 1) % p else "full" for i in range(n)]
    if model_type == "cohere2":
        p = cfg.int("sliding_window_pattern", default=4)
        return ["sliding" if (i + 1) % p else "full" for i in range(n)]
    if isinstance(window, (int, float)) and math.isfinite(window) and window >= max_context:
        return ["full"] * n  # a window as long as the context is no window (Phi-3.5: 262144)
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        first = cfg.int("max_window_layers", default=n, minimum=0)
        return ["full" if i < first else "sliding" for i in range(n)]
    return ["sliding"] * n


def _hybrid_pattern(cfg: Cfg, n: int) -> str:
    """Nemotron-H's `hybrid_override_pattern`, one symbol per layer, checked; '' when absent."""
    pattern = cfg.raw("hybrid_override_pattern")
    if pattern is None:
        return ""
    if not isinstance(pattern, str):
        raise KvplanError(f"{cfg.where}: hybrid_override_pattern must be a string, got {pattern!r:.60}", EXIT_USAGE)
    if len(pattern) != n:
        raise KvplanError(f"{cfg.where}: hybrid_override_pattern has {len(pattern)} symbols for {n} layers", EXIT_USAGE)
    unknown = sorted(set(pattern) - set("M*-E"))
    if unknown:
        raise KvplanError(f"{cfg.where}: hybrid_override_pattern has unknown symbol(s) {unknown}", EXIT_USAGE)
    return pattern


def read_layers(cfg: Cfg, model_type: str, g: dict) -> list[LayerSpec]:
    """The model's layers, in order, as layer specs."""
    n = g["num_layers"]
    kinds = _attention_kinds(cfg, model_type, n, g["max_context"])
    if cfg.has("kv_lora_rank"):  # MLA: DeepSeek V2/V3/R1, Kimi K2
        attention: LayerSpec = MLALatent(
            cfg.int("kv_lora_rank", limit="head_dim"), cfg.int("qk_rope_head_dim", limit="head_dim"), **mla_widths(cfg))
    else:
        attention = FullAttention(g["kv_heads"], g["head_dim"])
    window = cfg.int("sliding_window", "attention_chunk_size", default=0, minimum=0, limit="window")
    out: list[LayerSpec] = []
    for kind in kinds:
        if kind == "full":
            out.append(attention)
        elif kind == "sliding":
            out.append(SlidingWindow(g["kv_heads"], g["head_dim"], window) if window else attention)
        elif kind == "chunked":
            chunk = cfg.int("attention_chunk_size", limit="window")
            out.append(ChunkedLocal(g["kv_heads"], g["head_dim"], chunk))
        elif kind == "linear":
            out.append(gated_deltanet_state(cfg, model_type))
        elif kind == "mamba":
            out.append(mamba_state(cfg, g))
        elif kind == "short_conv":
            out.append(short_conv_state(cfg, g))
        else:
            out.append(NoCache())
    return out
