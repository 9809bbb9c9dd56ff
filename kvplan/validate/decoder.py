"""A real torch decoder built from a Blueprint, with a gpt-fast style preallocated cache.

Random weights, the model's real cache geometry. Each mixer owns its cache as buffers, allocated
once by `setup_caches(batch, max_len)` and written in place at the position:
  * full attention:  K, V [B, H_kv, S, D]; K stored after RoPE;
  * sliding window:  a ring of min(S, W) slots, slot = position mod W;
  * chunked local:   a ring of min(S, C) slots; a token sees only its own chunk;
  * MLA:             one latent [B, S, kv_lora_rank + rope] (normed latent, roped key), attention
                     computed with the up-projections absorbed, as the engines do;
  * recurrent:       conv state [B, C, K-1] and scan state [B, H, P, N], fixed per sequence.
Attention always reads K/V rounded to the cache dtype (fp8 is stored as float8_e4m3fn and upcast
on read), and the uncached path rounds the same way, so cached and uncached decoding differ only by
the cache itself. No mask, RoPE table or position buffer is kept alongside the cache: masks and
rotations are computed per call, so the cache's storages are exactly what a measurement counts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kvplan.model.layers import ChunkedLocal, FullAttention, MLALatent, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.validate.blueprint import Blueprint, LayerPlan

ROPE_THETA = 10000.0


def _linear(n_in: int, n_out: int) -> nn.Linear:
    layer = nn.Linear(n_in, n_out, bias=False)
    nn.init.normal_(layer.weight, std=1.0 / math.sqrt(n_in))  # unit-scale activations, clear argmax margins
    return layer


def _through(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x rounded to `dtype` and back: what reading it from a cache of that dtype gives."""
    return x if dtype == x.dtype else x.to(dtype).to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on the last dim of x [..., T, D] at `positions` [T]."""
    d = x.shape[-1]
    inv = ROPE_THETA ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)  # [D/2]
    ang = positions.to(torch.float32)[:, None] * inv[None, :]  # [T, D/2]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype), torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def _lower_bound(layer, p: torch.Tensor) -> torch.Tensor:
    """Earliest position a query at position p may attend to, for this attention kind."""
    if isinstance(layer, SlidingWindow):
        return p - layer.window + 1
    if isinstance(layer, ChunkedLocal):
        return p - p % layer.chunk
    return torch.zeros_like(p)


def _prefix_mask(layer, start: int, t: int, device) -> torch.Tensor:
    """[T, T] bool: query i (position start+i) may see key j, both within this call's tokens."""
    pos = torch.arange(start, start + t, device=device)  # [T]
    return (pos[None, :] <= pos[:, None]) & (pos[None, :] >= _lower_bound(layer, pos)[:, None])


def _slot_mask(layer, p: int, slots: int, device) -> torch.Tensor:
    """[slots] bool: which cache slots hold a token position p may see (after writing p)."""
    s = torch.arange(slots, device=device)
    held = p - torch.remainder(p - s, slots)  # position each slot holds: the latest q <= p with q = s mod slots
    lower = _lower_bound(layer, torch.tensor(p, device=device))
    return (held >= 0) & (held >= lower)


class Attention(nn.Module):
    """Full, sliding-window or chunked attention with GQA/MQA and a static cache."""

    def __init__(self, layer, hidden: int, heads: int, kv_dtype: torch.dtype):
        super().__init__()
        self.layer, self.heads, self.kv_heads, self.d = layer, heads, layer.num_kv_heads, layer.head_dim
        self.dv = getattr(layer, "v_head_dim", 0) or self.d
        self.kv_dtype = kv_dtype
        self.q = _linear(hidden, heads * self.d)
        self.k = _linear(hidden, self.kv_heads * self.d)
        self.v = _linear(hidden, self.kv_heads * self.dv)
        self.o = _linear(heads * self.dv, hidden)
        self.k_cache = self.v_cache = None

    def cache_slots(self, max_len: int) -> int:
        if isinstance(self.layer, SlidingWindow):
            return min(max_len, self.layer.window)  # a ring of the last W tokens
        if isinstance(self.layer, ChunkedLocal):
            return min(max_len, self.layer.chunk)  # one chunk
        return max_len

    def setup_cache(self, batch: int, max_len: int, device) -> None:
        slots = self.cache_slots(max_len)
        # [B, H_kv, S, D]
        self.k_cache = torch.zeros(batch, self.kv_heads, slots, self.d, dtype=self.kv_dtype, device=device)
        # [B, H_kv, S, Dv]
        self.v_cache = torch.zeros(batch, self.kv_heads, slots, self.dv, dtype=self.kv_dtype, device=device)

    def forward(self, x: torch.Tensor, start: int, cached: bool) -> torch.Tensor:
        b, t, _ = x.shape
        pos = torch.arange(start, start + t, device=x.device)
        q = rope(self.q(x).view(b, t, self.heads, self.d).transpose(1, 2), pos)  # [B, H, T, D]
        k = rope(self.k(x).view(b, t, self.kv_heads, self.d).transpose(1, 2), pos)  # [B, H_kv, T, D]
        v = self.v(x).view(b, t, self.kv_heads, self.dv).transpose(1, 2)  # [B, H_kv, T, Dv]
        k, v = _through(k, self.kv_dtype), _through(v, self.kv_dtype)
        if not cached or start == 0:  # uncached recompute, or prefill: attend over this call's tokens
            mask = _prefix_mask(self.layer, start, t, x.device)  # [T, T]
            if cached:
                slots = self.k_cache.shape[2]
                keep = min(t, slots)  # the last `slots` tokens go into the ring at position mod slots
                idx = torch.arange(t - keep, t, device=x.device) % slots
                self.k_cache[:, :, idx] = k[:, :, t - keep:].to(self.kv_dtype)
                self.v_cache[:, :, idx] = v[:, :, t - keep:].to(self.kv_dtype)
        else:  # one decode step: write the slot, read the whole cache
            assert t == 1, "decode steps are one token"
            slots = self.k_cache.shape[2]
            self.k_cache[:, :, start % slots] = k[:, :, 0].to(self.kv_dtype)
            self.v_cache[:, :, start % slots] = v[:, :, 0].to(self.kv_dtype)
            k = self.k_cache.to(x.dtype)  # [B, H_kv, S, D]
            v = self.v_cache.to(x.dtype)  # [B, H_kv, S, Dv]
            mask = _slot_mask(self.layer, start, slots, x.device)[None, :]  # [1, S]
        # [B, H, T, Dv]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
        return self.o(out.transpose(1, 2).reshape(b, t, self.heads * self.dv))


class LatentAttention(nn.Module):
    """DeepSeek MLA: caches the normed latent and the roped shared key, [B, S, r + rope]."""

    def __init__(self, lp: LayerPlan, hidden: int, heads: int, kv_dtype: torch.dtype):
        super().__init__()
        m, a = lp.mixer, lp.mla
        self.heads, self.r, self.rope_d, self.nope, self.dv = heads, m.kv_lora_rank, m.qk_rope_head_dim, a.nope, a.v
        self.kv_dtype = kv_dtype
        qk = heads * (a.nope + m.qk_rope_head_dim)
        if a.q_lora_rank:
            self.q_a, self.q_norm = _linear(hidden, a.q_lora_rank), RMSNorm(a.q_lora_rank)
            self.q_b = _linear(a.q_lora_rank, qk)
        else:
            self.q_a, self.q_norm, self.q_b = None, None, _linear(hidden, qk)
        self.kv_a = _linear(hidden, self.r + self.rope_d)
        self.kv_norm = RMSNorm(self.r)
        self.kv_b = _linear(self.r, heads * (a.nope + a.v))
        self.o = _linear(heads * a.v, hidden)
        self.cache = None

    def setup_cache(self, batch: int, max_len: int, device) -> None:
        # [B, S, r + rope]
        self.cache = torch.zeros(batch, max_len, self.r + self.rope_d, dtype=self.kv_dtype, device=device)

    def forward(self, x: torch.Tensor, start: int, cached: bool) -> torch.Tensor:
        b, t, _ = x.shape
        pos = torch.arange(start, start + t, device=x.device)
        q = self.q_b(self.q_norm(self.q_a(x)) if self.q_a is not None else x)
        q = q.view(b, t, self.heads, self.nope + self.rope_d).transpose(1, 2)  # [B, H, T, nope + rope]
        q_nope, q_pe = q[..., : self.nope], rope(q[..., self.nope:], pos)
        ckv = self.kv_a(x)  # [B, T, r + rope]
        latent = torch.cat([self.kv_norm(ckv[..., : self.r]), rope(ckv[..., self.r:], pos)], -1)  # [B, T, r + rope]
        latent = _through(latent, self.kv_dtype)
        if cached:
            self.cache[:, start:start + t] = latent.to(self.kv_dtype)
            if start > 0:
                latent = self.cache[:, : start + t].to(x.dtype)  # [B, S, r + rope]
        s = latent.shape[1]
        w = self.kv_b.weight.view(self.heads, self.nope + self.dv, self.r)
        w_uk, w_uv = w[:, : self.nope], w[:, self.nope:]  # [H, nope, r], [H, v, r]
        q_lat = torch.einsum("bhtn,hnr->bhtr", q_nope, w_uk)  # [B, H, T, r]
        c, k_pe = latent[..., : self.r], latent[..., self.r:]  # [B, S, r], [B, S, rope]
        scores = (torch.einsum("bhtr,bsr->bhts", q_lat, c) + torch.einsum("bhtd,bsd->bhts", q_pe, k_pe))
        scores = scores / math.sqrt(self.nope + self.rope_d)  # [B, H, T, S]
        qpos = pos[:, None]
        kpos = torch.arange(s, device=x.device)[None, :]
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        o_lat = torch.einsum("bhts,bsr->bhtr", scores.softmax(-1), c)  # [B, H, T, r]
        out = torch.einsum("bhtr,hvr->bthv", o_lat, w_uv)  # [B, T, H, v]
        return self.o(out.reshape(b, t, self.heads * self.dv))


class Recurrent(nn.Module):
    """A Mamba-2 style selective scan (also the shape of Mamba-1 and gated delta net states).

    Per token: causal depthwise conv over the last K inputs, then S <- exp(-dt e^A) S + dt x B^T,
    y = S C + D x, gated by silu(z). The state is kept in `state_dtype` after every token, in the
    cached and the uncached path alike.
    """

    def __init__(self, lp: LayerPlan, hidden: int, state_dtype: torch.dtype):
        super().__init__()
        s = self.dims = lp.state
        inner = s.heads * s.head_dim
        self.state_dtype = state_dtype
        self.in_proj = _linear(hidden, 2 * inner + 2 * s.groups * s.state + s.heads)  # x, z, B, C, dt
        self.conv_w = nn.Parameter(torch.randn(s.conv_channels, s.kernel) / math.sqrt(s.kernel))
        self.a_log = nn.Parameter(torch.rand(s.heads) - 1.0)
        self.d = nn.Parameter(torch.ones(s.heads))
        self.dt_bias = nn.Parameter(torch.zeros(s.heads))
        self.norm = RMSNorm(inner)
        self.out_proj = _linear(inner, hidden)
        self.conv_state = self.ssm_state = None

    def setup_cache(self, batch: int, max_len: int, device) -> None:
        s = self.dims
        # [B, C, K-1]
        self.conv_state = torch.zeros(batch, s.conv_channels, s.kernel - 1, dtype=self.state_dtype, device=device)
        # [B, H, P, N]
        self.ssm_state = torch.zeros(batch, s.heads, s.head_dim, s.state, dtype=self.state_dtype, device=device)

    def forward(self, x: torch.Tensor, start: int, cached: bool) -> torch.Tensor:
        s = self.dims
        b, t, _ = x.shape
        inner, gn = s.heads * s.head_dim, s.groups * s.state
        xs, z, bc, dt = self.in_proj(x).split([inner, inner, 2 * gn, s.heads], -1)
        u = torch.cat([xs, bc], -1) if s.bc_in_conv else xs  # [B, T, C]
        if cached and start > 0:
            conv, ssm = self.conv_state.to(x.dtype), self.ssm_state.to(x.dtype)
        else:
            conv = x.new_zeros(b, s.conv_channels, s.kernel - 1)  # [B, C, K-1]
            ssm = x.new_zeros(b, s.heads, s.head_dim, s.state)  # [B, H, P, N]
        decay_rate = torch.exp(self.a_log)  # [H]
        ys = []
        for i in range(t):
            window = torch.cat([conv, u[:, i, :, None]], -1)  # [B, C, K]
            conv = _through(window[..., 1:], self.state_dtype)
            cu = F.silu((window * self.conv_w).sum(-1))  # [B, C]
            xi = cu[:, :inner].view(b, s.heads, s.head_dim)  # [B, H, P]
            bci = cu[:, inner:] if s.bc_in_conv else bc[:, i]
            bi, ci = bci.view(b, 2, s.groups, s.state).unbind(1)  # [B, G, N] each
            bi = bi.repeat_interleave(s.heads // s.groups, 1)  # [B, H, N]
            ci = ci.repeat_interleave(s.heads // s.groups, 1)  # [B, H, N]
            dti = F.softplus(dt[:, i] + self.dt_bias)  # [B, H]
            a = torch.exp(-dti * decay_rate)[..., None, None]  # [B, H, 1, 1]
            ssm = _through(a * ssm + (dti[..., None, None] * xi[..., None]) * bi[:, :, None, :], self.state_dtype)
            ys.append((ssm * ci[:, :, None, :]).sum(-1) + self.d[:, None] * xi)  # [B, H, P]
        y = torch.stack(ys, 1).reshape(b, t, inner) * F.silu(z)  # [B, T, H*P]
        if cached:
            self.conv_state.copy_(conv)
            self.ssm_state.copy_(ssm)
        return self.out_proj(self.norm(y))


class MLP(nn.Module):
    def __init__(self, hidden: int, width: int, gated: bool):
        super().__init__()
        self.gate = _linear(hidden, width) if gated else None
        self.up, self.down = _linear(hidden, width), _linear(width, hidden)

    def forward(self, x):
        if self.gate is None:
            return self.down(F.gelu(self.up(x)))
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Top-k routed experts (plus an always-on shared expert when the model has one)."""

    def __init__(self, bp: Blueprint):
        super().__init__()
        self.top_k = bp.top_k
        self.router = _linear(bp.hidden, bp.num_experts)
        self.experts = nn.ModuleList(MLP(bp.hidden, bp.expert_width, bp.gated) for _ in range(bp.num_experts))
        self.shared = MLP(bp.hidden, bp.shared_width, bp.gated) if bp.shared_width else None

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])  # [N, h]
        weights, chosen = self.router(flat).topk(self.top_k, -1)  # [N, k]
        weights = weights.softmax(-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, bp: Blueprint, lp: LayerPlan, kv_dtype, state_dtype):
        super().__init__()
        m = lp.mixer
        if isinstance(m, (FullAttention, SlidingWindow, ChunkedLocal)):
            self.mixer = Attention(m, bp.hidden, bp.heads, kv_dtype)
        elif isinstance(m, MLALatent):
            self.mixer = LatentAttention(lp, bp.hidden, bp.heads, kv_dtype)
        elif isinstance(m, RecurrentState):
            self.mixer = Recurrent(lp, bp.hidden, state_dtype)
        else:
            self.mixer = None
        self.norm1 = RMSNorm(bp.hidden) if self.mixer is not None else None
        self.ffn = {"dense": lambda: MLP(bp.hidden, bp.dense_width, bp.gated), "moe": lambda: MoE(bp),
                    "none": lambda: None}[lp.ffn]()
        self.norm2 = RMSNorm(bp.hidden) if self.ffn is not None else None

    def forward(self, x, start: int, cached: bool):
        if self.mixer is not None:
            x = x + self.mixer(self.norm1(x), start, cached)
        if self.ffn is not None:
            x = x + self.ffn(self.norm2(x))
        return x


class Decoder(nn.Module):
    def __init__(self, bp: Blueprint, kv_dtype: torch.dtype, state_dtype: torch.dtype):
        super().__init__()
        self.embed = nn.Embedding(bp.vocab, bp.hidden)
        nn.init.normal_(self.embed.weight)
        self.blocks = nn.ModuleList(Block(bp, lp, kv_dtype, state_dtype) for lp in bp.layers)
        self.norm = RMSNorm(bp.hidden)
        self.lm_head = nn.Linear(bp.hidden, bp.vocab, bias=False)
        if bp.tied:
            self.lm_head.weight = self.embed.weight
        else:
            nn.init.normal_(self.lm_head.weight, std=1.0 / math.sqrt(bp.hidden))

    def setup_caches(self, batch: int, max_len: int) -> None:
        device = self.embed.weight.device
        for blk in self.blocks:
            if blk.mixer is not None:
                blk.mixer.setup_cache(batch, max_len, device)

    def cache_tensors(self) -> list[torch.Tensor]:
        names = ("k_cache", "v_cache", "cache", "conv_state", "ssm_state")
        return [getattr(b.mixer, n) for b in self.blocks if b.mixer is not None for n in names
                if getattr(b.mixer, n, None) is not None]

    def forward(self, tokens: torch.Tensor, start: int = 0, cached: bool = True, last_only: bool = True):
        x = self.embed(tokens)  # [B, T, h]
        for blk in self.blocks:
            x = blk(x, start, cached)
        x = self.norm(x[:, -1:] if last_only else x)
        return self.lm_head(x)  # [B, T or 1, V]
