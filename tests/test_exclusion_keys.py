"""Which exclusion-list key each quantization method reads (kvplan.readers.exclusion_rules.KEYS), as vLLM 0.33.0's
`from_config` reads them: fp8 `ignored_layers`, falling back to `modules_to_not_convert` only where the first is
empty or absent (`quantization/fp8.py` L162-168); fbgemm_fp8 and AWQ `modules_to_not_convert` (`fbgemm_fp8.py` L75,
`auto_awq.py` L246-248); compressed-tensors `ignore` (`compressed_tensors/compressed_tensors.py` L254); ModelOpt
`quantization.exclude_modules` in hf_quant_config.json (`modelopt.py` L342), `ignore` else `exclude_modules` in
config.json's form (L359); GPTQ no list (`auto_gptq.py` L191). A key the method does not read is left out and named in
a note. Sizes are hand arithmetic from the small config below.
"""

from __future__ import annotations

import copy

from kvplan.sources.importer import build_spec

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100.
# kvplan counts whole modules: layer 0's attention, q, k, v, o = 64x64 + 2 x 64x32 + 64x64 = 12,288 parameters;
# layer 1's MLP, gate, up, down = 3 x 64x128 = 24,576
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
ATT0 = [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"]
MLP1 = [f"model.layers.1.mlp.{p}_proj" for p in ("gate", "up", "down")]
CT_GROUPS = {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}}


def _read(qc: dict):
    config = copy.deepcopy(SMALL)
    config["quantization_config"] = qc
    spec, notices = build_spec(config, "test/small", source="test")
    q = spec.quantization
    return sum(c for _, c in q.kept), [n for n in notices if "leaves out" in n]


def test_fp8_reads_ignored_layers_and_leaves_modules_to_not_convert_out():
    # ignored_layers lists layer 0's attention (12,288 parameters): vLLM reads it and never looks at
    # modules_to_not_convert, so layer 1's MLP (24,576) stays fp8. Merging both keys (round 35's reading) kept
    # 12,288 + 24,576 = 28,672.
    kept, notes = _read({"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ATT0,
                         "modules_to_not_convert": MLP1})
    assert kept == 12_288
    assert len(notes) == 1 and "`modules_to_not_convert` (3 entries)" in notes[0]
    assert "reads `ignored_layers`" in notes[0]


def test_fp8_falls_back_to_modules_to_not_convert_when_ignored_layers_is_empty():
    # `if not ignored_layers:` -> modules_to_not_convert: layer 1's MLP = 24,576 kept; nothing left out
    config = copy.deepcopy(SMALL)
    config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": [],
                                     "modules_to_not_convert": MLP1}
    spec, notices = build_spec(config, "test/small", source="test")
    assert sum(c for _, c in spec.quantization.kept) == 24_576 and not [n for n in notices if "leaves out" in n]
    # SGLang's Fp8Config.from_config takes the first key present (the empty ignored_layers): a note says so
    assert [n for n in notices if "SGLang's fp8 config reads the first key present" in n and "(3 entries)" in n]
    kept, notes = _read({"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": MLP1})
    assert kept == 24_576 and notes == []


def test_fbgemm_and_awq_read_modules_to_not_convert_only():
    # modules_to_not_convert = layer 1's MLP (24,576); ignored_layers' layer-0 attention (12,288) is not read
    for qc in ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0},
               {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True}):
        kept, notes = _read({**qc, "modules_to_not_convert": MLP1, "ignored_layers": ATT0})
        assert kept == 24_576
        assert len(notes) == 1 and "`ignored_layers` (4 entries)" in notes[0]


def test_compressed_tensors_reads_ignore_only():
    # ignore = layer 0's attention (12,288); modules_to_not_convert's layer-1 MLP (24,576) is not read
    kept, notes = _read({"quant_method": "compressed-tensors", "config_groups": CT_GROUPS, "ignore": ATT0,
                         "modules_to_not_convert": MLP1})
    assert kept == 12_288 and len(notes) == 1 and "reads `ignore`" in notes[0]


def test_gptq_reads_no_list():
    # AutoGPTQConfig.from_config reads `dynamic`, no exclusion list: layer 1's MLP stays 4-bit, 0 kept
    kept, notes = _read({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True,
                         "modules_to_not_convert": MLP1})
    assert kept == 0 and len(notes) == 1 and "reads no exclusion list" in notes[0]


def test_modelopt_precedence_in_both_forms():
    # config.json form: `ignore` present (even empty) wins over exclude_modules -> 0 kept, exclude_modules named
    kept, notes = _read({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": [], "exclude_modules": MLP1})
    assert kept == 0 and len(notes) == 1 and "`exclude_modules` (3 entries)" in notes[0]
    # no `ignore`: exclude_modules is read -> 24,576 kept
    kept, notes = _read({"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": MLP1})
    assert kept == 24_576 and notes == []
    # hf_quant_config.json's nested block: only exclude_modules (layer 1's MLP, 24,576); its `ignore` (layer 0's
    # attention) is not read
    kept, notes = _read({"producer": {"name": "modelopt"},
                         "quantization": {"quant_algo": "FP8", "exclude_modules": MLP1, "ignore": ATT0}})
    assert kept == 24_576 and len(notes) == 1 and "`ignore` (4 entries)" in notes[0]
