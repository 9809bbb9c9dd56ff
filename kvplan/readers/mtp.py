"""Multi-token-prediction (MTP) modules a checkpoint carries beside its main decoder layers.

DeepSeek-V3/R1 keep one in `model.layers.61` (config `num_nextn_predict_layers: 1`, 61 main layers),
GLM-4.5 in `model.layers.92`, Qwen3-Next and Qwen3.5 under `mtp.*` (`mtp_num_hidden_layers`), MiMo in
`model.mtp_layers.*`. vLLM builds them only as the drafter of `--speculative-config '{"method": "mtp"}'`
and otherwise skips their tensors, so kvplan keeps them apart from `ModelSpec.layers`/`params`
(`ModelSpec.mtp_layers`/`mtp_params`) and adds them only when speculative decoding is asked for
(kvplan.planning.speculative).

Each MTP module is one full decoder layer of the model's own kind (its own KV cache: an MLA latent
for DeepSeek, full attention for Qwen3-Next's hybrid) plus a projection of [embedding; hidden] (2H -> H)
and three norms; the embedding and LM head are the target's (shared). Sources, vLLM v0.33.0:
  * `model_executor/models/deepseek_mtp.py` L76-111 (enorm, hnorm, eh_proj = nn.Linear(2H, H): not
    quantized, not split by tp; SharedHead's norm; mtp_block = DeepseekV2DecoderLayer) and L151-165
    (num_nextn_predict_layers layers from index num_hidden_layers);
  * `glm4_moe_mtp.py` L68-98, L136-153 (the same module around a Glm4MoeDecoderLayer);
  * `qwen3_next_mtp.py` L63 (`getattr(config, "num_nextn_predict_layers", 1)`), L79-95 (fc =
    ColumnParallelLinear(2H, H), split by tp, quantized as the model; full_attention decoder layers),
    L107-111 (norm, pre_fc_norm_hidden, pre_fc_norm_embedding); `qwen3_5_mtp.py` L82 (`mtp_num_hidden_layers`,
    default 1), L98-139;
  * `mimo_mtp.py` L54-65, L97 (token/hidden/final layernorm, input_proj = nn.Linear(2H, H), a Qwen2DecoderLayer);
  * embedding and LM head shared with the target: `v1/spec_decode/llm_base_proposer.py` L1476-1503, L1560-1585
    ("Detected MTP model. Sharing target model ... weights").
"""

from __future__ import annotations

import re
from dataclasses import fields, replace

from kvplan.core.errors import arg
from kvplan.model.layers import Kind, LayerSpec
from kvplan.model.spec import ParamCounts
from kvplan.readers.params import count_params

# model_type -> (config key counting the modules, vLLM's default when absent, projection of [e; h])
FAMILIES = {
    "deepseek_v3": ("num_nextn_predict_layers", 0, "replicated"),
    "deepseek_v32": ("num_nextn_predict_layers", 0, "replicated"),
    "kimi_k2": ("num_nextn_predict_layers", 0, "replicated"),
    "kimi_k25": ("num_nextn_predict_layers", 0, "replicated"),
    "glm4_moe": ("num_nextn_predict_layers", 0, "replicated"),
    # GLM-5: vLLM's drafter is deepseek_mtp's (config/speculative.py v0.33.0 L745-763), a DeepseekV2DecoderLayer
    "glm_moe_dsa": ("num_nextn_predict_layers", 0, "replicated"),
    "mimo": ("num_nextn_predict_layers", 0, "replicated"),
    "qwen3_next": ("num_nextn_predict_layers", 1, "split"),
    "qwen3_5": ("mtp_num_hidden_layers", 1, "split"),
    "qwen3_5_text": ("mtp_num_hidden_layers", 1, "split"),
    "qwen3_5_moe": ("mtp_num_hidden_layers", 1, "split"),
    "qwen3_5_moe_text": ("mtp_num_hidden_layers", 1, "split"),
}
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
_COUNTS = ("num_experts", "experts_per_token")  # describe the model, not summed


def mtp_count(cfg, model_type: str) -> int:
    """MTP modules the checkpoint has (0 for a family without them)."""
    if model_type not in FAMILIES:
        return 0
    key, default, _ = FAMILIES[model_type]
    return cfg.int(key, default=default, minimum=0, limit="num_hidden_layers")


def why_no_mtp(model) -> str:
    """Why `model` (a ModelSpec without mtp_layers) has no multi-token-prediction layers kvplan reads."""
    if model.family in FAMILIES:
        return ("its config declares none, or a layout kvplan does not read (GLM-5.2's IndexCache); "
                "`kvplan models show` lists mtp_layers")
    return (f"kvplan reads num_nextn_predict_layers / mtp_num_hidden_layers of {', '.join(sorted(FAMILIES))}; "
            f"this model_type is {model.family or 'unknown'}")


def read_mtp(cfg, model_type: str, g: dict, layers: list[LayerSpec]) -> tuple[tuple, ParamCounts | None, list[str]]:
    """(MTP cache layers, their parameters, notices) of a config; ((), None, notes) when it has none."""
    declared = next((k for k in MTP_KEYS if cfg.has(k) and cfg.raw(k)), None)
    if model_type not in FAMILIES:
        note = (f"{declared} = {cfg.raw(declared)!r}: this model_type's multi-token-prediction layers are not read "
                f"by kvplan; {arg('speculative')} mtp is refused for it") if declared else None
        return (), None, [note] if note else []
    k = mtp_count(cfg, model_type)
    if k and model_type == "glm_moe_dsa" and len(set(layers)) > 1:  # GLM-5.2's IndexCache: which spec? not read
        return (), None, ["the multi-token-prediction layer of a model whose layers differ in their indexer "
                          f"(IndexCache) is not read by kvplan; {arg('speculative')} mtp is refused for it"]
    attention = next((la for la in layers if la.kind in (Kind.FULL, Kind.MLA)), None)
    if not k or attention is None:
        return (), None, []
    extra = [attention] * k
    family = "deepseek_v3" if model_type in ("deepseek_v32", "glm_moe_dsa") else model_type  # as readers.dsa counts
    with_mtp = count_params(cfg, family, g, [*layers, *extra])
    without = count_params(cfg, family, g, layers)
    diff = {f.name: getattr(with_mtp, f.name) - getattr(without, f.name)
            for f in fields(ParamCounts) if f.name not in _COUNTS}
    params = replace(ParamCounts(**diff), num_experts=without.num_experts,
                     experts_per_token=without.experts_per_token)
    h = g["hidden"]
    proj, norms = 2 * h * h * k, 3 * h * k
    if FAMILIES[model_type][2] == "replicated":  # nn.Linear: 16-bit, whole on every rank
        params = replace(params, other=params.other + proj + norms)
    else:  # ColumnParallelLinear: split by tp, quantized as the model's linear layers
        params = replace(params, mlp=params.mlp + proj, other=params.other + norms)
    return tuple(extra), params, []


def add_params(a: ParamCounts, b: ParamCounts) -> ParamCounts:
    """Role-wise sum of two parameter counts of one model (the model's expert shape kept)."""
    return replace(a, **{f.name: getattr(a, f.name) + getattr(b, f.name)
                         for f in fields(ParamCounts) if f.name not in _COUNTS})


def names_mtp(name) -> bool:
    """Whether an exclusion entry names only the multi-token-prediction module (`mtp`, `mtp.fc`,
    `mtp.layers.0.self_attn.q_proj`: Qwen3-Next's and Qwen3.5's checkpoint names), never a module of the target model,
    whose names start `model.` (vLLM maps `mtp.` to None for both: their hf_to_vllm_mapper, which it applies to the
    quantization config's lists, 0.33.0 wheel models/qwen3_5.py L327-329 and L476-479, qwen3_next.py L823)."""
    return isinstance(name, str) and (name == "mtp" or name.startswith("mtp."))


def mtp_entries(names: list, model_type: str) -> tuple[str, ...]:
    """The entries that keep some of a `mtp.` module (Qwen3-Next, Qwen3.5: FAMILIES' "split" ones) in 16 bits: named
    under `mtp.`, or a `re:` entry matching one of its modules' names; what a drafter built from it would read
    (kvplan.planning.speculative refuses to guess). () for other families, whose MTP layers are named otherwise."""
    if FAMILIES.get(model_type, ("", 0, ""))[2] != "split":
        return ()
    probes = ("mtp.fc", "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.mlp.gate_proj",
              "mtp.layers.0.mlp.experts.0.gate_proj", "mtp.layers.0.linear_attn.in_proj_qkv")
    out = [n for n in names if names_mtp(n)]
    for n in names:
        if isinstance(n, str) and n.startswith("re:"):
            try:  # a malformed one is refused where the list is matched (kvplan.readers.unquantized)
                match = re.compile(n[3:]).match
            except (re.error, RecursionError, OverflowError):
                continue
            out += [n] if any(match(p) for p in probes) else []
    return tuple(out)
