"""transformers: DynamicCache grows per token, nothing is preallocated, sliding layers hold W tokens of memory.

Named hf_transformers so it never shadows the real `transformers` package. Sources (PyPI wheels;
docs/engines.md section 5):
  * `DynamicCache(config=...)` builds one layer per decoder layer from `layer_types` (5.24.0
    `cache_utils.py` L1959-2006; 4.57.6 L955-985); `DynamicSlidingWindowLayer` shows the last W - 1 tokens
    after each update (4.57.6 L206-208, 5.24.0 L244-247), but as a slice of the W-token concatenation, so
    W tokens of storage stay allocated: measured by `kvplan validate --backend transformers` (5.24.0,
    Gemma 3 and gpt-oss: a (1, 1, 511, 256) view on a 512-token storage). Memory is planned on W;
  * tensors are [batch, heads, seq, dim]: padded batches pay for the longest sequence, no pages;
  * DeepSeek-V3 stores the expanded per-head K (128 x 192) and V (128 x 128) up to 5.14.0 and the 576-value
    latent from 5.15.0 (`models/deepseek_v3/modeling_deepseek_v3.py` 4.57.6 L401-421, 5.24.0 L446-464).
Memory: one process owns the GPU (no utilisation fraction); the overhead is the planner's estimate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.planning.plan import cache_dtypes, paged_answers
from kvplan.engines.base import Capacity, Engine, Figure, check_opts, check_version, parse_version
from kvplan.model.layers import LOCAL_KINDS, FullAttention, Kind
from kvplan.planning.profile import kv_profile

VERSIONS = ("4.45.0", "4.57.6", "5.14.0", "5.15.0", "5.24.0")
DEFAULT_VERSION = "5.24.0"
OPTS = ()


@dataclass(frozen=True)
class Settings:
    version: str
    latent_mla: bool

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    check_opts("transformers", dict(opts or {}), OPTS)
    version = check_version("transformers", version, VERSIONS, DEFAULT_VERSION)
    return Settings(version, parse_version(version) >= (5, 15, 0))


def hf_layers(model, st: Settings):
    """The model's layers as transformers caches them (expanded MLA before 5.15.0)."""
    if st.latent_mla:
        return model.layers
    out = []
    for layer in model.layers:
        if layer.kind == Kind.MLA:
            # DeepSeek V2/V3 geometry: qk_nope 128 + rope per head for K, v_head_dim 128 for V.
            out.append(FullAttention(model.num_attention_heads, 128 + layer.qk_rope_head_dim, 128))
        else:
            out.append(layer)
    return tuple(out)


@dataclass(frozen=True)
class DynamicRules:
    """Tokens a sequence holds in a DynamicCache: all of them, or the last W in a sliding layer.

    `visible=True` gives what the cache tensors show instead (W - 1): the storage under them is W.
    """

    visible: bool = False
    name = "transformers"

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if layer.kind in LOCAL_KINDS:
            return min(seq_len, layer.span - 1 if self.visible else layer.span)
        return layer.tokens_held(seq_len)


def capacity(model, dep, kv_bytes: int, context: int, st: Settings, kv_dtype, state_dtype=None,
             profile=None) -> Capacity:
    """Sequences of `context` tokens that `kv_bytes` of free memory per rank holds, grown token by token.
    `profile`: a KV profile of hf_layers(model, st) already made (prepare()'s, one stage), used when
    its tp, dtypes, page and rules are the ones this needs."""
    want = (dep.tp, kv_dtype, state_dtype or kv_dtype, 1, DynamicRules())
    if profile is not None and (profile.tp, profile.kv_dtype, profile.state_dtype, profile.block_size,
                                profile.rules) == want:
        prof = profile
    else:
        prof = kv_profile(hf_layers(model, st), *want)
    seq = prof.sequence_bytes(context)
    conc = kv_bytes / seq if seq > 0 else 0.0
    tokens = kv_bytes // prof.slot_bytes_per_token() if prof.slot_bytes_per_token() else 0
    lines = [Figure("room for the cache", kv_bytes, "GiB"), Figure(f"one {context:,}-token sequence", seq, "GiB.3"),
             Figure(f"sequences of {context:,} tokens", conc, "ratio")]
    return Capacity("transformers", st.version, kv_bytes, int(tokens), conc, context,
                    prof.growth_bytes_per_token(), None, None, tuple(lines))


class HfTransformers(Engine):
    """The plan's figures are the paged arithmetic with DynamicRules (no pages, whole memory)."""

    name = "transformers"
    aliases = ("hf", "huggingface")
    versions = VERSIONS
    # DynamicRules: sliding and chunked layers their span, every other kind the tokens (or state) its spec holds
    kinds = frozenset({Kind.FULL, Kind.MLA, Kind.SLIDING, Kind.CHUNKED, Kind.STATE, Kind.NONE})
    default_version = DEFAULT_VERSION
    option_names = OPTS

    def settings(self, model, gpu, dep, req) -> Settings:
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def view(self, model, st: Settings):
        layers = hf_layers(model, st)
        return model if layers is model.layers else dataclasses.replace(model, layers=layers)

    def request(self, req, st, model, dep):
        return dataclasses.replace(req, gpu_memory_utilization=1.0, block_size=1)

    def rules(self, st) -> DynamicRules:
        return DynamicRules()

    def capacity(self, model, dep, stages, req, st: Settings, use) -> Capacity:
        # One stage (pp 1) holds every layer of the view, which is hf_layers(view): prepare()'s
        # profile is the one capacity() would build again when its settings match.
        one = stages[0].profile if len(stages) == 1 else None
        return capacity(model, dep, use.kv_memory_bytes_per_gpu, req.context, st, cache_dtypes(req, model)[0],
                        profile=one)

    def answers(self, model, dep, stages, req, st, use, cap):
        return paged_answers(stages, use, req, model.max_context)


ENGINE = HfTransformers
