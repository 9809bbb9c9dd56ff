"""Offload tiers in a simulation: the trace's hit-rate curve and its knee, `cpu:auto`, and the tiers the pool gets.

`curve_doc` runs the one-pass LRU curve (kvplan.simulator.mrc) over a trace's prompt blocks
(kvplan.simulator.blocks) and gives it as --json and the HTML show it: the hit rate at sizes spaced
8% apart, the knee past the GPU pool (docs/offload.md) and the sizes reaching 90, 95 and 99% of the
reusable hits. `auto_tiers` sizes `cpu:auto` at the knee, rounded up to a whole GiB. `sim_tiers`
turns sized tiers (kvplan.engines.offload.OffloadPlan) into the simulator's (name, bytes per GPU,
reload bytes/s per GPU) with the host profile's links. `requested_tiers` checks the tiers a run asks for (and the
host) before any work, and `engine_tiers` sizes them as the engine does: the API's `simulate` (moved from kvplan/api.py,
round 37).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.offload import OffloadPlan, check_backend, offload_pools
from kvplan.hardware.hosts import find_host
from kvplan.planning.offload import TierRequest, parse_offload
from kvplan.simulator.blocks import BLOCK_TOKENS, block_accesses
from kvplan.simulator.mrc import Curve, stack_distances
from kvplan.simulator.traces import hash_block_tokens

GIB = 2**30
POINT_STEP = 1.08  # the curve's sizes, 8% apart


def curve_doc(requests, bytes_per_token_all_gpus: int, gpu_pool_tokens: int,
              block_tokens: int = BLOCK_TOKENS) -> tuple[dict, Curve]:
    """The trace's LRU hit-rate curve as --json and the page show it, and the Curve itself, in blocks of
    `block_tokens` (the trace's hash block: Mooncake's 512, Qwen Bailian's 16; 512 for kvplan's own)."""
    curve = stack_distances(block_accesses(requests, block_tokens))
    cum = curve.cumulative()
    n = max(1, curve.accesses)
    sizes, c = [], 1
    while c < curve.max_distance:
        sizes.append(c)
        c = max(c + 1, int(c * POINT_STEP))
    sizes.append(curve.max_distance)
    unit = block_tokens * bytes_per_token_all_gpus

    def point(blocks: int) -> dict:
        b = min(blocks, curve.max_distance)
        return {"blocks": blocks, "tokens": blocks * block_tokens, "bytes": blocks * unit,
                "hit_pct": 100.0 * cum[b] / n if b >= 0 else 0.0}

    knee = curve.knee(gpu_pool_tokens // block_tokens)
    return {"block_tokens": block_tokens, "accesses": curve.accesses, "cold_misses": curve.cold,
            "max_hit_pct": 100.0 * cum[-1] / n, "gpu_pool_tokens": gpu_pool_tokens,
            "knee": point(knee), "for_pct_of_max": {str(f): point(curve.size_for(f / 100)) for f in (90, 95, 99)},
            "points": [[p["tokens"], p["bytes"], round(p["hit_pct"], 4)] for p in map(point, sizes)]}, curve


def auto_tiers(doc: dict, tiers: tuple[TierRequest, ...]) -> tuple[tuple[TierRequest, ...], int]:
    """`cpu:auto` -> the knee's size rounded up to a whole GiB (the tier's bytes for the whole deployment),
    and that size; refused when the GPU pool already keeps every block the trace reuses."""
    knee = doc["knee"]["bytes"]
    if knee <= 0:
        raise KvplanError(f"{arg('offload')} cpu:auto: the GPU pool already keeps every block this trace reuses; "
                          "no host tier pays", EXIT_USAGE, param="offload", value="cpu:auto")
    size = -(-knee // GIB) * GIB
    return tuple(TierRequest("cpu", size_bytes=size) if t.auto else t for t in tiers), size


def sim_tiers(op, token_bytes_per_gpu: int, host, gpus: int) -> tuple:
    """The simulator's tiers: (name, bytes per GPU the tier's tokens take, the link one GPU reloads over, or
    None without a host profile). A tier that does not keep evicted prefixes (V0's swap space) is refused."""
    out = []
    for p in op.tiers:
        if p.holds != "prefix":
            raise KvplanError(f"{arg('offload')} {p.tier}: {p.engine} keeps {p.holds} requests' blocks, not evicted "
                              "prefixes; simulate models prefix tiers only (choose a release with a prefix tier)",
                              EXIT_USAGE, param="offload")
        bw = host.reload_bytes_per_s(p.tier, gpus) if host is not None else None
        out.append((p.tier, p.tokens * token_bytes_per_gpu, bw))
    return tuple(out)


def engine_tiers(engine, res, spec, sim, dep, requests, fmt, tiers, backend: str, host) -> OffloadPlan:
    """The tiers a simulate run asked for as `engine` sizes them; cpu:auto at the knee of the trace's hit-rate curve,
    in its blocks."""
    if any(t.auto for t in tiers):
        block = hash_block_tokens(fmt) or BLOCK_TOKENS
        tiers = auto_tiers(curve_doc(requests, sim.token_bytes() * dep.tp, res.capacity.tokens, block)[0], tiers)[0]
    return offload_pools(engine, res.plan, spec, tiers, backend, host)


def requested_tiers(offload: str | None, backend: str, host, prefix_pool: bool, trace) -> tuple:
    """The tiers a simulate run asks for and the host profile (a name, a YAML file or a Host), checked before any work:
    they keep evicted prefixes (`prefix_pool`: the paged pool with prefix caching); cpu:auto needs a `trace`."""
    tiers = parse_offload(offload)
    check_backend(backend)
    if not tiers and (backend != "native" or host is not None):
        raise KvplanError(f"{arg('offload_backend')} and {arg('host')} describe offload tiers: give {arg('offload')} "
                          "too", EXIT_USAGE, param="offload")
    if tiers and not prefix_pool:
        raise KvplanError(f"{arg('offload')} keeps evicted prefix blocks: it needs the paged pool with prefix caching",
                          EXIT_USAGE, param="offload", value=offload)
    if any(t.auto for t in tiers) and trace is None:
        raise KvplanError(f"{arg('offload')} cpu:auto sizes the tier from a trace's hit-rate curve: give "
                          f"{arg('trace')}",
                          EXIT_USAGE, param="offload", value=offload)
    return tiers, (find_host(host) if isinstance(host, str) else host)
