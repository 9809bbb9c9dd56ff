"""Layouts beyond tp x pp: data-parallel ranks, expert parallelism, and what each rank holds.

Pure arithmetic (no I/O). Placement is vLLM's (docs/engines.md section 9.1), which kvplan also
uses engine-neutrally:
  * tp: attention heads, dense MLP and shared experts split over tp; KV heads split, or whole
    heads replicated when tp exceeds them (their K/V projections with them); MLA down-projections,
    norms and routers whole; vocabulary split over tp.
  * pp: contiguous layer ranges; embedding on the first stage, LM head on the last; a tied head on
    a last stage that is not the first keeps its own copy of the table.
  * dp: data-parallel ranks (attention data parallel for a MoE model): each holds its tp group's
    weights and its own requests, so the deployment holds dp x one rank's concurrency.
  * experts: the routed experts of a stage form one group over its tp x dp ranks: split by width
    without expert parallelism, into whole experts with it (ep = tp x dp, vLLM's
    --enable-expert-parallel); either way each rank holds experts / (tp x dp).
The weight counts per rank are restated from the roles in kvplan.model.spec.WeightBytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from kvplan.planning.deploy import NODE_GPUS, Deployment, validate_deployment
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.core.intmath import cdiv, divisors
from kvplan.model.layers import FullAttention, MLALatent
from kvplan.model.spec import ModelSpec, WeightBytes



def replicated_kv_proj_bytes(model: ModelSpec, wb: WeightBytes, layers, tp: int) -> int:
    """Bytes of K/V projection one rank holds beyond its 1/tp share, because tp exceeds the KV heads.

    vLLM's QKVParallelLinear gives each rank max(1, H_kv // tp) whole KV heads: at tp 8 and 4 KV
    heads every rank holds one head's K and V projections (hidden x (d + d_v) each), not half of
    one. Priced at the bytes per parameter of the split (linear) weights.
    """
    p = model.params
    split_params = p.attention + p.mlp + p.shared_experts - p.replicated
    if tp == 1 or split_params <= 0:
        return 0
    extra = 0  # parameters, x tp (kept whole until the end)
    for layer in layers:
        h = getattr(layer, "num_kv_heads", 0)
        if h and tp > h:
            dims = layer.head_dim + (getattr(layer, "v_head_dim", 0) or layer.head_dim)
            extra += model.hidden_size * dims * (max(1, h // tp) * tp - h)
    return int(extra * wb.sharded / split_params / tp)


class Placement(NamedTuple):
    """Over how many ranks each part of a stage is split (1: whole on every rank)."""

    attention: int  # attention / mixer projections
    mlp: int  # dense MLPs (and shared experts unless `shared` says otherwise)
    experts: int  # routed experts (by width, or whole experts with EP)
    embedding: int
    head: int
    shared: int = 0  # shared experts; 0: as `mlp` (SGLang fuses them into the routed experts' group)
    host_embedding: bool = False  # the input embedding stays in host memory (llama.cpp): host_shift


def vllm_placement(tp: int, dp: int) -> Placement:
    """vLLM (and kvplan's default): everything over tp within a dp rank, experts over tp x dp."""
    return Placement(tp, tp, tp * dp, tp, tp)


def rank_weights(wb: WeightBytes, model: ModelSpec, first: bool, last: bool, frac: float, place: Placement,
                 touched: float, kv_extra: int = 0, mix: tuple[float, float, float] | None = None) -> tuple[int, int]:
    """(resident bytes, bytes read per decode step) of one pipeline stage on one rank.

    `touched`: the distinct experts one decode step reads per MoE layer, for the tokens of the
    whole deployment (every dp rank's tokens reach every expert group). `kv_extra`: this stage's
    replicated_kv_proj_bytes. The split weights' MLP share is priced at their bytes per parameter.
    `mix`: (the stage's share of the mixers, of the dense-MLP layers, of the MoE layers) where they are not spread
    evenly (DeepSeek's dense layers first, a hybrid's Mamba, attention and MLP blocks:
    kvplan.planning.stage_shares); else all three are `frac`.
    """
    p = model.params
    split_params = p.attention + p.mlp + p.shared_experts - p.replicated
    dense = wb.sharded * p.mlp / split_params if split_params > 0 else 0
    shared = wb.sharded * p.shared_experts / split_params if split_params > 0 else 0
    f_mix, f_dense, f_moe = mix or (frac, frac, frac)
    split = ((wb.sharded - dense - shared) / place.attention * f_mix + dense / place.mlp * f_dense
             + shared / (place.shared or place.mlp) * f_moe)
    per_expert_rank = wb.experts / place.experts
    resident = split + per_expert_rank * f_moe + wb.replicated * frac
    table = wb.embedding / place.embedding
    whole = wb.vision_replicated  # towers: first stage, over tp but for the plain torch modules
    emb = table + (getattr(wb, "vision", 0) - whole) / place.attention + whole if first else 0
    head = wb.lm_head / place.head if last else 0
    tied_copy = table if (last and not first and not wb.lm_head) else 0  # vLLM builds embed_tokens there
    tied_read = table if (last and not wb.lm_head) else 0  # a tied head still reads the table
    resident += emb + head + tied_copy + kv_extra
    expert_read = per_expert_rank * (touched / p.num_experts) if p.num_experts else 0
    read = split + expert_read * f_moe + wb.replicated * frac + head + tied_read + kv_extra
    return int(resident), int(read)


def host_shift(wb, place, first: bool, last: bool) -> int:
    """Bytes a stage's GPU weights lose where the engine keeps the input embedding in host memory (llama.cpp,
    Placement.host_embedding): the whole table on the first stage, bar a tied head's GPU copy where the first stage
    is also the last (on a later last stage rank_weights books that copy already). The table's bytes are its own
    type's (kvplan.model.weights.weight_bytes), not scaled to a checkpoint's total."""
    if not place.host_embedding or not first or (last and not wb.lm_head):
        return 0
    return -wb.embedding


def per_rank_batch(batch: int, dp: int) -> int:
    """Sequences the busiest dp rank holds when `batch` are spread over dp ranks."""
    return cdiv(batch, dp)


def rank_request(req, dep):
    """The request one data-parallel rank serves: its share of the batch (the same request at dp 1)."""
    return req if dep.dp == 1 else replace(req, batch=per_rank_batch(req.batch, dep.dp))


def whole_answers(ans, dep, dcp_tokens_whole: bool = False):
    """One rank's answers as the deployment's: dp ranks each hold their own requests in their own pool (so
    the deployment's requests and token slots are dp times one rank's); with decode context parallel a rank's
    token slots hold every dcp-th token of dcp times as many (unless the engine's token figure already counts
    the whole dcp group: `dcp_tokens_whole`, vLLM's)."""
    if dep.dp == 1 and dep.dcp == 1:
        return ans
    tokens = ans.kv_cache_tokens * (1 if dcp_tokens_whole else dep.dcp) * dep.dp
    return ans._replace(max_concurrency=ans.max_concurrency * dep.dp, kv_cache_tokens=tokens)


def candidate_layouts(model: ModelSpec, gpus: int, per_node: int = NODE_GPUS):
    """Every (tp, pp, dp, ep) on exactly `gpus` GPUs a model can run: tp within a node (at most
    `per_node`), pp and dp across nodes; a MoE model with dp > 1 gets expert parallelism over
    tp x dp (the engines' DP-attention + EP recipe), otherwise ep = 1. Validity is the caller's
    (kvplan.planning.deploy.validate_deployment)."""
    moe = bool(model.params.num_experts)
    for tp in divisors(gpus):
        if tp > per_node:
            break
        for pp in divisors(gpus // tp):
            if pp > model.num_layers:
                break
            dp = gpus // (tp * pp)
            ep = tp * dp if moe and dp > 1 and model.params.num_experts % (tp * dp) == 0 else 1
            yield tp, pp, dp, ep


def layout_rank_key(plan) -> tuple:
    """Best first: fits, then most concurrent requests at the context, then decode tokens/s, then
    fewer pipeline stages (less latency), then wider tp."""
    dep = plan.deployment
    return (not plan.fits, -plan.max_concurrency, -plan.decode_tokens_per_second, dep.pp, -dep.tp)


SEARCH = "search"  # layout_from_flags: --gpus N alone, every layout of N GPUs is planned and ranked


def layout_from_flags(model: ModelSpec, gpus: int | None, tp: int | None, pp: int | None, dp: int | None = None,
                      ep: int | None = None, dcp: int | None = None):
    """What fit's layout flags ask for: None (no flag: one GPU and the smallest that fits), SEARCH
    (--gpus N alone), or the one Deployment they fix. Unset sizes are 1, except tp, which takes
    what --gpus leaves (gpus / (pp x dp)); --ep takes vLLM's only size, tp x dp, and any other
    value is refused with vLLM's reason. A layout the model cannot run is a one-line error."""
    for name, value in (("gpus", gpus), ("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("dcp", dcp)):
        if value is not None and not 1 <= value <= 4096:
            raise out_of_range(name, value, 1, 4096, thousands=False)
    if all(v is None for v in (gpus, tp, pp, dp, ep, dcp)):
        return None
    if gpus is not None and all(v is None for v in (tp, pp, dp, ep, dcp)):
        return SEARCH
    pp, dp = pp or 1, dp or 1
    if tp is None:
        if gpus is not None and gpus % (pp * dp):
            raise KvplanError(f"{arg('gpus')} {gpus} is not a multiple of {arg('pp')} {pp} × {arg('dp')} {dp}",
                              EXIT_USAGE, param="gpus", value=gpus)
        tp = gpus // (pp * dp) if gpus is not None else 1
    if gpus is not None and gpus != tp * pp * dp:
        raise KvplanError(f"{arg('gpus')} {gpus} does not equal {arg('tp')} {tp} × {arg('pp')} {pp} × "
                          f"{arg('dp')} {dp}", EXIT_USAGE, param="gpus", value=gpus)
    dep = Deployment(tp, pp, dp, 1 if ep is None else ep, 1 if dcp is None else dcp)
    why = validate_deployment(model, dep)
    if why:
        raise KvplanError(f"{model.name}: {why}", EXIT_USAGE)
    return dep


def layout_text(dep) -> str:
    """'tp 8', 'tp 1 × dp 8, ep 8', 'tp 4 × pp 2'."""
    text = " × ".join([f"tp {dep.tp}"] + [f"{k} {v}" for k, v in (("pp", dep.pp), ("dp", dep.dp)) if v > 1])
    return (text + (f", ep {dep.ep}" if dep.ep > 1 else "")
            + (f", dcp {dep.dcp}" if dep.dcp > 1 else ""))


@dataclass(frozen=True)
class DcpRules:
    """Decode context parallel (vLLM -dcp C): a request's tokens are spread over the C ranks of a
    dcp group, cp_kv_cache_interleave_size I at a time (I = 1: token i on rank i mod C; PR #23734),
    so a rank holds cdiv(S, C) of a sequence's S tokens in its own pages: vLLM's
    `max_memory_usage_bytes` takes `cdiv(max_model_len, dcp)` (v0.33.0 `v1/kv_cache_interface.py`
    L643-648). Every full-attention and MLA layer is sharded (dcp_problem refuses the others); page
    rounding is the wrapped rules'."""

    inner: object
    dcp: int

    @property
    def name(self) -> str:
        return f"{getattr(self.inner, 'name', 'paged')} / dcp {self.dcp}"

    @property
    def token_bytes(self):
        """The wrapped rules' entry bytes, where they have their own (kvplan.planning.profile), else None."""
        return getattr(self.inner, "token_bytes", None)

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if isinstance(layer, (MLALatent, FullAttention)):
            seq_len = cdiv(seq_len, self.dcp)
        return self.inner.tokens_allocated(layer, seq_len, block)
