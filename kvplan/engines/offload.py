"""One replica's offload tiers (`offload`): each tier as its engine sizes it, checked against a host profile.

`offload_pools(engine, plan, model, tiers, backend, host)` reads the GPU pool a configured engine laid
out (its Plan: bytes per token per rank, page, token slots), asks the engine for the rule of every
tier (`Engine.offload_rule`: its own tier, LMCache's or Dynamo KVBM's, each restated from source in the
engine's package or in kvplan.engines.lmcache / kvbm), sizes them (kvplan.planning.offload.TierPool)
and adds the warnings engines do not give at plan time: a tier not larger than the GPU pool (it
churns), host tiers past the server's DRAM less its reserve (SGLang refuses to start; others swap or
die), a CPU tier mapped in /dev/shm past its size. What kvplan does not model is refused with the
reason. `with_offload` adds the tiers' settings to a serve command (`--emit`).
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.errors import arg
from kvplan.hardware.hosts import Host
from kvplan.model.spec import ModelSpec
from kvplan.planning.offload import FULL_KINDS, Geometry, TierPool, TierRequest, refuse
from kvplan.planning.plan import Plan, PlanWarning, cache_dtypes

BACKENDS = ("native", "lmcache", "kvbm")


class OffloadPlan(NamedTuple):
    """The tiers of one replica, top to bottom, and what to warn about them."""

    geometry: Geometry
    backend: str
    tiers: tuple[TierPool, ...]
    warnings: tuple[PlanWarning, ...]
    host: Host | None


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise refuse(f"{arg('offload_backend')} must be one of {', '.join(BACKENDS)}, got {backend!r}",
                     "offload_backend", backend)
    return backend


def geometry(engine, plan: Plan, model: ModelSpec) -> Geometry:
    """The GPU pool `engine` laid out in `plan` (its own bytes per token, page and token slots), one replica."""
    dep = plan.deployment
    if dep.pp > 1 or dep.dp > 1 or dep.dcp > 1:
        raise refuse(f"{arg('offload')} is modelled for tensor parallelism only (one replica, no {arg('pp')}, "
                     f"{arg('dp')} or {arg('dcp')}): engines size host pools per pipeline stage and data-parallel "
                     "rank in ways kvplan has not read")
    kinds = tuple(sorted({str(layer.kind) for layer in model.layers
                          if layer.elements_per_token(dep.tp) or layer.state_elements(dep.tp)}))
    bpt = plan.kv_bytes_per_token_per_gpu  # the pool's cell: every caching layer grows with every token
    if not set(kinds) <= set(FULL_KINDS):  # a local layer stops growing past its window: its cell, not growth
        kv = cache_dtypes(plan.request, model)[0]
        bpt = sum(layer.token_bytes(kv, dep.tp) for layer in model.layers if layer.elements_per_token(dep.tp))
    return Geometry(engine.name, engine.version or engine.default_version, bpt, dep.tp,
                    plan.request.block_size, max(0, plan.kv_cache_tokens), max(0, plan.kv_memory_bytes_per_gpu),
                    plan.request.context, model.name, kinds)


def offload_pools(engine, plan: Plan, model: ModelSpec, tiers: tuple[TierRequest, ...], backend: str = "native",
                  host: Host | None = None) -> OffloadPlan:
    """Every tier as `engine` (configured) sizes it, and the plan-time warnings (module docstring)."""
    check_backend(backend)
    rules = [engine.offload_rule(backend, req.tier) for req in tiers]  # refusals before any arithmetic
    g = geometry(engine, plan, model)
    pools = []
    for req, rule in zip(tiers, rules):
        if req.auto:
            raise refuse(f"{arg('offload')} cpu:auto needs a trace ({arg('trace')} in simulate): the knee of its "
                         "hit-rate curve sizes it")
        pools.append(rule(req, g))
    return OffloadPlan(g, backend, tuple(pools), tuple(_warnings(g, pools, host)), host)


def _warnings(g: Geometry, pools: list[TierPool], host: Host | None) -> list[PlanWarning]:
    out = []
    for p in pools:
        if p.tokens <= g.device_tokens:
            out.append(PlanWarning(f"the {p.tier} tier holds {{}}, not more than the GPU pool's {{}}: a tier no larger "
                                   "than the pool above it churns (every block it keeps is also on the GPU)",
                                   (p.tokens, g.device_tokens), ("tokens", "tokens")))
    if host is None:
        return out
    ram = sum(p.bytes_total for p in pools if p.tier == "cpu")
    if ram > host.ram_for_kv_bytes:
        out.append(PlanWarning(f"the cpu tier takes {{}} of host RAM, more than {host.key}'s DRAM less its reserve "
                               "({}): SGLang refuses to start, other engines swap or are killed",
                               (ram, host.ram_for_kv_bytes), ("bytes", "bytes")))
    for p in pools:
        for fraction, then in p.dram_limits:  # strictest first: the first one passed is the one said
            if p.bytes_total > fraction * host.dram_bytes:
                out.append(PlanWarning(f"the {p.tier} tier's {{}} are more than {fraction:.0%} of {host.key}'s DRAM "
                                       f"({{}}): {then}", (p.bytes_total, host.dram_bytes), ("bytes", "bytes")))
                break
    shm = sum(p.bytes_total for p in pools if p.in_dev_shm)
    if shm > host.dev_shm_bytes:
        out.append(PlanWarning(f"the cpu tier may be mapped in /dev/shm (vLLM's SharedMmapRegion, in its source after "
                               f"0.14.0): {{}} exceed {host.key}'s "
                               "/dev/shm of {} (containers: raise its size)", (shm, host.dev_shm_bytes),
                               ("bytes", "bytes")))
    for p in pools:
        if p.tier == "disk" and host.nvme_capacity_bytes is not None and p.bytes_total > host.nvme_capacity_bytes:
            out.append(PlanWarning(f"the disk tier's {{}} exceed {host.key}'s NVMe of {{}}",
                                   (p.bytes_total, host.nvme_capacity_bytes), ("bytes", "bytes")))
        if p.tier == "disk" and host.nvme_capacity_bytes is None:
            out.append(PlanWarning(f"{host.key} lists no NVMe: the disk tier's reload bandwidth is unknown"))
    return out


def with_offload(command: str | None, op: OffloadPlan) -> str:
    """The serve command with the tiers' settings: environment first, flags after, config lines below
    (a TierPool's `flag` is one of the three: `NAME=value ...`, `--flag ...`, or `section.key=value`)."""
    env = [p.flag for p in op.tiers if p.flag and p.flag_kind == "env"]
    args = [p.flag for p in op.tiers if p.flag and p.flag_kind == "args"]
    args += list(dict.fromkeys(p.extra_args for p in op.tiers if p.extra_args))
    config = [p.flag for p in op.tiers if p.flag and p.flag_kind == "config"]
    line = " ".join([*env, command or "", *args]).strip()
    for c in config:  # TensorRT-LLM: an LLM API option, not a flag
        key, value = c.split("=", 1)
        section, _, field = key.partition(".")
        line += f"\n# extra LLM API options (YAML): {section}: {{{field}: {value}}}"
    return line
