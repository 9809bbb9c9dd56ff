"""What one sequence costs one rank: a pipeline stage's layers grouped by spec, priced per token.

The cache is paged in blocks of `block_size` tokens; a sequence's cost on a rank is the sum over
its layers of the slots the engine's rules allocate for its held tokens, plus fixed recurrent
states. `PAGED` is kvplan's engine-neutral rule (vLLM's for full attention); engines supply their
own rules object with the same `tokens_allocated` method (see kvplan.engines).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from kvplan.core.dtypes import DType
from kvplan.core.intmath import round_up
from kvplan.model.layers import LayerSpec
from kvplan.model.recurrent import state_bytes


@dataclass(frozen=True)
class PagedRules:
    """How a sequence's tokens become allocated slots: whole pages of the held tokens."""

    name = "paged"

    def tokens_allocated(self, layer: LayerSpec, seq_len: int, block: int) -> int:
        held = layer.tokens_held(seq_len)
        return round_up(held, block) if held else 0


PAGED = PagedRules()


@dataclass(frozen=True)
class KVProfile:
    """One pipeline stage's layers, grouped by identical spec, priced on one tensor-parallel rank."""

    groups: tuple[tuple[LayerSpec, int], ...]  # (spec, number of layers)
    tp: int
    kv_dtype: DType
    state_dtype: DType
    block_size: int
    rules: object = PAGED

    def __post_init__(self):
        # Per-group figures that never change, worked out once: a profile is shared by every GPU and
        # context of a sweep (kvplan.engines.neutral.NeutralEngine.grid), and sequence_bytes is called by
        # the max-context search many times. The memo of sequence_bytes is bounded; neither is part of eq or hash.
        tb = tuple(self.token_bytes(s) for s, _ in self.groups)
        read = tuple(s.token_bytes(self.kv_dtype, self.tp) for s, _ in self.groups)
        states = sum(self.state_bytes(s) * n for (s, n) in self.groups)
        # a layer that caches one entry per compress_ratio tokens (DeepSeek-V4: kvplan.model.compressed)
        per_token = [Fraction(b * n, s.compress_ratio) for (s, n), b in zip(self.groups, tb)]
        object.__setattr__(self, "_token_bytes", tb)
        object.__setattr__(self, "_read_bytes", read)
        object.__setattr__(self, "_state_bytes", states)
        object.__setattr__(self, "_memo", ({}, {}))  # seq_len -> bytes: unpaged, paged
        object.__setattr__(self, "_growth", int(sum(f for (s, _), f in zip(self.groups, per_token) if not s.bounded)))
        object.__setattr__(self, "_slot", int(sum(per_token)))

    def token_bytes(self, layer: LayerSpec) -> int:
        """Bytes one token takes `layer` in the cache: the rules' own where they have a say (an engine's padded
        entry: vLLM V0's MLA, kvplan.engines.vllm.pool), else the layer's."""
        entry = getattr(self.rules, "token_bytes", None)
        return entry(layer, self.kv_dtype, self.tp) if entry else layer.token_bytes(self.kv_dtype, self.tp)

    def state_bytes(self, layer: LayerSpec) -> int:
        """What one sequence holds in `layer` whatever its length: a recurrent state, or the fixed part of a
        layer that has one (DeepSeek-V4's window and compressor states, kvplan.model.compressed)."""
        return layer.fixed_bytes(self.kv_dtype) + (state_bytes(layer, self.tp, self.state_dtype)
                                                   if layer.state_elements(self.tp) else 0)

    def state_bytes_per_sequence(self) -> int:
        """Bytes of every layer's per-sequence state on this rank: the part of sequence_bytes no token adds."""
        return self._state_bytes

    def slots(self, layer: LayerSpec, seq_len: int) -> int:
        """Token slots the rules allocate one sequence of seq_len tokens in this layer."""
        return self.rules.tokens_allocated(layer, seq_len, self.block_size)

    def growth_bytes_per_token(self) -> int:
        """Bytes one more token adds at long context (unbounded layers only)."""
        return self._growth

    def slot_bytes_per_token(self) -> int:
        """Bytes of one token slot across every layer that caches tokens at all."""
        return self._slot

    def sequence_bytes(self, seq_len: int, paged: bool = True) -> int:
        """Bytes one sequence of seq_len tokens holds on this rank: allocated slots, plus states.

        paged=False: the tokens the layers hold, without the rules' rounding or entry padding (what a decode
        reads)."""
        memo = self._memo[paged]
        total = memo.get(seq_len)
        if total is not None:
            return total
        total = self._state_bytes
        for (spec, n), tb in zip(self.groups, self._token_bytes if paged else self._read_bytes):
            held = self.rules.tokens_allocated(spec, seq_len, self.block_size) if paged else spec.tokens_held(seq_len)
            if held:
                total += held * tb * n
        if len(memo) >= 256:
            memo.clear()
        memo[seq_len] = total
        return total


def kv_profile(layers, tp: int, kv_dtype: DType, state_dtype: DType, block_size: int, rules=PAGED) -> KVProfile:
    return KVProfile(tuple(Counter(layers).items()), tp, kv_dtype, state_dtype, block_size, rules)
