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

from kvplan.engines import Capacity, EngineResult, check_opts, check_version, parse_version
from kvplan.layers import ChunkedLocal, FullAttention, MLALatent, SlidingWindow

GIB = 2**30
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
        if isinstance(layer, MLALatent):
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
        if isinstance(layer, (SlidingWindow, ChunkedLocal)):
            window = getattr(layer, "window", 0) or layer.chunk
            return min(seq_len, window - 1 if self.visible else window)
        return layer.tokens_held(seq_len)


class HfTransformers:
    name = "transformers"
    versions = VERSIONS
    default_version = DEFAULT_VERSION
    opts = OPTS
    settings = staticmethod(settings)

    def capacity(self, model, dep, kv_bytes, context, batch, st, kv_dtype, state_dtype=None) -> Capacity:
        from kvplan.planner import kv_profile

        prof = kv_profile(hf_layers(model, st), dep.tp, kv_dtype, state_dtype or kv_dtype, 1, DynamicRules())
        seq = prof.sequence_bytes(context)
        conc = kv_bytes / seq if seq > 0 else 0.0
        tokens = kv_bytes // prof.slot_bytes_per_token() if prof.slot_bytes_per_token() else 0
        lines = [("room for the cache", f"{kv_bytes / GIB:.2f} GiB"), (f"one {context:,}-token sequence",
                 f"{seq / GIB:.3f} GiB"), (f"sequences of {context:,} tokens", f"{conc:.2f}")]
        return Capacity("transformers", st.version, kv_bytes, int(tokens), conc, context,
                        prof.growth_bytes_per_token(), None, None, tuple(lines))

    def plan(self, model, gpu, dep, req, st: Settings) -> EngineResult:
        from kvplan.dtypes import canonical_kv_dtype
        from kvplan.planner import plan

        m = dataclasses.replace(model, layers=hf_layers(model, st))
        r = dataclasses.replace(req, gpu_memory_utilization=1.0, block_size=1, rules=DynamicRules())
        p = plan(m, gpu, dep, r)
        kv_dtype = r.kv_dtype or canonical_kv_dtype("auto", model.dtype)
        cap = self.capacity(model, dep, p.kv_memory_bytes_per_gpu, req.context, req.batch, st, kv_dtype)
        p = dataclasses.replace(p, model=model.name)
        return EngineResult(p, cap, st.as_dict())


ENGINE = HfTransformers()
