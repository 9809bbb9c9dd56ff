"""What vLLM will choose or need at start-up: `--max-model-len auto` and the lowest utilisation that boots.

* `--max-model-len auto` (from 0.14.0): the length itself is kvplan.engines.vllm.autofit's, shown as an
  engine figure; `fit --emit vllm` without --ctx prints `--max-model-len auto` and says what it expects.
* The lowest `--gpu-memory-utilization` that boots `concurrency` requests of `context` tokens: the
  smallest g (two decimals, as users pass it) whose budget `total x g - weights - overhead` holds the
  blocks those requests need (vLLM refuses to start when one request does not fit; the concurrency is
  kvplan's capacity at that budget), plus a stated margin for what kvplan's budget can miss.

The margin: on the held-out split of the log corpus kvplan's available KV is within 5% on HELD_OUT_WITHIN of
HELD_OUT_RECORDS vLLM records (benchmarks/budget_corpus.py, the README's held-out summary, which a test holds these
to); the miss is MiniMax-M2.7 AWQ on two GB10s' unified memory (spark-396: +14.25 GiB, +63.3%). MARGIN_FRACTION of
the KV budget is added.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.intmath import cdiv
from kvplan.engines.base import parse_version
from kvplan.engines.vllm.ssm_dtype import view as ssm_view
from kvplan.engines.vllm.autofit import FIRST, LABEL
from kvplan.engines.vllm.pool import stage_pools
from kvplan.engines.vllm.settings import Settings
from kvplan.planning.layout import per_rank_batch

GIB = 2**30
MARGIN_FRACTION = 0.05  # of the KV budget the requested load needs
# held-out vLLM records whose available KV kvplan has within 5%, of those it predicts (README "available kv" row)
HELD_OUT_WITHIN, HELD_OUT_RECORDS = 31, 32


@dataclasses.dataclass(frozen=True)
class BootAdvice:
    gpu_memory_utilization: float  # the lowest two-decimal value that boots, margin included
    kv_needed_bytes: int  # per GPU, for the requested context x concurrency, before the margin
    margin_bytes: int
    kv_budget_bytes: int  # per GPU at that utilisation (kvplan's estimate of vLLM's line)


def auto_note(result, model) -> str | None:
    """What `--emit vllm` says of its --max-model-len auto (None when it pins a length): the model's full
    length when the emitted utilisation holds the batch at that length (emit_advice raises it to that),
    else the length the engine's figure expects at the plan's budget (kvplan.engines.vllm.autofit)."""
    plan = result.plan
    if not plan.request.context_from_model or parse_version(result.settings["version"]) < FIRST:
        return None
    limit = plan.request.context
    batch = per_rank_batch(plan.request.batch, plan.deployment.dp)
    if plan.request.kv_cache_memory_bytes is None and lowest_utilization(plan, result.settings, model, batch):
        return f"--max-model-len auto: kvplan expects the model's full {limit:,} tokens at that utilisation"
    got = {f.label: f.value for f in result.capacity.lines}.get(LABEL)
    if got is None:
        return "--max-model-len auto: kvplan does not predict the length it sets here (see the notes)"
    if got == 0:
        return "--max-model-len auto: kvplan expects vLLM to refuse to start (not one token fits)"
    if got >= limit:
        return f"--max-model-len auto: kvplan expects the model's full {limit:,} tokens"
    return f"--max-model-len auto: kvplan expects about {got:,} tokens (vLLM fits it to the memory it measures)"


def settings_of(settings: dict):
    """The vllm.Settings behind a plan's settings dict (which carries extra keys)."""
    names = {f.name for f in dataclasses.fields(Settings)}
    return Settings(**{k: v for k, v in settings.items() if k in names})


def kv_needed(model, plan, st, concurrency: int) -> int:
    """Bytes of blocks `concurrency` requests of the plan's context occupy in vLLM's pool (tightest stage)."""
    req, dep = plan.request, plan.deployment
    kv_dtype = req.kv_dtype or canonical_kv_dtype("auto", model.dtype)
    state_dtype = req.state_dtype or canonical_kv_dtype("auto", model.dtype)
    return max(concurrency * pool.blocks_per_request(cdiv(req.context, dep.dcp), st) * pool.bytes_per_block
               for pool in stage_pools(ssm_view(model, st), dep, st, kv_dtype, state_dtype))  # states as pooled


def lowest_utilization(plan, settings: dict, model, concurrency: int) -> BootAdvice | None:
    """Smallest --gpu-memory-utilization (0.01 steps) whose KV budget holds `concurrency` x the plan's
    context plus MARGIN_FRACTION; None when even 1.00 does not. vLLM's budget is linear in the
    utilisation (weights and overhead do not move with it): kv(g) = kv(g0) + total x (g - g0)."""
    st = settings_of(settings)
    g0, kv0, total = st.gpu_memory_utilization, plan.kv_memory_bytes_per_gpu, plan.usable_memory_bytes
    need = kv_needed(model, plan, st, concurrency)
    margin = int(need * MARGIN_FRACTION)

    def kv_at(g: float) -> int:
        return kv0 + int(round(total * (g - g0)))

    if kv_at(1.0) < need + margin:
        return None
    g = max(0.01, _ceil2(g0 + (need + margin - kv0) / total))
    while g < 1.0 and kv_at(g) < need + margin:
        g = round(g + 0.01, 2)
    return BootAdvice(g, need, margin, kv_at(g))


def _ceil2(x: float) -> float:
    return min(1.0, cdiv(round(x * 10000), 100) / 100)


def emit_advice(plan, settings: dict, model) -> tuple[float, str]:
    """The --gpu-memory-utilization `fit --emit vllm` should print, and the margin it leaves, in words:
    the plan's own when its budget holds the requested batch x context plus the margin; else the
    lowest one that does (never below the plan's); else the plan's, with that said."""
    g = settings["gpu_memory_utilization"]
    # per data-parallel rank: each holds its own share of the requests in its own pool

    batch, ctx = per_rank_batch(plan.request.batch, plan.deployment.dp), plan.request.context
    adv = lowest_utilization(plan, settings, model, batch)
    if adv is None:
        return g, (f"margin: none; {batch} x {ctx:,} tokens do not fit even at "
                   "--gpu-memory-utilization 1.0 by kvplan's estimate")
    use = max(g, adv.gpu_memory_utilization)
    kv = plan.kv_memory_bytes_per_gpu if use == g else adv.kv_budget_bytes
    spare = kv - adv.kv_needed_bytes
    raised = "" if use == g else f" (raised from {g:g}: the lowest that holds them with the margin)"
    return use, (f"margin: at --gpu-memory-utilization {use:g}{raised} kvplan expects {kv / GIB:.2f} GiB of KV "
                 f"per GPU; {batch} x {ctx:,} tokens need {adv.kv_needed_bytes / GIB:.2f} GiB, "
                 f"{spare / GIB:.2f} GiB ({spare / max(1, adv.kv_needed_bytes):.0%}) to spare; the lowest value that "
                 f"keeps {MARGIN_FRACTION:.0%} is {adv.gpu_memory_utilization:g} (kvplan's budget is within 5% of "
                 f"vLLM's on {HELD_OUT_WITHIN} of {HELD_OUT_RECORDS} held-out logs)")
