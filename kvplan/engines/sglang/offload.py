"""SGLang HiCache's host pool (L2), by release, restated from its source.

`HostKVCache.__init__` (python/sglang/srt/mem_cache/memory_pool_host.py in the 0.4.9-0.5.14 wheels;
pool_host/base.py from 0.5.15, sgl-project/sglang@712c0617), per rank (each TP rank builds its own):
* `--hicache-size N` (whole GB, decimal, per rank; overrides the ratio): `size = int(N * 1e9 //
  size_per_token)`; else `--hicache-ratio r` (default 2.0): `size = int(device_pool.size * r)`;
* pages: through 0.5.5 `size -= size % page_size` (whole pages, rounded down); from 0.5.6 `page_num =
  size // page_size + 1`, `size = page_num * page_size` (always one page more);
* a host pool not larger than the device pool: through 0.5.14 an assertion ("The host memory should
  be larger than the device memory with the current protocol": the server does not start); from
  0.5.15 a warning ("L2 cache effectiveness is reduced");
* a refusal (ValueError "Not enough host memory available. Requesting X GB but only have Y GB free")
  when `size * size_per_token` exceeds the host's available memory less 10 GiB
  (`HICACHE_HOST_MEMORY_RESERVE_BYTES`; 0.5.23 divides that by the ranks on the host): kvplan checks the
  node's ranks together against the host profile (kvplan.engines.offload). Up to 0.4.9 the message
  printed the available memory before the reserve (PR #8102, 2025-07-17, changed it); else it logs
  "Allocating X GB host memory for hierarchical KV cache." (0.5.23: "... host pool: N tokens, X GB").
`size_per_token` is one rank's bytes per token across its layers (MHA: `head_dim * head_num *
layer_num * itemsize * 2`; MLA: `(kv_lora_rank + qk_rope_head_dim) * itemsize * layer_num`): the
device pool's cell. Pinned on the released wheels 0.4.9, 0.5.3, 0.5.4, 0.5.5, 0.5.6, 0.5.10, 0.5.13,
0.5.14, 0.5.15, 0.5.16 and 0.5.23; `--hicache-size` is in 0.4.9's server_args.py (`hicache_size: int = 0`),
kvplan's first SGLang release with it.
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.engines.base import parse_version
from kvplan.planning.offload import Geometry, TierPool, TierRequest, check_kinds, refuse

SINCE = (0, 4, 9)
PLUS_ONE_PAGE_SINCE = (0, 5, 6)
WARNS_SINCE = (0, 5, 15)  # before: an assertion, the server does not start
RESERVE = 10 * 2**30  # HICACHE_HOST_MEMORY_RESERVE_BYTES


def host_tokens(size: int, page: int, version: tuple[int, ...]) -> tuple[int, int]:
    """(pages, tokens) of a host pool asked for `size` tokens, as the release rounds it."""
    if version >= PLUS_ONE_PAGE_SINCE:
        pages = size // page + 1
    else:
        pages = size // page
    return pages, pages * page


def cpu_pool(req: TierRequest, g: Geometry) -> TierPool:
    v = parse_version(g.version)
    if v < SINCE:
        raise refuse(f"sglang {g.version}: HiCache's host pool is modelled from 0.4.9 on; choose a later "
                     f"{arg('engine_version')}")
    check_kinds(g)
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
    pages, tokens = host_tokens(size, page, v)
    if tokens <= g.device_tokens:
        if v < WARNS_SINCE:
            raise refuse(f"sglang {g.version} does not start: its host pool ({tokens:,} tokens per rank) must be "
                         f"larger than the device pool ({g.device_tokens:,}) (an assertion in HostKVCache); give a "
                         f"larger {arg('offload')} cpu tier")
        notes.append(f"SGLang warns: host pool ({tokens:,} tokens) not larger than the device pool "
                     f"({g.device_tokens:,}); L2 cache effectiveness is reduced")
    rounding = (f"({size:,} // page {page} + 1) x {page}" if v >= PLUS_ONE_PAGE_SINCE
                else f"{size:,} - {size:,} % page {page}")
    rule = f"{how} = {size:,} tokens; {rounding} = {tokens:,} tokens per rank (HostKVCache)"
    per = tokens * bpt
    return TierPool("cpu", f"sglang {g.version} HiCache", flag, per, g.ranks, per * g.ranks, pages, page,
                    tokens, g.contexts(tokens), rule, tuple(notes))
