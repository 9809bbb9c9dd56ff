"""One replica's offload tiers: each engine's host pool for `--offload`, checked against a host profile.

`offload_pools(result, model, dep, tiers, backend, host)` reads the plan an engine made
(kvplan.engines.base.EngineResult), picks the rule for the engine and backend (`native`: the engine's
own tier; `lmcache`; `kvbm`), sizes every tier (kvplan.offload.tiers.TierPool) and adds the warnings
engines do not give at plan time: a tier not larger than the GPU pool (it churns), host tiers past
the server's DRAM less its reserve (SGLang refuses to start; others swap or die), a vLLM CPU tier
past /dev/shm (where recent vLLM maps it). What kvplan does not model is refused with the reason.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.offload import kvbm, lmcache, neutral, sglang, trtllm, vllm
from kvplan.offload.tiers import Geometry, TierPool, TierRequest, refuse
from kvplan.planning.plan import PlanWarning

BACKENDS = ("native", "lmcache", "kvbm")
# engine -> backend -> {tier: rule}; a missing entry is refused with the reason in _why_not.
_RULES = {
    "kvplan": {"native": {"cpu": neutral.pool, "disk": neutral.pool, "remote": neutral.pool}},
    "vllm": {"native": {"cpu": vllm.cpu_pool}, "lmcache": {"cpu": lmcache.cpu_pool},
             "kvbm": {"cpu": kvbm.pool, "disk": kvbm.pool, "remote": kvbm.pool}},
    "sglang": {"native": {"cpu": sglang.cpu_pool}},
    "trtllm": {"native": {"cpu": trtllm.cpu_pool}, "kvbm": {"cpu": kvbm.pool, "disk": kvbm.pool, "remote": kvbm.pool}},
}
_WHY = {
    ("vllm", "native"): "vLLM's native offloading has a CPU tier only",
    ("sglang", "native"): "SGLang HiCache's L3 storage backends size themselves; kvplan sizes its host pool (cpu)",
    ("trtllm", "native"): "TensorRT-LLM's host cache is one secondary (CPU) pool",
    ("vllm", "lmcache"): "LMCache's disk and remote backends are not modelled; its local CPU backend is",
}
FULL_KINDS = ("full", "mla")


class OffloadPlan(NamedTuple):
    """The tiers of one replica, top to bottom, and what to warn about them."""

    geometry: Geometry
    backend: str
    tiers: tuple[TierPool, ...]
    warnings: tuple[PlanWarning, ...]
    host: object | None  # kvplan.hardware.hosts.Host


def geometry(result, model, dep) -> Geometry:
    """The GPU pool an engine laid out (its own bytes per token, page and token count), for one replica."""
    cap, plan = result.capacity, result.plan
    if dep.pp > 1 or dep.dp > 1 or dep.dcp > 1:
        raise refuse("--offload is modelled for tensor parallelism only (one replica, no --pp, --dp or --dcp): "
                     "engines size host pools per pipeline stage and data-parallel rank in ways kvplan has not read")
    kinds = {str(layer.kind) for layer in model.layers if layer.elements_per_token(dep.tp) or layer.state_elements(dep.tp)}
    odd = sorted(kinds - set(FULL_KINDS))
    if odd:
        raise refuse(f"--offload is modelled for full-attention and MLA caches; {model.name} has {', '.join(odd)} "
                     "layers (vLLM's connector needs one page size; hybrid host pools are not read)")
    bpt = cap.bytes_per_token or plan.kv_bytes_per_token_per_gpu
    block = cap.block_size or plan.request.block_size
    return Geometry(cap.engine, cap.version or "", bpt, dep.tp, block, cap.tokens, cap.kv_memory_bytes,
                    plan.request.context)


def offload_pools(result, model, dep, tiers: tuple[TierRequest, ...], backend: str = "native",
                  host=None) -> OffloadPlan:
    """Every tier as the engine sizes it, and the plan-time warnings (see the module docstring)."""
    if backend not in BACKENDS:
        raise refuse(f"--offload-backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    g = geometry(result, model, dep)
    rules = _RULES.get(g.engine)
    if rules is None:
        raise refuse(f"--offload with --engine {g.engine}: it has no KV offload tier; plan it with --engine vllm, "
                     "sglang, trtllm or without --engine")
    if backend not in rules:
        raise refuse(f"--offload-backend {backend} does not run under {g.engine} (it has: {', '.join(rules)})")
    pools = []
    for req in tiers:
        if req.auto:
            raise refuse("--offload cpu:auto needs a trace (simulate --trace): the knee of its hit-rate curve sizes it")
        rule = rules[backend].get(req.tier)
        if rule is None:
            why = _WHY.get((g.engine, backend), f"{g.engine} with {backend} has no {req.tier} tier")
            raise refuse(f"--offload {req.tier}: {why}; try --offload-backend kvbm (Dynamo KVBM) for disk")
        pools.append(rule(req, g))
    return OffloadPlan(g, backend, tuple(pools), tuple(_warnings(g, pools, host)), host)


def _warnings(g: Geometry, pools: list[TierPool], host) -> list[PlanWarning]:
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
    shm = sum(p.bytes_total for p in pools if p.in_dev_shm)
    if shm > host.dev_shm_bytes:
        out.append(PlanWarning(f"vLLM maps its CPU tier in /dev/shm (SharedMmapRegion): {{}} exceeds {host.key}'s "
                               "/dev/shm of {} (containers: raise --shm-size)", (shm, host.dev_shm_bytes),
                               ("bytes", "bytes")))
    for p in pools:
        if p.tier == "disk" and host.nvme_capacity_bytes is not None and p.bytes_total > host.nvme_capacity_bytes:
            out.append(PlanWarning(f"the disk tier's {{}} exceed {host.key}'s NVMe of {{}}",
                                   (p.bytes_total, host.nvme_capacity_bytes), ("bytes", "bytes")))
        if p.tier == "disk" and host.nvme_capacity_bytes is None:
            out.append(PlanWarning(f"{host.key} lists no NVMe: the disk tier's reload bandwidth is unknown"))
    return out


def link_bytes_per_s(tier: str, host, gpus: int) -> float | None:
    """One GPU's share of the path a tier reloads through (one direction): the host link for cpu; the
    NVMe read rate (or the NIC) shared by the replica's GPUs, capped by the host link, for disk (remote)."""
    if host is None:
        return None
    if tier == "cpu":
        return float(host.link_bytes_per_s)
    shared = host.nvme_read_bytes_per_s if tier == "disk" else host.nic_bytes_per_s
    if shared is None:
        return None
    return float(min(host.link_bytes_per_s, shared / max(1, gpus)))
