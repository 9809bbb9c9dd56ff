"""SGLang HiCache's host pool (L2), restated from its source.

`HostKVCache.__init__` (sgl-project/sglang@049f8e64, python/sglang/srt/mem_cache/pool_host/base.py),
per rank (each TP rank builds its own pool):
* `--hicache-size N` (whole GB, decimal, per rank; overrides the ratio):
  `size = int(N * 1e9 // size_per_token)`;
* else `--hicache-ratio r` (default 2.0): `size = int(device_pool.size * r)`;
* then `page_num = size // page_size + 1` and `size = page_num * page_size` (always one page more);
* a warning when `size <= device_pool.size` ("L2 cache effectiveness is reduced");
* a refusal when `size * size_per_token > psutil available - HICACHE_HOST_MEMORY_RESERVE_BYTES`
  (10 GiB): kvplan checks the node's ranks together against the host profile (pools).
`size_per_token` is one rank's bytes per token across its layers (MHA:
`head_dim * head_num * layer_num * itemsize * 2`, pool_host/mha.py@0047d999; MLA: the latent and
rope dims once) - the device pool's cell. Modelled from 0.4.9 (kvplan's first SGLang release with
`--hicache-size`).
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.engines.base import parse_version
from kvplan.planning.offload import Geometry, TierPool, TierRequest, refuse

SINCE = (0, 4, 9)
RESERVE = 10 * 2**30  # HICACHE_HOST_MEMORY_RESERVE_BYTES


def cpu_pool(req: TierRequest, g: Geometry) -> TierPool:
    if parse_version(g.version) < SINCE:
        raise refuse(f"sglang {g.version}: HiCache's host pool is modelled from 0.4.9 on; choose a later "
                     f"{arg('engine_version')}")
    page, bpt = g.block_size, g.bytes_per_token
    notes = []
    if req.ratio is not None:
        size = int(g.device_tokens * req.ratio)
        flag = f"--enable-hierarchical-cache --hicache-ratio {req.ratio:g}"
        how = f"int({g.device_tokens:,} device tokens x {req.ratio:g})"
    else:
        per_rank = req.size_bytes // g.ranks
        gb = per_rank // 10**9
        if gb < 1:
            raise refuse(f"{arg('offload')} cpu: {per_rank:,} B per rank is under 1 GB, and SGLang's --hicache-size "
                         "takes whole GB per rank")
        if gb * 10**9 != per_rank:
            notes.append(f"--hicache-size takes whole GB per rank: {per_rank:,} B per rank rounded down to {gb} GB")
        size = int(gb * 1e9 // bpt)
        flag = f"--enable-hierarchical-cache --hicache-size {gb}"
        how = f"int({gb} x 1e9 // {bpt:,} B)"
    page_num = size // page + 1
    tokens = page_num * page
    if tokens <= g.device_tokens:
        notes.append(f"SGLang warns: host pool ({tokens:,} tokens) not larger than the device pool "
                     f"({g.device_tokens:,}); L2 cache effectiveness is reduced")
    rule = (f"{how} = {size:,} tokens; ({size:,} // page {page} + 1) x {page} = {tokens:,} tokens per rank "
            "(pool_host/base.py HostKVCache)")
    per = tokens * bpt
    return TierPool("cpu", f"sglang {g.version} HiCache", flag, per, g.ranks, per * g.ranks, page_num, page,
                    tokens, g.contexts(tokens), rule, tuple(notes))
