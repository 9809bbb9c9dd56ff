"""8-bit GPTQ / AWQ / AutoRound checkpoints priced as stored (issue 22): one byte a weight, and per group of
`group_size` inputs of each output an fp16 scale and a packed 8-bit zero point (GPTQ adds g_idx int32 [K]), not an
fp32 scale per 128 x 128 tile. The tensors' shapes are the quantizer's own (AutoGPTQ/AutoGPTQ@058fd80a
auto_gptq/nn_modules/qlinear/qlinear_cuda.py QuantLinear.__init__: qweight int32 [K * bits / 32, N], qzeros int32
[ceil(K / g), N * bits / 32], scales fp16 [ceil(K / g), N], g_idx int32 [K]); a checkpoint written with them is read
back by its headers and must equal what kvplan counts from config.json alone."""

from __future__ import annotations

import json

from conftest import write_safetensors

from kvplan.model.weight_formats import linear_bytes
from kvplan.model.weights import weight_bytes
from kvplan.sources.importer import build_spec

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, untied head.
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
# (name, K inputs, N outputs) of each quantized linear of one layer
LINEARS = (("self_attn.q_proj", 64, 64), ("self_attn.k_proj", 64, 32), ("self_attn.v_proj", 64, 32),
           ("self_attn.o_proj", 64, 64), ("mlp.gate_proj", 64, 128), ("mlp.up_proj", 64, 128),
           ("mlp.down_proj", 128, 64))
GPTQ8 = {"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": False, "sym": True}


def _gptq_tensors(bits: int, group: int) -> dict:
    """The checkpoint AutoGPTQ's QuantLinear writes for SMALL, with bf16 embedding, head and norms."""
    tensors = {"model.embed_tokens.weight": ("BF16", [100, 64], 12_800), "lm_head.weight": ("BF16", [100, 64], 12_800),
               "model.norm.weight": ("BF16", [64], 128)}
    for i in range(2):
        layer = f"model.layers.{i}"
        tensors |= {f"{layer}.{n}.weight": ("BF16", [64], 128) for n in ("input_layernorm", "post_attention_layernorm")}
        for name, k, n in LINEARS:
            groups = -(-k // group)
            tensors |= {f"{layer}.{name}.qweight": ("I32", [k * bits // 32, n], k * bits // 32 * n * 4),
                        f"{layer}.{name}.qzeros": ("I32", [groups, n * bits // 32], groups * n * bits // 32 * 4),
                        f"{layer}.{name}.scales": ("F16", [groups, n], groups * n * 2),
                        f"{layer}.{name}.g_idx": ("I32", [k], k * 4)}
    return tensors


def _spec(qc: dict):
    return build_spec(dict(SMALL, quantization_config=qc), "test/small-int8", source="test")[0]


def test_gptq_8bit_group_32_is_counted_as_its_checkpoint_stores_it(tmp_path):
    # Per layer, linear weights q 64x64 + k, v 2 x 64x32 + o 64x64 + gate, up 2 x 64x128 + down 128x64 = 36,864:
    #   qweight int32 [K/4, N]: 1 B a weight                  36,864 B
    #   qzeros int32 [K/32, N/4]: one 8-bit zero per group     36,864 / 32 = 1,152 groups -> 1,152 B
    #   scales fp16 [K/32, N]                                  1,152 x 2 = 2,304 B
    #   g_idx int32 [K]: K = 6 x 64 + 128 = 512                2,048 B
    #   -> 42,368 B a layer, 84,736 for 2; + embedding and head 2 x 6,400 x 2 B + norms 5 x 64 x 2 B = 26,240
    #   = 110,976 B. (An fp32 scale per 128 x 128 pooled tile, what kvplan counted before: 73,728 + 72 x 4 + 4,096
    #   + 26,240 = 104,352, 6,624 B short.)
    spec = _spec(GPTQ8)
    q = spec.quantization
    assert (q.method, q.group_size, q.input_groups, q.index_bytes) == ("int8", 32, True, 4_096)
    assert q.block_shapes == ()
    assert weight_bytes(spec).total == 110_976
    folder = tmp_path / "small-gptq-int8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(SMALL, quantization_config=GPTQ8)))
    write_safetensors(folder / "model.safetensors", _gptq_tensors(8, 32))
    from kvplan.sources.resolve import resolve_model

    assert resolve_model(str(folder)).spec.checkpoint_bytes == 110_976


def test_awq_and_autoround_8bit_store_the_same_groups_without_g_idx():
    # AWQ (qweight int32 [K, N/4], qzeros int32 [K/g, N/4], scales fp16 [K/g, N]) and AutoRound's AWQ / GPTQ
    # exports: 73,728 B + 2,304 groups x 3 B = 80,640 B of linears at group 32; no g_idx (kvplan counts it for
    # quant_method gptq only) -> + 26,240 = 106,880 B
    for qc in ({"quant_method": "awq", "bits": 8, "group_size": 32, "zero_point": True, "version": "gemm"},
               {"quant_method": "autoround", "bits": 8, "group_size": 32, "sym": True}):
        spec = _spec(qc)
        assert (spec.quantization.method, spec.quantization.input_groups) == ("int8", True)
        assert weight_bytes(spec).total == 106_880


def test_linear_bytes_input_groups_against_square_blocks():
    # 1,048,576 weights at group 128: 8,192 groups x (2 B scale + 1 B zero) = 24,576 B over the weights' bytes;
    # the same count with a 128 x 128 block's fp32 scale: 64 blocks x 4 B = 256 B
    assert linear_bytes(1 << 20, "int8", 128, True, 2, True) == (1 << 20) + 24_576
    assert linear_bytes(1 << 20, "int8", 128) == (1 << 20) + 256
    # a 4-bit checkpoint is unchanged: 0.5 B + 2.5 B per group of 128 -> 524,288 + 20,480
    assert linear_bytes(1 << 20, "int4", 128, True, 2) == 524_288 + 20_480


def test_compressed_tensors_int8_and_block_fp8_keep_their_own_scales():
    # W8A8 int8 (compressed-tensors channel) and DeepSeek-style block fp8 are not input groups
    ct = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
        "num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}}}}
    assert _spec(ct).quantization.input_groups is False
    assert _spec({"quant_method": "fp8", "weight_block_size": [128, 128]}).quantization.input_groups is False
