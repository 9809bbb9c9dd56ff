"""Family facts about a read model's MLPs that its spec does not spell out: which layers have a dense MLP,
a MoE block or none, and whether the MLP is gated. Asked by whoever rebuilds a model (kvplan.validate).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.layers import NoCache
from kvplan.model.spec import ModelSpec
from kvplan.readers.params import _UNGATED


def gated_mlp(spec: ModelSpec) -> bool:
    """SwiGLU-style (gate, up, down: three matrices), or up -> act -> down (two) for the families of
    kvplan.readers.params._UNGATED."""
    return spec.family not in _UNGATED


def mlp_width(spec: ModelSpec, params: int, layers: int, shared: bool = False) -> int:
    """One MLP's intermediate width from its parameter count over `layers` layers (gated_mlp: three matrices of
    hidden x width, else two), or 0 where no reading is exact. A shared expert's (`shared`) count may also hold a gate
    of hidden inputs a layer (Qwen2-MoE's, Qwen3-Next's and Qwen3.5's shared_expert_gate:
    kvplan.readers.params.shared_expert_width); at most one of the two readings is exact. Engine rules that need the
    width refuse where it is 0 (exact_mlp_width)."""
    per = layers * (3 if gated_mlp(spec) else 2) * spec.hidden_size
    if not per:
        return 0
    if shared and params % per and (params - layers * spec.hidden_size) % per == 0:
        params -= layers * spec.hidden_size
    return 0 if params % per else params // per


def exact_mlp_width(spec: ModelSpec, params: int, layers: int, what: str, tp: int, purpose: str,
                    shared: bool = False) -> int:
    """mlp_width, refused where the parameter counts give none exactly: kvplan cannot `purpose` (the engine rule that
    needs the width, kvplan.engines.fp8_linear, kvplan.engines.trtllm.mlp_split) at this tp."""
    width = mlp_width(spec, params, layers, shared=shared)
    if not width:
        raise KvplanError(f"{spec.name}: its {what} width does not follow exactly from its parameter counts, so "
                          f"kvplan cannot {purpose} {arg('tp')} {tp}", EXIT_USAGE, param="tp", value=tp)
    return width


def expert_width(spec: ModelSpec, exact: bool = False) -> int:
    """One routed expert's intermediate width, from the parameter counts: the experts' weights (their biases taken
    out) over MoE layers x experts x matrices (gated_mlp) x hidden; 0 without experts. The floor of the division, or
    with `exact` 0 where the counts do not hold exactly that (a remainder the spec cannot place)."""
    per = _per_width(spec)
    weights = spec.params.experts - spec.params.expert_biases
    if not (per and spec.params.experts) or (exact and weights % per):
        return 0
    return weights // per


def _per_width(spec: ModelSpec) -> int:
    """Expert parameters per unit of one expert's width: MoE layers x experts x matrices x hidden."""
    p = spec.params
    return p.num_moe_layers * p.num_experts * (3 if gated_mlp(spec) else 2) * spec.hidden_size


def dense_mlp_layers(spec: ModelSpec) -> int:
    """How many layers have a dense MLP (ffn_kinds over every layer); 0 where the spec counts no dense MLP."""
    return ffn_kinds(spec, spec.num_layers).count("dense") if spec.params.mlp else 0


def ffn_kinds(full: ModelSpec, n: int) -> list[str]:
    """Which of the first n layers have a dense MLP, a MoE block, or none.

    The spec records how many layers are MoE, not which; the layouts of the catalog's families
    are: DeepSeek/GLM dense first then MoE (`first_k_dense_replace`); Llama 4 interleaved
    (`interleave_moe_layer_step`); Nemotron-H MLP only in its MLP blocks (NoCache layers).
    """
    p, total = full.params, full.num_layers
    if full.family == "nemotron_h":
        return ["dense" if isinstance(layer, NoCache) else "none" for layer in full.layers[:n]]
    moe = p.num_moe_layers if p.num_experts else 0
    if moe == 0:
        return ["dense"] * n
    if full.family in ("llama4", "llama4_text") and moe < total:
        step = total // moe
        return ["moe" if i % step == step - 1 else "dense" for i in range(n)]
    first_moe = total - moe
    return ["moe" if i >= first_moe else "dense" for i in range(n)]


def most_moe_layers(full: ModelSpec, ranges) -> int:
    """The most MoE layers any one of the [start, end) `ranges` (the pipeline stages) holds, placed by ffn_kinds: the
    stage with the most layers need not have the most MoE layers (DeepSeek's dense layers come first)."""
    kinds = ffn_kinds(full, full.num_layers)
    return max(kinds[a:b].count("moe") for a, b in ranges)
