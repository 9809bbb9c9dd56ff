"""PyTorch's CUDA caching allocator as kvplan replays it (kvplan.core.caching_allocator), and the weights as loaded
it gives SGLang (kvplan.planning.tensors, kvplan.engines.sglang.loaded), against PyTorch's source and an SGLang log.

Constants and rules: c10/cuda/CUDACachingAllocator.cpp, pytorch/pytorch@eb42ad6e L47-48 and L117-124
(kLargeBuffer 20971520, kMinBlockSize 512, kSmallSize 1048576, kSmallBuffer 2097152, kMinLargeAlloc 10485760,
kRoundLarge 2097152); `round_size`, `get_allocation_size`, `should_split` (large pool: split when remaining >
kSmallSize; small pool or expandable segments: remaining >= kMinBlockSize) and `get_free_block` (best fit) read at
pytorch/pytorch@001074d2 (read 2026-12-02).
"""

from __future__ import annotations

from kvplan.core.caching_allocator import (
    LARGE_BUFFER, MIN_BLOCK, MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER, SMALL_SIZE, reserved_bytes, round_size,
    rounding_bytes, segment_size,
)
from kvplan.engines import resolve_engine
from kvplan.engines.sglang import loaded
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment, split_layers
from kvplan.planning.plan import Request
from kvplan.planning.tensors import rank_tensors
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20
GIB = 2**30


def test_constants_are_pytorchs():
    # the literals of CUDACachingAllocator.cpp, written out
    assert (MIN_BLOCK, SMALL_SIZE, SMALL_BUFFER) == (512, 1048576, 2097152)
    assert (LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE) == (20971520, 10485760, 2097152)


def test_round_size_and_segment_size():
    # round_size: at least 512, a multiple of 512
    assert [round_size(s) for s in (1, 512, 513, 10_000)] == [512, 512, 1024, 10_240]
    # get_allocation_size: <= 1 MiB -> 2 MiB; < 10 MiB -> 20 MiB; else rounded up to 2 MiB
    assert segment_size(1 * MIB) == 2 * MIB
    assert segment_size(1 * MIB + 1) == 20 * MIB
    assert segment_size(10 * MIB - 512) == 20 * MIB
    assert segment_size(10 * MIB) == 10 * MIB
    assert segment_size(17 * MIB + MIB // 2) == 18 * MIB  # QwQ's qkv at tp 4, 17.5 MiB
    assert segment_size(12 * MIB + MIB // 2) == 14 * MIB  # its o, 12.5 MiB


def test_mid_size_requests_share_20_mib_segments():
    # 4 MiB each: one 20 MiB segment holds five (each split leaves > 1 MiB, the fifth takes the last 4 MiB whole)
    assert reserved_bytes((4 * MIB,) * 5) == 20 * MIB
    assert reserved_bytes((4 * MIB,) * 6) == 40 * MIB


def test_split_rule_decides_what_a_remainder_serves():
    # 12.5 MiB -> a 14 MiB segment; its 1.5 MiB tail (> 1 MiB) is split off and serves a 1.25 MiB request
    assert reserved_bytes((12 * MIB + MIB // 2, MIB + MIB // 4)) == 14 * MIB
    # 17.5 MiB -> an 18 MiB segment; its 0.5 MiB tail (<= 1 MiB) stays with the tensor, so a 1.25 MiB request
    # takes a fresh 20 MiB segment
    assert reserved_bytes((17 * MIB + MIB // 2, MIB + MIB // 4)) == 38 * MIB
    # small requests pack into 2 MiB segments: 1,000 x 1 KiB = 1,024,000 B, one segment
    assert reserved_bytes((1024,) * 1000) == 2 * MIB
    assert reserved_bytes((1024,) * 2049) == 4 * MIB  # 2,049 KiB > 2 MiB


def test_expandable_segments_round_only_the_last_page():
    # QwQ's four big tensors of one layer at tp 4: 17.5 + 12.5 + 135 + 67.5 = 232.5 MiB -> 240 MiB in 20 MiB pages,
    # against 18 + 14 + 136 + 68 = 236 MiB in their own segments
    layer = tuple(int(x * MIB) for x in (17.5, 12.5, 135, 67.5))
    assert reserved_bytes(layer, expandable=True) == 240 * MIB
    assert reserved_bytes(layer) == 236 * MIB
    assert rounding_bytes(layer) == int(3.5 * MIB)


def test_qwq32b_tp4_rounding_by_hand():
    """QwQ-32B (qwen2.5-32b's architecture) at tp 4, bf16: hidden 5120, 40 heads, 8 KV heads x 128, MLP 27648,
    vocabulary 152064, 64 layers, untied head. Per rank: qkv (1280 + 2 x 256) x 5120 x 2 B = 17.5 MiB, o 12.5 MiB,
    gate_up 2 x 6912 x 5120 x 2 B = 135 MiB, down 67.5 MiB: segments 18, 14, 136, 68, 3.5 MiB over a layer, x 64 =
    224 MiB; embedding and LM head 152064 / 4 x 5120 x 2 B = 371.25 MiB each -> 372, 2 x 0.75 MiB. Norms: 129 x
    10,240 B = 1,320,960 B in one 2 MiB small segment, 776,192 B over. Total 225.5 MiB + 776,192 B."""
    model = find_in_catalog("qwen2.5-32b")
    tensors = rank_tensors(model, tp=4)
    assert tensors[:5] == (389_283_840, 18_350_080, 13_107_200, 141_557_760, 70_778_880)
    assert rounding_bytes(tensors) == int(225.5 * MIB) + 776_192


def test_qwq32b_tp4_weights_as_loaded_match_the_log():
    """didier-durand/llms-in-clouds docs/sglang.md (2025-03-08), SGLang 0.4.3.post4 on 4x L4, --tp 4, QwQ-32B:
    "Load weight end. ... avail mem=6.09 GB, mem usage=15.54 GB" (GB = GiB, two decimals). kvplan's weights as
    loaded (checkpoint split + fp32 RoPE table + the allocator's rounding) and free memory after them (the L4's
    torch total 22,558 MiB less the 409 MiB booked before loading less the weights) land within the printed
    rounding; the checkpoint alone was 0.22 GiB short and the free memory 0.24 GiB short before."""
    gpu = find_gpu("l4")
    res = resolve_engine("sglang", "0.4.3", ["mem_fraction_static=0.85"]).result(
        find_in_catalog("qwen2.5-32b"), gpu, Deployment(4, 1), Request(context=32768))
    weights = res.plan.weight_bytes_per_gpu
    assert abs(weights / GIB - 15.54) <= 0.006
    assert abs((gpu.memory_usable_bytes - res.settings["init_bytes"] - weights) / GIB - 6.09) <= 0.011
    tokens = next(f.value[0] for f in res.capacity.lines if f.label == "KV Cache is allocated")
    assert abs(tokens - 46_611) / 46_611 <= 0.01  # printed #tokens: 46611


def test_pipeline_stage_and_tied_head():
    model = find_in_catalog("qwen2.5-32b")
    first = rank_tensors(model, tp=4, ranges=split_layers(model.num_layers, 2))
    assert first[0] == 389_283_840 and 389_283_840 not in first[1:]  # no LM head on the first of two stages
    assert len(first) == 1 + 32 * 6  # embedding, then 32 layers of qkv, o, gate_up, down and two norms


def test_packed_formats_are_not_listed():
    # gpt-oss: MXFP4 experts are packed (not listed); its bf16 attention is: qkv (64 + 16) x 64 x 2880 x 2 B
    model = find_in_catalog("gpt-oss-20b")
    tensors = rank_tensors(model)
    assert (64 + 2 * 8) * 64 * 2880 * 2 in tensors
    assert loaded.allocator_extra(model) == rounding_bytes(tensors)


def test_vllm_model_loading_counts_the_blocks_handed_out():
    """vLLM's "Model loading took" is `max_memory_allocated` after `empty_cache` (vllm-project/vllm@002db495
    `platforms/cuda.py` get_current_memory_usage): the blocks handed out, each keeping its segment's tail when that
    tail is 1 MiB or less (`should_split`). Qwen2.5-7B-Instruct at tp 1, bf16 (hidden 3584, 28 heads, 4 KV heads x
    128, MLP 18944, vocabulary 152064, untied): qkv (3584 + 1024) x 3584 x 2 B = 31.5 MiB keeps 0.5 MiB; o 24.5 MiB
    splits its 1.5 MiB tail off (0); gate_up 259 MiB keeps 1 MiB; down 129.5 keeps 0.5: 2 MiB a layer x 28 = 56 MiB,
    + 0.5 MiB each for the embedding and LM head (1,039.5 MiB) = 57 MiB. llm-d-planner@d3121e05
    accuracy/results/v0.19.0/logs/qwen-qwen2-5-7b-instruct--h100-80gb--tp1pp1dp1--8192.log (2026-04-22), vLLM 0.19.0
    on an H100: "Model loading took 14.25 GiB"; without the 57 MiB kvplan said 14.19."""
    from kvplan.core.caching_allocator import allocated_rounding

    model = find_in_catalog("qwen2.5-7b-instruct")
    assert allocated_rounding(rank_tensors(model)) == 57 * MIB
    res = resolve_engine("vllm", "0.19.0").result(model, find_gpu("h100-sxm"), Deployment(), Request(context=8192))
    assert abs(res.plan.weight_bytes_per_gpu / GIB - 14.25) <= 0.005
