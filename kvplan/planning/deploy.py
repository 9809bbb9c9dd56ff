"""Deployments: tp x pp x dp x ep (x dcp), which of them a model can run, and how a GPU count becomes one.

One rule turns a GPU count into a layout (`deployment_for_gpus`): the widest valid tensor
parallelism within a node (node_size: the user's, the GPU profile's, else NODE_GPUS), pipeline
stages for the rest. `fit --gpus`, the smallest-fit search, `cheapest` and `sweep` all use it, each
with the node of the GPU it plans. `validate_deployment` says why a model cannot run a deployment
(heads, layers, and the dp / ep / dcp rules of `layout_problem`). Trying deployments with an engine
is kvplan.compare.candidates'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.core.errors import arg
from kvplan.core.intmath import divisors
from kvplan.model.layers import FullAttention, Kind, MLALatent, has_dsa
from kvplan.model.spec import ModelSpec

NODE_GPUS = 8  # tensor parallelism stays within a node; pipeline stages span nodes
MAX_SEARCH_GPUS = 64  # the smallest-fit search stops here
SEARCH_COUNTS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Deployment:
    """tp x pp GPUs per data-parallel rank, dp of them; ep = tp x dp with expert parallelism, else 1;
    dcp: decode-context-parallel ranks within tp (kvplan.planning.layout says what each rank holds); node_gpus the
    node size a user gave (`gpus_per_node`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dcp: int = 1
    # GPUs per node as the user states them to the engine (TensorRT-LLM's gpus_per_node); None: the GPU profile's
    # node_gpus, else the engine's assumption (kvplan.engines.trtllm.mlp_split)
    node_gpus: int | None = None
    # layers per pipeline stage as the user sets them (vLLM's VLLM_PP_LAYER_PARTITION, SGLang's
    # SGLANG_PP_LAYER_PARTITION), or the engine release's own cut where uneven (kvplan.engines.stage_split); None:
    # split_layers' default
    stage_layers: tuple[int, ...] | None = None
    # where stage_layers came from, as the words after the sizes in a plan's assumption (kvplan.engines.stage_split.
    # said): the user's option, a log's line or an engine release's own cut; not part of the layout
    stage_from: str = field(default="", compare=False, repr=False)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


def node_of(dep, gpu=None) -> tuple[int, str]:
    """GPUs in one node of this deployment, and where kvplan took the figure: the user's `gpus_per_node`
    (Deployment.node_gpus), else the GPU profile's `node_gpus`, else NODE_GPUS assumed."""
    if getattr(dep, "node_gpus", None):
        return dep.node_gpus, f"{arg('gpus_per_node')} {dep.node_gpus}"
    said = getattr(gpu, "node_gpus", None)
    if said:
        return said, f"{said} GPUs per node, the GPU profile's node_gpus"
    return NODE_GPUS, f"assumed {NODE_GPUS} GPUs per node"


def node_size(dep, gpu=None) -> int:
    """GPUs in one node of this deployment (node_of)."""
    return node_of(dep, gpu)[0]


def nvlink_past_node(gpu, ranks: int) -> bool:
    """Whether the GPU profile's NVSwitch domain reaches past its own node (`node_gpus`, else NODE_GPUS) and holds
    `ranks` GPUs: multi-node NVLink (a GB200 NVL72 rack of 4-GPU trays), where ranks on other nodes still use
    NVLink."""
    domain = getattr(gpu, "interconnect_domain", None) or 0
    return getattr(gpu, "interconnect_kind", None) == "nvswitch" and domain >= ranks and domain > node_size(None, gpu)


def nvlink_reaches(gpu, ranks: int, node: int) -> bool:
    """Whether a group of `ranks` GPUs sits on one node of `node` GPUs or inside multi-node NVLink
    (nvlink_past_node): where an engine's NVLink-only buffers (a custom all-reduce, FlashInfer's fusion workspace)
    can be shared by every rank."""
    return ranks <= node or nvlink_past_node(gpu, ranks)


# How an engine cuts n layers over pp stages where nobody set layers per stage (kvplan.engines.stage_split.CUTS says
# which engine release cuts which way, with the source lines): the remainder's layers go to
MIDDLE = "middle"  # the stages before the last, from the second-to-last backwards (vLLM 0.8.0 on: 61 / 4 15,15,16,15)
LAST = "last"  # the last stage, all of them (vLLM before 0.8, SGLang before 0.5.6: 62 / 4 15,15,15,17)
LAST_ONES = "last ones"  # one apiece to the last stages (SGLang 0.5.6 on: 62 / 4 15,15,16,16)
FIRST_ONES = "first ones"  # one apiece to the first stages (TensorRT-LLM's torch.tensor_split: 62 / 4 16,16,15,15)
SHARES = "shares"  # llama.cpp's equal device shares of n + 1 slots, the output the last (80 / 4 21,20,20,19)


def cut_sizes(n: int, pp: int, form: str = MIDDLE) -> tuple[int, ...]:
    """Layers per stage as an engine cuts n layers over pp stages by itself (`form`, above)."""
    if form == SHARES:  # layer i on the first device whose cumulative share (d + 1) / pp exceeds i / (n + 1)
        return tuple(sum(1 for i in range(n) if i * pp // (n + 1) == d) for d in range(pp))
    base, extra = divmod(n, pp)
    first = {MIDDLE: pp - 1 - extra, LAST_ONES: pp - extra, FIRST_ONES: 0}.get(form)
    if first is None:
        return tuple(base + (extra if i == pp - 1 else 0) for i in range(pp))
    return tuple(base + (1 if first <= i < first + extra else 0) for i in range(pp))


def split_layers(n: int, pp: int, sizes: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges for pp stages: `sizes` layers each where set (a Deployment's stage_layers:
    the user's, checked by stage_split_problem, or the engine's own uneven cut, kvplan.engines.stage_split), else as
    vLLM 0.8.0 on cuts them (cut_sizes MIDDLE: 61 layers over 4 are 15, 15, 16, 15)."""
    if sizes is None:
        sizes = cut_sizes(n, pp)
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


def stage_ranges(model, dep: Deployment) -> list[tuple[int, int]]:
    """`dep`'s pipeline stages over `model`'s layers (split_layers, with the user's stage_layers where set)."""
    return split_layers(model.num_layers, dep.pp, dep.stage_layers)


def stages_or_one(model, ranges: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """`ranges` (a deployment's pipeline stages, stage_ranges), or `model`'s layers as one stage where None: what a
    memory rule that takes its stages, as its callers have them, reads."""
    return [(0, model.num_layers)] if ranges is None else ranges


def largest_stage(per_layer: list, dep: Deployment):
    """The largest stage's sum of a per-layer figure (bytes, counts), the stages cut as split_layers cuts them."""
    return max(sum(per_layer[a:b]) for a, b in split_layers(len(per_layer), dep.pp, dep.stage_layers))


def stage_split_problem(n: int, pp: int, sizes: tuple[int, ...]) -> str | None:
    """Why layers per stage `sizes` cannot split n layers over pp stages, in the engines' own checks (vLLM and SGLang
    `get_pp_indices`: the count must equal pp, the sum the layers) and kvplan's (no stage without layers); None: they
    can."""
    given = ",".join(map(str, sizes))
    if len(sizes) != pp:
        return f"the layer split {given} names {len(sizes)} stages, not pp={pp}"
    if sum(sizes) != n:
        return f"the layer split {given} sums to {sum(sizes)} layers, not the model's {n}"
    if min(sizes) < 1:
        return f"the layer split {given} leaves a stage without layers (kvplan plans none)"
    return None


def _kv_heads(model) -> list[int]:
    return sorted({getattr(layer, "num_kv_heads", 0) for layer in model.layers} - {0})


def _splits_kv(h: int, tp: int) -> bool:
    """Whether tp ranks cannot hold `h` KV heads: they are split evenly over the ranks, or each rank keeps whole
    replicated heads (vLLM's QKVParallelLinear asserts one or the other; SGLang and TensorRT-LLM split the same way)."""
    return bool(h % tp if h >= tp else tp % h)


def _tp_sizes(model) -> str:
    """" (tp 1, 2, 4 or 8 does)": the tensor-parallel sizes the model's heads allow, for a refusal."""
    kv = _kv_heads(model)
    ok = [t for t in divisors(model.num_attention_heads) if not any(_splits_kv(h, t) for h in kv)]
    return f" (tp {', '.join(map(str, ok[:-1]))} or {ok[-1]} does)" if len(ok) > 1 else ""


def validate_deployment(model, dep: Deployment) -> str | None:
    """Why this deployment cannot run this model, or None when it can."""
    if dep.tp < 1 or dep.pp < 1:
        return "tp and pp must be at least 1"
    if model.num_attention_heads % dep.tp:
        return f"tp={dep.tp} does not divide the {model.num_attention_heads} attention heads{_tp_sizes(model)}"
    for h in _kv_heads(model):
        if _splits_kv(h, dep.tp):
            return f"tp={dep.tp} neither divides nor is a multiple of the {h} KV heads{_tp_sizes(model)}"
    if dep.pp > model.num_layers:
        return f"pp={dep.pp} exceeds the {model.num_layers} layers"
    if dep.stage_layers is not None:
        problem = stage_split_problem(model.num_layers, dep.pp, dep.stage_layers)
        if problem:
            return problem
    return layout_problem(model, dep.tp, dep.pp, dep.dp, dep.ep, dep.dcp)


def deployment_for_gpus(model, gpus: int, node: int = NODE_GPUS) -> Deployment | None:
    """The deployment a person would pick for `gpus` GPUs: the widest valid power-of-two tp within a node of `node`
    GPUs (node_size: the user's, the GPU profile's, else NODE_GPUS), then pipeline stages for the rest (16 GPUs on
    nodes of 8: tp 8 x pp 2; 8 GB200s, trays of 4: tp 4 x pp 2). None when no split is valid."""
    tp = 1 << (max(node, 1).bit_length() - 1)
    while tp >= 1:
        if gpus % tp == 0:
            dep = Deployment(tp, gpus // tp)
            if validate_deployment(model, dep) is None:
                return dep
        tp //= 2
    return None


def candidate_deployments(model, max_gpus: int = MAX_SEARCH_GPUS, counts=SEARCH_COUNTS,
                          node: int = NODE_GPUS) -> list[Deployment]:
    """Valid deployments of `counts` GPUs (default: powers of two) in the order a person would try them:
    fewest GPUs, then tp before pp (deployment_for_gpus on nodes of `node`)."""
    out = []
    for gpus in counts:
        if gpus > max_gpus:
            break
        dep = deployment_for_gpus(model, gpus, node)
        if dep is not None:
            out.append(dep)
    return out


def count_splits(model, counts, max_gpus: int = MAX_SEARCH_GPUS, node: int = NODE_GPUS) -> list[Deployment]:
    """The default split of each of `counts` GPUs on nodes of `node` that the model can run (deployment_for_gpus), or
    with no counts candidate_deployments' powers of two up to `max_gpus`: cheapest's deployments on one GPU type."""
    if not counts:
        return candidate_deployments(model, max_gpus, node=node)
    return [d for d in (deployment_for_gpus(model, c, node) for c in counts) if d is not None]


def layout_problem(model: ModelSpec, tp: int, pp: int, dp: int, ep: int, dcp: int = 1) -> str | None:
    """Why dp / ep / dcp cannot be used with this model and tp, in the engine's own terms; None if they can."""
    if dp < 1 or ep < 1 or dcp < 1:
        return "dp, ep and dcp must be at least 1"
    if dcp > 1:
        problem = dcp_problem(model, tp, dcp)
        if problem:
            return problem
    if ep > 1:
        p = model.params
        if not p.num_experts:
            return f"ep={ep}: {model.name} has no routed experts (expert parallelism needs a MoE model)"
        if ep != tp * dp:
            return (f"ep={ep}: expert parallelism is planned over every rank of a stage, tp x dp = {tp * dp} "
                    "(vLLM's --enable-expert-parallel takes no size; a hybrid expert split of SGLang or "
                    "TensorRT-LLM, 1 < ep < tp x dp, is not modelled)")
        if p.num_experts % ep:
            return f"ep={ep} does not divide the {p.num_experts} routed experts"
    return None


def dcp_problem(model: ModelSpec, tp: int, dcp: int) -> str | None:
    """Why vLLM cannot run decode context parallel size `dcp` at `tp` for this model (None: it can).

    vLLM v0.33.0: dcp divides tp (`config/parallel.py` L594-599, it reuses the tp ranks); only
    full-attention and MLA caches are sharded ("DCP not support sliding window",
    `v1/kv_cache_interface.py` L947-950); for GQA/MQA tp must exceed the KV heads, dcp must not
    exceed tp // KV heads and must divide the query heads per KV head (`config/model.py` L1578-1607):
    the dcp ranks are the ranks that would otherwise hold replicated copies of one KV head.
    """
    if tp % dcp:
        return f"dcp={dcp}: decode context parallelism reuses the tp group's GPUs, so it must divide tp={tp}"
    if has_dsa(model.layers):
        return (f"dcp={dcp}: how vLLM splits DeepSeek Sparse Attention's indexer key cache over decode-context-"
                "parallel ranks is not modelled")
    other = {str(layer.kind) for layer in model.layers
             if layer.kind != Kind.NONE and not isinstance(layer, (MLALatent, FullAttention))}
    if other:
        return (f"dcp={dcp}: vLLM shards only full-attention and MLA caches over decode-context-parallel ranks; "
                f"{model.name} caches {', '.join(sorted(other))} layers")
    heads = {layer.num_kv_heads for layer in model.layers if isinstance(layer, FullAttention)}
    for h in sorted(heads):
        if tp <= h:
            return (f"dcp={dcp}: decode context parallelism for GQA/MQA needs tp ({tp}) above the model's "
                    f"{h} KV heads (vLLM)")
        if dcp > tp // h:
            return f"dcp={dcp} exceeds vLLM's maximum tp // KV heads = {tp // h} for tp={tp} and {h} KV heads"
        if (model.num_attention_heads // h) % dcp:
            return (f"dcp={dcp} does not divide the {model.num_attention_heads // h} query heads per KV head "
                    "(vLLM, GQA/MQA)")
    return None
