"""What a validation decoder builds for a ModelSpec: every width, per layer, before any torch.

The cache geometry is never changed: KV heads, head_dim, window, chunk, MLA latent ranks and
recurrent state shapes come from the spec's layer specs as they are. What a CPU cannot afford
may be shrunk on request (hidden size, MLP and expert widths, number of routed experts,
vocabulary), and the blueprint records it so the output can say so. The parameter counts of
exactly what is built are derived here in closed form, by role, so the planner's
`weight_bytes` can price the built model and the measured parameter bytes can be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.layers import ChunkedLocal, FullAttention, LayerSpec, MLALatent, NoCache, SlidingWindow
from kvplan.model.recurrent import RecurrentState
from kvplan.model.spec import ModelSpec, ParamCounts
from kvplan.readers.mlp_layout import ffn_kinds, gated_mlp

MLA_NOPE_DIM = 128  # qk_nope_head_dim and v_head_dim of every MLA model in the catalog (DeepSeek V2/V3/R1,
MLA_V_DIM = 128  # Kimi K2); not part of the spec because the cache does not depend on them


@dataclass(frozen=True)
class Widths:
    """Widths a validation build may shrink; None keeps the model's own."""

    hidden: int | None = None
    mlp: int | None = None  # dense MLP width
    expert: int | None = None  # routed and shared expert width
    experts: int | None = None  # routed experts per MoE layer (top-k capped to it)
    vocab: int | None = None

    def changed(self) -> bool:
        return any(v is not None for v in (self.hidden, self.mlp, self.expert, self.experts, self.vocab))


# One CPU-friendly shrink: cache geometry untouched, everything else small.
SMALL = Widths(mlp=256, expert=128, experts=4, vocab=1024)


@dataclass(frozen=True)
class MLADims:
    q_lora_rank: int  # 0: q is projected straight from the hidden state
    nope: int
    v: int


@dataclass(frozen=True)
class StateDims:
    """A recurrent layer as a Mamba-2 style scan: state [H, P, N], conv over C channels, kernel K."""

    heads: int  # H
    head_dim: int  # P (values per head)
    state: int  # N (state size per value)
    groups: int  # G groups of B/C (key heads of a gated delta net)
    kernel: int  # K
    bc_in_conv: bool  # Mamba-2 and gated delta nets convolve B and C too; Mamba-1 does not

    @property
    def conv_channels(self) -> int:
        return self.heads * self.head_dim + (2 * self.groups * self.state if self.bc_in_conv else 0)


@dataclass(frozen=True)
class LayerPlan:
    mixer: LayerSpec
    ffn: str  # "dense", "moe" or "none"
    mla: MLADims | None = None
    state: StateDims | None = None


@dataclass(frozen=True)
class Blueprint:
    name: str
    hidden: int
    heads: int
    vocab: int
    tied: bool
    gated: bool  # SwiGLU (3 matrices) or up/act/down (2)
    dense_width: int
    expert_width: int
    shared_width: int
    num_experts: int
    top_k: int
    layers: tuple[LayerPlan, ...]
    shrunk: tuple[str, ...] = ()  # what differs from the real model, for the output

    def param_counts(self) -> ParamCounts:
        """Parameters of exactly this build, by role (closed form; the decoder creates the same)."""
        h, mats = self.hidden, 3 if self.gated else 2
        attention = replicated = other = mlp = experts = shared = router = moe_layers = 0
        for lp in self.layers:
            m = lp.mixer
            if isinstance(m, (FullAttention, SlidingWindow, ChunkedLocal)):
                d = m.head_dim
                dv = getattr(m, "v_head_dim", 0) or d
                attention += h * self.heads * d + h * m.num_kv_heads * (d + dv) + self.heads * dv * h
            elif isinstance(m, MLALatent):
                a = lp.mla
                qk = self.heads * (a.nope + m.qk_rope_head_dim)
                q = h * a.q_lora_rank + a.q_lora_rank * qk if a.q_lora_rank else h * qk
                kv_down = h * (m.kv_lora_rank + m.qk_rope_head_dim)
                attention += q + kv_down + m.kv_lora_rank * self.heads * (a.nope + a.v) + self.heads * a.v * h
                replicated += (h * a.q_lora_rank) + kv_down
                other += a.q_lora_rank + m.kv_lora_rank  # latent norms
            elif isinstance(m, RecurrentState):
                s = lp.state
                inner = s.heads * s.head_dim
                attention += h * (2 * inner + 2 * s.groups * s.state + s.heads) + inner * h
                other += s.conv_channels * s.kernel + 3 * s.heads + inner  # conv, A_log, D, dt_bias, norm
            if not isinstance(m, NoCache):
                other += h  # the mixer's pre-norm
            if lp.ffn != "none":
                other += h  # the MLP's pre-norm
            if lp.ffn == "dense":
                mlp += mats * h * self.dense_width
            elif lp.ffn == "moe":
                moe_layers += 1
                experts += self.num_experts * mats * h * self.expert_width
                shared += mats * h * self.shared_width
                router += h * self.num_experts
        return ParamCounts(
            embedding=self.vocab * h, lm_head=0 if self.tied else self.vocab * h,
            attention=attention, mlp=mlp, experts=experts,
            experts_active=experts * self.top_k // self.num_experts if self.num_experts else 0,
            shared_experts=shared, router=router, other=other + h, replicated=replicated,
            num_experts=self.num_experts if moe_layers else 0, experts_per_token=self.top_k if moe_layers else 0,
            num_moe_layers=moe_layers,
        )


def _mla_dims(full: ModelSpec, layer: MLALatent) -> MLADims:
    """q_lora_rank solved from the spec's attention parameters (nope and v dims: 128, see above)."""
    h, heads, r, rope = full.hidden_size, full.num_attention_heads, layer.kv_lora_rank, layer.qk_rope_head_dim
    nope, v = MLA_NOPE_DIM, MLA_V_DIM
    mla_layers = sum(isinstance(x, MLALatent) for x in full.layers)
    per_layer = full.params.attention // max(mla_layers, 1)
    rest = per_layer - h * (r + rope) - r * heads * (nope + v) - heads * v * h
    qk = heads * (nope + rope)
    if rest > h * qk and (rest % (h + qk)) == 0:
        return MLADims(rest // (h + qk), nope, v)
    return MLADims(0, nope, v)


def state_dims(layer: RecurrentState) -> StateDims:
    """Factor a RecurrentState's element counts into scan dimensions with exactly those counts.

    Mamba-1: conv (K-1) x inner, ssm inner x N, heads = inner: exact from the spec.
    Mamba-2 / gated delta net: conv (K-1)(H P + 2 G N), ssm H P N with H = layer.num_heads for
    Mamba-2; a gated delta net's num_heads is its key heads (G) and H = value heads. K = 4 (every
    config in the catalog) and the first head size in 128, 64, 256, ... that factors exactly.
    """
    conv, ssm, heads = layer.conv_elements, layer.ssm_elements, layer.num_heads
    if layer.variant == "mamba":
        if conv % heads == 0 and ssm % heads == 0:
            return StateDims(heads, 1, ssm // heads, 1, conv // heads + 1, False)
    for kernel in (4, 2, 3, 5):
        if conv % (kernel - 1):
            continue
        channels = conv // (kernel - 1)
        for n in (128, 64, 256, 16, 32, 8, 512):
            if layer.variant == "gated_deltanet":
                groups, p = heads, n  # key heads; key dim = value dim = n
                if ssm % (n * p) == 0:
                    h = ssm // (n * p)
                    if h * p + 2 * groups * n == channels:
                        return StateDims(h, p, n, groups, kernel, True)
            elif ssm % (heads * n) == 0:
                p = ssm // (heads * n)
                rest = channels - heads * p
                if rest > 0 and rest % (2 * n) == 0 and heads % (rest // (2 * n)) == 0:
                    return StateDims(heads, p, n, rest // (2 * n), kernel, True)
    raise KvplanError(f"cannot lay out a {layer.variant} state of {conv} conv + {ssm} ssm values as a scan",
                      EXIT_USAGE)


def blueprint(full: ModelSpec, n: int, widths: Widths = Widths()) -> Blueprint:
    """What to build for the first n layers of `full`, with `widths` applied."""
    if not 0 < n <= full.num_layers:
        raise KvplanError(f"{arg('layers')} must be between 1 and {full.num_layers}, got {n}", EXIT_USAGE)
    p = full.params
    h_real = full.hidden_size
    gated = gated_mlp(full)
    mats = 3 if gated else 2
    kinds = ffn_kinds(full, n)
    all_kinds = ffn_kinds(full, full.num_layers)
    n_dense = max(all_kinds.count("dense"), 1)
    n_moe = max(all_kinds.count("moe"), 1)
    dense_width = p.mlp // (mats * h_real * n_dense) if p.mlp else 0
    top_k = max(p.experts_per_token, 1) if p.num_experts else 0
    expert_width = full.intermediate_size // top_k if p.num_experts else 0
    shared_width = p.shared_experts // (n_moe * mats * h_real) if p.num_experts else 0
    num_experts = p.num_experts
    shrunk = []
    if widths.hidden is not None and widths.hidden != h_real:
        shrunk.append(f"hidden size {h_real} -> {widths.hidden}")
    if widths.mlp is not None and dense_width and "dense" in kinds and widths.mlp < dense_width:
        shrunk.append(f"MLP width {dense_width} -> {widths.mlp}")
        dense_width = widths.mlp
    if "moe" in kinds and widths.expert is not None and widths.expert < expert_width:
        shrunk.append(f"expert width {expert_width} -> {widths.expert}")
        expert_width = widths.expert
        if shared_width:
            shared_width = min(shared_width, widths.expert)
    if "moe" in kinds and widths.experts is not None and widths.experts < num_experts:
        shrunk.append(f"routed experts {num_experts} -> {widths.experts} (top-{min(top_k, widths.experts)})")
        num_experts = widths.experts
        top_k = min(top_k, num_experts)
    vocab = full.vocab_size
    if widths.vocab is not None and widths.vocab < vocab:
        shrunk.append(f"vocabulary {vocab} -> {widths.vocab}")
        vocab = widths.vocab
    layers = []
    for layer, ffn in zip(full.layers[:n], kinds):
        mla = _mla_dims(full, layer) if isinstance(layer, MLALatent) else None
        state = state_dims(layer) if isinstance(layer, RecurrentState) else None
        layers.append(LayerPlan(layer, ffn, mla, state))
    return Blueprint(
        name=full.name, hidden=widths.hidden or h_real, heads=full.num_attention_heads, vocab=vocab,
        tied=p.lm_head == 0, gated=gated, dense_width=dense_width, expert_width=expert_width,
        shared_width=shared_width, num_experts=num_experts if "moe" in kinds else 0,
        top_k=top_k if "moe" in kinds else 0, layers=tuple(layers), shrunk=tuple(shrunk),
    )


def built_spec(reduced: ModelSpec, bp: Blueprint) -> ModelSpec:
    """The reduced spec with the parameter counts of what was actually built (for weight_bytes)."""
    width = bp.expert_width * bp.top_k if bp.num_experts else bp.dense_width
    return replace(reduced, params=bp.param_counts(), hidden_size=bp.hidden, vocab_size=bp.vocab,
                   intermediate_size=width or reduced.intermediate_size)
