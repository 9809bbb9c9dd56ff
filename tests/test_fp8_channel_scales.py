"""FP8 channel-wise weights (llm-compressor's FP8_DYNAMIC, fbgemm_fp8, ModelOpt FP8_PER_CHANNEL_PER_TOKEN): the fp32
scale per output feature each engine allocates is weight bytes; per-tensor and block FP8 add none beyond their own.

Sources of the shapes (the expected bytes below are hand arithmetic from them and the configs' sizes):
* llm-compressor's FP8_DYNAMIC preset is `weights: num_bits 8, type float, strategy channel` with dynamic per-token
  fp8 activations (vllm-project/compressed-tensors@da3ad9fe:src/compressed_tensors/quantization/quant_scheme.py,
  FP8_DYNAMIC); RedHatAI's *-FP8-dynamic checkpoints are written with it.
* vLLM CompressedTensorsW8A8Fp8.create_weights -> create_fp8_scale_parameter: ChannelQuantScaleParameter
  (sum(output_partition_sizes), 1) float32 (0.11.0 wheel utils/fp8_utils.py L804-808, 0.33.0 L1406-1411); experts
  w13_weight_scale (E, 2 x I, 1), w2_weight_scale (E, hidden, 1) float32 (0.11.0 compressed_tensors_moe.py L626-637,
  0.33.0 compressed_tensors_moe/compressed_tensors_moe_w8a8_fp8.py L188-202). SGLang allocates the same shapes
  (0.5.23 wheel compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py L107-113, compressed_tensors_w8a8_fp8_moe.py
  L171-185); TensorRT-LLM reads `strategy: channel` as FP8_PER_CHANNEL_PER_TOKEN (NVIDIA/TensorRT-LLM@21156a7a:
  tensorrt_llm/models/quant_config_utils.py _quant_config_from_config_group) whose FP8RowwiseLinearMethod holds
  weight_scale torch.empty(out_features) (tensorrt_llm/_torch/modules/linear.py): torch's default dtype, fp32 where
  no caller sets another (none does in NVIDIA/TensorRT-LLM@004b733e tensorrt_llm/_torch/pyexecutor/model_loader.py).
* A llm-compressor FP8 dynamic checkpoint's card states the stored shape: weight scale (N, 1), one per output
  channel, lm_head ignored (JongYeop/Llama-3.1-8B-Instruct-FP8-W8A8-Dynamic-Per-Token, the Hub card as a stored
  mirror copy has it, hugingapi.com/JongYeop/Llama-3.1-8B-Instruct-FP8-W8A8-Dynamic-Per-Token).
* vLLM FBGEMMFp8LinearMethod: weight_scale (sum(output_partition_sizes), 1) float32 (0.33.0 fbgemm_fp8.py L133-134);
  FBGEMMFp8Config.get_quant_method gives only LinearBase a method (L79-90).
* vLLM ModelOptFp8PcPtLinearMethod: weight_scale (output_size_per_partition,) float32 (0.19.0 modelopt.py L583-584).
* Per-tensor FP8 (compressed-tensors `strategy: tensor`, fp8's Fp8LinearMethod, ModelOpt FP8): one fp32 scale per
  fused shard, len(output_partition_sizes) (0.11.0 fp8_utils.py L823-826): 7 a Llama layer, 896 B in Llama-3.1-8B,
  left out.
"""

from __future__ import annotations

import pytest

from kvplan.api import plan
from kvplan.core.errors import KvplanError
from kvplan.model.weights import weight_bytes
from kvplan.sources.catalog import find_in_catalog
from kvplan.sources.importer import build_spec

from conftest import LLAMA_31_8B, llm_compressor_w8a8, shared_config

FP8_DYNAMIC = llm_compressor_w8a8("float")
LLAMA_8B = LLAMA_31_8B
QWEN2_MOE = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
             "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "num_experts": 4,
             "num_experts_per_tok": 2, "vocab_size": 100, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
             "tie_word_embeddings": False}


def _quant(config: dict, qc: dict | None):
    return build_spec(dict(config, **({"quantization_config": qc} if qc else {})), "test/fp8", source="test")[0]


def _weights(strategy: str, **more) -> dict:
    group = FP8_DYNAMIC["config_groups"]["group_0"]
    return {**FP8_DYNAMIC, "config_groups": {"group_0": {**group, "weights": {**group["weights"],
                                                                               "strategy": strategy, **more}}}}


def test_llama_3_1_8b_fp8_dynamic_holds_a_scale_per_output_channel():
    # Per layer the column-parallel outputs: q 32 x 128 + k, v 2 x 8 x 128 = 6,144, gate + up 2 x 14,336 = 28,672;
    # the row-parallel o and down output 4,096 each. 32 layers x 34,816 x 4 B = 4,456,448 B (sharded) and
    # 32 x 8,192 x 4 B = 1,048,576 B (whole on every rank): 5,505,024 B, as int8 W8A8's
    spec = _quant(LLAMA_8B, FP8_DYNAMIC)
    assert (spec.quantization.method, spec.quantization.channel_scales) == ("fp8", (4_456_448, 1_048_576, 0))
    fp8, bf16 = weight_bytes(spec), weight_bytes(_quant(LLAMA_8B, None))
    linear = 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)  # 6,979,321,856 fp8 weights, 1 B each
    assert fp8.sharded == linear + 4_456_448 and bf16.sharded == 2 * linear
    assert fp8.replicated - bf16.replicated == 1_048_576


def test_per_tensor_and_block_fp8_add_no_channel_scales():
    assert _quant(LLAMA_8B, _weights("tensor")).quantization.channel_scales == ()
    block = _quant(LLAMA_8B, _weights("block", block_structure=[128, 128])).quantization
    assert (block.group_size, block.channel_scales) == (128, ())  # its fp32 scale per 128 x 128 tile: linear_bytes
    assert _quant(LLAMA_8B, {"quant_method": "fp8", "activation_scheme": "dynamic"}).quantization.channel_scales == ()
    assert _quant(LLAMA_8B, {"quant_method": "modelopt", "quant_algo": "FP8"}).quantization.channel_scales == ()
    # a config read by its first scheme (NVFP4 here) takes that scheme's scales, not a later group's
    mixed = {**FP8_DYNAMIC, "config_groups": {"nvfp4": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}, **FP8_DYNAMIC["config_groups"]}}
    assert (_quant(LLAMA_8B, mixed).quantization.method, _quant(LLAMA_8B, mixed).quantization.channel_scales) == (
        "nvfp4", ())


def test_moe_experts_and_shared_expert_scales():
    # Qwen2-MoE-like, 2 MoE layers: q, k, v (4 + 2 x 2) x 16 = 128 and o 64 a layer; the shared expert's gate and up
    # 2 x 48 = 96, its down 64; routed experts 4 x (2 x 32 + 64) = 512 a layer. (128 + 96) x 2 x 4 B = 1,792 B,
    # (64 + 64) x 2 x 4 B = 1,024 B, 512 x 2 x 4 B = 4,096 B
    assert _quant(QWEN2_MOE, FP8_DYNAMIC).quantization.channel_scales == (1_792, 1_024, 4_096)
    # fbgemm_fp8 gives FusedMoE no method and ModelOpt's FP8 MoE method is per-tensor: the linears' scales only
    fbgemm = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": [], "activation_scale_ub": 1200.0}
    assert _quant(QWEN2_MOE, fbgemm).quantization.channel_scales == (1_792, 1_024, 0)
    pcpt = {"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}
    assert _quant(QWEN2_MOE, pcpt).quantization.channel_scales == (1_792, 1_024, 0)


def test_llama_3_1_405b_fp8_fbgemm_scales_only_its_quantized_mlps():
    # Meta's fbgemm_fp8 checkpoint keeps every attention projection and the MLPs of layers 0 and 125 in bf16
    # (modules_to_not_convert): 124 quantized MLPs, each gate + up 2 x 53,248 = 106,496 outputs (sharded) and down
    # 16,384 (whole on every rank). 124 x 106,496 x 4 B = 52,822,016 B; 124 x 16,384 x 4 B = 8,126,464 B
    spec = find_in_catalog("llama-3.1-405b-instruct-fp8")
    assert spec.quantization.channel_scales == (52_822_016, 8_126_464, 0)
    kept = dict(spec.quantization.kept)
    p = spec.params
    quantized_mlp = p.mlp - kept["mlp"]  # 124 x 3 x 16,384 x 53,248
    assert quantized_mlp == 124 * 3 * 16384 * 53248
    w = weight_bytes(spec)
    assert w.sharded == quantized_mlp + 2 * (p.attention + kept["mlp"]) + 52_822_016


def test_mla_projections_dense_first_layer_and_shared_expert():
    # DeepSeek-V3-shaped, 2 layers (the first dense), 4 heads, q LoRA 32, kv LoRA 16, rope 8, nope 16, v 16. vLLM's
    # DeepseekV2MLAAttention (0.11.0 wheel models/deepseek_v2.py L877-916): q_b 4 x (16 + 8) = 96 and kv_b
    # 4 x (16 + 16) = 128 column-parallel; the fused q_a + kv_a 32 + 16 + 8 = 56 and o 64 whole on every rank.
    # Layer 0's dense MLP: gate + up 2 x 128 = 256, down 64; layer 1's shared expert (1 x 32): 64 and 64, its
    # routed experts 4 x (2 x 32 + 64) = 512. Column (224 x 2 + 256 + 64) x 4 B = 3,072 B; whole
    # (120 x 2 + 64 + 64) x 4 B = 1,472 B; experts 512 x 4 B = 2,048 B
    ds = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32,
          "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "n_routed_experts": 4,
          "moe_intermediate_size": 32, "first_k_dense_replace": 1, "intermediate_size": 128, "n_shared_experts": 1,
          "num_experts_per_tok": 2, "moe_layer_freq": 1, "vocab_size": 100, "max_position_embeddings": 4096,
          "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    assert _quant(ds, FP8_DYNAMIC).quantization.channel_scales == (3_072, 1_472, 2_048)


def test_sglang_from_0_5_16_refuses_an_fbgemm_fp8_checkpoint():
    # SGLang registers FBGEMMFp8Config through 0.5.15 (0.5.15 wheel layers/quantization/__init__.py L95) and has no
    # fbgemm from 0.5.16 on; ModelConfig._verify_quantization raises "Unknown quantization method" (0.5.16 wheel
    # configs/model_config.py L1466-1471). vLLM loads it (FBGEMMFp8Config)
    model = find_in_catalog("llama-3.1-405b-instruct-fp8")
    assert model.quantization.quant_method == "fbgemm_fp8"
    for version in (None, "0.5.16", "0.5.23"):
        with pytest.raises(KvplanError, match="registers no fbgemm_fp8 quantization method"):
            plan("llama-3.1-405b-instruct-fp8", gpu="h100", tp=8, context="8k", engine="sglang", engine_version=version)
    assert plan("llama-3.1-405b-instruct-fp8", gpu="h100", tp=8, context="8k", engine="sglang", engine_version="0.5.15")
    assert plan("llama-3.1-405b-instruct-fp8", gpu="h100", tp=8, context="8k", engine="vllm")


def test_fbgemm_moe_experts_load_in_16_bits():
    """vLLM's FBGEMMFp8Config.get_quant_method gives FusedMoE no method (0.33.0 fbgemm_fp8.py L79-90; SGLang 0.5.15
    fpgemm_fp8.py L78-89 the same), so the routed experts load unquantized in the model dtype."""
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
    spec = _quant(QWEN2_MOE, qc)
    # experts: 2 layers x 4 experts x (gate + up + down) 3 x hidden 64 x moe_intermediate 32 = 49,152 parameters,
    # bf16 2 B each = 98,304 B (fp8 would be 49,152 B); no channel scales on them (the third part 0)
    assert spec.params.experts == 2 * 4 * 3 * 64 * 32
    assert weight_bytes(spec).experts == 98_304
    assert spec.quantization.channel_scales[2] == 0
    # a dense fbgemm model has no experts to keep: its format is unchanged
    assert _quant(LLAMA_8B, qc).quantization.experts_method == ""


def test_a_gated_query_counts_its_gate_rows():
    # Qwen3-Next-80B-A3B's config (../shared/configs): 48 layers, full attention every 4th (12 layers), 16 query
    # heads of 256; attn_output_gate unset, true by default (vLLM's Qwen3NextAttention: getattr(config,
    # "attn_output_gate", True)), so qkv_proj outputs total_num_heads x (1 + attn_output_gate) query heads (vllm 0.33.0
    # wheel models/qwen3_next.py L317-325). The gate's 16 x 256 rows hold a scale each: 12 x 4,096 x 4 B = 196,608 B
    # more column-parallel scales than the same config with the gate off
    cfg = shared_config("Qwen__Qwen3-Next-80B-A3B-Thinking")
    gated = _quant(cfg, FP8_DYNAMIC).quantization.channel_scales
    plain = _quant(dict(cfg, attn_output_gate=False), FP8_DYNAMIC).quantization.channel_scales
    assert gated[0] - plain[0] == 196_608 and gated[1:] == plain[1:]
