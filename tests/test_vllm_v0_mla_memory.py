"""vLLM V0's MLA memory before 0.8.0 beside the KV cache (kvplan.engines.vllm.v0_mla; issue 22).

Sources: the vllm 0.7.1 / 0.7.3 wheels, `attention/backends/mla/utils.py` `process_weights_after_loading` (0.7.3
L232-389: W_Q_UK, W_UV_O requantized to fp8 for an fp8 checkpoint, W_QR in the model dtype, the dequantized kv_b_proj
kept by the W_UK / W_UV views); the vllm 0.8.0 wheel, `attention/backends/mla/common.py` L1097-1122 (after
vllm#14770: no W_Q_UK / W_UV_O) and its V0 prefill (`forward` L1329-1420, `_forward_prefill` L1226-1327). Shapes from
deepseek-ai/DeepSeek-R1's config.json: hidden 7,168, 128 heads, q_lora_rank 1,536, kv_lora_rank 512, nope 128, rope
64, v 128, 61 layers; DeepSeek-V2-Lite's: hidden 2,048, 16 heads, no q_lora_rank, 27 layers, bf16.
The log: vllm-project/vllm#14842 (DeepSeek-R1, TP8, V0, a main build of 2025-03-14, max_model_len 163,840), "# cuda
blocks: 4739" of 64 tokens padded to 1,280 B a token-layer: a budget of 23,684,000,000 B a GPU
(tests/test_vllm_v0_mla_align.py works it out).
"""

from __future__ import annotations

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.vllm import v0_mla
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30
LOG_BUDGET = 23_684_000_000  # vllm#14842's padded run (test_vllm_v0_mla_align.py)


def test_absorbed_weights_deepseek_r1_tp8_fp8():
    # per rank n = 128 / 8 = 16 heads; per layer:
    #   W_Q_UK fp8 1,536 x (16 x 512)  = 12,582,912 B; its scales (1,536/128) x (8,192/128) x 4 = 3,072 B
    #   W_UV_O fp8 (16 x 512) x 7,168  = 58,720,256 B; its scales (8,192/128) x (7,168/128) x 4 = 14,336 B
    #   W_QR bf16 1,536 x 16 x 64 x 2  =  3,145,728 B
    #   kv_b_proj dequantized bf16 512 x 16 x (128 + 128) x 2 = 4,194,304 B
    #   = 78,660,608 B a layer; x 61 = 4,798,297,088 B (4.47 GiB)
    r1 = find_in_catalog("deepseek-r1")
    assert v0_mla.absorbed_layer_bytes(r1, 8) == 78_660_608
    assert v0_mla.absorbed_bytes(r1, 8, (0, 7, 3)) == 4_798_297_088
    assert v0_mla.absorbed_bytes(r1, 8, (0, 7, 1)) == 4_798_297_088  # the 0.7.1 wheel's utils.py L327-389 too
    # 0.8.0 keeps only bf16 views of the dequantized kv_b_proj (#14770); 0.6.6 had no MLA backend
    assert v0_mla.absorbed_bytes(r1, 8, (0, 8, 0)) == 0 and v0_mla.absorbed_bytes(r1, 8, (0, 6, 6)) == 0


def test_absorbed_weights_deepseek_v2_lite_bf16():
    # no q_lora_rank: W_Q is q_proj itself, Lq = hidden 2,048; tp 1, 16 heads; bf16 copies, kv_b_proj's W_UK / W_UV
    # are views of the parameter (nothing added):
    #   W_Q_UK 2,048 x 16 x 512 x 2 = 33,554,432; W_UV_O 16 x 512 x 2,048 x 2 = 33,554,432; W_QR 2,048 x 16 x 64 x 2
    #   = 4,194,304 -> 71,303,168 B a layer; x 27 = 1,925,185,536 B
    lite = find_in_catalog("deepseek-v2-lite")
    assert v0_mla.absorbed_bytes(lite, 1, (0, 7, 3)) == 1_925_185_536


def test_profile_peak_deepseek_r1_tp8():
    # the MLA prefill's live tensors a token (module docstring, 2.), bf16 elements:
    #   residual + input 2 x 7,168; q_a out + norm 2 x 1,536; kv_a 576; latent 512; q 16 x 192 = 3,072;
    #   output buffer 7,168; kv_b 16 x 256 = 4,096; K + padded V 2 x 3,072; attention out 16 x 128 = 2,048; o_proj 7,168
    #   = 48,192 elements; then the larger of o_proj's fp8 input (2,048 + 2,048/128 x 4 = 2,112 B, during the GEMM)
    #   and, at TP 8, its all-reduced copy (7,168 x 2 = 14,336 B: vLLM's all-reduce is out of place, vllm 0.8.0
    #   wheel distributed/parallel_state.py L298-300, device_communicators/pynccl.py L122 torch.empty_like):
    #   48,192 x 2 + 14,336 = 110,720 B a token x 163,840 tokens = 18,140,364,800 B (16.89 GiB; 15.03 before the
    #   all-reduce copy; kvplan's generic V0 estimate gave 10.64 GiB)
    r1 = find_in_catalog("deepseek-r1")
    assert v0_mla.profile_peak(r1, 8, 163_840, (0, 7, 3)) == 18_140_364_800
    # one GPU: no all-reduce, so the fp8 input decides; n = 128 heads there: 2 x 7,168 + 2 x 1,536 + 576 + 512
    #   + 128 x 192 + 7,168 + 128 x 256 + 2 x 128 x 192 + 128 x 128 + 7,168 = 155,712 elements x 2 = 311,424 B,
    #   + 16,384 + 16,384/128 x 4 = 16,896 B -> 328,320 B a token
    assert v0_mla.profile_peak(r1, 1, 163_840, (0, 7, 3)) == 328_320 * 163_840
    assert v0_mla.profile_peak(r1, 8, 163_840, (0, 8, 0)) is None  # V1's own rules
    st = vllm.settings(r1, find_gpu("h200"), Deployment(8), Request(context=163_840), "0.7.3", {}, {})
    _, parts = vllm.overhead(r1, Deployment(8), st)
    assert parts["activation_peak"] == 18_140_364_800
    assert parts["weights_repack"] - 4_798_297_088 < GIB // 10  # the absorbed copies, beside the RoPE table etc.


def test_profile_peak_moe_side_at_6400_tokens():
    # dstack's resident context (3,200 in + 3,200 out): a MoE layer (fused_moe's chunk M = 6,400 < 32,768) peaks over
    # the MLA prefill's 6,400 x 110,720 = 708,608,000 B; E 256 experts, top-k 8, N = 2 x 2,048 / 8 = 512:
    #   residual, input, shared output 3 x 6,400 x 7,168 x 2            = 275,251,200
    #   router logits and top-k 6,400 x (256 x 2 + 2 x 8 x 4)           =   3,686,400
    #   cache13 + cache2 6,400 x 8 x (max(512, 7,168) + 256) x 2         = 760,217,600
    #   the chunk's fp8 input 6,400 x (7,168 + 7,168/128 x 4)            =  47,308,800
    #   = 1,086,464,000 B (after the experts: 5 x 6,400 x 7,168 x 2 + 3,686,400 = 462,438,400, lower)
    r1 = find_in_catalog("deepseek-r1")
    assert v0_mla.profile_peak(r1, 8, 6_400, (0, 7, 3)) == 1_086_464_000


def _budget(version: str) -> int:
    """kvplan's KV budget a GPU for vllm#14842's setting (`vllm serve` defaults, block 64)."""
    engine = resolve_engine("vllm", version=version, block_size=64)
    plan = engine.plan(find_in_catalog("deepseek-r1"), find_gpu("h200"), Deployment(8), Request(163_840))
    return plan.kv_memory_bytes_per_gpu


def test_14842_budget_and_what_is_left():
    # The log's budget 23,684,000,000 B (22.06 GiB) is the independent figure; kvplan's own (24.98 GiB here, its terms
    # worked by hand in the tests above) is not pinned, only held against the log: over it, by less than 14%, and by
    # what the plan's note states (UNEXPLAINED_GIB, the remainder said, not added; SMALLER_PCT, the pool's shortfall
    # in 4,997,120 B blocks against the log's 4,739)
    budget = _budget("0.7.3")
    left = (budget - LOG_BUDGET) / GIB
    assert left == pytest.approx(v0_mla.UNEXPLAINED_GIB, abs=0.1)
    assert 1 - 4_739 / (budget // 4_997_120) == pytest.approx(v0_mla.SMALLER_PCT / 100, abs=0.005)
    assert LOG_BUDGET < budget < 1.14 * LOG_BUDGET  # over by 13.3% (21.7% last round, 61.9% before)
    note = v0_mla.uncertainty_note(find_in_catalog("deepseek-r1"), (0, 7, 3))
    assert note and "vllm#14842" in note and v0_mla.uncertainty_note(find_in_catalog("deepseek-r1"), (0, 8, 5)) is None
