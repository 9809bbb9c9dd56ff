"""The element types vLLM holds a hybrid's recurrent states in, by release, layer kind and option.

vLLM types each state layer's buffers with MambaStateDtypeCalculator (`model_executor/layers/mamba/mamba_utils.py`):
the conv state in --mamba-cache-dtype ('auto': the model dtype); the temporal (recurrent) state in
--mamba-ssm-cache-dtype, whose 'auto' is the conv state's type (`_mamba_state_dtype`: vllm@v0.12.0 L51-63,
vllm@v0.19.0 L55-67, vllm@v0.20.0 L87-99). Which layers read the second option, read in the wheels:
  * Mamba-1 and Mamba-2 (mamba1_state_dtype, mamba2_state_dtype) at every release here;
  * Gated DeltaNet from 0.17.0 (gated_delta_net_state_dtype takes mamba_ssm_cache_dtype: vllm@v0.17.0 L78-87;
    0.16.0 L78-85 and 0.12.0 L75-81 give both states mamba_cache_dtype);
  * never KDA (conv states in mamba_cache_dtype, the recurrent one float32: kda_state_dtype, vllm@v0.19.0 L90-96),
    lightning attention (one state in mamba_cache_dtype, and float32 refused: "fp32 state for minimax is not yet
    supported", linear_attention_state_dtype, vllm@v0.19.0 L21-30) nor short conv (a conv state only).
A model hook sets mamba_ssm_cache_dtype when it is 'auto' (`model_executor/models/config.py` MODELS_CONFIG_MAP):
  * NemotronH: none before 0.13.0 (vllm@v0.12.0 L493-510 has no entry); from 0.13.0 the config's
    mamba_ssm_cache_dtype, else float16 (vllm@v0.13.0 L493-510, vllm-project/vllm#29978); from 0.20.0 else
    float32 (vllm@v0.20.0 L410 DEFAULT_MAMBA_SSM_CACHE_DTYPE, L422-423; vllm-project/vllm#39032);
  * Qwen3.5 (from 0.17.0, the release that added it): the config's mamba_ssm_dtype (vllm@v0.19.0 L663-686).
The reader records what the newest hook gives (kvplan.readers.states: `RecurrentState.ssm_dtype`, and
`ssm_dtype_default` where the config is silent); this module applies the release's rule to it.
The options: choices auto, float32 (vllm@v0.11.0 and v0.12.0 `config/cache.py` MambaDType), float16 too from 0.13.0
(vllm@v0.13.0 `config/cache.py` L32); kvplan reads them from 0.11.0 (0.10.1 has them, with other rules: refused).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.options import opt_choice
from kvplan.model.recurrent import recurrent_states, ssm_as
from kvplan.planning.plan_warnings import PlanWarning

OPTS = ("mamba_cache_dtype", "mamba_ssm_cache_dtype")
SINCE = (0, 11, 0)  # the first release whose options kvplan has read
FLOAT16 = (0, 13, 0)  # MambaDType gains float16
HOOK = (0, 13, 0)  # NemotronH's hook reads the config's mamba_ssm_cache_dtype
HOOK_FP32 = (0, 20, 0)  # ... and defaults to float32 (float16 before)
GDN_SSM = (0, 17, 0)  # Gated DeltaNet's temporal state reads mamba_ssm_cache_dtype
ONE_STATE = ("short_conv", "linear_attention")  # one state each, in mamba_cache_dtype
FOLLOWS = ("mamba", "mamba2", "gated_deltanet")  # the kinds whose temporal state can take mamba_ssm_cache_dtype


def options(opts: dict, v: tuple) -> tuple[str, str]:
    """(mamba_cache_dtype, mamba_ssm_cache_dtype) as given ('auto' where not), each checked for the release."""
    choices = ("auto", "float32", "float16") if v >= FLOAT16 else ("auto", "float32")
    got = tuple(opt_choice(opts, key, "auto", choices) for key in OPTS)
    if v < SINCE and any(key in opts for key in OPTS):
        raise KvplanError(f"kvplan reads vLLM's {' and '.join(OPTS)} from 0.11.0 on (their rules before are "
                          "not read)", EXIT_USAGE, param="engine_opts", value={k: opts[k] for k in OPTS if k in opts})
    return got


def _states(model) -> list:
    return recurrent_states(model.layers)


def read_ssm_dtype(model) -> str:
    """The temporal-state type the reader gives the model (the newest hook's; "" where the conv type), before any
    release's rule: what the speed fit prices vLLM's corpus runs in."""
    states = _states(model)
    return states[0].ssm_dtype if states else ""


def conv_dtype(model, st):
    """The conv states' DType (--mamba-cache-dtype), or None for 'auto' (the model's own)."""
    flag = st.mamba_cache_dtype
    return None if flag == "auto" else canonical_kv_dtype(flag)


def _conv(model, st):
    """The conv states' DType, 'auto' read as the model's."""
    return conv_dtype(model, st) or canonical_kv_dtype("auto", model.dtype)


def _gdn_shared(layer, v: tuple) -> bool:
    """Gated DeltaNet before 0.17.0: both its states in mamba_cache_dtype, whatever mamba_ssm_cache_dtype says."""
    return layer.variant == "gated_deltanet" and v < GDN_SSM


def _no_hook(layer, v: tuple) -> bool:
    """Mamba-2 before 0.13.0: no config hook, so 'auto' is the conv state's type whatever the config says."""
    return layer.variant == "mamba2" and v < HOOK


def pool_ssm_dtype(model, st) -> str:
    """kvplan's name of the dtype vLLM holds the temporal states in, "" where its rule is the reader's own (KDA's
    float32, a lightning or short-conv layer's single state in the conv type): `Request.ssm_dtype`, which memory,
    the roofline and the speed figures all read."""
    states = _states(model)
    if not states or states[0].variant not in FOLLOWS:
        return ""
    layer, v = states[0], st.v
    conv = _conv(model, st)
    flag = st.mamba_ssm_cache_dtype
    own = st.ssm_dtype_read  # the reader's (the layers may be a view already: this stays what they were read as)
    if _gdn_shared(layer, v):
        # both states in mamba_cache_dtype, whatever the flag; a config's own type is Qwen3.5's, a model (and hook)
        # from 0.17.0 only: the reader's, as before
        return own or conv.name
    if flag != "auto":
        return canonical_kv_dtype(flag).name
    if not own or _no_hook(layer, v):
        return conv.name  # no hook: 'auto' is the conv state's type
    if layer.ssm_dtype_default and v < HOOK_FP32:
        return "fp16"  # the hook's default before 0.20.0, for a config that states none
    return own


def view(model, st):
    """The model with its temporal states in the dtype the release pools them in (pool_ssm_dtype)."""
    dtype = pool_ssm_dtype(model, st)
    return replace(model, layers=ssm_as(model.layers, dtype)) if dtype else model


def check(model, st) -> None:
    """Refuse what vLLM refuses: a float32 --mamba-cache-dtype on a lightning-attention model."""
    states = _states(model)
    if states and states[0].variant == "linear_attention" and st.mamba_cache_dtype == "float32":
        raise KvplanError("vLLM refuses mamba_cache_dtype float32 on lightning attention ('fp32 state for minimax is "
                          "not yet supported', linear_attention_state_dtype)", EXIT_USAGE,
                          param="engine_opts", value={"mamba_cache_dtype": "float32"})


def assumption(model, st) -> tuple[PlanWarning, ...]:
    """What a plan says of a model with recurrent states: the types vLLM holds them in, and why; a note, but a
    warning where the speed fit priced other types or the release may not run the model (`_line`)."""
    line, doubt = _line(model, st)
    return (PlanWarning.literal(line, note=not doubt),) if line else ()


def _line(model, st) -> tuple[str, bool]:
    """(the types' line, whether it says something that may make a figure wrong); ("", False) without states."""
    states = _states(model)
    if not states:
        return "", False
    layer = states[0]
    conv = _conv(model, st).name
    ssm = pool_ssm_dtype(model, st) or layer.ssm_dtype or conv
    if layer.variant == "kda":
        ssm = "fp32"
    flag, read = st.mamba_ssm_cache_dtype, st.ssm_dtype_read
    if layer.variant in ONE_STATE:  # a single state (a conv window; lightning attention's) in mamba_cache_dtype
        unread = ", mamba_ssm_cache_dtype not read for this kind" if flag != "auto" else ""
        return (f"vLLM {st.version} holds the {layer.variant} states in {conv} (mamba_cache_dtype "
                f"{st.mamba_cache_dtype}{unread})"), False
    line = (f"vLLM {st.version} holds the {layer.variant} states' conv part in {conv} (mamba_cache_dtype "
            f"{st.mamba_cache_dtype}) and the recurrent part in {ssm} ({_why(layer, st, flag, read)})")
    priced_other = layer.variant in FOLLOWS and ssm != (read or conv)
    if priced_other:
        line += (f"; the speed fit priced vLLM's corpus runs in the reader's {read or conv} (docs/speed.md, "
                 "'Recurrent states')")
    return line, priced_other or (_gdn_shared(layer, st.v) and bool(read))


def _why(layer, st, flag: str, read: str) -> str:
    v = st.v
    if layer.variant not in FOLLOWS:  # KDA: float32 whatever the options (kda_state_dtype)
        return "its kernel's own type" + (", mamba_ssm_cache_dtype not read for this kind" if flag != "auto" else "")
    if _gdn_shared(layer, v):
        if read:
            return ("the config's; its hook, like Qwen3.5 itself, is vLLM's from 0.17.0: this release may not run "
                    "the model")
        return "mamba_cache_dtype: Gated DeltaNet reads mamba_ssm_cache_dtype from 0.17.0"
    if flag != "auto":
        return f"mamba_ssm_cache_dtype {flag}"
    if not read:
        return "mamba_ssm_cache_dtype auto: the conv type"
    if _no_hook(layer, v):
        return "no config hook before 0.13.0: the conv type, whatever the config says"
    if layer.ssm_dtype_default:
        return f"the config states none: the hook's {'float16' if v < HOOK_FP32 else 'float32'}"
    return "the config's, copied by the model's hook"
