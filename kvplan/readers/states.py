"""Per-sequence state layers of the hybrids the common reader knows (Qwen3-Next/3.5, Nemotron-H,
Granite 4, Jamba, LFM2), shaped as vLLM's mamba_utils.MambaStateShapeCalculator allocates them.
"""

from __future__ import annotations

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.recurrent import RecurrentState

# Qwen3.5 (vLLM model_executor/models/qwen3_5.py): Qwen3-Next's layers (Gated DeltaNet + gated attention).
QWEN3_5 = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}


def output_gated(cfg, model_type: str) -> bool:
    """Whether q_proj also gives a gate per head of the attention's output, doubling its q rows: the config's
    `attn_output_gate`, true by default for Qwen3-Next and Qwen3.5 (vLLM's Qwen3NextAttention reads
    getattr(config, "attn_output_gate", True))."""
    return cfg.bool("attn_output_gate", model_type == "qwen3_next" or model_type in QWEN3_5)


def short_conv_state(cfg, g: dict) -> RecurrentState:
    """LFM2's gated short convolution: (conv_L_cache - 1) x hidden_size values, split over tp.

    vLLM lfm2.py passes hidden_size and conv_L_cache to mamba_utils.short_conv_state_shape:
    conv state (conv_kernel - 1, intermediate / tp), no recurrent state.
    """
    kernel = cfg.int("conv_L_cache", default=3, limit="head_dim")
    return RecurrentState((kernel - 1) * g["hidden"], 0, g["hidden"], "short_conv")


def gated_deltanet_state(cfg, model_type: str = "") -> RecurrentState:
    """Qwen3-Next / Qwen3.5 linear attention: a conv window over q,k,v and a per-head k x v state.

    conv: (linear_conv_kernel_dim - 1) x (2 x key heads x key dim + value heads x value dim)
    ssm:  value heads x key dim x value dim, in the config's `mamba_ssm_dtype` for Qwen3.5 (qwen35_ssm_dtype)
    """
    k_heads = cfg.int("linear_num_key_heads", limit="num_attention_heads")
    v_heads = cfg.int("linear_num_value_heads", limit="num_attention_heads")
    k_dim = cfg.int("linear_key_head_dim", limit="head_dim")
    v_dim = cfg.int("linear_value_head_dim", limit="head_dim")
    kernel = cfg.int("linear_conv_kernel_dim", default=4)
    conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
    return RecurrentState((kernel - 1) * conv_dim, v_heads * k_dim * v_dim, k_heads, "gated_deltanet",
                          ssm_dtype=qwen35_ssm_dtype(cfg, model_type), value_heads=v_heads, key_head_dim=k_dim,
                          value_head_dim=v_dim)


def qwen35_ssm_dtype(cfg, model_type: str) -> str:
    """The Gated DeltaNet recurrent state's element type a Qwen3.5 config fixes (`mamba_ssm_dtype`).

    vLLM 0.17.0+ (the release that added Qwen3.5) registers Qwen3_5ForConditionalGenerationConfig for the
    Qwen3.5 architectures (model_executor/models/config.py, 0.19.0 L663-686): with --mamba-ssm-cache-dtype
    auto it copies the text config's mamba_ssm_dtype (float32 in the published Qwen3.5 configs) into
    cache_config.mamba_ssm_cache_dtype, which gated_delta_net_state_dtype gives the temporal state; the
    conv state keeps mamba_cache_dtype (auto: the model dtype). Qwen3-Next has no such hook (and its
    config no such key): "" = the plan's state dtype.
    """
    if model_type not in QWEN3_5:
        return ""
    raw = cfg.raw("mamba_ssm_dtype")
    if raw is None or raw == "auto":
        return ""
    return _dtype_name(cfg, "mamba_ssm_dtype", raw)


def _dtype_name(cfg, key: str, raw) -> str:
    """kvplan's name of a config's dtype string (float32 -> fp32), refused when it is not one."""
    if not isinstance(raw, str):
        raise KvplanError(f"{cfg.where}: {key} must be a dtype name, got {raw!r:.40}", EXIT_USAGE)
    return canonical_kv_dtype(raw).name


def ssm_cache_dtype(cfg) -> str:
    """The recurrent state's element type a config fixes (`mamba_ssm_cache_dtype`, Nemotron 3: float32).

    vLLM's NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype (model_executor/models/config.py)
    copies it into cache_config.mamba_ssm_cache_dtype when the flag is auto, and uses float32 for a
    Nemotron-H config that does not say ("Only float32 is known to have no accuracy issues");
    "" = the plan's state dtype.
    """
    raw = cfg.raw("mamba_ssm_cache_dtype")
    if raw is None and cfg.raw("model_type") == "nemotron_h":
        return "fp32"  # the hook's default when the config is silent (DEFAULT_MAMBA_SSM_CACHE_DTYPE)
    if raw is None or raw == "auto":
        return ""
    return _dtype_name(cfg, "mamba_ssm_cache_dtype", raw)


def mamba2_dims(cfg, hidden: int) -> tuple[int, int, int, int, int]:
    """(heads, head_dim, state, groups, conv kernel) of a hybrid's Mamba-2 mixer (Nemotron-H, Granite 4).

    Granite 4 may write mamba_d_head "auto": mamba_expand x hidden / heads, as transformers'
    GraniteMoeHybridConfig resolves it.
    """
    heads = cfg.int("mamba_num_heads", "mamba_n_heads", limit="num_attention_heads")
    if cfg.raw("mamba_d_head") == "auto":
        inner = cfg.int("mamba_expand", default=2, limit="head_dim") * hidden
        if inner % heads:
            raise KvplanError(f"{cfg.where}: mamba_expand x hidden_size ({inner}) is not divisible by {heads} mamba "
                              "heads", EXIT_USAGE)
        head_dim = inner // heads
    else:
        head_dim = cfg.int("mamba_head_dim", "mamba_d_head", limit="head_dim")
    state = cfg.int("ssm_state_size", "mamba_d_state", limit="head_dim")
    groups = cfg.int("n_groups", "mamba_n_groups", default=1, limit="num_attention_heads")
    kernel = cfg.int("conv_kernel", "mamba_d_conv", default=4, limit="head_dim")
    return heads, head_dim, state, groups, kernel


# The chunk a Mamba-2 mixer's scan runs at where a config sets neither key: its transformers config class's default, by
# the model_types whose readers build a Mamba-2 mixer (the transformers 5.25.0 wheel, models/*/configuration_*.py:
# Mamba2Config `chunk_size: int = 256` L87, NemotronHConfig `chunk_size: int = 128` L130 with `mamba_chunk_size` read
# into it L167, GraniteMoeHybridConfig `mamba_chunk_size: int | None = 256` L102, FalconH1Config's the same L84)
CHUNK_DEFAULTS = {"mamba2": 256, "nemotron_h": 128, "granitemoehybrid": 256, "falcon_h1": 256}


def mamba_chunk(cfg) -> int:
    """The chunk length a Mamba-2 mixer's chunked scan runs at: the config's `mamba_chunk_size`, else its `chunk_size`,
    as vLLM's ModelConfig.get_mamba_chunk_size reads them (vllm/config/model.py), else its transformers class's default
    (CHUNK_DEFAULTS); a config of another model_type that sets neither is refused as missing the key."""
    return cfg.int("mamba_chunk_size", "chunk_size", default=CHUNK_DEFAULTS.get(cfg.raw("model_type")), limit="window")


def mamba2_state(cfg, heads: int, head_dim: int, state: int, groups: int, kernel: int, **kw) -> RecurrentState:
    """One Mamba2 layer's state for one sequence (mamba_state's formulas; Falcon-H1's and plain Mamba2's readers
    too): its conv and SSM elements, heads and groups, the SSD scan's head sizes and chunk (kvplan.speed.ssd)."""
    inner = heads * head_dim
    return RecurrentState((kernel - 1) * (inner + 2 * groups * state), inner * state, heads, "mamba2", groups,
                          (kernel - 1) * 2 * groups * state, key_head_dim=state, value_head_dim=head_dim,
                          chunk=mamba_chunk(cfg), **kw)


def mamba_state(cfg, g: dict) -> RecurrentState:
    """Mamba2 (Nemotron-H) or Mamba1 (Jamba) state of one layer for one sequence.

    Mamba2: intermediate = mamba_num_heads x mamba_head_dim;
            conv (conv_kernel - 1) x (intermediate + 2 x n_groups x ssm_state_size);
            ssm  mamba_num_heads x mamba_head_dim x ssm_state_size.
    Mamba1: d_inner = mamba_expand x hidden; conv (mamba_d_conv - 1) x d_inner; ssm d_inner x mamba_d_state.
    """
    if cfg.has("mamba_num_heads", "mamba_n_heads"):
        return mamba2_state(cfg, *mamba2_dims(cfg, g["hidden"]), ssm_dtype=ssm_cache_dtype(cfg),
                            ssm_dtype_default=cfg.raw("mamba_ssm_cache_dtype") is None and bool(ssm_cache_dtype(cfg)))
    inner = cfg.int("mamba_expand", default=2) * g["hidden"]
    state = cfg.int("mamba_d_state", "ssm_state_size", default=16)
    kernel = cfg.int("mamba_d_conv", "conv_kernel", default=4)
    return RecurrentState((kernel - 1) * inner, inner * state, inner, "mamba")


def linear_layer_types(cfg, types, n: int) -> list[str]:
    """A `layer_types` list of full_attention / linear_attention (MiniMax, Kimi-Linear) as 'full' /
    'linear' for each of the n layers; anything else is refused rather than guessed."""
    names = {"full_attention": "full", "linear_attention": "linear"}
    if not isinstance(types, list) or len(types) < n or not {str(t) for t in types[:n]} <= set(names):
        raise KvplanError(f"{cfg.where}: layer_types must give full_attention / linear_attention for {n} layers",
                          EXIT_USAGE)
    return [names[t] for t in types[:n]]
