"""SGLang's DeepSeek-V4 rules: the releases read, its page and cache dtype, its running limit, and the engine table
of its pools (their arithmetic: kvplan.engines.sglang.dsv4_pool), as the 0.5.15 wheel
(sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl, the release the SGLang cookbook's DeepSeek-V4 cells ran)
has them. Restated, not copied:

* `arg_groups/deepseek_v4_hook.py` L49-53 (called from `server_args.py` L3849-3852): a DeepseekV4ForCausalLM
  server started without --max-running-requests gets 256, the deployment's figure;
  `model_runner_kv_cache_mixin.py` L1225-1238 (`_resolve_max_num_reqs`) gives each DP worker max_running_requests //
  dp_size, at most its token pool // 2.
* Why the limit, not the pool, binds: `model_executor/pool_configurator.py` L609-649 (`DSV4PoolConfigurator.
  _get_bytes_per_full_token`) sizes the pool at about 7.7 KB a "full" token for DeepSeek-V4-Flash (its SWA share
  0.1 by `arg_groups/overrides.py` L709-710, 1:4 and 1:128 latents, indexer keys, fp32 compressor states), so on
  the cookbook's GPUs it holds millions of tokens, far more than 256 requests of 8k + 1k tokens use.
* The pools themselves (kvplan.engines.sglang.dsv4_pool, read in the 0.5.15 and 0.5.16 wheels) and the engine table
  SGLang's start-up prints for them (`capacity` here). 0.5.23 reworked them (`pool_configurator.py`
  L1067-1700: the SWA pool sized from the running limit plus 4 x max_running_requests cached prefix tails
  unless --swa-full-tokens-ratio is given, fp4 indexer keys on the ratio-4 layers, page padding priced); 0.5.19 to
  0.5.22 were not read: those releases are refused with the reason (`release_problem`). The running limit above
  is what the speed fit reads for every release from 0.5.15 (`running_limit`).
* 0.5.17 and 0.5.18 (wheels read, round 41) size them as 0.5.16 does: DSV4PoolConfigurator (0.5.17
  `pool_configurator.py` L610-873, 0.5.18 L715-1004) differs only by an unused kv_cache_dtype_str (0.5.17 L619) and a
  speculative ring assert (0.5.18 L774-778, L820-839); apply_deepseek_v4_defaults (256: 0.5.17 L141-142, 0.5.18
  L138-139), _deepseek_v4_overrides (page 256, SWA share 0.1: 0.5.17 `overrides.py` L1081-1109, 0.5.18 L1137-1165),
  _deepseek_v4_kv_cache_dtype (0.5.17 L1812, 0.5.18 L1900), get_compress_state_ring_size (L34 in both) and the
  environment defaults (online compression off, fp32 states) are 0.5.16's; resolve_max_num_reqs (0.5.17
  `mem_cache/kv_cache_configurator.py` L1719, 0.5.18 L1873) changed only for mamba state caps, and 0.5.18's
  multimodal reservation in `_profile_available_bytes` is 0 for this text model. 0.5.18 also turns on FlashInfer's
  all-reduce fusion for DeepSeek-V4 at tp > 1 without DP attention on SM90 / SM100 (`overrides.py` L1959-2004), whose
  workspace the graph runners create in their warm-up (`model_executor/runner/base_runner.py` L229-239), after the
  pools (`model_runner.py` L825-827): not in the budget, as for DeepSeek-V3.

Not modelled: hisparse, online 1:128 compression (SGLANG_OPT_USE_ONLINE_COMPRESS), bf16 compressor states
(SGLANG_DSV4_COMPRESS_STATE_DTYPE), speculative decoding's rings and draft layer, disaggregated decode's extra
slots, NPU and ROCm's unified pool, the fp4 indexer flag (its buffers, not the configurator's sizing).
"""

from __future__ import annotations

import dataclasses
import math

from kvplan.core.dtypes import KV_DTYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.core.search import largest_fitting
from kvplan.engines.capacity import Capacity, Figure
from kvplan.engines.sglang import dsv4_pool as pool
from kvplan.engines.versions import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.compressed import CompressedMLA, has_compressed
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan import KV_ENGINE_AUTO, PlanWarning

# The releases whose pools are restated here, oldest first (earlier ones not claimed; 0.5.19-0.5.22 not read, 0.5.23
# reworked them): every bound and message below is read from it
RELEASES = ("0.5.15", "0.5.16", "0.5.17", "0.5.18")
READ = f"{RELEASES[0]}-{RELEASES[-1]}"  # as messages name them
DEFAULT_MAX_RUNNING = 256  # deepseek_v4_hook.py L49-50


def default_running(dp: int) -> int:
    """Requests one DP worker runs at once where no --max-running-requests is given: the deployment's 256 // dp."""
    return max(1, DEFAULT_MAX_RUNNING // max(1, dp))


def applies(version: str | None, layers) -> bool:
    """Whether SGLang `version` runs these layers with its DeepSeek-V4 rules (a release this module read)."""
    return (version is not None and parse_version(version) >= parse_version(RELEASES[0])
            and any(isinstance(layer, CompressedMLA) for layer in layers))


def running_limit(version: str | None, layers, dp: int, per_worker: int | None) -> int | None:
    """The requests one DP worker of SGLang `version` runs at once with DeepSeek-V4 `layers`: the stated
    --max-running-requests already divided per worker (`per_worker`), else the model's default 256 // dp;
    None where the rules here do not apply (not DeepSeek-V4, or a release before 0.5.15)."""
    if not applies(version, layers):
        return None
    return int(per_worker) if per_worker else default_running(dp)


def release_problem(version: str) -> str:
    """Why SGLang `version` cannot plan DeepSeek-V4's pools as kvplan reads them ('' when it can)."""
    why = _unread(version)
    return f"SGLang {version}: {why}; choose {arg('engine_version')} {RELEASES[0]} to {RELEASES[-1]}" if why else ""


def _unread(version: str) -> str:
    """What kvplan has not read of SGLang `version`'s DeepSeek-V4 pools ('' for 0.5.15-0.5.18)."""
    v = parse_version(version)
    if v < parse_version(RELEASES[0]):
        return (f"kvplan reads SGLang's DeepSeek-V4 pools from {RELEASES[0]} (DSV4PoolConfigurator; earlier releases "
                "not read)")
    if v > parse_version(RELEASES[-1]):
        return (f"kvplan restates SGLang's DeepSeek-V4 pools for {READ} only; 0.5.23 reworked them (the SWA pool "
                "sized from the running limit and cached prefix tails, fp4 indexer keys, page padding) and "
                "0.5.19-0.5.22 were not read")
    return ""


def check_release(model, version: str, defaulted: bool = False) -> None:
    """A one-line refusal where `model` is DeepSeek-V4 and SGLang `version`'s pools are not restated here;
    `defaulted`: no release was asked, `version` is kvplan's default, and the line says which release to pass."""
    why = release_problem(version) if has_compressed(model.layers) else ""
    if why and defaulted:
        why = (f"DeepSeek-V4 under SGLang needs {arg('engine_version')} {RELEASES[-1]} (or {RELEASES[0]}-"
               f"{RELEASES[-2]}): with none given kvplan plans SGLang {version}, whose DeepSeek-V4 pools it does not "
               f"restate ({_unread(version)})")
    if why:
        raise KvplanError(why, EXIT_USAGE, param="engine_version", value=version, allowed=RELEASES)


# The CUDA compute capabilities whose kernels 0.5.15-0.5.18's DeepSeek-V4 backend runs: FlashMLA's on every CUDA GPU but
# SM120, which has its own (`layers/attention/deepseek_v4_backend.py` 0.5.15 L114-119, L1419-1442; 0.5.17 and 0.5.18
# L139, the same `_is_sm120` split), and FlashMLA is built for Hopper and Blackwell (SM90, SM100: deepseek-ai/FlashMLA's
# README; vLLM's FlashMLA backends accept capability major 9 or 10 only, `v1/attention/backends/mla/flashmla.py`). An
# SM89 path was proposed (sgl-project/sglang#28620, closed; #40566, 2026-09-21, open) and is in none of these wheels.
CUDA_MAJORS = (9, 10, 12)


def check_gpu(model, gpu) -> None:
    """A one-line refusal where DeepSeek-V4 would run on an NVIDIA GPU whose capability these releases' kernels lack."""
    if not has_compressed(model.layers) or vendor_of(gpu) != "NVIDIA":
        return
    cap = capability_of(gpu)
    if cap is not None and cap[0] not in CUDA_MAJORS:
        raise KvplanError(f"SGLang {READ} run DeepSeek-V4's attention with FlashMLA (SM90/SM100) or their SM120 "
                          f"kernels; {gpu.name} is compute capability {cap[0]}.{cap[1]} (an SM89 path, "
                          "sgl-project/sglang#40566, is in none of them)", EXIT_USAGE, param="gpu", value=gpu.key)


def stage_dims(model, dep) -> list:
    """The configurator's view of each pipeline stage's layers (kvplan.engines.sglang.dsv4_pool.Dims)."""
    return [pool.dims(model.layers[a:b]) for a, b in stage_ranges(model, dep)]


def requested(st, dp: int) -> int:
    """--max-running-requests per worker as the configurator reads it: the stated one // dp, else 256 // dp."""
    return st.max_running_requests or default_running(dp)


def size(model, dep, budget: int, st, dp: int) -> tuple[pool.Dims, pool.Pools]:
    """The bounding stage's dims and the pools of one worker for a per-rank `budget` (every stage the same budget:
    SGLang's free memory is the minimum over ranks; the smallest stage's full count is kept)."""
    want = requested(st, dp)
    stages = stage_dims(model, dep)
    counts = [pool.full_tokens(d, budget, st.swa_full_tokens_ratio, want, st.page_size) for d in stages]
    i = min(range(len(stages)), key=lambda k: counts[k])
    return stages[i], pool.pools(stages[i], counts[i], st.swa_full_tokens_ratio, want, st.page_size)


def capacity(model, dep, kv_bytes: int, context: int, st, dp: int, kv_dtype) -> Capacity:
    """SGLang's DeepSeek-V4 pools for a per-rank budget ("rest"): the figures its start-up logs, and the requests of
    `context` tokens one worker runs at once (its pools' and its running limit's least)."""
    budget = max(0, kv_bytes)
    d, p = size(model, dep, budget, st, dp)
    ratio = st.swa_full_tokens_ratio
    held = pool.requests_held(d, p, context, st.page_size)
    conc = min(held, p.running)
    lines = (
        Figure("KV budget per GPU (rest)", budget, "bytes"),
        Figure("mem_fraction_static", st.mem_fraction_static, "number"),
        Figure("page size", st.page_size, "tokens"),
        Figure("swa_full_tokens_ratio", ratio, "number"),
        Figure("bytes_per_full_token", pool.bytes_per_full_token(d, ratio), "B.2"),
        Figure("c128_state_fixed", pool.c128_state_fixed(d, requested(st, dp)), "sglang GB"),
        Figure("DSV4 pool sizes", p.printed(), "dsv4 pools"),
        Figure("max_total_num_tokens", p.full, "count"),
        Figure("max_running_requests", p.running, "count"),
        Figure(f"full tokens a {context:,}-token request takes", cdiv(context, st.page_size) * st.page_size, "count"),
        Figure(f"SWA tokens it holds (at most {max(d.window, st.page_size) + st.page_size})",
               pool.swa_need(d, context, st.page_size), "count"),
        Figure(f"requests of {context:,} tokens", conc, "ratio"),
    )
    notes = (f"SGLang sizes DeepSeek-V4's pools per full token ({pool.bytes_per_full_token(d, ratio):,.2f} B: its SWA "
             f"share {ratio:g}, the 1:4 and 1:128 latents, the indexer keys, the c4 states) after the c128 states of "
             f"{requested(st, dp)} requests; a request takes whole {st.page_size}-token pages of the full pool "
             "(kvplan.engines.sglang.dsv4_pool)",)
    # bytes one more token adds on a rank (its compressed entries and indexer keys), as the plan prices growth
    bpt = max(sum(x.token_bytes(kv_dtype, dep.tp) // x.compress_ratio for x in model.layers[a:b]
                  if isinstance(x, CompressedMLA)) for a, b in stage_ranges(model, dep))
    return Capacity("sglang", st.version, budget, p.full, conc, context, bpt, None, st.page_size, lines, notes,
                    max_running=p.running)


def max_context(model, dep, cap: Capacity, batch: int, st, dp: int) -> int:
    """The longest length whose `batch` requests one worker runs at once (pools and running limit)."""
    d, p = size(model, dep, cap.kv_memory_bytes, st, dp)
    if batch > p.running:
        return 0
    return max(0, largest_fitting(lambda n: n == 0 or pool.requests_held(d, p, n, st.page_size) >= batch,
                                  model.max_context))


def auto_cache(model, req):
    """(`req`, notes) with SGLang's --kv-cache-dtype auto for DeepSeek-V4: fp8_e4m3 on CUDA, its warning "Setting KV
    cache dtype to fp8_e4m3 for DeepseekV4ForCausalLM" (0.5.15 wheel `arg_groups/overrides.py` L1298-1320,
    `_deepseek_v4_kv_cache_dtype`; 0.5.16 L1463-1485, the same), where the model dtype (bf16) would be kvplan's
    auto. A dtype asked for by name is left as asked (check_settings refuses all but fp8)."""
    if not (req.kv_auto and has_compressed(model.layers)):
        return req, ()
    note = PlanWarning("KV cache fp8: SGLang's kv_cache_dtype auto is fp8_e4m3 for DeepSeek-V4 (its "
                       "_deepseek_v4_kv_cache_dtype override; the pool on CUDA holds fp8 latents only)",
                       topic=KV_ENGINE_AUTO, note=True)  # the engine's own default: a note
    return dataclasses.replace(req, kv_dtype=KV_DTYPES["fp8"]), (note,)


def check_settings(page: int, kv_dtype) -> None:
    """SGLang's DeepSeek-V4 settings on CUDA: page 256 whatever --page-size says (overrides.py L694-705), an fp8
    cache (the pool asserts a uint8 store: `deepseek_v4_memory_pool.py` L107-124). SGLang's auto is fp8_e4m3 for
    this model (overrides.py L1308-1311), planned so by `auto_cache`: only a dtype asked for by name reaches here."""
    if page != pool.PAGE:
        raise KvplanError(f"SGLang runs DeepSeek-V4 with page_size {pool.PAGE} whatever --page-size says (its dsv4 "
                          f"backend's override), not {page}", EXIT_USAGE, param="engine_opts",
                          value={"page_size": page})
    if not kv_dtype.one_byte:
        raise KvplanError(f"SGLang's DeepSeek-V4 pool on CUDA holds fp8 latents only (DeepSeekV4SingleKVPool asserts a "
                          f"uint8 store; its auto is fp8_e4m3), not {kv_dtype.name}; pass {arg('kv_dtype')} auto "
                          "or fp8", EXIT_USAGE, param="kv_dtype", value=kv_dtype.name)


def no_log_check(model) -> None:
    """check-log reads SGLang's "KV Cache is allocated" pools, which DeepSeek-V4's do not print."""
    if has_compressed(model.layers):
        raise KvplanError("SGLang's DeepSeek-V4 start-up prints 'DSV4 memory calculation' and 'DSV4 pool sizes', "
                          "not the 'KV Cache is allocated' line check-log reads; compare them with fit's engine table",
                          EXIT_USAGE)


def pool_cost(model, settings: dict, dep) -> tuple[int, int] | None:
    """(bytes per full token rounded up, c128 state bytes) of the stage that holds the fewest tokens, from a plan's
    settings (`--emit sglang`'s fraction advice, kvplan.engines.sglang.boot); None for a model that is not
    DeepSeek-V4. `dep`: the deployment (its dp ranks DP-attention workers, DeepSeek-V4 being a MoE model)."""
    if model is None or not has_compressed(model.layers):
        return None
    ratio = settings["swa_full_tokens_ratio"]
    want = settings.get("max_running_requests") or default_running(dep.dp)
    costs = [(pool.bytes_per_full_token(d, ratio), pool.c128_state_fixed(d, want)) for d in stage_dims(model, dep)]
    per_token, fixed = max(costs)
    return math.ceil(per_token), fixed


def emitted_running(model, planned: int) -> int:
    """--max-running-requests for the emitted command: for DeepSeek-V4 the 256 its pools were sized at (the c128
    states are per request slot), else the plan's."""
    return DEFAULT_MAX_RUNNING if has_compressed(model.layers) else planned


def emit_flags(model, opts: dict) -> list[str]:
    """--swa-full-tokens-ratio where the plan states one for DeepSeek-V4 (its pools are sized by it)."""
    if has_compressed(model.layers) and "swa_full_tokens_ratio" in opts:
        return ["--swa-full-tokens-ratio", str(opts["swa_full_tokens_ratio"])]
    return []
