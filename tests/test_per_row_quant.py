"""GPTQ / AWQ at `group_size: -1` (one scale and zero per output row) priced from the tensors' rows (issue 22), against
published checkpoints' file sizes.

The sizes are TheBloke's "Provided files" tables (the Hub model cards, 2023): a branch's size in GB (10^9), rounded to
0.01 and counting the branch's small non-weight files too (tokenizer, configs: its 4-bit 128g rows sit 0.005-0.01 GB
above the weights alone), so a total is checked to 0.01 GB and, better, the difference of two branches of one
repository (the same small files in both) to 0.01 GB:
* https://huggingface.co/TheBloke/Llama-2-7B-32K-Instruct-GPTQ: gptq-8bit--1g-actorder_True 7.01 GB (Llama-2-7B
  shapes: hidden 4096, 32 layers, 32 heads, MLP 11008, vocab 32000, untied; ../shared/configs/
  meta-llama__Llama-2-7b-hf.json).
* https://huggingface.co/TheBloke/zephyr-7B-beta-GPTQ: gptq-8bit--1g-actorder_True 7.52 GB, gptq-8bit-128g-actorder_True
  7.68 GB (Mistral-7B shapes: hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336, vocab 32000, untied;
  HuggingFaceH4/zephyr-7b-beta config.json).
Before this change both branches priced the same (groups of 128 for -1): a difference of 0.
"""

from __future__ import annotations

from kvplan.model.weights import weight_bytes
from kvplan.sources.importer import build_spec

LLAMA2_7B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
             "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096,
             "torch_dtype": "float16", "tie_word_embeddings": False}
MISTRAL_7B = dict(LLAMA2_7B, model_type="mistral", architectures=["MistralForCausalLM"], num_key_value_heads=8,
                  intermediate_size=14336, max_position_embeddings=32768, sliding_window=4096)


def _gptq(cfg: dict, bits: int, group: int):
    qc = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": True, "sym": True}
    return build_spec(dict(cfg, quantization_config=qc), "test/gptq", source="test")[0]


def test_llama2_7b_8bit_per_row_matches_its_published_size():
    # linears a layer: q, k, v, o 4 x 4096^2 = 67,108,864; gate, up, down 3 x 4096 x 11008 = 135,266,304
    #   -> 202,375,168 x 32 = 6,476,005,376 B at 8 bits
    # rows a layer: qkv 12,288 + o 4,096 + gate_up 22,016 + down 4,096 = 42,496 x 32 = 1,359,872 x 3 B
    #   (fp16 scale + 8-bit zero) = 4,079,616 B
    # g_idx: inputs a layer q, k, v 3 x 4096 + o 4096 + gate, up 2 x 4096 + down 11008 = 35,584 x 32 x 4 B = 4,554,752
    # embedding + head 2 x 32000 x 4096 x 2 = 524,288,000; norms 65 x 4096 x 2 = 532,480
    #   -> 7,009,460,224 B = 7.01 GB (the table: 7.01 GB); groups of 128 gave 7,157,161,984 (7.16 GB)
    total = weight_bytes(_gptq(LLAMA2_7B, 8, -1)).total
    assert total == 7_009_460_224
    assert abs(total / 1e9 - 7.01) <= 0.01


def test_zephyr_per_row_and_group_128_branches_differ_as_published():
    # linears: (q 4096^2 + k, v 2 x 1024 x 4096 + o 4096^2 + 3 x 4096 x 14336) x 32 = 6,979,321,856 at 8 bits
    # group 128: 6,979,321,856 / 128 = 54,525,952 groups x 3 B = 163,577,856
    # per row: (qkv 6,144 + o 4,096 + gate_up 28,672 + down 4,096) x 32 = 1,376,256 rows x 3 B = 4,128,768
    # difference 159,449,088 B = 0.159 GB; the tables: 7.68 - 7.52 = 0.16 GB
    row, group = (weight_bytes(_gptq(MISTRAL_7B, 8, g)).total for g in (-1, 128))
    assert group - row == 163_577_856 - 4_128_768
    assert abs((group - row) / 1e9 - 0.16) <= 0.01
    assert abs(row / 1e9 - 7.52) <= 0.01 and abs(group / 1e9 - 7.68) <= 0.01


def test_row_parallel_scales_held_whole_on_every_rank():
    # vLLM gives o_proj and down_proj (RowParallelLinear, inputs split) all N rows' scales on every rank at group -1
    # (0.11.2 gptq.py L264-281; marlin_utils.py L252-258): Mistral-7B's o 4096 + down 4096 rows x 32 layers = 262,144
    # rows x 3 B = 786,432 B replicated, beside the norms' 532,480; the column-parallel rows stay sharded
    w = weight_bytes(_gptq(MISTRAL_7B, 8, -1))
    assert w.replicated == 786_432 + 532_480
    four = weight_bytes(_gptq(MISTRAL_7B, 4, -1))  # 4 bits: 2.5 B a row (fp16 scale + 4-bit zero)
    assert four.replicated == 262_144 * 5 // 2 + 532_480
    # 4 bits in all: 6,979,321,856 / 2 + 1,376,256 rows x 2.5 B = 3,489,660,928 + 3,440,640; g_idx 4,980,736
    assert four.sharded + four.replicated - 532_480 == 3_489_660_928 + 3_440_640 + 4_980_736


def test_a_role_whose_shapes_are_not_read_keeps_groups_of_128_and_says_so():
    # Mamba mixers are not read as tensors (kvplan.readers.block_scales): their rows are unknown, priced at 128
    cfg = {"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 768, "num_hidden_layers": 2,
           "state_size": 16, "expand": 2, "conv_kernel": 4, "vocab_size": 1000, "torch_dtype": "float16",
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True}}
    q = build_spec(cfg, "test/mamba-gptq", source="test")[0].quantization
    assert q.per_row
    assert any("group_size -1" in n and "groups of 128" in n for n in q.notes)


def test_models_show_counts_rows_not_tiles(tmp_path, kvplan_home):
    # Llama-2-7B's 42,496 rows a layer x 32 = 1,359,872 per-row scales (and zeros), not 128 x 128 tiles
    import json
    import subprocess
    import sys
    qc = {"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": True, "sym": True}
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA2_7B, quantization_config=qc)))
    out = subprocess.run([sys.executable, "-m", "kvplan", "models", "show", str(tmp_path), "--json"],
                         capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert data["row_scales"] == 1_359_872 and "block_scales" not in data
