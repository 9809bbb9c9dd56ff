"""compressed-tensors W8A8 int8, channel-wise: the weights' fp32 scales, one per output feature, are weight bytes.

vLLM allocates them in CompressedTensorsW8A8Int8.create_weights (the 0.8.0 wheel's
model_executor/layers/quantization/compressed_tensors/schemes/compressed_tensors_w8a8_int8.py L67-70, 0.12.0 L78-84:
`weight_scale = ChannelQuantScaleParameter(data=torch.empty((sum(output_partition_sizes), 1), dtype=torch.float32))`
for QuantizationStrategy.CHANNEL), and for MoE experts in CompressedTensorsW8A8Int8MoEMethod (0.12.0
compressed_tensors_moe.py L1331-1341: w13_weight_scale (E, 2 x I, 1), w2_weight_scale (E, hidden, 1), float32).
Expected bytes are hand arithmetic from the configs' shapes.
"""

from __future__ import annotations

from kvplan.model.weights import weight_bytes
from kvplan.sources.importer import build_spec

from conftest import LLAMA_31_8B, llm_compressor_w8a8

# the quantization_config llm-compressor writes for W8A8 int8 (RedHatAI's *-quantized.w8a8 checkpoints): int8
# weights per channel, int8 activations per token, dynamic
W8A8 = llm_compressor_w8a8("int")
LLAMA_8B = LLAMA_31_8B
MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
       "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100,
       "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def _spec(config: dict, qc: dict | None):
    return build_spec(dict(config, **({"quantization_config": qc} if qc else {})), "test/w8a8", source="test")[0]


def test_llama_3_1_8b_w8a8_holds_a_scale_per_output_channel():
    # Per layer the column-parallel outputs: q 32 x 128 + k, v 2 x 8 x 128 = 6,144, gate + up 2 x 14,336 = 28,672;
    # the row-parallel o and down output 4,096 each. 32 layers x 34,816 x 4 B = 4,456,448 B (sharded) and
    # 32 x 8,192 x 4 B = 1,048,576 B (every rank whole): 5,505,024 B in all (0.06% of the 9.09 GB loaded)
    q = _spec(LLAMA_8B, W8A8).quantization
    assert (q.method, q.channel_scales) == ("int8", (4_456_448, 1_048_576, 0))
    with_scales, bf16 = weight_bytes(_spec(LLAMA_8B, W8A8)), weight_bytes(_spec(LLAMA_8B, None))
    # the linear weights themselves are 1 B each: 32 x (4,096 x 6,144 + 4,096 x 4,096 + 3 x 4,096 x 14,336)
    # = 6,979,321,856 B, half their bf16 bytes
    linear = 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    assert with_scales.sharded == linear + 4_456_448
    assert with_scales.replicated - bf16.replicated == 1_048_576
    assert bf16.sharded == 2 * linear


def test_moe_experts_scales_and_a_tensor_strategy_has_none():
    # Small Qwen3-MoE, every layer MoE: q, k, v (4 + 2 x 2) x 16 = 128 and o 64 per layer; experts
    # 4 x (2 x 32 + 64) = 512 per layer. 2 layers: 1,024 B, 512 B, 4,096 B
    assert _spec(MOE, W8A8).quantization.channel_scales == (1_024, 512, 4_096)
    tensor = {**W8A8, "config_groups": {"g": {"targets": ["Linear"], "weights": {
        "num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": True}}}}
    assert _spec(MOE, tensor).quantization.channel_scales == ()  # one scale per tensor: a few bytes
