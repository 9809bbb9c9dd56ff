"""SGLang's DeepSeek-V4 running limit, as the 0.5.15 wheel
(sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl, the release the SGLang cookbook's DeepSeek-V4 cells ran)
has them. Restated, not copied:

* `arg_groups/deepseek_v4_hook.py` L49-53 (called from `server_args.py` L3849-3852): a DeepseekV4ForCausalLM server started without
  --max-running-requests gets 256, the deployment's figure; `model_runner_kv_cache_mixin.py` L1225-1238
  (`_resolve_max_num_reqs`) gives each DP worker max_running_requests // dp_size, at most its token pool // 2.
* Why the limit, not the pool, binds: `model_executor/pool_configurator.py` L609-649 (`DSV4PoolConfigurator.
  _get_bytes_per_full_token`) sizes the pool at about 7.7 KB a "full" token for DeepSeek-V4-Flash (its SWA share
  0.1 by `arg_groups/overrides.py` L709-710, 1:4 and 1:128 latents, indexer keys, fp32 compressor states), so on
  the cookbook's GPUs it holds millions of tokens, far more than 256 requests of 8k + 1k tokens use. kvplan does not
  size that pool (yet): only the limit is restated here.

Not modelled here: the pool's available bytes under SGLang's memory plan for this model (kvplan's SGLang engine
still refuses the layers: `Engine.reads_layers`), hisparse, online 1:128 compression, speculative decoding.
"""

from __future__ import annotations

from kvplan.engines.versions import parse_version
from kvplan.model.compressed import CompressedMLA

FROM = (0, 5, 15)  # the release read (earlier releases are not claimed)
DEFAULT_MAX_RUNNING = 256  # deepseek_v4_hook.py L49-50


def applies(version: str | None, layers) -> bool:
    """Whether SGLang `version` runs these layers with its DeepSeek-V4 rules (a release this module read)."""
    return (version is not None and parse_version(version) >= FROM
            and any(isinstance(layer, CompressedMLA) for layer in layers))


def running_limit(version: str | None, layers, dp: int, per_worker: int | None) -> int | None:
    """The requests one DP worker of SGLang `version` runs at once with DeepSeek-V4 `layers`: the stated
    --max-running-requests already divided per worker (`per_worker`), else the model's default 256 // dp;
    None where the rules here do not apply (not DeepSeek-V4, or a release before 0.5.15)."""
    if not applies(version, layers):
        return None
    if per_worker:
        return int(per_worker)
    return max(1, DEFAULT_MAX_RUNNING // max(1, dp))
