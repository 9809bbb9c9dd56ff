"""One rank's shard of a validation Decoder, sliced from the whole model, with its collectives.

Every rank builds the whole (small) Decoder from the same seed, takes its Shard's slices as fresh
tensors (shard.py says which) and drops the rest, so the sharded model computes what the whole
one computes, and what a rank measures is exactly what it keeps. Collectives are torch.distributed's:
  * row-parallel outputs (attention's o, the MLP's down, tensor-parallel experts) are partial
    sums, all-reduced over the tensor-parallel group;
  * the vocabulary-parallel embedding looks up its own rows (others zero), all-reduced; the LM
    head's logits slices are all-gathered;
  * expert parallel: a MoE layer all-gathers the tokens of every rank of its stage, each rank
    applies its own experts, the sums are all-reduced and each rank keeps its own tokens' rows.
Pipeline stages pass hidden states with send/recv (dist_run.py drives that).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from kvplan.validate.decoder import MLP, Attention, Block, Decoder, LatentAttention, MoE
from kvplan.validate.shard import Layout, Shard, kv_range, split_range


def _copy(dst: nn.Linear, src: torch.Tensor) -> None:
    with torch.no_grad():
        dst.weight.copy_(src)


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    if group is not None:
        dist.all_reduce(x, group=group)
    return x


def _all_gather(x: torch.Tensor, group, size: int) -> torch.Tensor:
    """Concatenation along dim 0 of every group member's x, in group rank order."""
    if group is None:
        return x
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, 0)


class Reduced(nn.Module):
    """A module whose output is a partial sum over the tensor-parallel group."""

    def __init__(self, inner: nn.Module, group):
        super().__init__()
        self.inner, self.group = inner, group

    def forward(self, *args):
        return _all_reduce(self.inner(*args), self.group)


def shard_attention(full: Attention, hidden: int, heads: int, tp: int, tp_rank: int) -> Attention:
    q0, q1 = split_range(heads, tp, tp_rank)
    k0, k1 = kv_range(full.kv_heads, heads, tp, tp_rank)
    d, dv = full.d, full.dv
    mod = Attention(replace(full.layer, num_kv_heads=k1 - k0), hidden, q1 - q0, full.kv_dtype)
    _copy(mod.q, full.q.weight[q0 * d:q1 * d])
    _copy(mod.k, full.k.weight[k0 * d:k1 * d])
    _copy(mod.v, full.v.weight[k0 * dv:k1 * dv])
    _copy(mod.o, full.o.weight[:, q0 * dv:q1 * dv])
    return mod


def shard_latent(full: LatentAttention, lp, hidden: int, heads: int, tp: int, tp_rank: int) -> LatentAttention:
    q0, q1 = split_range(heads, tp, tp_rank)
    per_q, per_kv = full.nope + full.rope_d, full.nope + full.dv
    mod = LatentAttention(lp, hidden, q1 - q0, full.kv_dtype)
    if full.q_a is not None:  # the q down-projection and its norm are whole on every rank
        _copy(mod.q_a, full.q_a.weight)
        mod.q_norm.load_state_dict(full.q_norm.state_dict())
    _copy(mod.q_b, full.q_b.weight[q0 * per_q:q1 * per_q])
    _copy(mod.kv_a, full.kv_a.weight)
    mod.kv_norm.load_state_dict(full.kv_norm.state_dict())
    _copy(mod.kv_b, full.kv_b.weight[q0 * per_kv:q1 * per_kv])
    _copy(mod.o, full.o.weight[:, q0 * full.dv:q1 * full.dv])
    return mod


def shard_mlp(full: MLP, tp: int, tp_rank: int, cols: tuple[int, int] | None = None) -> MLP:
    """Columns [c0, c1) of the MLP's width (default: this rank's tensor-parallel share)."""
    width = full.up.weight.shape[0]
    c0, c1 = cols or split_range(width, tp, tp_rank)
    mod = MLP(full.up.weight.shape[1], c1 - c0, full.gate is not None)
    if full.gate is not None:
        _copy(mod.gate, full.gate.weight[c0:c1])
    _copy(mod.up, full.up.weight[c0:c1])
    _copy(mod.down, full.down.weight[:, c0:c1])
    return mod


class RankMoE(nn.Module):
    """Routed experts on one rank: every expert's width slice (ep = 1), or whole experts e0..e1 (ep > 1).

    With dp = 1 and ep = 1 the expert group is the tensor-parallel group, whose ranks see the same
    tokens: partial sums, all-reduced. Otherwise it spans the stage's tp x dp ranks: tokens are
    all-gathered, each rank adds its part for all of them, the sums are all-reduced, and each rank
    keeps its own rows."""

    def __init__(self, full: MoE, shard: Shard, layout: Layout, groups: dict):
        super().__init__()
        self.top_k = full.top_k
        self.across = layout.dp > 1 or layout.ep > 1  # the expert layers span the stage's tp x dp ranks
        self.router = full.router  # whole on every rank
        e0, e1 = shard.experts
        self.first = e0
        self.experts = nn.ModuleList(shard_mlp(full.experts[e], 1, 0, shard.expert_width) for e in range(e0, e1))
        self.shared = shard_mlp(full.shared, layout.tp, shard.tp_rank) if full.shared is not None else None
        self.tp_group, self.stage_group = groups["tp"], groups["stage"]
        self.stage_size, self.stage_index = layout.tp * layout.dp, shard.dp_rank * layout.tp + shard.tp_rank

    def _routed(self, flat: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.router(flat).topk(self.top_k, -1)  # [N, k], over all experts
        weights = weights.softmax(-1)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            rows, slot = torch.nonzero(chosen == self.first + i, as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        return out

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])  # [N, h]
        if not self.across:
            out = self._routed(flat)
            if self.shared is not None:
                out = out + self.shared(flat)
            return _all_reduce(out, self.tp_group).view_as(x)
        n = flat.shape[0]
        every = _all_gather(flat, self.stage_group, self.stage_size)  # [stage ranks x N, h]
        routed = _all_reduce(self._routed(every), self.stage_group)
        out = routed[self.stage_index * n:(self.stage_index + 1) * n]
        if self.shared is not None:
            out = out + _all_reduce(self.shared(flat), self.tp_group)
        return out.view_as(x)


class VocabEmbedding(nn.Module):
    """Rows v0..v1 of the embedding; a token outside them looks up zeros; summed over tp."""

    def __init__(self, table: torch.Tensor, vocab: tuple[int, int], group):
        super().__init__()
        self.v0, self.v1 = vocab
        self.weight = nn.Parameter(table[self.v0:self.v1].clone())
        self.group = group

    def forward(self, tokens):
        mine = (tokens >= self.v0) & (tokens < self.v1)
        local = torch.where(mine, tokens - self.v0, torch.zeros_like(tokens))
        return _all_reduce(F.embedding(local, self.weight) * mine[..., None], self.group)


class RankBlock(Block):
    """A Block made of this rank's shards (its forward is Block's: pre-norm residual mixer, then FFN)."""

    def __init__(self, mixer, norm1, ffn, norm2):
        nn.Module.__init__(self)  # the parts are built by the caller, not from a blueprint
        self.mixer, self.norm1, self.ffn, self.norm2 = mixer, norm1, ffn, norm2


class RankDecoder(nn.Module):
    """This rank's layers of the Decoder: embedding on the first stage, norm and LM head on the last."""

    def __init__(self, full: Decoder, bp, shard: Shard, layout: Layout, groups: dict):
        super().__init__()
        tp, r, tp_group = layout.tp, shard.tp_rank, groups["tp"]
        self.shard, self.tp, self.tp_group = shard, tp, tp_group
        self.embed = VocabEmbedding(full.embed.weight, shard.vocab, tp_group) if shard.first else None
        blocks = []
        for i in range(*shard.layers):
            blk, lp = full.blocks[i], bp.layers[i]
            mixer = blk.mixer
            if isinstance(mixer, Attention) and tp > 1:
                mixer = Reduced(shard_attention(mixer, bp.hidden, bp.heads, tp, r), tp_group)
            elif isinstance(mixer, LatentAttention) and tp > 1:
                mixer = Reduced(shard_latent(mixer, lp, bp.hidden, bp.heads, tp, r), tp_group)
            ffn = blk.ffn
            if isinstance(ffn, MoE):
                ffn = RankMoE(ffn, shard, layout, groups)
            elif isinstance(ffn, MLP) and tp > 1:
                ffn = Reduced(shard_mlp(ffn, tp, r), tp_group)
            blocks.append(RankBlock(mixer, blk.norm1, ffn, blk.norm2))
        self.blocks = nn.ModuleList(blocks)
        self.norm = full.norm if shard.last else None
        self.lm_head = None
        if shard.last:
            if bp.tied and self.embed is not None:
                self.lm_head = self.embed.weight  # one tensor for both, as on one GPU
            else:  # an untied head, or a tied one on a later stage: its own slice
                self.lm_head = nn.Parameter(full.lm_head.weight[shard.vocab[0]:shard.vocab[1]].clone())

    def setup_caches(self, batch: int, max_len: int) -> None:
        device = next(self.parameters()).device
        for mixer in self.mixers():
            mixer.setup_cache(batch, max_len, device)

    def mixers(self):
        for blk in self.blocks:
            m = blk.mixer
            if m is not None:
                yield m.inner if isinstance(m, Reduced) else m

    def cache_tensors(self) -> list[torch.Tensor]:
        names = ("k_cache", "v_cache", "cache", "conv_state", "ssm_state")
        return [getattr(m, n) for m in self.mixers() for n in names if getattr(m, n, None) is not None]

    def forward(self, inp: torch.Tensor, start: int, cached: bool, last_only: bool = True) -> torch.Tensor:
        """Token ids (first stage) or hidden states in; hidden states out, or logits on the last stage."""
        x = self.embed(inp) if self.embed is not None else inp
        for blk in self.blocks:
            x = blk(x, start, cached)
        if self.lm_head is None:
            return x
        x = self.norm(x[:, -1:] if last_only else x)
        local = x @ self.lm_head.t()  # [B, T, V / tp]
        if self.tp_group is None:
            return local
        parts = [torch.empty_like(local) for _ in range(self.tp)]
        dist.all_gather(parts, local.contiguous(), group=self.tp_group)
        return torch.cat(parts, -1)
