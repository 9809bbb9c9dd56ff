"""Layers that keep a fixed state per sequence instead of, or beside, a per-token cache: `RecurrentState` (Mamba,
Mamba-2, Gated DeltaNet, linear attention; vLLM's MambaSpec) and `ParallelHybrid` (Falcon-H1's attention and Mamba-2
mixer side by side), and the rules that read those states: the element type an engine pools them in
(`with_ssm_dtype`, `ssm_as`), every state a model keeps (`recurrent_states`), and a state's bytes on one rank
(`state_bytes`). The per-token kinds they sit beside are kvplan.model.layers'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.model.layers import FullAttention, Kind, LayerSpec


@dataclass(frozen=True)
class RecurrentState(LayerSpec):
    """A linear-attention or state-space layer (Mamba, Mamba2, Gated DeltaNet): no per-token cache.

    It keeps a fixed state per sequence: a convolution window of `conv_elements` values and a
    recurrent state of `ssm_elements` values. Both are split over tensor-parallel ranks by head
    (`num_heads` heads; a rank keeps num_heads // tp of them, at least one). Mamba-2's B and C
    projections belong to `groups` groups (`group_conv_elements` of the conv window): when tp
    does not divide the groups, every rank keeps a whole group, as vLLM replicates them
    (model_executor/layers/mamba/mamba_utils.py, mamba2_state_shape / extra_groups_for_head_shards).
    """

    conv_elements: int
    ssm_elements: int
    num_heads: int
    variant: str = "mamba2"  # mamba | mamba2 | gated_deltanet | kda | linear_attention | short_conv
    groups: int = 0
    group_conv_elements: int = 0  # of conv_elements: the groups' part (Mamba-2 B and C)
    ssm_dtype: str = ""  # the recurrent state's own element type when the config fixes one (fp32), else ""
    # ssm_dtype is the default an engine's model hook gives a config that states none (Nemotron-H's float32), not the
    # config's own: engines whose default differed by release apply theirs (kvplan.engines.vllm.ssm_dtype)
    ssm_dtype_default: bool = False
    # a Gated DeltaNet's projection widths (value heads, key and value head sizes; num_heads is its key heads), which
    # the block-FP8 shard rule reads (kvplan.engines.fp8_linear); 0: not read (other variants)
    value_heads: int = 0
    # a head's key and value widths, which the prefill kernels' FLOPs read (kvplan.speed.recurrent): a Gated DeltaNet's
    # and KDA's d_k and d_v, lightning attention's head_dim twice, Mamba-2's state size N (B and C, its keys and
    # queries) and head_dim P (x, its values); 0: not read (Mamba-1, short conv, a catalog entry from before)
    key_head_dim: int = 0
    value_head_dim: int = 0
    chunk: int = 0  # Mamba-2's chunked-scan length the config sets (mamba_chunk_size / chunk_size); 0: not read

    kind = Kind.STATE

    def replicated_groups(self, tp: int = 1) -> int:
        """Mamba-2's B and C groups over all ranks: the config's where tp divides them, else up to tp (vLLM's
        extra_groups_for_head_shards: every rank holds a whole group)."""
        return self.groups if self.groups % tp == 0 else max(tp, self.groups)

    def state_parts(self, tp: int = 1) -> tuple[int, int]:
        """(conv values, recurrent values) one rank keeps for one sequence."""
        share = max(1, self.num_heads // tp)
        conv = (self.conv_elements - self.group_conv_elements) * share // self.num_heads
        if self.groups:
            conv += self.group_conv_elements // self.groups * self.replicated_groups(tp) // tp
        return conv, self.ssm_elements * share // self.num_heads

    def state_elements(self, tp: int = 1) -> int:
        return sum(self.state_parts(tp))

    def describe(self) -> str:
        return f"{self.variant} state ({self.conv_elements:,} conv + {self.ssm_elements:,} ssm values)"


@dataclass(frozen=True)
class ParallelHybrid(LayerSpec):
    """Falcon-H1: attention and a Mamba-2 mixer side by side in every layer, so the layer caches K and V
    for every token AND keeps a fixed state per sequence.

    vLLM v0.11.0 `model_executor/models/falcon_h1.py` (FalconH1ParallelHybrid) builds both in each
    decoder layer and registers the mixer under its own layer index (num_hidden_layers + i), so the
    KV-cache manager sees one FullAttentionSpec and one MambaSpec per decoder layer, both on the
    decoder layer's pipeline stage. Engines that size it take `parts()`; kvplan's own arithmetic
    sums them (per-token values from the attention, the per-sequence state from the mixer).
    """

    attention: FullAttention
    state: RecurrentState

    kind = Kind.FULL
    bounded = False
    allocation = "layers that hold attention and a Mamba state side by side (Falcon-H1)"

    def parts(self) -> tuple[LayerSpec, LayerSpec]:
        return self.attention, self.state

    def elements_per_token(self, tp: int = 1) -> int:
        return self.attention.elements_per_token(tp)

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def state_elements(self, tp: int = 1) -> int:
        return self.state.state_elements(tp)

    def state_parts(self, tp: int = 1) -> tuple[int, int]:
        return self.state.state_parts(tp)

    @property
    def ssm_dtype(self) -> str:
        return self.state.ssm_dtype

    def describe(self) -> str:
        return f"{self.attention.describe()} + {self.state.describe()}"


def with_ssm_dtype(layer: LayerSpec, dtype: str) -> LayerSpec:
    """`layer` as an engine told to store recurrent states in `dtype` holds it (SGLang's --mamba-ssm-dtype, which
    wins over the config's mamba_ssm_dtype: kvplan.engines.sglang.mamba.ssm_dtype_of): a RecurrentState's, or
    Falcon-H1's mixer's, `ssm_dtype` set; every other layer as it is. The speed terms read and write the state in
    the element type its pool holds (kvplan.speed.terms, `kv`)."""
    if isinstance(layer, RecurrentState):
        return replace(layer, ssm_dtype=dtype)
    if isinstance(layer, ParallelHybrid):
        return replace(layer, state=replace(layer.state, ssm_dtype=dtype))
    return layer


def recurrent_states(layers) -> list[RecurrentState]:
    """Every recurrent state the layers keep: a RecurrentState layer's own and Falcon-H1's mixer beside its attention
    (a ParallelHybrid, whose kind is its attention's), so a rule about state layers sees both."""
    return [layer.state if isinstance(layer, ParallelHybrid) else layer for layer in layers
            if layer.kind == Kind.STATE or isinstance(layer, ParallelHybrid)]


def ssm_as(layers, dtype: str) -> tuple:
    """`layers` with their recurrent values in `dtype` (with_ssm_dtype), as they are where it is "": the dtype an
    engine pools them in (`Request.ssm_dtype`), which a plan's memory, roofline and speed figures all read."""
    return tuple(with_ssm_dtype(layer, dtype) for layer in layers) if dtype else tuple(layers)


def state_bytes(layer, tp: int, state_dtype) -> int:
    """Bytes of a layer's per-sequence state on one rank: conv values in `state_dtype`, recurrent
    values in the layer's own `ssm_dtype` when its config fixes one (vLLM's mamba_ssm_cache_dtype,
    e.g. Nemotron 3's float32), else in `state_dtype` too."""
    ssm_dtype = getattr(layer, "ssm_dtype", "")
    if not ssm_dtype:
        return state_dtype.bytes_for(layer.state_elements(tp))

    conv, ssm = layer.state_parts(tp)
    return state_dtype.bytes_for(conv) + canonical_kv_dtype(ssm_dtype, "bf16").bytes_for(ssm)
