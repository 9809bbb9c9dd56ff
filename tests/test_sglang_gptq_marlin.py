"""SGLang's GPTQ / compressed-tensors WNA16 Marlin path (issue 22, item 2; round 38): it pads no shard and drops
check_marlin_supports_shape's answer (0.5.23 wheel hardware_backend/gpu/quantization/gptq_kernels.py L89-94), so a
rank's shard whose N is not a multiple of 64 (or K of 16) stops the load in gptq_marlin_repack (0.5.23
kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh L304-316): refused, where vLLM 0.24+ pads it."""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.sources.importer import build_spec

GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
# Qwen2-72B's config.json: hidden 8,192, 80 layers, 64 heads, 8 KV heads, intermediate 29,568
QWEN2_72B = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 8192,
             "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 29568,
             "vocab_size": 152064, "max_position_embeddings": 32768, "torch_dtype": "float16",
             "tie_word_embeddings": False}
# Qwen1.5-MoE-A2.7B's config.json: hidden 2,048, 24 layers, 16 heads (16 KV), 60 experts of 1,408, shared 5,632
QWEN_MOE = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048,
            "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
            "num_experts_per_tok": 4, "decoder_sparse_step": 1, "vocab_size": 151936,
            "max_position_embeddings": 8192, "torch_dtype": "float16", "tie_word_embeddings": False}


def _model(cfg: dict, qc: dict = GPTQ):
    return build_spec(dict(cfg, quantization_config=qc), "test/gptq", source="test")[0]


def _plan(model, tp: int, version: str = "0.5.23", gpu: str = "h100", engine: str = "sglang"):
    return api.plan(model, gpu, context=2048, batch=1, engine=engine, engine_version=version, gpus=tp, tp=tp)


def test_qwen2_72b_gptq_at_tp8_is_refused_by_the_repack():
    # gate_up N = 2 x 29,568 / 8 = 7,392 = 115 x 64 + 32: "size_n = 7392 is not divisible by tile_n_size = 64".
    # At tp 4: 14,784 = 231 x 64 and down K 7,392 = 462 x 16: planned. qkv (8 + 2 x 1) x 128 = 1,280 at tp 8 fits.
    with pytest.raises(KvplanError) as e:
        _plan(_model(QWEN2_72B), 8)
    assert "gate_up_proj" in str(e.value) and "size_n = 7392 is not divisible by tile_n_size = 64" in str(e.value)
    assert e.value.param == "tp" and "\n" not in str(e.value)
    assert _plan(_model(QWEN2_72B), 4).weight_bytes > 0
    assert _plan(_model(QWEN2_72B), 8, engine="vllm", version="0.33.0").weight_bytes > 0  # vLLM pads it


def test_asymmetric_gptq_is_not_marlin_in_sglang():
    # sym: false is not in GPTQMarlinConfig.TYPE_MAP {(4, True), (8, True)} (0.5.23 gptq.py L298-301), so
    # is_gptq_marlin_compatible is False (L473-474) and GPTQConfig loads it: no Marlin repack, no refusal at tp 8;
    # the checkpoint's bytes are the same as the symmetric one's (qzeros stored either way)
    asym = _model(QWEN2_72B, dict(GPTQ, sym=False))
    assert asym.quantization.asym and not _model(QWEN2_72B).quantization.asym
    assert _plan(asym, 8).weight_bytes > 0
    assert _plan(asym, 4).weight_bytes == _plan(_model(QWEN2_72B), 4).weight_bytes


def test_where_sglang_does_not_run_marlin_it_is_planned():
    # below compute capability 8.0 Marlin has no types (T4: GPTQConfig, minimum 60); before 0.5.3 vLLM's GPTQ Marlin
    # (not read); compressed-tensors 8-bit may be W8A8 (not Marlin)
    assert _plan(_model(QWEN2_72B), 8, gpu="t4").weight_bytes > 0
    assert _plan(_model(QWEN2_72B), 8, version="0.4.9").weight_bytes > 0


def test_compressed_tensors_wna16_from_0_5_4():
    # the first release with SGLang's WNA16 scheme is 0.5.4 (compressed_tensors_wNa16.py L220-249); symmetric or not
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                                           "group_size": 128}}}, "ignore": ["lm_head"]}
    model = _model(QWEN2_72B, qc)
    with pytest.raises(KvplanError, match="size_n = 7392") as e:
        _plan(model, 8, version="0.5.4")
    assert "sym: true" not in str(e.value)
    assert _plan(model, 8, version="0.5.3").weight_bytes > 0


def test_gptq_moe_experts_are_checked_too():
    # Qwen1.5-MoE at tp 8: an expert's 1,408 / 8 = 176 a rank, w13 N = 352 = 5 x 64 + 32: refused; the shared expert's
    # gate_up 2 x 5,632 / 8 = 1,408 = 22 x 64 fits. At tp 4: w13 704 = 11 x 64, w2 K 352 = 22 x 16: planned.
    with pytest.raises(KvplanError, match="routed experts' w13 .*size_n = 352 is not divisible"):
        _plan(_model(QWEN_MOE), 8)
    assert _plan(_model(QWEN_MOE), 4).weight_bytes > 0
