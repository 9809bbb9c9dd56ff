"""NVFP4 checkpoints: read from config.json, counted at 9/16 B a weight, and the block scales vLLM pads
on Blackwell (kvplan.engines.vllm.overhead.nvfp4_scale_padding), against vLLM's source arithmetic.

vLLM modelopt.py ModelOptNvFp4LinearMethod.create_weights: weight uint8 [N, K/2] (two e2m1 values a
byte) and weight_scale float8_e4m3fn [N, K/16]; swizzle_blockscale pads the scales to
[round_up(N, 128), round_up(K/16, 4)] for the CUTLASS / FlashInfer kernels; before Blackwell Marlin
repacks weights and scales in place (marlin_utils_fp4.py), same bytes.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.readers.configs import Cfg
from kvplan.engines.vllm.overhead import nvfp4_scale_padding
from kvplan.hardware.gpus import find_gpu
from kvplan.core.errors import KvplanError
from kvplan.model.spec import Quantization
from kvplan.model.weight_formats import linear_bytes
from kvplan.readers.quantization import read_quantization


def _q(qc: dict) -> Quantization:
    return read_quantization(Cfg({"quantization_config": qc, "torch_dtype": "bfloat16"}, "config.json"))


def test_modelopt_and_compressed_tensors_nvfp4_are_read():
    assert _q({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}) == Quantization("nvfp4", 16)
    assert _q({"quant_method": "modelopt", "quant_algo": "FP8"}).method == "fp8"
    ct = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
          "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}}}
    assert _q(ct) == Quantization("nvfp4", 16)
    # before this, a ModelOpt checkpoint was planned as bf16 (4x its real size); now an unread algo is refused
    with pytest.raises(KvplanError, match="MIXED_PRECISION"):
        _q({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"})


def test_nvfp4_bytes_per_weight():
    # 4096 x 4096 weights: 8,388,608 B of e2m1 pairs + 1,048,576 fp8 scales (one per 16) = 9/16 B each.
    assert linear_bytes(4096 * 4096, "nvfp4", 16) == 4096 * 4096 // 2 + 4096 * 4096 // 16


def test_blackwell_scale_padding_qwen3_30b_a3b_tp8():
    # Qwen3-30B-A3B (hidden 2048, 128 experts of width 768, top-8, 48 layers; 32 heads, 4 kv heads, 128)
    # at tp 8 on a B200. Per expert per layer: gate_up N = 2 x 768 / 8 = 192 -> 256 rows x K/16 = 2048 / 16
    # = 128 columns: +64 x 128 = 8,192 B; down N = 2048 x K/16 = 96 / 16 = 6 -> 8 columns: +2 x 2048
    # = 4,096 B. Attention: qkv N = (32 + 2 x 4) x 128 / 8 = 640 (a multiple of 128), K/16 = 128; o_proj
    # N = 2048, K/16 = 512 / 16 = 32: no padding. 12,288 B x 128 experts x 48 layers = 75,497,472 B.
    m = find_in_catalog("qwen3-30b-a3b")
    nv = dataclasses.replace(m, quantization=Quantization("nvfp4", 16))
    assert nvfp4_scale_padding(nv, 8, find_gpu("b200")) == 12_288 * 128 * 48
    # tp 4: 384 rows (3 x 128) and 192 / 16 = 12 columns (3 x 4): nothing to pad.
    assert nvfp4_scale_padding(nv, 4, find_gpu("b200")) == 0
    # Hopper runs NVFP4 through Marlin, repacked in place: nothing added; other formats: nothing.
    assert nvfp4_scale_padding(nv, 8, find_gpu("h100-sxm")) == 0
    assert nvfp4_scale_padding(m, 8, find_gpu("b200")) == 0
