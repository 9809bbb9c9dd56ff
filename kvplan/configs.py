"""Reading a Hugging Face `config.json` into a ModelSpec: the list of layer specs and the weights.

This is where planners usually go wrong, so every rule here names the config keys it reads:
`head_dim` is honoured when given (Qwen3, Gemma, GLM-4.5 and gpt-oss set one that differs from
hidden / heads); `use_sliding_window: false` switches a window off; `layer_types`,
`sliding_window_pattern`, `hybrid_override_pattern`, `full_attention_interval` and
`attn_layer_period` lay out hybrids; MLA keeps one latent of kv_lora_rank + qk_rope_head_dim.
Parameter counting lives in kvplan.params; this module decides what each layer is.
"""

from __future__ import annotations

import math

from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.layers import (
    ChunkedLocal, FullAttention, LayerSpec, MLALatent, NoCache, RecurrentState, SlidingWindow,
)
from kvplan.model import ModelSpec, Quantization
from kvplan.readers import family_reader

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

LIMITS = {  # anything above these is a hostile or broken config, not a model
    "hidden_size": 1 << 20, "num_hidden_layers": 10_000, "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16, "head_dim": 1 << 14, "intermediate_size": 1 << 24,
    "vocab_size": 1 << 25, "window": 1 << 30, "experts": 1 << 16,
}


class Cfg:
    """A config dict with typed getters that collect what is missing and reject nonsense."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where

    def has(self, *names: str) -> bool:
        return any(self.data.get(n) is not None for n in names)

    def raw(self, *names: str, default=None):
        for n in names:
            if self.data.get(n) is not None:
                return self.data[n]
        return default

    def int(self, *names: str, default: int | None = None, limit: str | None = None, minimum: int = 1) -> int:
        value = self.raw(*names)
        if value is None:
            if default is None:
                raise _Missing(names)
            return default
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)):
            raise KvplanError(f"{self.where}: {names[0]} must be an integer, got {shown(value)}", EXIT_USAGE)
        value = int(value)
        cap = LIMITS.get(limit or names[0])
        if value < minimum or (cap is not None and value > cap):
            raise KvplanError(f"{self.where}: {names[0]} = {value} is out of range", EXIT_USAGE)
        return value

    def int_list(self, name: str) -> list[int]:
        """A list of non-negative integers (layer indices), empty when absent."""
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise KvplanError(f"{self.where}: {name} must be a list of layer indices, got {value!r:.60}", EXIT_USAGE)
        return value

    def bool(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        return default if value is None else bool(value)


def shown(value) -> str:
    """A config value as its JSON spelling (Infinity, NaN), cut to 60 characters."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return f"{value!r:.60}"


class _Missing(Exception):
    def __init__(self, names):
        self.names = names


def unwrap_text_config(config: dict) -> tuple[dict, bool]:
    """Multimodal configs (Gemma 3, Llama 4, Mistral 3, LLaVA) nest the language model.

    Returns the language model's config, with top-level keys it lacks filled in, and whether it
    was nested.
    """
    text = config.get("text_config") or config.get("language_config") or config.get("llm_config")
    if isinstance(text, dict) and text:
        merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
        merged.update(text)
        return merged, True
    return config, False


def spec_from_config(config: dict, name: str, *, source: str = "config.json") -> tuple[ModelSpec, list[str]]:
    """Parse a config.json dict into a ModelSpec. Returns the spec and notices for the user."""
    from kvplan.params import count_params

    if not isinstance(config, dict):
        raise KvplanError(f"{source}: expected a JSON object, got {type(config).__name__}", EXIT_USAGE)
    data, nested = unwrap_text_config(config)
    cfg = Cfg(data, source)
    notices: list[str] = []
    model_type = str(data.get("model_type") or config.get("model_type") or "")
    family = family_reader(model_type)
    derived = None
    if model_type not in KNOWN_FAMILIES and family is None:
        derived = derive_unknown_layout(config, data, model_type, source)
        if derived is None:
            notices.append(f"model_type {model_type or '(none)'!r} has no dedicated reader; every key is a standard "
                           "decoder's, read with the standard keys")
        else:
            notices.append(f"model_type {model_type!r} has no reader in kvplan: its layout is derived from "
                           f"transformers' {derived[3]} built on the meta device")
    dsa = [k for k in ("index_head_dim", "index_n_heads", "index_topk") if data.get(k) is not None]
    if dsa:  # DeepSeek-V3.2 / GLM-5 sparse attention: an fp8 indexer key cache beside the MLA latent
        raise KvplanError(f"{source}: {dsa[0]} declares a DeepSeek Sparse Attention indexer, whose key cache "
                          "kvplan does not size yet; it would be under-counted, so this model is refused", EXIT_USAGE)
    if nested:
        notices.append("multimodal config: planning the language model's cache; vision weights are not counted from the config")
    try:
        if derived is not None:
            geometry, layers, params = derived[:3]
        elif family is not None:
            geometry, layers, params = family.read(cfg, model_type)
        else:
            geometry = read_geometry(cfg, model_type)
            layers = read_layers(cfg, model_type, geometry)
            _refuse_cacheless(layers, source)
            params = count_params(cfg, model_type, geometry, layers)
        _refuse_cacheless(layers, source)
    except _Missing as missing:
        raise KvplanError(
            f"{source}: missing key {' / '.join(missing.names)} (needed to size the model)", EXIT_USAGE
        ) from None
    arch = config.get("architectures") or data.get("architectures") or [""]
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
        quantization=read_quantization(cfg),
        family=model_type,
        architecture=str(arch[0]) if isinstance(arch, list) and arch else str(arch),
        notes=tuple(geometry["notes"]),
        source=source,
    )
    return spec, notices


def _refuse_cacheless(layers, source: str) -> None:
    if all(layer.kind == "none" for layer in layers):
        raise KvplanError(f"{source}: no layer attends or keeps a state (every layer is MLP/MoE); "
                          "not a decoder kvplan can plan", EXIT_USAGE)


def derive_unknown_layout(config: dict, data: dict, model_type: str, source: str):
    """None when the keys fully determine a standard decoder; else transformers' layout, or a refusal.

    With the [transformers] extra the layout is derived from transformers' own classes on the meta
    device (kvplan.derive); without it, or when transformers has no class for the model_type
    either, kvplan exits 2 naming the keys it does not understand.
    """
    import importlib.util

    from kvplan.readers import unknown_family_keys

    odd = unknown_family_keys(data)
    if not odd:
        return None
    more = f" and {len(odd) - 5} more" if len(odd) > 5 else ""
    why = (f"{source}: model_type {model_type or '(none)'!r} has no reader in kvplan and its config has keys a "
           f"standard decoder does not ({', '.join(odd[:5])}{more}); kvplan does not guess a cache layout")
    if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None:
        raise KvplanError(f"{why}. Install the [transformers] extra (pip install 'kvplan[transformers]') to derive "
                          "it from transformers' own classes, or ask for a reader", EXIT_USAGE)
    import transformers

    if model_type not in transformers.CONFIG_MAPPING:
        raise KvplanError(f"{why}, and transformers {transformers.__version__} has no class for it either; "
                          "ask for a reader", EXIT_USAGE)
    from kvplan.derive import derive

    return derive(config, source)


def read_dtype(cfg: Cfg) -> str:
    raw = str(cfg.raw("torch_dtype", "dtype", default="bfloat16")).lower()
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(raw, "bf16")


def read_quantization(cfg: Cfg) -> Quantization:
    """The checkpoint's weight format from `quantization_config` (fp8, AWQ/GPTQ, MXFP4, ...).

    Every value is checked before use: a malformed entry (`bits: "four"`, `group_size: [128]`)
    is a one-line error naming the key, never a guess.
    """
    q = cfg.raw("quantization_config")
    if not isinstance(q, dict):
        return Quantization(read_dtype(cfg))
    where = f"{cfg.where}: quantization_config"
    method = str(q.get("quant_method", "")).lower()
    if method == "mxfp4":
        skip = _q_strings(q, "modules_to_not_convert", where)
        return Quantization("mxfp4", 32, experts_only=any("self_attn" in s for s in skip) or not skip)
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        if block is not None and (not isinstance(block, list) or len(block) not in (0, 2)):
            raise KvplanError(f"{where}.weight_block_size must be a list of two integers, got {block!r}", EXIT_USAGE)
        sizes = [_q_int({"weight_block_size": b}, where, "weight_block_size", default=0) for b in block or []]
        return Quantization("fp8", sizes[0] if sizes else 0)
    if method in ("awq", "gptq", "autoround"):
        bits = _q_int(q, where, "bits", "w_bit", default=4)
        group = _q_int(q, where, "group_size", "q_group_size", default=128, minimum=-1)
        return Quantization(_int_format(bits, where), group if group > 0 else 128)
    if method == "bitsandbytes":
        return Quantization("int4", 64) if q.get("load_in_4bit") is True else Quantization("int8")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise KvplanError(f"{where}.config_groups must be an object of objects, got {groups!r:.60}", EXIT_USAGE)
        for group in groups.values():
            weights = group.get("weights") or {}
            if not isinstance(weights, dict):
                raise KvplanError(f"{where}.config_groups: weights must be an object, got {weights!r:.60}", EXIT_USAGE)
            bits = _q_int(weights, where, "num_bits", default=0, minimum=0)
            if bits == 4:
                return Quantization("int4", _q_int(weights, where, "group_size", default=128))
            if bits == 8:
                return Quantization("fp8" if weights.get("type") == "float" else "int8")
            if bits:
                raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return Quantization(read_dtype(cfg))


def _q_int(q: dict, where: str, *names: str, default: int, minimum: int = 1) -> int:
    """An integer from a quantization_config entry, or a one-line error naming it."""
    for name in names:
        value = q.get(name)
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)
                or not minimum <= value <= (1 << 20)):
            raise KvplanError(f"{where}.{name} must be an integer, got {shown(value)}", EXIT_USAGE)
        return int(value)
    return default


def _q_strings(q: dict, name: str, where: str) -> list[str]:
    value = q.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KvplanError(f"{where}.{name} must be a list of module names, got {value!r:.60}", EXIT_USAGE)
    return value


def _int_format(bits: int, where: str) -> str:
    if bits not in (4, 8):
        raise KvplanError(f"{where}: {bits}-bit weights are not supported (4 or 8)", EXIT_USAGE)
    return "int4" if bits == 4 else "int8"


def read_geometry(cfg: Cfg, model_type: str) -> dict:
    """The numbers every family shares: widths, heads, layers, vocabulary, context."""
    hidden = cfg.int("hidden_size", "n_embd", "d_model", limit="hidden_size")
    heads = cfg.int("num_attention_heads", "n_head", "num_heads", limit="num_attention_heads")
    num_layers = cfg.int("num_hidden_layers", "n_layer", "num_layers", limit="num_hidden_layers")
    vocab = cfg.int("vocab_size", "padded_vocab_size", limit="vocab_size")
    notes: list[str] = []
    if cfg.has("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"):
        kv_heads = cfg.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                           limit="num_key_value_heads")
    elif cfg.bool("multi_query", False) and not cfg.bool("new_decoder_architecture", False):
        kv_heads = 1  # Falcon-7B style multi-query attention
    else:
        kv_heads = heads
    if kv_heads > heads:
        raise KvplanError(f"{cfg.where}: num_key_value_heads ({kv_heads}) exceeds num_attention_heads ({heads})", EXIT_USAGE)
    if cfg.has("head_dim", "attention_head_dim", "kv_channels"):
        head_dim = cfg.int("head_dim", "attention_head_dim", "kv_channels", limit="head_dim")
        if head_dim * heads != hidden:
            notes.append(f"head_dim {head_dim} is explicit (hidden_size / heads would be {hidden / heads:g})")
    else:
        if hidden % heads:
            raise KvplanError(f"{cfg.where}: hidden_size {hidden} is not divisible by {heads} heads and no head_dim is given", EXIT_USAGE)
        head_dim = hidden // heads
    intermediate = cfg.int("intermediate_size", "n_inner", "ffn_hidden_size", "block_ff_dim", default=4 * hidden,
                           limit="intermediate_size")
    if model_type == "lfm2":
        intermediate = lfm2_ff_width(cfg, intermediate)
    max_context = cfg.int("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                          "model_max_length", default=2048, limit="window")
    experts = cfg.int("num_local_experts", "num_experts", "n_routed_experts", default=0, minimum=0, limit="experts")
    top_k = cfg.int("num_experts_per_tok", "experts_per_token", "moe_topk", default=0, minimum=0, limit="experts")
    if experts:
        expert_width = cfg.int("moe_intermediate_size", "intermediate_size", limit="intermediate_size")
        act_width = expert_width * max(top_k, 1)
    else:
        act_width = intermediate
    return dict(hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, num_layers=num_layers,
                vocab=vocab, intermediate=intermediate, max_context=max_context, experts=experts,
                top_k=top_k, act_width=act_width, notes=notes)


def lfm2_ff_width(cfg: Cfg, width: int) -> int:
    """LFM2's MLP width as transformers' Lfm2MLP derives it (block_auto_adjust_ff_dim)."""
    if not cfg.bool("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    mult = cfg.raw("block_ffn_dim_multiplier", default=1.0)
    if not isinstance(mult, (int, float)) or isinstance(mult, bool) or not 0 < mult < 1e3:
        raise KvplanError(f"{cfg.where}: block_ffn_dim_multiplier must be a positive number, got {shown(mult)}", EXIT_USAGE)
    step = cfg.int("block_multiple_of", default=256, limit="intermediate_size")
    width = int(mult * width)
    return step * -(-width // step)


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
            cfg.int("kv_lora_rank", limit="head_dim"), cfg.int("qk_rope_head_dim", limit="head_dim"))
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
            out.append(_gated_deltanet_state(cfg))
        elif kind == "mamba":
            out.append(_mamba_state(cfg, g))
        elif kind == "short_conv":
            out.append(_short_conv_state(cfg, g))
        else:
            out.append(NoCache())
    return out


def _short_conv_state(cfg: Cfg, g: dict) -> RecurrentState:
    """LFM2's gated short convolution: (conv_L_cache - 1) x hidden_size values, split over tp.

    vLLM lfm2.py passes hidden_size and conv_L_cache to mamba_utils.short_conv_state_shape:
    conv state (conv_kernel - 1, intermediate / tp), no recurrent state.
    """
    kernel = cfg.int("conv_L_cache", default=3, limit="head_dim")
    return RecurrentState((kernel - 1) * g["hidden"], 0, g["hidden"], "short_conv")


def _gated_deltanet_state(cfg: Cfg) -> RecurrentState:
    """Qwen3-Next linear attention: a conv window over q,k,v and a per-head k x v state.

    conv: (linear_conv_kernel_dim - 1) x (2 x key heads x key dim + value heads x value dim)
    ssm:  value heads x key dim x value dim
    """
    k_heads = cfg.int("linear_num_key_heads", limit="num_attention_heads")
    v_heads = cfg.int("linear_num_value_heads", limit="num_attention_heads")
    k_dim = cfg.int("linear_key_head_dim", limit="head_dim")
    v_dim = cfg.int("linear_value_head_dim", limit="head_dim")
    kernel = cfg.int("linear_conv_kernel_dim", default=4)
    conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
    return RecurrentState((kernel - 1) * conv_dim, v_heads * k_dim * v_dim, k_heads, "gated_deltanet")


def mamba2_dims(cfg: Cfg, hidden: int) -> tuple[int, int, int, int, int]:
    """(heads, head_dim, state, groups, conv kernel) of a hybrid's Mamba-2 mixer (Nemotron-H, Granite 4).

    Granite 4 may write mamba_d_head "auto": mamba_expand x hidden / heads, as transformers'
    GraniteMoeHybridConfig resolves it.
    """
    heads = cfg.int("mamba_num_heads", "mamba_n_heads", limit="num_attention_heads")
    if cfg.raw("mamba_d_head") == "auto":
        inner = cfg.int("mamba_expand", default=2, limit="head_dim") * hidden
        if inner % heads:
            raise KvplanError(f"{cfg.where}: mamba_expand x hidden_size ({inner}) is not divisible by {heads} mamba heads", EXIT_USAGE)
        head_dim = inner // heads
    else:
        head_dim = cfg.int("mamba_head_dim", "mamba_d_head", limit="head_dim")
    state = cfg.int("ssm_state_size", "mamba_d_state", limit="head_dim")
    groups = cfg.int("n_groups", "mamba_n_groups", default=1, limit="num_attention_heads")
    kernel = cfg.int("conv_kernel", "mamba_d_conv", default=4, limit="head_dim")
    return heads, head_dim, state, groups, kernel


def _mamba_state(cfg: Cfg, g: dict) -> RecurrentState:
    """Mamba2 (Nemotron-H) or Mamba1 (Jamba) state of one layer for one sequence.

    Mamba2: intermediate = mamba_num_heads x mamba_head_dim;
            conv (conv_kernel - 1) x (intermediate + 2 x n_groups x ssm_state_size);
            ssm  mamba_num_heads x mamba_head_dim x ssm_state_size.
    Mamba1: d_inner = mamba_expand x hidden; conv (mamba_d_conv - 1) x d_inner; ssm d_inner x mamba_d_state.
    """
    if cfg.has("mamba_num_heads", "mamba_n_heads"):
        heads, head_dim, state, groups, kernel = mamba2_dims(cfg, g["hidden"])
        inner = heads * head_dim
        return RecurrentState((kernel - 1) * (inner + 2 * groups * state), heads * head_dim * state, heads, "mamba2",
                              groups, (kernel - 1) * 2 * groups * state)
    inner = cfg.int("mamba_expand", default=2) * g["hidden"]
    state = cfg.int("mamba_d_state", "ssm_state_size", default=16)
    kernel = cfg.int("mamba_d_conv", "conv_kernel", default=4)
    return RecurrentState((kernel - 1) * inner, inner * state, inner, "mamba")
