"""vLLM's Marlin MoE pads a GPTQ / AWQ rank's expert width N to P = round_up(N, lcm(64, group)) as it repacks the
experts (issue 22; marlin_moe_padded_intermediate, vLLM 0.33.0 wheel `quantization/utils/marlin_utils.py` L335-353;
the padded tensors, `fused_moe/oracle/int_wna16.py` L649-667 / L799-817): AWQ and GPTQ (without act-order) from
0.25.0 (auto_gptq.py 0.25.0-0.29.0 L246-248 `allow_tile_padding=not self.desc_act`), compressed-tensors WNA16 from
0.30.0, on Marlin (CUDA, 7.5+), not on Humming (9.0 from 0.32.0) nor where FlashInfer's TRT-LLM MxInt4 may go
first. kvplan.engines.vllm.marlin_moe_pad cites the rest."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan import api
from kvplan.engines.vllm import marlin_moe_pad
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import require_in_catalog

MIB = 2**20


def _qwen3(method: str = "awq", group: int = 32, bits: str = "int4"):
    base = require_in_catalog("qwen3-30b-a3b")  # hidden 2,048, 128 experts of 768, 48 MoE layers (its config.json)
    return dataclasses.replace(base, quantization=Quantization(method=bits, group_size=group, quant_method=method))


# Qwen3-30B-A3B at 4 bits, group 32, tp 8: N = 768 / 8 = 96 (a whole number of 32-groups, so Marlin takes it with
# padding), P = round_up(96, lcm(64, 32) = 64) = 128, d = 32. Per expert: qweight 3 x 2,048 x 32 x 4 / 8 = 98,304
# (w13 [2,048 / 8, 2 x 96 -> 2 x 128] int32: +256 x 64 x 4 = 65,536; w2 +32 rows of 2,048 / 8 int32 = 32,768);
# fp16 scales 2 x (2,048 / 32 x 2 x 32 + 32 / 32 x 2,048) = 12,288; packed zeros (4,096 + 2,048) x 4 / 8 = 3,072:
# 113,664 B. A layer's 128 experts 14,548,992 B; 48 layers 698,351,616 B = 666 MiB a GPU.
PER_GPU = 128 * (3 * 2048 * 32 * 4 // 8 + 2 * (64 * 2 * 32 + 2048) + (64 * 2 * 32 + 2048) * 4 // 8) * 48
# GPTQ at 0.25.0-0.26.x: its experts method does not pass w13_qzeros / w2_qzeros to the Marlin prep (vLLM 0.25.0 and
# 0.26.0 wheels, auto_gptq.py L661-674; 0.27.0 L717-718 passes them), so only the packed zeros stay unpadded:
# 128 experts x 48 layers x 3,072 B = 18,874,368 B less
GPTQ_NO_ZEROS = PER_GPU - 128 * 48 * 3072


def test_the_padding_in_bytes_by_hand():
    assert PER_GPU == 698_351_616 == 666 * MIB
    got = marlin_moe_pad.padded_bytes(_qwen3(), Deployment(8), (0, 30, 0), find_gpu("a100-sxm-80"))
    assert got == PER_GPU


@pytest.mark.parametrize("method, version, gpu, expected", [
    ("awq", "0.24.0", "a100-sxm-80", 0),  # no marlin_moe_padded_intermediate before 0.25.0
    ("awq", "0.25.0", "a100-sxm-80", PER_GPU),  # AutoAWQ's experts take allow_tile_padding=True
    ("gptq", "0.24.0", "a100-sxm-80", 0),  # the strict Marlin test (no allow_tile_padding): MoeWNA16
    ("gptq", "0.25.0", "a100-sxm-80", GPTQ_NO_ZEROS),  # auto_gptq.py 0.25.0 L246-248: allow_tile_padding=not desc_act
    ("gptq", "0.26.0", "a100-sxm-80", GPTQ_NO_ZEROS),  # qzeros not handed to the prep yet
    ("gptq", "0.27.0", "a100-sxm-80", PER_GPU),  # qzeros padded with the rest
    ("gptq", "0.29.0", "a100-sxm-80", PER_GPU),  # the same lines in 0.29.0 (round 38 had GPTQ from 0.30.0 only)
    ("gptq", "0.30.0", "a100-sxm-80", PER_GPU),
    ("awq", "0.31.0", "h100", PER_GPU),  # Humming goes first on 9.0 only from 0.32.0
    ("awq", "0.33.0", "h100", 0),  # Humming on 9.0 (its layout not read): said, not counted
    ("awq", "0.33.0", "b200", PER_GPU),
])
def test_by_release_method_and_gpu(method, version, gpu, expected):
    from kvplan.engines.versions import parse_version

    assert GPTQ_NO_ZEROS == 679_477_248
    got = marlin_moe_pad.padded_bytes(_qwen3(method), Deployment(8), parse_version(version), find_gpu(gpu))
    assert got == expected


def test_no_padding_where_the_shard_is_whole_tiles_or_a_group_straddles_it():
    v, gpu = (0, 33, 0), find_gpu("a100-sxm-80")
    assert marlin_moe_pad.padded_bytes(_qwen3(), Deployment(4), v, gpu) == 0  # N = 192 = 3 x 64
    assert marlin_moe_pad.padded_bytes(_qwen3(group=128), Deployment(8), v, gpu) == 0  # 96 % 128: MoeWNA16
    assert marlin_moe_pad.padded_bytes(_qwen3(group=64), Deployment(8), v, gpu) == 0  # 96 % 64: MoeWNA16


def test_a_plan_books_it_in_the_weights_as_loaded_and_says_so():
    common = dict(gpu="a100-sxm-80", tp=8, context=4096, engine="vllm")
    padded = api.plan(_qwen3(), engine_version="0.30.0", **common)
    before = api.plan(_qwen3(), engine_version="0.24.0", **common)
    text = " ".join(w.message for w in padded.warnings)
    assert "per-rank width 96 -> 128" in text and "counted" in text
    assert "96 -> 128" not in " ".join(w.message for w in before.warnings)
    hopper = api.plan(_qwen3(), engine_version="0.33.0", **dict(common, gpu="h100"))
    assert "Humming" in " ".join(w.message for w in hopper.warnings)


def test_booked_with_the_weights_as_loaded():
    """Vllm.loaded_extra (the weights_repack term, booked as weights) holds the padding: a GPTQ checkpoint's at 0.29.0
    is PER_GPU more than the same checkpoint with act-order (`desc_act: true`), whose strict Marlin test sends the shard
    to MoeWNA16 through 0.29.0 (the other terms, RoPE tables and the 20 MiB split's segment tails, are the same)."""
    from kvplan.engines.vllm.engine import Vllm
    from kvplan.planning.plan import Request

    gpu, dep, model, extra = find_gpu("a100-sxm-80"), Deployment(8), _qwen3("gptq"), []
    ordered = dataclasses.replace(model, quantization=dataclasses.replace(model.quantization, act_order=True))
    for model in (ordered, model):
        eng = Vllm("0.29.0", {}, {})
        st = eng.settings(model, gpu, dep, Request(context=4096))
        extra.append(eng.loaded_extra(eng.view(model, st), dep, st))
    # the plain checkpoint's dense Marlin also drops its attention's qzeros and g_idx (vllm.marlin_freed),
    # which act-order keeps: at tp 8 qkv (N, K) = ((32 / 8 + 2 x 1) x 128 = 768, 2,048), o (2,048, 512); qzeros K / 32
    # x N / 2 B = 24,576 + 16,384; g_idx 4 K = 8,192 + 2,048; 51,200 B a layer, 48 layers 2,457,600 B
    assert extra[1] - extra[0] == PER_GPU - 48 * (24_576 + 16_384 + 8_192 + 2_048) == PER_GPU - 2_457_600


def _ct(group: int = 32, symmetric: bool = False):
    """Qwen3-30B-A3B's shapes as a compressed-tensors pack-quantized 4-bit checkpoint (WNA16)."""
    base = require_in_catalog("qwen3-30b-a3b")
    q = Quantization(method="int4", group_size=group, symmetric=symmetric, quant_method="compressed-tensors")
    return dataclasses.replace(base, quantization=q)


# A symmetric compressed-tensors checkpoint keeps no zero points: PER_GPU less the packed zeros, 128 experts x 48
# layers x (64 x 2 x 32 + 2,048) x 4 / 8 = 3,072 B an expert -> 128 x 110,592 x 48 = 679,477,248 B.
SYMMETRIC = PER_GPU - 128 * 48 * (64 * 2 * 32 + 2048) * 4 // 8


@pytest.mark.parametrize("version, gpu, symmetric, group, expected", [
    ("0.29.0", "a100-sxm-80", False, 32, 0),  # 0.25-0.29: padded unless actorder (unread): said, not counted
    ("0.30.0", "a100-sxm-80", False, 32, PER_GPU),  # compressed_tensors_moe_wna16.py 0.30.0 L110: allow_tile_padding
    ("0.30.0", "a100-sxm-80", True, 32, SYMMETRIC),  # no weight_zero_point to pad
    ("0.30.0", "b200", True, 32, 0),  # kInt4Static32 on 10.x: FlashInfer TRT-LLM may go first, not counted
    ("0.30.0", "b200", False, 32, PER_GPU),  # asymmetric: TRT-LLM refuses zero points (int_wna16.py L146-147)
    ("0.33.0", "h100", False, 32, 0),  # Humming ahead of Marlin on 9.0
])
def test_compressed_tensors_experts(version, gpu, symmetric, group, expected):
    from kvplan.engines.versions import parse_version

    model = _ct(group, symmetric)
    assert SYMMETRIC == 679_477_248
    assert marlin_moe_pad.padded_bytes(model, Deployment(8), parse_version(version), find_gpu(gpu)) == expected


def test_compressed_tensors_notes_say_what_is_not_counted():
    common = dict(tp=8, context=4096, engine="vllm")
    early = api.plan(_ct(), gpu="a100-sxm-80", engine_version="0.29.0", **common)
    assert "actorder" in " ".join(w.message for w in early.warnings)
    blackwell = api.plan(_ct(symmetric=True), gpu="b200", engine_version="0.30.0", **common)
    assert "TRT-LLM MxInt4" in " ".join(w.message for w in blackwell.warnings)


# DeepSeek-V3 (../shared/configs/deepseek-ai__DeepSeek-V3.json: 61 layers, first_k_dense_replace 3, so layers 0-2
# dense and 58 MoE; hidden 7,168; 256 experts of moe_intermediate_size 2,048) as AWQ 4-bit group 32, split over
# tp 8 x dp 8 = 64 ranks: N = 2,048 / 64 = 32, P = round_up(32, 64) = 64, d = 32. Per expert: qweight
# 3 x 7,168 x 32 x 4 / 8 = 344,064; fp16 scales 2 x (7,168 / 32 x 2 x 32 + 32 / 32 x 7,168) = 43,008; packed zeros
# (14,336 + 7,168) x 4 / 8 = 10,752: 397,824 B, x 256 experts = 101,842,944 B a MoE layer.
DSV3_LAYER = 256 * (344_064 + 43_008 + 10_752)


def test_pipeline_stages_count_their_own_moe_layers():
    """pp 2 cuts 61 layers 31 + 30 (get_pp_indices: the remainder to the first stage): the first stage holds the 3
    dense layers and 28 MoE layers, the second 30 MoE layers. The stage that pads most is the second, 30 layers, not
    min(31 layers, 58 MoE layers) = 31. At pp 4 (15, 15, 16, 15: 12, 15, 16, 15 MoE) the largest is 16 either way."""
    base = require_in_catalog("deepseek-v3")
    model = dataclasses.replace(base, quantization=Quantization(method="int4", group_size=32, quant_method="awq"))
    v, a100 = (0, 30, 0), find_gpu("a100-sxm-80")
    assert DSV3_LAYER == 101_842_944
    assert marlin_moe_pad.padded_bytes(model, Deployment(tp=8, pp=2, dp=8), v, a100) == 30 * DSV3_LAYER
    assert marlin_moe_pad.padded_bytes(model, Deployment(tp=8, pp=4, dp=8), v, a100) == 16 * DSV3_LAYER
    assert marlin_moe_pad.padded_bytes(model, Deployment(tp=8, dp=8), v, a100) == 58 * DSV3_LAYER
