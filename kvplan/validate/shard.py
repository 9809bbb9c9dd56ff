"""What each rank of a distributed validation run holds: ranks, groups, and one rank's share.

No torch: the layout, the checks that refuse a layout, and each rank's parameter count in closed
form, so what a rank builds can be predicted before it is built and the sharded decoder
(dist_decoder.py) has one source for every slice it takes.

A layout is tp x pp x dp ranks, tensor parallel innermost (vLLM's order):
    rank = (dp_rank x pp + pp_rank) x tp + tp_rank.
Placement, as vLLM places it (docs/engines.md section 9):
  * tp: attention heads split evenly; KV heads split when tp <= H_kv, else each rank keeps the one
    head its query heads read (`QKVParallelLinear`); MLA's down-projections, latent norms and the
    latent cache whole on every rank; dense MLP width split; the vocabulary (embedding and LM
    head) split in equal contiguous slices; norms and routers whole.
  * pp: contiguous layer ranges as vLLM 0.8.0+ cuts them (kvplan.planning.deploy.split_layers' default, the
    remainder one layer apiece before the last stage): this decoder is placed as vLLM places it, and the plan it is
    compared with is the engine-neutral one (dist_rank.predict_rank), which takes the same cut, so no other engine's
    cut (kvplan.engines.stage_split.CUTS) applies here; the embedding on the first stage,
    the final norm and LM head on the last; a tied LM head on a last stage that is not the first
    keeps its own copy of the embedding slice (vLLM builds `embed_tokens` there to tie it).
  * dp: each data-parallel rank the same weights as its tensor-parallel group, its own requests.
  * ep: 1 = routed experts split by width over the stage's tp x dp ranks (vLLM: "expert layers
    form a tensor parallel group of size DP x TP"; every rank all experts); ep = tp x dp = each
    rank of a stage keeps E / ep whole experts (vLLM's --enable-expert-parallel, EP = TP x DP);
    shared experts and dense MLPs stay tensor parallel within the dp group.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.errors import arg
from kvplan.model.layers import ChunkedLocal, FullAttention, MLALatent, NoCache, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.planning.deploy import split_layers


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(dp_rank, pp_rank, tp_rank) of a global rank."""
        rest, tp_rank = divmod(rank, self.tp)
        dp_rank, pp_rank = divmod(rest, self.pp)
        return dp_rank, pp_rank, tp_rank

    def rank_of(self, dp_rank: int, pp_rank: int, tp_rank: int) -> int:
        return (dp_rank * self.pp + pp_rank) * self.tp + tp_rank

    def tp_groups(self) -> list[list[int]]:
        return [[self.rank_of(d, p, t) for t in range(self.tp)] for d in range(self.dp) for p in range(self.pp)]

    def pipe_groups(self) -> list[list[int]]:
        return [[self.rank_of(d, p, t) for p in range(self.pp)] for d in range(self.dp) for t in range(self.tp)]

    def stage_groups(self) -> list[list[int]]:
        """Every rank of one pipeline stage (dp-major): the expert-parallel group when ep > 1."""
        return [[self.rank_of(d, p, t) for d in range(self.dp) for t in range(self.tp)] for p in range(self.pp)]

    def label(self) -> str:
        return " x ".join(f"{k} {v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp), ("ep", self.ep))
                          if v > 1) or "one rank"


def split_range(n: int, parts: int, index: int) -> tuple[int, int]:
    """The index-th of `parts` equal contiguous slices of range(n) (n divisible by parts)."""
    size = n // parts
    return index * size, (index + 1) * size


def kv_range(num_kv_heads: int, num_heads: int, tp: int, tp_rank: int) -> tuple[int, int]:
    """KV heads a tensor-parallel rank keeps: its even share, or the one head its query heads read."""
    if tp <= num_kv_heads:
        return split_range(num_kv_heads, tp, tp_rank)
    first_q = tp_rank * (num_heads // tp)
    head = first_q // (num_heads // num_kv_heads)
    return head, head + 1


def _attention_kinds():
    return (FullAttention, SlidingWindow, ChunkedLocal)


def layout_problem(bp, layout: Layout, batch: int) -> str | None:
    """Why this distributed run cannot be built for blueprint `bp`, or None."""
    tp, pp, dp, ep = layout.tp, layout.pp, layout.dp, layout.ep
    if min(tp, pp, dp, ep) < 1:
        return f"{arg('tp')}, {arg('pp')}, {arg('dp')} and {arg('ep')} must be at least 1"
    if bp.heads % tp:
        return f"tp={tp} does not divide the {bp.heads} attention heads"
    for lp in bp.layers:
        m = lp.mixer
        if isinstance(m, _attention_kinds()):
            h = m.num_kv_heads
            if (h % tp if h >= tp else tp % h):
                return f"tp={tp} neither divides nor is a multiple of the {h} KV heads"
        if isinstance(m, RecurrentState) and tp > 1:
            return ("the distributed runner does not split recurrent (Mamba / linear attention) layers over tp; "
                    f"use {arg('pp')} or {arg('dp')}")
    if pp > len(bp.layers):
        return f"pp={pp} exceeds the {len(bp.layers)} layers built"
    if bp.vocab % tp:
        return f"tp={tp} does not divide the vocabulary of {bp.vocab} built"
    ffns = {lp.ffn for lp in bp.layers}
    if "dense" in ffns and bp.dense_width % tp:
        return f"tp={tp} does not divide the MLP width {bp.dense_width}"
    if "moe" in ffns:
        if bp.shared_width % tp:
            return f"tp={tp} does not divide the shared expert width {bp.shared_width}"
        if ep == 1 and bp.expert_width % (tp * dp):
            return (f"tp x dp = {tp * dp} does not divide the expert width {bp.expert_width} (the experts' "
                    "tensor-parallel group spans dp)")
    if ep not in (1, tp * dp):
        return (f"ep={ep}: expert parallelism spans every tensor- and data-parallel rank (ep = tp x dp = {tp * dp}), "
                "as vLLM's --enable-expert-parallel")
    if ep > 1:
        if "moe" not in ffns:
            return f"ep={ep}: the layers built have no routed experts"
        if bp.num_experts % ep:
            return f"ep={ep} does not divide the {bp.num_experts} routed experts built"
    if batch % dp:
        return (f"{arg('batch')} {batch} must be a multiple of dp={dp} (each data-parallel rank decodes batch / dp "
                "sequences)")
    return None


@dataclass(frozen=True)
class Shard:
    """One rank's share of a Blueprint."""

    rank: int
    dp_rank: int
    pp_rank: int
    tp_rank: int
    layers: tuple[int, int]  # [start, end) of the blueprint's layers
    first: bool
    last: bool
    heads: tuple[int, int]  # query heads kept
    vocab: tuple[int, int]  # vocabulary rows kept (embedding and LM head)
    experts: tuple[int, int]  # routed experts kept
    expert_width: tuple[int, int]  # columns of each kept expert's width
    batch: int  # sequences this rank decodes (its data-parallel group's)


def shard_of(bp, layout: Layout, rank: int, batch: int) -> Shard:
    dp_rank, pp_rank, tp_rank = layout.coords(rank)
    start, end = split_layers(len(bp.layers), layout.pp)[pp_rank]  # vLLM 0.8.0+'s cut, the neutral plan's too
    stage_rank = dp_rank * layout.tp + tp_rank  # index within the stage's tp x dp ranks
    if layout.ep > 1:
        experts, width = split_range(bp.num_experts, layout.ep, stage_rank), (0, bp.expert_width)
    else:  # vLLM: the expert layers form one tensor-parallel group of dp x tp ranks
        experts, width = (0, bp.num_experts), split_range(bp.expert_width, layout.tp * layout.dp, stage_rank)
    return Shard(rank, dp_rank, pp_rank, tp_rank, (start, end), pp_rank == 0, pp_rank == layout.pp - 1,
                 split_range(bp.heads, layout.tp, tp_rank), split_range(bp.vocab, layout.tp, tp_rank),
                 experts, width, batch // layout.dp)


def _mixer_params(bp, lp, layout: Layout, shard: Shard) -> int:
    """Parameters of one layer's mixer on this rank (its pre-norm included)."""
    h, m = bp.hidden, lp.mixer
    hq = shard.heads[1] - shard.heads[0]
    if isinstance(m, _attention_kinds()):
        d = m.head_dim
        dv = getattr(m, "v_head_dim", 0) or d
        lo, hi = kv_range(m.num_kv_heads, bp.heads, layout.tp, shard.tp_rank)
        return h * hq * d + h * (hi - lo) * (d + dv) + hq * dv * h + h
    if isinstance(m, MLALatent):
        a = lp.mla
        qk = hq * (a.nope + m.qk_rope_head_dim)
        q = h * a.q_lora_rank + a.q_lora_rank * qk if a.q_lora_rank else h * qk
        kv_down = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        norms = a.q_lora_rank + m.kv_lora_rank
        return q + kv_down + m.kv_lora_rank * hq * (a.nope + a.v) + hq * a.v * h + norms + h
    if isinstance(m, RecurrentState):  # tp = 1 only (layout_problem)
        s = lp.state
        inner = s.heads * s.head_dim
        return h * (2 * inner + 2 * s.groups * s.state
                    + s.heads) + inner * h + s.conv_channels * s.kernel + 3 * s.heads + inner + h
    assert isinstance(m, NoCache)
    return 0


def rank_params(bp, layout: Layout, shard: Shard) -> int:
    """Parameters this rank builds, in closed form (dist_decoder builds exactly these)."""
    h, mats, tp = bp.hidden, 3 if bp.gated else 2, layout.tp
    total = 0
    for lp in bp.layers[shard.layers[0]:shard.layers[1]]:
        total += _mixer_params(bp, lp, layout, shard)
        if lp.ffn == "dense":
            total += mats * h * bp.dense_width // tp + h
        elif lp.ffn == "moe":
            experts = shard.experts[1] - shard.experts[0]
            width = shard.expert_width[1] - shard.expert_width[0]
            total += h * bp.num_experts + experts * mats * h * width + mats * h * bp.shared_width // tp + h
    rows = (shard.vocab[1] - shard.vocab[0]) * h
    if shard.first:
        total += rows
    if shard.last:
        total += h  # the final norm
        if not (bp.tied and shard.first):  # an untied head, or a tied one on another stage (its own copy)
            total += rows
    return total
