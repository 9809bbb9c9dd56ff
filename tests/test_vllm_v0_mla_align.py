"""vLLM V0's MLA cache entry padded to 256 bytes on CUDA (0.7.2 to 0.8.0; kvplan.engines.vllm.pool.ALIGNED_MLA).

Golden figures from vllm-project/vllm#14842 (LucasWilkinson, 2025-03-14, "[Attention] Get rid of mla cache
alignment"): DeepSeek-R1, `vllm serve ... --tensor-parallel-size 8` on the V0 engine (VLLM_USE_V1=0), a main-branch
build of 2025-03-14 (between 0.7.3 and 0.8.0), max_model_len 163,840 (the model's default), FlashMLA's 64-token block
(4,739 x 64 / 163,840 = 1.85, as printed):
    padded   (VLLM_MLA_CUDA_MEM_ALIGN_KV_CACHE=1): "# cuda blocks: 4739" ... "Maximum concurrency for 163840 tokens
             per request: 1.85x"
    unpadded (=0, and the PR itself):              "# cuda blocks: 5266" ... "2.06x"
The same server, so the same KV budget B both times. Hand arithmetic (61 layers, 576 latent values in bf16):
    padded block   64 x 61 x 640 x 2 = 4,997,120 B;  unpadded 64 x 61 x 576 x 2 = 4,497,408 B
    4,739 blocks: 23,681,351,680 <= B < 23,686,348,800;  5,266 blocks: 23,683,350,528 <= B < 23,687,847,936
    both hold for B in [23,683,350,528, 23,686,348,800): B = 23,684,000,000 below.
    concurrency 4,739 x 64 / 163,840 = 1.851 (printed 1.85x); 5,266 x 64 / 163,840 = 2.057 (2.06x).
The padding rule itself: vllm 0.7.2 / 0.7.3 wheels, vllm/worker/cache_engine.py L132-137 and L156-158.
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import KV_DTYPES
from kvplan.engines import resolve_engine
from kvplan.engines.vllm import engine as vllm
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

BF16 = KV_DTYPES["bf16"]
B = 23_684_000_000  # the budget both of #14842's runs divide into their block counts (module docstring)
LEN = 163_840


def _pool_and_cap(version: str, gpu: str, block: int):
    ds = find_in_catalog("deepseek-r1")
    st = vllm.settings(ds, find_gpu(gpu), Deployment(8), Request(context=LEN), version, {},
                       {"block_size": block})
    pool = vllm.build_pool(ds.layers, 8, BF16, BF16, st)
    return pool, vllm.capacity(ds, Deployment(8), B, LEN, 1, st, BF16, BF16)


def test_v0_mla_padded_on_cuda_matches_14842():
    pool, cap = _pool_and_cap("0.7.3", "h200", 64)
    assert pool.bytes_per_block == 4_997_120  # 64 x 61 x 640 x 2
    assert cap.blocks == 4_739  # "# cuda blocks: 4739"
    assert cap.max_concurrency == pytest.approx(1.851, abs=1e-3)  # printed 1.85x


def test_unpadded_releases_and_rocm_keep_576():
    # V1 (0.8.0 on) never padded: the same budget gives the unpadded run's 5,266 blocks.
    pool, cap = _pool_and_cap("0.8.5", "h200", 64)
    assert pool.bytes_per_block == 4_497_408 and cap.blocks == 5_266  # "# cuda blocks: 5266"
    # ROCm: _align_cache asks current_platform.is_cuda(); 0.7.1 predates the padding (#12676 opened 2025-02-03).
    for version, gpu in (("0.7.3", "mi300x"), ("0.7.1", "h200")):
        pool, _ = _pool_and_cap(version, gpu, 64)
        assert pool.bytes_per_block == 4_497_408, (version, gpu)


def _plan(version: str, gpu: str):
    engine = resolve_engine("vllm", version=version, block_size=64)
    return engine.plan(find_in_catalog("deepseek-r1"), find_gpu(gpu), Deployment(8), Request(LEN))


def test_kv_per_token_is_the_padded_pools():
    # The padding rule: vllm 0.7.3 wheel, vllm/worker/cache_engine.py L132-137 (get_cache_block_size:
    # key_cache_entry = num_heads x head_size = 576, rounded by align_to_256bytes when _align_cache) and L156-158
    # (align_to_256bytes: cdiv(entry x 2 B, 256) x 256 / 2 B = 640 elements). A token-layer is 640 x 2 = 1,280 B:
    #   per GPU (each of the 8 ranks holds the whole latent) 61 x 1,280 = 78,080 B; all GPUs 8 x 78,080 = 624,640 B
    #   one 163,840-token sequence per GPU (2,560 whole 64-token blocks) 163,840 x 78,080 = 12,792,627,200 B
    # what a decode reads stays the 576 values: 163,840 x 61 x 576 x 2 = 11,513,364,480 B
    plan = _plan("0.7.3", "h200")
    assert plan.kv_bytes_per_token_per_gpu == 78_080 and plan.kv_bytes_per_token == 624_640
    assert plan.kv_bytes_per_sequence_per_gpu == 12_792_627_200
    assert plan.stages[0].profile.sequence_bytes(LEN, paged=False) == 11_513_364_480
    # the pool divides by the same bytes: 64 x 78,080 = 4,997,120 a block
    assert 64 * plan.kv_bytes_per_token_per_gpu == 4_997_120
    # ROCm (is_cuda() false) and V1 keep 576 values: 61 x 1,152 = 70,272 B a GPU
    assert _plan("0.7.3", "mi300x").kv_bytes_per_token_per_gpu == 70_272
    assert _plan("0.8.5", "h200").kv_bytes_per_token_per_gpu == 70_272
