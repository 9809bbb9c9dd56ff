"""compressed-tensors W4A8 (int4 weights, 8-bit activations) as vLLM loads it (issue 22; kvplan.engines.vllm.w4a8 cites
the sources): on compute capability 9.0 CUTLASS W4A8 packs each bf16 group scale to eight fp8 bytes and adds an fp32
scale per output channel (0.33.0 wheel `model_executor/kernels/linear/mixed_precision/cutlass.py` L73-100;
`layers/quantization/utils/quant_utils.py` convert_bf16_scales_to_fp8 L931-954; vllm-project/vllm@0065de94
`csrc/quantization/cutlass_w4a8/w4a8_mm_entry.cu` pack_scale_fp8: torch::empty({scales.numel() * 8})); elsewhere, or
with integer activations, refused. Before this, the reader read such a config as plain W4A16 int4.

Shapes: Llama-3.1-8B (conftest.LLAMA_31_8B, its config.json: hidden 4,096, intermediate 14,336,
32 heads of 128, 8 KV heads, 32 layers, bfloat16)."""

from __future__ import annotations

import pytest

from conftest import LLAMA_31_8B
from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.sources.importer import build_spec

WEIGHTS = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128, "dynamic": False}
FP8_TOKEN = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}

# A rank's linear of N outputs and K inputs gains 6 x N x K / 128 (8 B a group for the checkpoint's 2) + 4 x N (fp32
# channel scale). Llama-3.1-8B at tp 1, a layer: qkv N = (32 + 2 x 8) x 128 = 6,144, K 4,096 (32 groups); o N 4,096,
# K 4,096 (32); gate_up N = 2 x 14,336 = 28,672, K 4,096 (32); down N 4,096, K 14,336 (112 groups):
# 6 x (6,144 x 32 + 4,096 x 32 + 28,672 x 32 + 4,096 x 112) = 6 x 1,703,936 = 10,223,616
# + 4 x (6,144 + 4,096 + 28,672 + 4,096) = 172,032 -> 10,395,648 B a layer; 32 layers 332,660,736 B (317.25 MiB).
TP1 = 32 * (6 * (6_144 * 32 + 4_096 * 32 + 28_672 * 32 + 4_096 * 112) + 4 * (6_144 + 4_096 + 28_672 + 4_096))
# tp 2: qkv N (16 + 2 x 4) x 128 = 3,072; o K 2,048 (16 groups); gate_up N 14,336; down K 7,168 (56 groups):
# 6 x (3,072 x 32 + 4,096 x 16 + 14,336 x 32 + 4,096 x 56) = 6 x 851,968 = 5,111,808 + 4 x 25,600 = 102,400
TP2 = 32 * (5_111_808 + 102_400)


def _model(weights=None, acts=FP8_TOKEN, **cfg):
    group = {"targets": ["Linear"], "weights": dict(WEIGHTS, **(weights or {}))}
    if acts is not None:
        group["input_activations"] = acts
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": group}}
    config = dict(LLAMA_31_8B, **cfg)
    return build_spec(dict(config, quantization_config=qc), "test/llama-w4a8", source="test")[0]


def _plan(model, gpu="h100", version="0.33.0", tp=1, engine="vllm"):
    return api.plan(model, gpu, context=4096, engine=engine, engine_version=version, gpus=tp, tp=tp)


def test_the_reader_keeps_the_activations():
    assert _model().quantization.input_quant == ("float", 8, "token", True, True)
    assert _model(acts=None).quantization.input_quant == ()  # W4A16: weight-only, as before
    with pytest.raises(KvplanError, match="input_activations must be an object"):
        _model(acts="fp8")


@pytest.mark.parametrize("tp, extra", [(1, TP1), (2, TP2)])
def test_cutlass_w4a8_scales_by_hand(tp, extra):
    assert (TP1, TP2) == (332_660_736, 166_854_656)
    # 0.19.0 on an H100: the W4A16 twin runs Machete / Marlin on whole tiles, nothing added; W4A8 adds CUTLASS's scales
    w4a8, w4a16 = _plan(_model(), version="0.19.0", tp=tp), _plan(_model(acts=None), version="0.19.0", tp=tp)
    assert w4a8.weight_bytes_per_gpu - w4a16.weight_bytes_per_gpu == extra
    assert _plan(_model(), tp=tp).weight_bytes_per_gpu == w4a8.weight_bytes_per_gpu  # 0.33.0: the same kernel
    note = " ".join(w.message for w in w4a8.warnings)
    assert "CUTLASS W4A8" in note and "eight-wide" in note


@pytest.mark.parametrize("change, gpu, version, words", [
    ({}, "a100-sxm-80", "0.33.0", "compute capability 9.0 only"),  # _is_fp8_w4a8_sm90: exactly 9.0
    ({}, "l40s", "0.33.0", "compute capability 9.0 only"),  # 8.9 has FP8, but the scheme asks 9.0 exactly
    ({}, "h100", "0.18.0", "read from 0.19.0"),
    ({"acts": dict(FP8_TOKEN, type="int")}, "h100", "0.33.0", "int8 activations"),
    ({"acts": dict(FP8_TOKEN, strategy="tensor", dynamic=False)}, "h100", "0.33.0", "finds no scheme"),
    ({"weights": {"group_size": 64}}, "h100", "0.33.0", "groups of 128"),
    ({"torch_dtype": "float16"}, "h100", "0.33.0", "bfloat16 only"),
])
def test_what_vllm_does_not_load_as_priced_is_refused(change, gpu, version, words):
    model = _model(**change)
    with pytest.raises(KvplanError) as e:
        _plan(model, gpu=gpu, version=version)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_shard_off_cutlass_tiles_is_refused():
    # Qwen2-72B's intermediate 29,568 at tp 8: gate_up N = 2 x 29,568 / 8 = 7,392 = 57.75 x 128
    with pytest.raises(KvplanError, match="gate_up_proj is 7392 outputs"):
        _plan(_model(hidden_size=8192, num_hidden_layers=4, num_attention_heads=64, intermediate_size=29568), tp=8)


def test_sglang_has_no_w4a8_linear_scheme():
    # 0.5.23 compressed_tensors.py _get_scheme_from_parts: WNA16 takes no input activations, pack-quantized is not an
    # activation format, so "No compressed-tensors compatible scheme was found." (L862)
    with pytest.raises(KvplanError, match="No compressed-tensors compatible scheme"):
        _plan(_model(), engine="sglang", version="0.5.23")
    assert _plan(_model(acts=None), engine="sglang", version="0.5.23").weight_bytes > 0
