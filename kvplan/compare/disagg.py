"""Disaggregated serving's two pools, each planned by the engine on its own layout, and the refusal of
a pool that would not start.

A prefill replica runs at its own `max_model_len` and holds the prompts it is computing plus the
prompts whose KV waits to be pulled by a decode replica (staged); a decode replica holds each
request's prompt and output. Each pool is one engine plan (`Engine.result`) of one replica (tp x pp;
the replica count is the pool's data parallelism), at its `max_model_len`: a pool whose KV memory
cannot hold one sequence of that length is refused, as the engine refuses to start (vLLM: "To serve
at least one request with the models's max seq len ... needed KV cache memory is larger than the
available KV cache memory", vllm/v1/core/kv_cache_utils.py `check_enough_kv_cache_memory`), the
crash loop of a generated deployment whose prefill workers got `max_model_len` 131,072 without the
memory for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.core.errors import EXIT_DOES_NOT_FIT, EXIT_USAGE, KvplanError, arg
from kvplan.core.units import human_bytes, plural
from kvplan.planning.deploy import Deployment
from kvplan.planning.layout import layout_from_flags


@dataclass(frozen=True)
class Pool:
    """One replica of a pool as the engine plans it, and what it must hold."""

    role: str  # prefill | decode
    result: object  # the engine's EngineResult (its .plan)
    max_model_len: int
    tokens: int  # tokens one request holds here (prefill: the prompt; decode: prompt + output)
    holds: int  # requests of `tokens` the replica's KV memory holds
    needs: int  # requests it must hold at once (prefill: in flight + staged; decode: its batch)

    @property
    def plan(self):
        return self.result.plan

    @property
    def binds(self) -> str:
        """What limits the pool, in words: its KV memory where it holds fewer requests than it must, else
        the GPU's speed (prefill: compute; decode: the batch kvplan.simulator.disagg settles on)."""
        if self.holds < self.needs:
            return "KV memory"
        return "compute" if self.role == "prefill" else "step time"


def pool_layout(spec, role: str, tp: int | None, pp: int | None) -> Deployment:
    """One `role` replica's tp x pp (one GPU when neither is given), checked as fit's flags are; a refusal
    names the pool."""
    try:
        return layout_from_flags(spec, None, tp, pp) or Deployment()
    except KvplanError as exc:
        raise KvplanError(f"{role} pool: {exc.message}", exc.exit_code,
                          param=f"{role}_{exc.param or ('tp' if tp else 'pp')}",
                          value=exc.value, allowed=exc.allowed) from None


def holds_at(plan, tokens: int, max_running: int | None = None) -> int:
    """Requests of `tokens` tokens one replica's KV holds: the binding pipeline stage's pool over one
    sequence's whole pages on that rank. Where the engine keeps recurrent states in a pool of their own
    (SGLang's hybrids: Plan.state_pool_bytes_per_gpu), the token pool over a sequence's tokens, within the
    running cap its state slots allow (`max_running`, Capacity.max_running)."""
    if plan.state_pool_bytes_per_gpu:
        per = max(s.profile.sequence_bytes(tokens) - s.profile.sequence_bytes(0) for s in plan.stages)  # tokens only
        held = plan.token_pool_bytes_per_gpu // max(1, per)
        return min(held, max_running) if max_running else held
    return min(s.kv_memory_bytes // max(1, s.profile.sequence_bytes(tokens)) for s in plan.stages)


def plan_pool(role: str, engine, spec, hw, dep, req, max_model_len: int, tokens: int, needs: int) -> Pool:
    """`role`'s replica on `dep` at `max_model_len` (req: the Request both pools share), refused with the
    reason where its KV memory cannot hold one sequence of that length."""
    result = engine.result(spec, hw, dep, replace(req, context=max_model_len, batch=1))
    plan = result.plan
    param = f"{role}_max_model_len"
    if plan.max_context < max_model_len and plan.max_context_limited_by in ("model", "max_model_len"):
        raise KvplanError(f"{role} pool: {arg(param)} {max_model_len:,} is beyond {spec.name}'s context length "
                          f"{plan.max_context:,}; the engine refuses it (give a shorter {arg(param)}, or shorter "
                          "requests)", EXIT_USAGE, param=param, value=max_model_len)
    if plan.max_context < max_model_len:
        raise KvplanError(
            f"{role} pool ({plural(dep.tp * dep.pp, 'GPU')}, tp {dep.tp} pp {dep.pp}) would not start: "
            f"{arg(param)} {max_model_len:,} needs {human_bytes(plan.kv_bytes_per_sequence_per_gpu)} of KV per GPU, "
            f"its KV memory is {human_bytes(plan.kv_memory_bytes_per_gpu)} (longest that fits: {plan.max_context:,} "
            f"tokens); lower {arg(param)} or give the pool more GPUs",
            EXIT_DOES_NOT_FIT, param=param, value=max_model_len)
    return Pool(role, result, max_model_len, tokens, holds_at(plan, tokens, result.capacity.max_running), needs)
