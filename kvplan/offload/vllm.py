"""vLLM's CPU tier: the OffloadingConnector's host blocks, restated from its source.

* 0.14.0 on: `--kv-offloading-size GiB` (float, the whole deployment) with `--kv-offloading-backend
  native`; `VllmConfig._post_init_kv_transfer_config` (vllm/config/vllm.py) sets
  `cpu_bytes_to_use = kv_offloading_size * (1 << 30)` for the OffloadingConnector (PR #24498; vLLM's
  offloading blog of 2026-01-08 names 0.14.0).
* `CPUOffloadingSpec.__init__` (vllm-project/vllm@02fcc613, vllm/v1/kv_offload/cpu.py):
  `kv_bytes_per_block = page_size_bytes * len(kv_cache_tensors) * world_size`, one page size for
  every group (hybrid models are asserted away); `num_blocks = int(cpu_bytes_to_use) //
  (kv_bytes_per_block * block_size_factor)`. The factor is the offloaded block over the GPU block
  (vllm/v1/kv_offload/spec.py@0072b0b7: `lcm` of the GPU block sizes, or extra_config
  `block_size`), 1 by default. `page_size_bytes * len(kv_cache_tensors)` is one rank's bytes for one
  GPU block across its layers: block_size x that rank's bytes per token.
* 0.11.0 to 0.13.x: no size flag; `--kv-transfer-config` with extra_config `num_cpu_blocks`, the
  blocks every rank allocates (the blog's "For older releases"). kvplan picks that count as
  bytes // the same whole-deployment block bytes.
Before 0.11.0 there is no OffloadingConnector.
"""

from __future__ import annotations

import json

from kvplan.offload.tiers import Geometry, TierPool, TierRequest, refuse

SIZE_FLAG_SINCE = (0, 14, 0)
CONNECTOR_SINCE = (0, 11, 0)


def cpu_pool(req: TierRequest, g: Geometry, block_size_factor: int = 1) -> TierPool:
    from kvplan.engines.base import parse_version

    v = parse_version(g.version)
    if v < CONNECTOR_SINCE:
        raise refuse(f"vllm {g.version} has no KV offloading connector (it arrived in 0.11.0); "
                     "choose --engine-version 0.11.0 or later")
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
                    in_dev_shm=v >= SIZE_FLAG_SINCE)
