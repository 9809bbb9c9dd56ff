"""One frozen spec per kind of layer, each knowing what one sequence costs it in cache.

This mirrors vLLM's `vllm/v1/kv_cache_interface.py` (FullAttentionSpec, SlidingWindowSpec,
ChunkedLocalAttentionSpec, MLAAttentionSpec, MambaSpec): a model is a list of these, and every
total is a sum over that list, so hybrid models (Gemma 3, gpt-oss, Qwen3-Next, Nemotron-H, Jamba)
need no special cases anywhere else.

Every spec answers three questions, per tensor-parallel rank:
  * `elements_per_token(tp)` - cache values one held token costs in this layer;
  * `tokens_held(seq_len)`   - how many of a sequence's tokens the layer keeps;
  * `state_elements(tp)`     - a fixed per-sequence state (recurrent layers), independent of length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel rank keeps: split when there are enough, else replicated.

    vLLM (`QKVParallelLinear`) and SGLang give each rank max(1, H_kv // tp) heads: with tp = 8 and
    H_kv = 2 every rank holds one head, so the cache across ranks is 4x the model's own.
    """
    return max(1, num_kv_heads // tp)


@dataclass(frozen=True)
class FullAttention:
    """Global attention (MHA, GQA, MQA): K and V for every token of the sequence."""

    num_kv_heads: int
    head_dim: int
    v_head_dim: int = 0  # 0 means same as head_dim; differs for expanded (non-latent) MLA caches

    kind = "full"

    def elements_per_token(self, tp: int = 1) -> int:
        v = self.v_head_dim or self.head_dim
        return kv_heads_per_rank(self.num_kv_heads, tp) * (self.head_dim + v)

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def state_elements(self, tp: int = 1) -> int:
        return 0

    @property
    def bounded(self) -> bool:
        return False


@dataclass(frozen=True)
class SlidingWindow:
    """Local attention over the last `window` tokens (Mistral v0.1, Gemma 2/3 local, gpt-oss)."""

    num_kv_heads: int
    head_dim: int
    window: int

    kind = "sliding"

    def elements_per_token(self, tp: int = 1) -> int:
        return kv_heads_per_rank(self.num_kv_heads, tp) * 2 * self.head_dim

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.window)

    def state_elements(self, tp: int = 1) -> int:
        return 0

    @property
    def bounded(self) -> bool:
        return True


@dataclass(frozen=True)
class ChunkedLocal:
    """Chunked local attention (Llama 4): a token sees only its own chunk, so one chunk is held.

    Worst case is a whole chunk; a sequence shorter than a chunk holds all of its tokens.
    """

    num_kv_heads: int
    head_dim: int
    chunk: int

    kind = "chunked"

    def elements_per_token(self, tp: int = 1) -> int:
        return kv_heads_per_rank(self.num_kv_heads, tp) * 2 * self.head_dim

    def tokens_held(self, seq_len: int) -> int:
        return min(seq_len, self.chunk)

    def state_elements(self, tp: int = 1) -> int:
        return 0

    @property
    def bounded(self) -> bool:
        return True


@dataclass(frozen=True)
class MLALatent:
    """Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2): one compressed latent per token.

    The cache keeps `kv_lora_rank` latent values plus the `qk_rope_head_dim` decoupled rope key:
    512 + 64 = 576 values, with no x2 for K and V and no split by head. Every tensor-parallel rank
    keeps the whole latent (it is shared by all heads), so tp does not divide it.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int

    kind = "mla"

    def elements_per_token(self, tp: int = 1) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    def tokens_held(self, seq_len: int) -> int:
        return seq_len

    def state_elements(self, tp: int = 1) -> int:
        return 0

    @property
    def bounded(self) -> bool:
        return False


@dataclass(frozen=True)
class RecurrentState:
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
    variant: str = "mamba2"  # mamba | mamba2 | gated_deltanet | linear_attention
    groups: int = 0
    group_conv_elements: int = 0  # of conv_elements: the groups' part (Mamba-2 B and C)
    ssm_dtype: str = ""  # the recurrent state's own element type when the config fixes one (fp32), else ""

    kind = "state"

    def elements_per_token(self, tp: int = 1) -> int:
        return 0

    def tokens_held(self, seq_len: int) -> int:
        return 0

    def state_parts(self, tp: int = 1) -> tuple[int, int]:
        """(conv values, recurrent values) one rank keeps for one sequence."""
        share = max(1, self.num_heads // tp)
        conv = (self.conv_elements - self.group_conv_elements) * share // self.num_heads
        if self.groups:
            groups = self.groups if self.groups % tp == 0 else max(tp, self.groups)  # replicated up to tp
            conv += self.group_conv_elements // self.groups * groups // tp
        return conv, self.ssm_elements * share // self.num_heads

    def state_elements(self, tp: int = 1) -> int:
        return sum(self.state_parts(tp))

    @property
    def bounded(self) -> bool:
        return True


@dataclass(frozen=True)
class NoCache:
    """A layer that caches nothing (an MLP-only block of Nemotron-H, an encoder layer)."""

    kind = "none"

    def elements_per_token(self, tp: int = 1) -> int:
        return 0

    def tokens_held(self, seq_len: int) -> int:
        return 0

    def state_elements(self, tp: int = 1) -> int:
        return 0

    @property
    def bounded(self) -> bool:
        return True


LayerSpec = Union[FullAttention, SlidingWindow, ChunkedLocal, MLALatent, RecurrentState, NoCache]

LAYER_TYPES: dict[str, type] = {
    "full": FullAttention,
    "sliding": SlidingWindow,
    "chunked": ChunkedLocal,
    "mla": MLALatent,
    "state": RecurrentState,
    "none": NoCache,
}


def describe(layer: LayerSpec) -> str:
    """A short human label, e.g. 'full attention, 8 KV heads x 128' or 'sliding window 4096'."""
    if isinstance(layer, FullAttention):
        v = f"/{layer.v_head_dim}" if layer.v_head_dim and layer.v_head_dim != layer.head_dim else ""
        return f"full attention, {layer.num_kv_heads} KV heads x {layer.head_dim}{v}"
    if isinstance(layer, SlidingWindow):
        return f"sliding window {layer.window}, {layer.num_kv_heads} KV heads x {layer.head_dim}"
    if isinstance(layer, ChunkedLocal):
        return f"chunked local {layer.chunk}, {layer.num_kv_heads} KV heads x {layer.head_dim}"
    if isinstance(layer, MLALatent):
        return f"MLA latent {layer.kv_lora_rank} + rope {layer.qk_rope_head_dim}"
    if isinstance(layer, RecurrentState):
        return f"{layer.variant} state ({layer.conv_elements:,} conv + {layer.ssm_elements:,} ssm values)"
    return "no cache"


def state_bytes(layer, tp: int, state_dtype) -> int:
    """Bytes of a layer's per-sequence state on one rank: conv values in `state_dtype`, recurrent
    values in the layer's own `ssm_dtype` when its config fixes one (vLLM's mamba_ssm_cache_dtype,
    e.g. Nemotron 3's float32), else in `state_dtype` too."""
    ssm_dtype = getattr(layer, "ssm_dtype", "")
    if not ssm_dtype:
        return state_dtype.bytes_for(layer.state_elements(tp))
    from kvplan.dtypes import canonical_kv_dtype

    conv, ssm = layer.state_parts(tp)
    return state_dtype.bytes_for(conv) + canonical_kv_dtype(ssm_dtype, "bf16").bytes_for(ssm)
