"""vLLM's weight-only FP8 Marlin below compute capability 8.9 (issue 22 item 2): an `fp8` checkpoint's dense linears
as prepare_fp8_layer_for_marlin leaves them (vLLM 0.24.0 wheel `model_executor/layers/quantization/utils/
marlin_utils_fp8.py` L106-216: 16-bit scales per output channel, block scales repeated over each block's N columns,
the shard zero-padded by marlin_padded_nk from 0.24.0). kvplan.engines.vllm.marlin_fp8 cites the rest.

Shapes: Qwen3-8B (../shared/configs/Qwen__Qwen3-8B.json: hidden 4,096, intermediate 12,288, 32 heads, 8 KV heads,
head_dim 128, 36 layers; Qwen/Qwen3-8B-FP8 is its 128 x 128 block-FP8 checkpoint) and Llama-2-7B
(../shared/configs/meta-llama__Llama-2-7b-hf.json: hidden 4,096, intermediate 11,008, 32 heads and KV heads, 32
layers), per-tensor FP8, both kvplan's catalog entries with the quantization replaced."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan import api
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.vllm import marlin_fp8
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import require_in_catalog

A100, L4, H100, V = find_gpu("a100-sxm-80"), find_gpu("l4"), find_gpu("h100-sxm"), (0, 30, 0)

# Qwen3-8B block FP8 at tp 8, every shard whole tiles (no padding). Marlin's scales (K / 128, N) x 2 B against the
# checkpoint's fp32 (ceil(N / 128), ceil(K / 128)) x 4 B:
#   qkv N = (32 / 8 + 2 x 8 / 8) x 128 = 768, K 4,096: 32 x 768 x 2 = 49,152 - 6 x 32 x 4 = 768
#   o   N = 4,096, K = 512:                             4 x 4,096 x 2 = 32,768 - 32 x 4 x 4 = 512
#   gate_up N = 2 x 12,288 / 8 = 3,072, K 4,096:       32 x 3,072 x 2 = 196,608 - 24 x 32 x 4 = 3,072
#   down N = 4,096, K = 1,536:                         12 x 4,096 x 2 = 98,304 - 32 x 12 x 4 = 1,536
# a layer 376,832 - 5,888 = 370,944 B; 36 layers 13,353,984 B (12.7 MiB) a GPU.
QWEN_TP8 = 36 * (49_152 + 32_768 + 196_608 + 98_304 - 768 - 512 - 3_072 - 1_536)
# tp 1: qkv (4,096 / 128) x 6,144 x 2 - 48 x 32 x 4; o 32 x 4,096 x 2 - 32 x 32 x 4; gate_up 32 x 24,576 x 2
# - 192 x 32 x 4; down 96 x 4,096 x 2 - 32 x 96 x 4: 3,014,656 - 47,104 = 2,967,552 B a layer, 106,831,872 B (101.9 MiB)
QWEN_TP1 = 36 * (3_014_656 - 47_104)
# Llama-2-7B per-tensor FP8 at tp 8: scales become (1, N) x 2 B (kvplan counts the checkpoint's per-tensor scalars as
# nothing): qkv N 1,536 -> 3,072; o N 4,096 -> 8,192; gate_up N 2,752 -> 5,504; down N 4,096 -> 8,192. down's K 1,376
# fits neither tile: marlin_padded_nk(4,096, 1,376, -1) = (4,096, 1,408), 32 x 4,096 x 1 B = 131,072 more.
# A layer 156,032 B; 32 layers 4,993,024 B a GPU (0.24.0+); before 0.24.0 no padding: 32 x 24,960 = 798,720 B.
LLAMA_TP8 = 32 * (3_072 + 8_192 + 5_504 + 8_192 + 131_072)


def _with(name: str, block: int):
    return dataclasses.replace(require_in_catalog(name), quantization=Quantization("fp8", block, quant_method="fp8"))


def test_block_fp8_scales_as_marlin_loads_them():
    qwen = _with("qwen3-8b", 128)
    assert marlin_fp8.loaded_bytes(qwen, Deployment(8), V, A100) == QWEN_TP8 == 13_353_984
    assert marlin_fp8.loaded_bytes(qwen, Deployment(1), V, A100) == QWEN_TP1 == 106_831_872


def test_per_tensor_fp8_channel_scales_and_padding():
    llama = _with("llama-2-7b-hf", 0)
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), V, A100) == LLAMA_TP8 == 4_993_024
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), (0, 23, 0), A100) == 32 * 24_960 == 798_720


def test_only_below_native_fp8():
    qwen = _with("qwen3-8b", 128)
    assert marlin_fp8.loaded_bytes(qwen, Deployment(8), V, L4) == 0  # 8.9: FP8 GEMMs
    assert marlin_fp8.loaded_bytes(qwen, Deployment(8), V, H100) == 0
    ct = dataclasses.replace(qwen, quantization=Quantization("fp8", 128, quant_method="compressed-tensors"))
    assert marlin_fp8.loaded_bytes(ct, Deployment(8), V, A100) == 0  # 0.30.0: Humming ahead of Marlin (from 0.25.0)


def test_the_plan_counts_and_says_it():
    """The plan books the bytes with the weights (the KV pool shrinks by as much) and says so; a compressed-tensors
    checkpoint of the same bytes, which 0.30.0 gives to Humming (its W8A16 list, from 0.25.0), is the control."""
    def plan(method):
        model = dataclasses.replace(require_in_catalog("qwen3-8b"),
                                    quantization=Quantization("fp8", 128, quant_method=method))
        return api.plan(model, gpu="a100-sxm-80", engine="vllm", engine_version="0.30.0", context=4096)
    fp8, ct = plan("fp8"), plan("compressed-tensors")
    assert fp8.weight_bytes_per_gpu - ct.weight_bytes_per_gpu == QWEN_TP1
    assert ct.kv_memory_bytes_per_gpu - fp8.kv_memory_bytes_per_gpu == QWEN_TP1
    said = [w for w in fp8.warnings if "weight-only through Marlin" in w.message]
    assert len(said) == 1 and said[0].values == (QWEN_TP1,) and "not counted" not in said[0].message
    assert not [w for w in ct.warnings if "weight-only through Marlin" in w.message]


def test_before_padding_the_misfit_is_said():
    llama = _with("llama-2-7b-hf", 0)
    plan = api.plan(llama, gpu="a100-sxm-80", engine="vllm", engine_version="0.23.0", tp=8, context=4096)
    said = [w for w in plan.warnings if "weight-only through Marlin" in w.message]
    assert len(said) == 1 and said[0].values == (798_720,) and "priced unpadded" in said[0].message
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), (0, 9, 2), A100) == 0  # not read before 0.10.0


# NVFP4 (ModelOpt) with Llama-2-7B's shapes at tp 8: only down's K 1,376 fits neither tile; marlin_padded_nk(4,096,
# 1,376, 16) = (4,096, 1,408): 32 x 4,096 = 131,072 more entries at 4 bits + one fp8 scale per 16 = 9 / 16 B each:
# 73,728 B a layer, 32 layers 2,359,296 B a GPU. The scales go back to one fp8 byte per 16
# (nvfp4_marlin_process_scales): nothing else changes.
NVFP4_TP8 = 32 * 32 * 4096 * 9 // 16


def test_nvfp4_marlin_pads_below_blackwell():
    llama = dataclasses.replace(require_in_catalog("llama-2-7b-hf"),
                                quantization=Quantization("nvfp4", 16, quant_method="modelopt"))
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), V, A100) == NVFP4_TP8 == 2_359_296
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), V, H100) == NVFP4_TP8  # 9.0 before Humming (0.32.0)
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), (0, 32, 0), H100) == 0  # Humming first: said, not counted
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), V, find_gpu("b200")) == 0  # FP4 GEMMs
    assert marlin_fp8.loaded_bytes(llama, Deployment(8), (0, 23, 0), A100) == 0  # no padding before 0.24.0
    assert marlin_fp8.loaded_bytes(llama, Deployment(4), V, A100) == 0  # down K 2,752 = 43 x 64, N % 128


# Qwen3-30B-A3B block FP8 (Qwen/Qwen3-30B-A3B-FP8; ../shared/configs/Qwen__Qwen3-30B-A3B.json: hidden 2,048, 128
# experts of width 768, 48 layers all MoE, 32 heads, 4 KV heads, head_dim 128), tp 1. An expert's scales as
# prepare_fp8_moe_layer_for_marlin leaves them: w13 (2,048 / 128, 2 x 768) x 2 B = 49,152, w2 (768 / 128, 2,048) x 2 B
# = 24,576, for the checkpoint's fp32 (1,536 / 128, 16) x 4 = 768 and (16, 6) x 4 = 384: 72,576 B; x 128 experts x 48
# layers = 445,906,944 B. Attention: qkv N (32 + 2 x 4) x 128 = 5,120, K 2,048: 16 x 5,120 x 2 - 40 x 16 x 4 = 161,280;
# o N 2,048, K 4,096: 32 x 2,048 x 2 - 16 x 32 x 4 = 129,024; x 48 = 13,934,592. 459,841,536 B (438.5 MiB) a GPU.
# tp 4: the expert width 192 is not whole 128-blocks (vLLM refines or refuses it): attention only, experts said.
QWEN_MOE_TP1 = 128 * 48 * (49_152 + 24_576 - 768 - 384) + 48 * (161_280 + 129_024)


def test_fp8_experts_scales_as_marlin_loads_them():
    moe = _with("qwen3-30b-a3b", 128)
    assert marlin_fp8.loaded_bytes(moe, Deployment(1), V, A100) == QWEN_MOE_TP1 == 459_841_536
    got, skipped = marlin_fp8.priced(moe, Deployment(4), V, A100)
    assert skipped == ["routed experts'"] and got == 48 * ((16 * 1280 * 2 - 10 * 16 * 4) + (8 * 2048 * 2 - 16 * 8 * 4))
    plan = api.plan(moe, gpu="a100-sxm-80", engine="vllm", engine_version="0.30.0", tp=4, context=4096)
    said = [w.message for w in plan.warnings if "weight-only through Marlin" in w.message]
    assert len(said) == 1 and "not counted: the routed experts" in said[0]


# DeepSeek-V3 block FP8 (../shared/configs/deepseek-ai__DeepSeek-V3.json: 61 layers, the first 3 dense (intermediate
# 18,432), 58 MoE (256 experts and one shared expert of 2,048); hidden 7,168; MLA attention, whose shapes
# marlin_dense_pad does not read: said, not counted) at tp 8 on A100. A rank's shards, Marlin's (K / 128, N) x 2 B
# less the checkpoint's fp32 (N / 128, K / 128) x 4 B, all whole tiles:
#   dense gate_up N 4,608, K 7,168: 56 x 4,608 x 2 - 36 x 56 x 4 = 508,032; down N 7,168, K 2,304: 18 x 7,168 x 2
#   - 56 x 18 x 4 = 254,016: 762,048 a dense layer;
#   shared gate_up N 512: 56 x 512 x 2 - 4 x 56 x 4 = 56,448; down K 256: 2 x 7,168 x 2 - 56 x 2 x 4 = 28,224;
#   an expert (N 256): w13 (56, 512) + w2 (2, 7,168) x 2 B = 86,016 - (4 x 56 + 56 x 2) x 4 = 84,672, x 256 experts;
# a MoE layer 84,672 + 256 x 84,672 = 21,760,704. pp 2 cuts 31 + 30 layers: 3 dense + 28 MoE = 611,585,856 B, and
# 30 MoE = 652,821,120 B (622.6 MiB), the larger (not 31 MoE layers' worth: the first stage's 3 are dense).
DSV3_MOE_LAYER = 84_672 + 256 * 84_672


def test_pipeline_stages_count_their_own_moe_layers():
    dsv3 = _with("deepseek-v3", 128)
    assert DSV3_MOE_LAYER == 21_760_704
    got, skipped = marlin_fp8.priced(dsv3, Deployment(8, pp=2), V, A100)
    assert got == 30 * DSV3_MOE_LAYER == 652_821_120 > 3 * 762_048 + 28 * DSV3_MOE_LAYER
    assert skipped == ["attention"]


# compressed-tensors FP8 (llm-compressor's FP8_DYNAMIC: fp8 weights with an fp32 scale per output channel) with
# Llama-3.1-8B's shapes (conftest.LLAMA_31_8B). Below 8.9 its W8A8 scheme
# falls to CompressedTensorsW8A16Fp8 and Marlin (0.19.0 compressed_tensors.py L629-646): the fp32 channel scale (4 B
# an output, which kvplan counts) becomes Marlin's (1, N) 16-bit row (2 B): -2 B an output. Every shard is whole
# tiles at tp 1 and 8 (no padding). tp 1, a layer: qkv N 6,144 + o 4,096 + gate_up 28,672 + down 4,096 = 43,008
# outputs: -86,016 B, 32 layers -2,752,512 B. tp 8: qkv (4 + 2 x 1) x 128 = 768 + o 4,096 (K 512) + gate_up 3,584 +
# down 4,096 (K 1,792) = 12,544: -25,088 B a layer, -802,816 B a GPU.
CT_TP1, CT_TP8 = -2 * 32 * 43_008, -2 * 32 * 12_544


def _ct_channel():
    from conftest import LLAMA_31_8B, llm_compressor_w8a8
    from kvplan.sources.importer import build_spec
    config = dict(LLAMA_31_8B, quantization_config=llm_compressor_w8a8("float"))
    return build_spec(config, "test/llama-fp8-dynamic", source="test")[0]


def test_compressed_tensors_fp8_channel_below_8_9():
    model = _ct_channel()
    assert (CT_TP1, CT_TP8) == (-2_752_512, -802_816) and model.quantization.channel_scales
    for v in ((0, 10, 0), (0, 19, 0), (0, 24, 0)):  # scheme-side prep (0.10-0.19), Marlin's kernel alone (0.20-0.24)
        assert marlin_fp8.loaded_bytes(model, Deployment(1), v, A100) == CT_TP1
        assert marlin_fp8.loaded_bytes(model, Deployment(8), v, A100) == CT_TP8
    assert marlin_fp8.loaded_bytes(model, Deployment(1), (0, 24, 0), L4) == 0  # 8.9: CompressedTensorsW8A8Fp8
    plan = api.plan(model, gpu="a100-sxm-80", engine="vllm", engine_version="0.24.0", context=4096)
    said = [w for w in plan.warnings if "weight-only through Marlin" in w.message]
    assert len(said) == 1 and said[0].values == (-CT_TP1,) and "fewer weights" in said[0].message


def test_compressed_tensors_fp8_humming_and_unread_block_are_said():
    model = _ct_channel()
    assert marlin_fp8.loaded_bytes(model, Deployment(1), (0, 25, 0), A100) == 0  # Humming first in W8A16's list
    plan = api.plan(model, gpu="a100-sxm-80", engine="vllm", engine_version="0.25.0", context=4096)
    assert any("tries Humming" in w.message for w in plan.warnings)
    # a block strategy takes fp8's block rule from 0.19.0 (the same bytes as Qwen/Qwen3-8B-FP8's); 0.15-0.18 were not
    # read: nothing counted there, said
    block = dataclasses.replace(require_in_catalog("qwen3-8b"),
                                quantization=Quantization("fp8", 128, quant_method="compressed-tensors"))
    assert marlin_fp8.loaded_bytes(block, Deployment(1), (0, 24, 0), A100) == QWEN_TP1
    assert marlin_fp8.loaded_bytes(block, Deployment(1), (0, 19, 0), A100) == QWEN_TP1
    assert marlin_fp8.loaded_bytes(block, Deployment(1), (0, 18, 0), A100) == 0
    unread = api.plan(block, gpu="a100-sxm-80", engine="vllm", engine_version="0.17.0", context=4096)
    assert any("did not read (0.15.0-0.18.x)" in w.message for w in unread.warnings)


def test_compressed_tensors_block_fp8_refused_where_w8a16_raises():
    # 0.10.0 and 0.11.0 wheels, compressed_tensors_w8a16_fp8.py create_weights L85-99: a CHANNEL or TENSOR scale, else
    # ValueError("Unsupported weight strategy=..."): a block checkpoint below 8.9 does not load through 0.14.0
    block = dataclasses.replace(require_in_catalog("qwen3-8b"),
                                quantization=Quantization("fp8", 128, quant_method="compressed-tensors"))
    for version in ("0.10.0", "0.14.0"):
        with pytest.raises(KvplanError, match="Unsupported weight strategy.*0.19.0 or later") as e:
            api.plan(block, gpu="a100-sxm-80", engine="vllm", engine_version=version, context=4096)
        assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    api.plan(block, gpu="l4", engine="vllm", engine_version="0.14.0", context=4096)  # 8.9: W8A8 FP8, not W8A16
    channel = _ct_channel()  # a channel scale loads in those releases
    api.plan(channel, gpu="a100-sxm-80", engine="vllm", engine_version="0.14.0", context=4096)


# compressed-tensors FP8 without activation quantization (a W8A16 scheme: `input_activations: null`), Llama-3.1-8B's
# shapes: _is_fp8_w8a8 needs input_activations and _is_fp8_w8a16 asks no capability (0.10.0 compressed_tensors.py
# L427-432, 0.19.0 L649-653), so an H100 takes CompressedTensorsW8A16Fp8 and its prepare_fp8_layer_for_marlin
# (0.10.0 L59, 0.19.0 L133) exactly as an A100 does: the same bytes as FP8-dynamic below 8.9 above, CT_TP1 =
# -2 B x 43,008 outputs x 32 layers = -2,752,512 B at tp 1, CT_TP8 = -2 x 12,544 x 32 = -802,816 B a GPU at tp 8.
def _ct_w8a16(block: int = 0):
    from conftest import LLAMA_31_8B, llm_compressor_w8a8
    from kvplan.sources.importer import build_spec
    q = llm_compressor_w8a8("float")
    q["config_groups"]["group_0"]["input_activations"] = None
    if block:
        q["config_groups"]["group_0"]["weights"].update(strategy="block", block_structure=[block, block])
    return build_spec(dict(LLAMA_31_8B, quantization_config=q), "test/llama-fp8-w8a16", source="test")[0]


def test_compressed_tensors_w8a16_runs_marlin_on_hopper():
    model, w8a8 = _ct_w8a16(), _ct_channel()
    assert model.quantization.weight_only and not w8a8.quantization.weight_only
    for v in ((0, 10, 0), (0, 17, 0), (0, 19, 0)):  # the scheme's own Marlin prep, whatever the GPU
        assert marlin_fp8.loaded_bytes(model, Deployment(1), v, H100) == CT_TP1 == -2_752_512
        assert marlin_fp8.loaded_bytes(model, Deployment(8), v, H100) == CT_TP8 == -802_816
        assert marlin_fp8.loaded_bytes(w8a8, Deployment(1), v, H100) == 0  # W8A8: CompressedTensorsW8A8Fp8, native
    plans = [api.plan(m, gpu="h100-sxm", engine="vllm", engine_version="0.19.0", context=4096) for m in (model, w8a8)]
    assert plans[1].weight_bytes_per_gpu - plans[0].weight_bytes_per_gpu == -CT_TP1  # same checkpoint bytes
    said = [w for w in plans[0].warnings if "weight-only through Marlin" in w.message]
    assert len(said) == 1 and said[0].values == (-CT_TP1,) and "on every GPU" in said[0].message
    assert not [w for w in plans[1].warnings if "Marlin" in w.message]


def test_compressed_tensors_w8a16_refused_where_fp8_marlin_declines_hopper():
    # 0.20.0-0.24.0: init_wfp8_a16_linear_kernel's CUDA list is MarlinFP8ScaledMMLinearKernel alone, whose
    # is_supported returns False at compute capability >= 89 without VLLM_TEST_FORCE_FP8_MARLIN (0.20.0 and 0.24.0
    # kernels/linear/scaled_mm/marlin.py L46-55): choose_scaled_mm_linear_kernel raises, the load stops
    model = _ct_w8a16()
    for version in ("0.20.0", "0.24.0"):
        with pytest.raises(KvplanError, match="VLLM_TEST_FORCE_FP8_MARLIN.*0.19.x or 0.25.0") as e:
            api.plan(model, gpu="h100-sxm", engine="vllm", engine_version=version, context=4096)
        assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    a100 = api.plan(model, gpu="a100-sxm-80", engine="vllm", engine_version="0.24.0", context=4096)  # 8.0: Marlin
    assert [w.values for w in a100.warnings if "weight-only through Marlin" in w.message] == [(-CT_TP1,)]
    humming = api.plan(model, gpu="h100-sxm", engine="vllm", engine_version="0.25.0", context=4096)  # Humming first
    assert any("tries Humming" in w.message and "on this GPU too" in w.message for w in humming.warnings)
    assert marlin_fp8.loaded_bytes(model, Deployment(1), (0, 25, 0), H100) == 0


def test_compressed_tensors_w8a16_block_on_hopper():
    # a block strategy: 0.10.x's _is_fp8_w8a16 takes tensor and channel only, 0.11.0-0.14.0's W8A16 scheme raises
    # "Unsupported weight strategy" (refused); from 0.19.0 fp8's block rule, the same bytes as Qwen3-8B's above on an
    # A100. Llama-3.1-8B at tp 1 (every shard whole 128-blocks), Marlin's (K / 128, N) x 2 B less the fp32 blocks:
    #   qkv N 6,144, K 4,096: 32 x 6,144 x 2 - 48 x 32 x 4 = 393,216 - 6,144 = 387,072
    #   o N 4,096, K 4,096: 32 x 4,096 x 2 - 32 x 32 x 4 = 262,144 - 4,096 = 258,048
    #   gate_up N 28,672, K 4,096: 32 x 28,672 x 2 - 224 x 32 x 4 = 1,835,008 - 28,672 = 1,806,336
    #   down N 4,096, K 14,336: 112 x 4,096 x 2 - 32 x 112 x 4 = 917,504 - 14,336 = 903,168
    # 3,354,624 B a layer, 107,347,968 B (102.4 MiB) a GPU over 32 layers
    block = _ct_w8a16(128)
    assert block.quantization.group_size == 128 and block.quantization.weight_only
    assert marlin_fp8.loaded_bytes(block, Deployment(1), (0, 19, 0), H100) == 32 * 3_354_624 == 107_347_968
    for version in ("0.10.0", "0.14.0"):
        with pytest.raises(KvplanError, match="without quantized activations.*Unsupported weight strategy"):
            api.plan(block, gpu="h100-sxm", engine="vllm", engine_version=version, context=4096)
    unread = api.plan(block, gpu="h100-sxm", engine="vllm", engine_version="0.17.0", context=4096)
    assert any("did not read (0.15.0-0.18.x)" in w.message for w in unread.warnings)


def test_a_w8a16_checkpoint_keeps_its_reading_in_the_catalog():
    from kvplan.sources.catalog import spec_from_dict, spec_to_dict
    model = _ct_w8a16()
    again = spec_from_dict(spec_to_dict(model), "test")
    assert again.quantization.weight_only and again.quantization == model.quantization
    old = spec_to_dict(_ct_channel())  # an entry without the flag (W8A8, or written before it): not weight-only
    assert "weight_only" not in old["quantization"] and not spec_from_dict(old, "test").quantization.weight_only


def test_w8a16_refusal_is_one_line_on_the_command_line(tmp_path, kvplan_home):
    import json

    from typer.testing import CliRunner

    from conftest import LLAMA_31_8B, llm_compressor_w8a8
    from kvplan.cli import app
    q = llm_compressor_w8a8("float")
    q["config_groups"]["group_0"]["input_activations"] = None
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA_31_8B, quantization_config=q)))
    r = CliRunner().invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--engine", "vllm", "--engine-version",
                                 "0.24.0", "--ctx", "4k"])
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]  # after the model's own lines
    assert r.exit_code == EXIT_USAGE and len(errors) == 1 and "VLLM_TEST_FORCE_FP8_MARLIN=1" in errors[0]
    assert "Traceback" not in r.output


def test_compressed_tensors_w8a16_routed_experts_are_refused():
    # CompressedTensorsMoEMethod has no FP8 weight-only method: a channel scheme reaches the WNA16 MoE method, which
    # raises on a format other than pack-quantized (0.33.0 compressed_tensors_moe/compressed_tensors_moe.py L90-101),
    # tensor and block ones raise "Unsupported FusedMoe scheme" (L200); the dense W8A16 above loads
    moe = dataclasses.replace(require_in_catalog("qwen3-30b-a3b"), quantization=Quantization(
        "fp8", 0, quant_method="compressed-tensors", weight_only=True))
    for gpu, version in (("h100-sxm", "0.19.0"), ("a100-sxm-80", "0.24.0"), ("h100-sxm", "0.30.0")):
        with pytest.raises(KvplanError, match="routed experts without quantized activations") as e:
            api.plan(moe, gpu=gpu, engine="vllm", engine_version=version, context=4096)
        assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    w8a8 = dataclasses.replace(moe, quantization=Quantization("fp8", 0, quant_method="compressed-tensors"))
    api.plan(w8a8, gpu="h100-sxm", engine="vllm", engine_version="0.19.0", context=4096)  # W8A8 experts: loads


def test_compressed_tensors_w8a16_refused_on_amd():
    # init_wfp8_a16_linear_kernel's ROCm list is empty from 0.20.0 ("To be added": 0.20.0 kernels/linear/__init__.py
    # L204-210, 0.24.0 L343-349, 0.33.0 L522-529), so choose_scaled_mm_linear_kernel raises; 0.10.0-0.19.x run the
    # scheme's prepare_fp8_layer_for_marlin on ROCm as on CUDA, not read there: both refused, the W8A8 scheme planned
    model = _ct_w8a16()
    for version, words in (("0.24.0", "cannot load.*no ROCm kernel"), ("0.33.0", "cannot load"),
                           ("0.19.0", "is not planned: .*not read on ROCm")):
        with pytest.raises(KvplanError, match=words) as e:
            api.plan(model, gpu="mi300x", engine="vllm", engine_version=version, context=4096)
        assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    api.plan(_ct_channel(), gpu="mi300x", engine="vllm", engine_version="0.24.0", context=4096)  # W8A8: planned
