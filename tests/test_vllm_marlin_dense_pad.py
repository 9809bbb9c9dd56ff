"""vLLM's Marlin zero-pads a dense GPTQ / AWQ / compressed-tensors WNA16 linear whose per-rank shard fits neither thread
tile, (N % 64, K % 128) or (N % 128, K % 64), from 0.24.0 (issue 22 item 2; marlin_padded_nk, vLLM 0.26.0 wheel
`model_executor/layers/quantization/utils/marlin_utils.py` L220-242; MarlinLinearKernel, 0.24.0
`model_executor/kernels/linear/mixed_precision/marlin.py` L70-83 accepts the shard, L108-215 pads the tensors; 0.23.0
L36-62 refuses it). kvplan.engines.vllm.marlin_dense_pad cites the rest.

Shapes: Llama-2-7B (../shared/configs/meta-llama__Llama-2-7b-hf.json: hidden 4,096, intermediate 11,008, 32 heads,
32 KV heads, 32 layers), kvplan's catalog entry llama-2-7b-hf."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan import api
from kvplan.engines.vllm import marlin_dense_pad
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import require_in_catalog

# Llama-2-7B at tp 8: qkv N = (4 + 2 x 4) x 128 = 1,536, K = 4,096 (whole tiles); o N = 4,096, K = 512; gate_up N =
# 2 x 11,008 / 8 = 2,752 = 43 x 64, K = 4,096 (the (64, 128) family); down N = 4,096, K = 1,376 = 10.75 x 128 =
# 21.5 x 64: neither. marlin_padded_nk(4,096, 1,376, 32): (4,096, round_up(1,376, lcm(128, 32) = 128) = 1,408) or
# (4,096, round_up(1,376, lcm(64, 32) = 64) = 1,408): K 1,376 -> 1,408, 32 more rows.
# Per layer: qweight 32 x 4,096 x 4 / 8 = 65,536 B; fp16 scales 1,408 / 32 - 1,376 / 32 = 1 more group row of 4,096:
# 8,192 B; GPTQ (sym: true, Marlin's uint4b8) no zero points: 73,728 B; AWQ's packed zeros 4,096 x 4 / 8 = 2,048 B
# more: 75,776 B. 32 layers: GPTQ 2,359,296 B (2.25 MiB), AWQ 2,424,832 B a GPU.
GPTQ_TP8 = 32 * (32 * 4096 * 4 // 8 + 2 * 4096)
AWQ_TP8 = 32 * (32 * 4096 * 4 // 8 + 2 * 4096 + 4096 * 4 // 8)
A100, V = find_gpu("a100-sxm-80"), (0, 30, 0)


def _llama2(method: str = "gptq", group: int = 32, **kw):
    q = Quantization(method=kw.pop("bits", "int4"), group_size=group, quant_method=method, **kw)
    return dataclasses.replace(require_in_catalog("llama-2-7b-hf"), quantization=q)


def test_the_padding_in_bytes_by_hand():
    assert (GPTQ_TP8, AWQ_TP8) == (2_359_296, 2_424_832)
    assert marlin_dense_pad.padded_bytes(_llama2(), Deployment(8), V, A100) == GPTQ_TP8
    assert marlin_dense_pad.padded_bytes(_llama2("awq"), Deployment(8), V, A100) == AWQ_TP8
    # compressed-tensors WNA16, asymmetric (weight_zero_point): as AWQ; symmetric: as GPTQ
    assert marlin_dense_pad.padded_bytes(_llama2("compressed-tensors"), Deployment(8), V, A100) == AWQ_TP8
    ct_sym = _llama2("compressed-tensors", symmetric=True)
    assert marlin_dense_pad.padded_bytes(ct_sym, Deployment(8), V, A100) == GPTQ_TP8


def test_the_two_tile_families():
    assert marlin_dense_pad.padded_nk(4096, 1376, 32) == (4096, 1408)
    assert marlin_dense_pad.padded_nk(2752, 4096, 128) == (2752, 4096)  # (64, 128): no padding
    assert marlin_dense_pad.padded_nk(4096, 2752, 64) == (4096, 2752)  # (128, lcm(64, 64)): no padding
    assert marlin_dense_pad.padded_nk(4096, 2752, 128) == (4096, 2816)  # K kept whole 128-groups: lcm(64, 128)
    # gpt-oss's 2,880 at tp 4 (720 x 2,880): (768, 2,944) = 2,260,992 or (768, 2,880) = 2,211,840: the second
    assert marlin_dense_pad.padded_nk(720, 2880, -1) == (768, 2880)


@pytest.mark.parametrize("version, gpu, counted", [
    ("0.23.0", "a100-sxm-80", False),  # the strict check_marlin_supports_shape: another kernel, no padding
    ("0.24.0", "a100-sxm-80", True),
    ("0.24.0", "t4", True),  # Marlin from 7.5
    ("0.24.0", "v100-sxm2-32", False),  # below 7.5: not Marlin
    ("0.31.0", "h100", True),  # Machete refuses K % 64 != 0; Humming is after Marlin before 0.32.0
    ("0.32.0", "h100", False),  # prioritize_humming: Humming first on 9.0, its layout unread
    ("0.33.0", "b200", True),
    ("0.33.0", "mi300x", False),  # Marlin is CUDA only
])
def test_by_release_and_gpu(version, gpu, counted):
    from kvplan.engines.versions import parse_version

    got = marlin_dense_pad.padded_bytes(_llama2(), Deployment(8), parse_version(version), find_gpu(gpu))
    assert got == (GPTQ_TP8 if counted else 0)


def test_no_padding_where_the_shard_fits_or_a_group_straddles_it():
    assert marlin_dense_pad.padded_bytes(_llama2(), Deployment(4), V, A100) == 0  # down K 2,752 = 43 x 64, N % 128
    # group 128: 1,376 % 128 = 96, a group across the cut: not Marlin (the layer falls back), nothing padded
    assert marlin_dense_pad.padded_bytes(_llama2(group=128), Deployment(8), V, A100) == 0
    # act-order through 0.29.0: the strict shape check, another kernel
    ordered = _llama2(act_order=True)
    assert marlin_dense_pad.padded_bytes(ordered, Deployment(8), (0, 29, 0), A100) == 0
    # Qwen2.5-3B-Instruct-AWQ as published (group 128; intermediate 11,008 as Llama-2-7B's): at tp 8 its down
    # projection's 1,376 inputs straddle a group too
    qwen = dataclasses.replace(require_in_catalog("qwen2.5-3b"), quantization=Quantization(
        method="int4", group_size=128, quant_method="awq"))
    assert marlin_dense_pad.padded_bytes(qwen, Deployment(8), V, A100) == 0


def test_eight_bit_gptq_per_row_runs_allspark_on_ampere_through_0_30():
    """AllSpark (8.x, 8-bit GPTQ at group -1, K and N % 16) goes ahead of Marlin until 0.31.0 drops it from the list:
    down's 32 more rows at 1 B a weight, one scale row either way: 32 x 4,096 x 32 layers = 4,194,304 B."""
    model = _llama2(bits="int8", per_row=True, input_groups=True, group=128)
    assert marlin_dense_pad.padded_bytes(model, Deployment(8), (0, 30, 0), A100) == 0
    assert marlin_dense_pad.padded_bytes(model, Deployment(8), (0, 31, 0), A100) == 32 * 4096 * 32 == 4_194_304


def test_a_plan_says_it_and_books_it_with_the_weights():
    """The note names the rule and the bytes; Vllm.loaded_extra (the weights_repack term, booked as weights) holds
    them: a GPTQ checkpoint at 0.29.0 is GPTQ_TP8 more than the same with act-order (strict check, no padding)."""
    from kvplan.engines.vllm.engine import Vllm
    from kvplan.planning.plan import Request

    common = dict(gpu="a100-sxm-80", tp=8, context=4096, engine="vllm")
    text = " ".join(w.message for w in api.plan(_llama2(), engine_version="0.24.0", **common).warnings)
    assert "marlin_padded_nk" in text
    hopper = api.plan(_llama2(), engine_version="0.33.0", **dict(common, gpu="h100"))
    assert "Humming" in " ".join(w.message for w in hopper.warnings)
    extra = []
    for model in (_llama2(act_order=True), _llama2()):
        eng = Vllm("0.29.0", {}, {})
        st = eng.settings(model, A100, Deployment(8), Request(context=4096))
        extra.append(eng.loaded_extra(eng.view(model, st), Deployment(8), st))
    # the plain checkpoint's Marlin also drops its qzeros and g_idx (kvplan.engines.vllm.marlin_freed), which
    # act-order keeps: a layer's shards at tp 8, group 32 (N, K): qkv (1,536, 4,096), o (4,096, 512), gate_up (2,752,
    # 4,096), down (4,096, 1,376); qzeros K / 32 x N / 2 B = 98,304 + 32,768 + 176,128 + 88,064 = 395,264; g_idx 4 K
    # rounded to 512 B blocks = 16,384 + 2,048 + 16,384 + 5,632 = 40,448; 32 layers: 13,942,784 B
    assert extra[1] - extra[0] == GPTQ_TP8 - 32 * (395_264 + 40_448) == GPTQ_TP8 - 13_942_784
