"""SGLang's DeepSeek-V4 rules: its per-full-token pool bytes and its running limit, as the 0.5.15 wheel
(sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl, the release the SGLang cookbook's DeepSeek-V4 cells ran)
has them. Restated, not copied:

* `arg_groups/deepseek_v4_hook.py` L49-53 (called from `server_args.py` L3849-3852): a DeepseekV4ForCausalLM server started without
  --max-running-requests gets 256, the deployment's figure; `model_runner_kv_cache_mixin.py` L1225-1238
  (`_resolve_max_num_reqs`) gives each DP worker max_running_requests // dp_size, at most its token pool // 2.
* `arg_groups/overrides.py` L683-711: page 256, and --swa-full-tokens-ratio 0.1 where the flag is left at its
  default (`_deepseek_v4_overrides`).
* `model_executor/pool_configurator.py` L513-650 (`DSV4PoolConfigurator`, `_get_bytes_per_full_token` L609-649): one
  "full" token of the pool costs, over L layers of which L4 compress 1:4 and L128 1:128,
    kv = qk_nope + 2 qk_rope + 8 bytes (an fp8 latent with its scales), idx = index_head_dim + index_head_dim/128 x 4,
    ratio x kv x L  +  kv / 4 x L4  +  kv / 128 x L128  +  idx / 4 x L4
    + ratio x (ring4 / window) x (2 x 2 x (qk_nope + qk_rope) + 2 x 2 x index_head_dim) x 4 bytes x L4,
  with qk_nope = head_dim - qk_rope (`configs/model_config.py` L785), ring4 = 8 without speculative decoding
  (`mem_cache/deepseek_v4_memory_pool.py` L34-48), fp32 compressor states (`environ.py` L846,
  SGLANG_DSV4_COMPRESS_STATE_DTYPE), and the 1:128 compressor states request-scoped, outside this figure.
  The pool holds available bytes / bytes_per_full_token full tokens.

Not modelled here: the pool's available bytes under SGLang's memory plan for this model (kvplan's SGLang engine
still refuses the layers: `Engine.reads_layers`), hisparse, online 1:128 compression, speculative decoding.
"""

from __future__ import annotations

from kvplan.engines.versions import parse_version
from kvplan.model.compressed import CompressedMLA

FROM = (0, 5, 15)  # the release read (earlier releases are not claimed)
DEFAULT_MAX_RUNNING = 256  # deepseek_v4_hook.py L49-50
SWA_FULL_TOKENS_RATIO = 0.1  # overrides.py L709-710
C4_RING = 8  # deepseek_v4_memory_pool.py L47-48, without speculative decoding
STATE_BYTES = 4  # fp32 compressor states
QUANT_BLOCK = 128  # the indexer's fp8 keys carry an fp32 scale per 128


def applies(version: str | None, layers) -> bool:
    """Whether SGLang `version` runs these layers with its DeepSeek-V4 rules (a release this module read)."""
    return (version is not None and parse_version(version) >= FROM
            and any(isinstance(layer, CompressedMLA) for layer in layers))


def bytes_per_full_token(layers, swa_ratio: float = SWA_FULL_TOKENS_RATIO) -> float:
    """SGLang's bytes per full token of a DeepSeek-V4 pool over `layers` (one pipeline stage's)."""
    comp = [layer for layer in layers if isinstance(layer, CompressedMLA)]
    if not comp:
        return 0.0
    first = comp[0]
    rope, nope = first.rope_dim, first.head_dim - first.rope_dim
    kv = nope + 2 * rope + 8
    c4 = [layer for layer in comp if layer.compress_ratio == 4]
    n4, n128 = len(c4), sum(1 for layer in comp if layer.compress_ratio == 128)
    index = max((layer.index_head_dim for layer in c4), default=0)
    idx = index + index // QUANT_BLOCK * 4
    states = (2 * 2 * (nope + rope) + 2 * 2 * index) * STATE_BYTES
    return (swa_ratio * kv * len(comp) + kv / 4 * n4 + kv / 128 * n128 + idx / 4 * n4
            + swa_ratio * (C4_RING / first.window) * states * n4)


def running_limit(version: str | None, layers, dp: int, per_worker: int | None) -> int | None:
    """The requests one DP worker of SGLang `version` runs at once with DeepSeek-V4 `layers`: the stated
    --max-running-requests already divided per worker (`per_worker`), else the model's default 256 // dp;
    None where the rules here do not apply (not DeepSeek-V4, or a release before 0.5.15)."""
    if not applies(version, layers):
        return None
    if per_worker:
        return int(per_worker)
    return max(1, DEFAULT_MAX_RUNNING // max(1, dp))
