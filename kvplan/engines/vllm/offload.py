"""vLLM's CPU tier by release: V0's swap space, then the OffloadingConnector's host blocks, restated from source.

* Before 0.8.0 (V0, the default engine): `--swap-space` GiB per GPU (default 4), the CPU blocks every
  worker allocates for preempted sequences (not a prefix cache). `CacheConfig.swap_space_bytes =
  swap_space * 2^30` (vllm/config.py, v0.6.6); the worker's `determine_num_available_blocks`
  (vllm/worker/worker.py, v0.6.6) takes `num_cpu_blocks = int(swap_space_bytes // cache_block_size)`
  with `CacheEngine.get_cache_block_size` (vllm/worker/cache_engine.py, vllm-project/vllm@60b652b7):
  `dtype_size x num_layers x 2 x block_size x num_kv_heads x head_size`, the layers and KV heads of
  one rank, every attention layer full-length (V0 had no sliding-window pool). The executor prints
  `# GPU blocks: G, # CPU blocks: C`. `CacheConfig.verify_with_parallel_config` refuses to start
  when `swap_space_bytes x tp` exceeds 70% of the host's total memory ("Too large swap space") and
  warns above 40% ("Possibly too large swap space").
* 0.8.0 to 0.10.x (V1 by default): no CPU tier until the connector.
* 0.11.0 to 0.13.x: the OffloadingConnector (registered in kv_connector/factory.py and
  v1/kv_offload/ in the 0.11.0 wheel, absent from the 0.10.2 wheel), `--kv-transfer-config` with
  extra_config `num_cpu_blocks`, the blocks every rank allocates (v1/kv_offload/cpu.py; vLLM's
  offloading blog, "For older releases").
  kvplan picks that count as bytes // the whole-deployment block bytes (below). 0.13.0 already has
  `--kv-offloading-size`, but its native path writes `num_cpu_blocks: 0` (config/vllm.py: "the actual
  calculation for num_cpu_blocks should be done after the model's KV cache is initialized"), which
  0.13.0's CPUOffloadingSpec refuses ("num_cpu_blocks must be specified"): read in the 0.13.0 wheel.
* 0.14.0 on (the 0.14.0 wheel): `--kv-offloading-size GiB` (float, "the total buffer size summed across
  all TP ranks", config/cache.py) with `--kv-offloading-backend native` (the default);
  `VllmConfig._post_init_kv_transfer_config` (config/vllm.py) sets `cpu_bytes_to_use =
  kv_offloading_size * (1 << 30)`, and `CPUOffloadingSpec.__init__` (v1/kv_offload/cpu.py; also
  vllm-project/vllm@02fcc613): `kv_bytes_per_block = page_size_bytes * len(kv_cache_tensors) *
  world_size`, one page size for every group (asserted), `num_blocks = int(cpu_bytes_to_use) //
  (kv_bytes_per_block * offloaded_block_size // gpu_block_size)`; the offloaded block is extra_config
  `block_size`, the GPU block by default (v1/kv_offload/spec.py). `page_size_bytes *
  len(kv_cache_tensors)` is one rank's bytes of one GPU block across its layers: block_size x that
  rank's bytes per token. 0.14.0 holds the blocks in pinned tensors (v1/kv_offload/worker/cpu_gpu.py);
  vLLM's later source maps one region for every rank at /dev/shm/vllm_offload_{instance_id}.mmap
  (`SharedMmapRegion`), so from 0.15.0 kvplan checks the tier against /dev/shm: the first release with
  the mapping is not pinned (kvplan read no wheel between 0.14.0 and it).
"""

from __future__ import annotations

import json

from kvplan.core.errors import arg
from kvplan.engines.base import parse_version
from kvplan.planning.offload import Geometry, TierPool, TierRequest, check_kinds, refuse

V1_DEFAULT_SINCE = (0, 8, 0)
CONNECTOR_SINCE = (0, 11, 0)
SIZE_FLAG_SINCE = (0, 14, 0)
DEV_SHM_SINCE = (0, 15, 0)  # not pinned: after 0.14.0 (pinned tensors), by vLLM's 2026 source (module docstring)
DEFAULT_SWAP_GIB = 4
# vllm/config.py CacheConfig.verify_with_parallel_config: swap x tp against the host's total memory
SWAP_LIMITS = ((0.7, "vLLM refuses to start (Too large swap space)"),
               (0.4, "vLLM warns (Possibly too large swap space)"))


def cpu_pool(req: TierRequest, g: Geometry, block_size_factor: int = 1) -> TierPool:
    """The CPU tier `req` asks for, as the vLLM release `g.version` sizes it."""
    v = parse_version(g.version)
    if v < V1_DEFAULT_SINCE:
        return swap_pool(req, g)
    if v < CONNECTOR_SINCE:
        raise refuse(f"vllm {g.version} (V1) has no CPU KV tier: the OffloadingConnector arrived in 0.11.0 (a run "
                     "that falls back to V0 keeps V0's swap space, not planned for 0.8-0.10: "
                     f"kvplan.engines.vllm.v0_fallback); choose {arg('engine_version')} 0.11.0 or later, or 0.6.6 for "
                     "V0's swap")
    check_kinds(g, why="vLLM's CPUOffloadingSpec asserts one page size for every KV-cache group")
    world_block = g.block_size * block_size_factor * g.bytes_per_token * g.ranks
    asked = g.whole(req)
    notes = []
    if v >= SIZE_FLAG_SINCE:
        gib = asked / 2**30  # exact: a power-of-two division of an integer below 2^53
        cpu_bytes = int(gib * (1 << 30))
        blocks = cpu_bytes // world_block
        flag = f"--kv-offloading-backend native --kv-offloading-size {gib!r}"
        total = cpu_bytes  # one shared region of cpu_bytes_to_use for every rank
        rule = (f"int({gib!r} x 2^30) // ({g.block_size} x {block_size_factor} x {g.bytes_per_token:,} B x "
                f"{g.ranks} ranks) = {blocks:,} blocks (vllm/v1/kv_offload/cpu.py CPUOffloadingSpec)")
    else:
        blocks = asked // world_block
        extra = {"num_cpu_blocks": blocks}
        cfg = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}
        flag = f"--kv-transfer-config '{json.dumps(cfg, separators=(',', ':'))}'"
        total = blocks * world_block
        rule = (f"num_cpu_blocks = {asked:,} B // ({g.block_size} x {g.bytes_per_token:,} B x {g.ranks} ranks) "
                f"= {blocks:,} (each rank allocates that many of its blocks)")
        notes.append(f"vllm {g.version} takes a block count, not a size: kvplan chose num_cpu_blocks")
    tokens = blocks * g.block_size * block_size_factor
    return TierPool("cpu", f"vllm {g.version} OffloadingConnector", flag, total // g.ranks, g.ranks, total,
                    blocks, g.block_size * block_size_factor, tokens, g.contexts(tokens), rule, tuple(notes),
                    in_dev_shm=v >= DEV_SHM_SINCE)


def swap_blocks(swap_bytes_per_rank: int, block_size: int, bytes_per_token: int) -> int:
    """V0's `# CPU blocks`: int(swap_space_bytes // cache_block_size), the block one rank's layers take."""
    return swap_bytes_per_rank // (block_size * bytes_per_token)


def swap_pool(req: TierRequest, g: Geometry) -> TierPool:
    """V0's swap space: `--swap-space` GiB on every GPU's worker (the size asked, split over the ranks). Every
    attention layer's block is full-length in V0 (a sliding-window layer too); V0's MLA cache is not read."""
    check_kinds(g, ("full", "sliding"), "V0's cache block of an MLA or recurrent layer is not modelled")
    per_rank = g.whole(req) // g.ranks
    gib = per_rank / 2**30
    swap = int(gib * 2**30)
    blocks = swap_blocks(swap, g.block_size, g.bytes_per_token)
    tokens = blocks * g.block_size
    rule = (f"int({gib!r} x 2^30 // ({g.block_size} x {g.bytes_per_token:,} B)) = {blocks:,} CPU blocks per rank "
            "(vllm/worker/worker.py determine_num_available_blocks; printed as # CPU blocks)")
    notes = (f"V0's swap space holds the blocks of preempted requests, not evicted prefixes; vLLM V0 allocates "
             f"{DEFAULT_SWAP_GIB} GiB per GPU when the flag is not given",)
    return TierPool("cpu", f"vllm {g.version} swap space (V0)", f"--swap-space {gib!r}", swap, g.ranks,
                    swap * g.ranks, blocks, g.block_size, tokens, g.contexts(tokens), rule, notes,
                    holds="preempted", dram_limits=SWAP_LIMITS)
