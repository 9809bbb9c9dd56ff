"""What the simulator knows about a deployment: its KV pool and a roofline step-time model.

Everything here is per GPU (one tensor-parallel rank), in whole bytes. The KV pool is the
binding pipeline stage's: its budget, and its layers grouped by how many tokens they hold (all,
or a window). The step time is a MODEL, not a measurement: by default kvplan.speed's calibrated model (each
roofline term times a coefficient fitted per engine on published measurements; `speed`), or, with
speed="roofline", the bare roofline: each pipeline stage costs max(bytes it reads / bandwidth, FLOPs
it does / peak dense FLOP/s), stages add up, and an optional fixed overhead per step stands for the
engine's CPU work. Real engines are slower than this roofline; latencies from it are lower bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.intmath import round_up
from kvplan.speed.terms import prefill_width


@dataclass(frozen=True)
class Group:
    """Layers that hold the same tokens: all of them (window None) or the last `window`."""

    bytes_per_token: int  # every layer of the group together, on one rank
    window: int | None = None


@dataclass(frozen=True)
class StageCost:
    """One pipeline stage on one rank, as the step-time model reads it."""

    dense_read_bytes: int  # weights every step reads (all but routed experts)
    expert_bytes: int = 0  # routed experts held on this rank; a step reads the share its tokens touch
    num_experts: int = 0
    top_k: int = 0
    kv_bytes_per_token: int = 0  # read per cached token of unbounded layers
    kv_window_bytes: tuple = ()  # ((bytes per token, window), ...) of bounded layers
    flops_per_token: float = 0.0  # 2 x active parameters on this rank, the embedding's and the LM head's apart
    head_flops: float = 0.0  # the last stage's LM head, 2 x vocab x hidden / tp, per sequence in a step (its logits)
    attn_flops_per_pair: float = 0.0  # 4 x query heads x head dim over this rank's attention layers
    # ((bytes per token, top-k), ...) of kv_bytes_per_token read for at most top-k tokens a sequence
    kv_topk: tuple = ()
    attn_topk: tuple = ()  # ((FLOPs per pair, top-k), ...) of attn_flops_per_pair at most top-k pairs a query
    attn_prefill_flops_per_pair: float | None = None  # a prefill query's pair (MLA decompressed); None: the same
    decompress_flops: float = 0.0  # FLOPs a prefill spends per cached token it attends to (MLA's kv_b_proj)


@dataclass(frozen=True)
class SimModel:
    name: str
    kv_budget_bytes: int  # the KV pool of one rank of the binding stage
    block_size: int  # tokens per page
    groups: tuple  # (Group, ...) of that stage
    state_bytes: int = 0  # fixed per-sequence state (recurrent layers) on that rank
    max_model_len: int = 1 << 20
    stages: tuple = ()  # (StageCost, ...)
    bandwidth_bytes_per_s: float = 1e12
    flops_per_s: float = 0.0  # 0: the compute roof is left out
    step_overhead_s: float = 0.0
    fixed_step_s: float | None = None  # tests: every step takes exactly this long
    speed: object = None  # a kvplan.speed.model.StepModel: the calibrated step (None: the roofline below)
    speed_label: str = "roofline"  # how the step times were made, for reports

    def __post_init__(self):
        # held() and paged() run a few times per request: the usual model (full attention only,
        # no states) gets them as one multiplication.
        if all(g.window is None for g in self.groups) and not self.state_bytes:
            tb, b = self.token_bytes(), self.block_size
            bb = b * tb
            object.__setattr__(self, "held", lambda length: length * tb)
            object.__setattr__(self, "paged", lambda length: -(-length // b) * bb)  # round_up(length, b) * tb, inline

    @property
    def all_full(self) -> bool:
        return all(g.window is None for g in self.groups)

    def token_bytes(self) -> int:
        return sum(g.bytes_per_token for g in self.groups)

    def block_bytes(self) -> int:
        return self.block_size * self.token_bytes()

    def held(self, length: int) -> int:
        """Bytes one sequence of `length` tokens has written (no paging), states included."""
        return self.state_bytes + sum(g.bytes_per_token
                                      * (length if g.window is None or length < g.window else g.window)
                                      for g in self.groups)

    def paged(self, length: int) -> int:
        """Bytes one sequence of `length` tokens holds in whole pages, states included."""
        b = self.block_size
        total = self.state_bytes
        for g in self.groups:
            n = length if g.window is None or length < g.window else g.window
            total += round_up(n, b) * g.bytes_per_token
        return total


def _plus(f, extra: float):
    return f if not extra else (lambda context: extra + f(context))


class StepTimer:
    """Seconds one engine step takes for its scheduled tokens: the calibrated model (kvplan.speed) where
    the SimModel carries one, else the roofline above."""

    def __init__(self, model: SimModel):
        self.model = model
        self._touched: dict = {}

    def _expert_share(self, stage: StageCost, tokens: int) -> float:
        key = (stage.num_experts, stage.top_k, tokens)
        hit = self._touched.get(key)
        if hit is None:
            e, k = stage.num_experts, stage.top_k
            hit = self._touched[key] = 1.0 - (1.0 - k / e) ** tokens  # uniform routing
        return hit

    def decode_step(self, seqs: int):
        """A function of the cached context: the time of a decode-only step of `seqs` requests
        (each attends to its context and itself), equal to step(seqs, seqs, context, context + seqs)."""
        m = self.model
        if m.speed is not None and m.fixed_step_s is None:
            return _plus(m.speed.decode(seqs), m.step_overhead_s)
        if (m.fixed_step_s is not None or len(m.stages) != 1 or m.stages[0].kv_window_bytes or m.stages[0].kv_topk
                or m.stages[0].attn_topk):
            return lambda context: self.step(seqs, seqs, context, float(context + seqs))
        st = m.stages[0]
        bw, fl, ovh = m.bandwidth_bytes_per_s, m.flops_per_s, m.step_overhead_s
        base = st.dense_read_bytes + (st.expert_bytes * self._expert_share(st, seqs) if st.expert_bytes else 0)
        kv, fa = st.kv_bytes_per_token, st.attn_flops_per_pair
        f0 = (st.flops_per_token + st.head_flops + st.attn_flops_per_pair) * seqs
        if not fl:
            return lambda context: ovh + (base + kv * context) / bw
        return lambda context: ovh + max((base + kv * context) / bw, (f0 + fa * context) / fl)

    def step(self, tokens: int, seqs: int, context: int, pairs: float, new: int = 0, *, prefill_pairs: float = 0.0,
             prefill_context: float = 0.0) -> float:
        """`tokens` scheduled tokens of `seqs` sequences that attend to `context` cached tokens in
        all (the KV a step reads) and form `pairs` query-key pairs (attention FLOPs), `prefill_pairs` of them
        prefill queries' (an MLA prefill's width, kvplan.speed.shape.attention_flops) over `prefill_context` cached
        tokens of theirs; `new` of them start their prefill in this step (the calibrated model's cost per request)."""
        m = self.model
        if m.fixed_step_s is not None:
            return m.fixed_step_s
        if m.speed is not None:
            return m.step_overhead_s + m.speed.step(tokens, seqs, context, pairs, new, prefill_pairs=prefill_pairs,
                                                    prefill_context=prefill_context)
        total = m.step_overhead_s
        for s in m.stages:
            read = s.dense_read_bytes + s.kv_bytes_per_token * context
            for bpt, window in s.kv_window_bytes:
                read += bpt * min(context, seqs * window)
            for bpt, k in s.kv_topk:  # DeepSeek Sparse Attention: a latent read for at most k tokens a sequence
                read -= bpt * max(0.0, context - seqs * k)
            if s.expert_bytes:
                read += s.expert_bytes * self._expert_share(s, tokens)
            t = read / m.bandwidth_bytes_per_s
            if m.flops_per_s:
                attn = (s.attn_flops_per_pair * (pairs - prefill_pairs) + prefill_width(s) * prefill_pairs
                        - sum(f * max(0.0, pairs - tokens * k) for f, k in s.attn_topk))
                c = (s.flops_per_token * tokens + s.head_flops * seqs + s.decompress_flops * prefill_context
                     + attn) / m.flops_per_s  # the head: one position a sequence (kvplan.speed.terms.head_rows)
                t = max(t, c)
            total += t
        return total
