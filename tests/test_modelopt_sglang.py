"""NVIDIA ModelOpt checkpoints under SGLang (issue 22; kvplan/readers/modelopt_sglang.py): the exclusion list's key by
algorithm and each entry's match as SGLang reads them, from the 0.5.23 wheel's
`sglang/srt/layers/quantization/modelopt_quant.py` (ModelOptFp8Config.from_config L466-520 reads `ignore` alone;
ModelOptFp4Config.from_config L1653-1655 `ignore`, `modules_to_not_convert`, `exclude_modules`; is_layer_excluded
L379-425: the entry as a regex with `.` literal and `*` any run, fullmatching the whole name or one dotted word; a
FusedMoE block asks is_layer_excluded alone, L349-353) and `utils.py` is_layer_skipped (dotted-path boundaries from
0.5.11, a substring in 0.5.10). vLLM's reading (substring or fnmatch of the whole name; `ignore`, else
`exclude_modules`) stays every other engine's.

The model is test_modelopt.py's small Qwen3-MoE: attention 12,288 parameters a layer, experts 24,576 a layer, 2 layers.
"""

from __future__ import annotations

from test_modelopt import _spec

from kvplan.engines.sglang.quant_methods import as_read, restated
from kvplan.model.weights import weight_bytes
from kvplan.readers.modelopt_sglang import matcher


def _nvfp4(**lists):
    return _spec({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, **lists})


def test_a_word_inside_a_dotted_word_keeps_nothing_in_sglang():
    # `attn`: a substring of every `self_attn` projection, so vLLM keeps 2 x 12,288 = 24,576 attention parameters in
    # bf16; SGLang 0.5.11+ matches no whole name, no dotted word (`self_attn` is not `attn`) and no dotted run, so it
    # quantizes them; SGLang 0.5.10's substring is_layer_skipped keeps them as vLLM does
    spec = _nvfp4(ignore=["lm_head", "attn"])
    assert spec.quantization.kept == (("attention", 24_576),)
    new, old = as_read(spec, "0.5.23"), as_read(spec, "0.5.10")
    assert new.quantization.kept == () and old.quantization.kept == spec.quantization.kept
    # 24,576 parameters at NVFP4's 9/16 B instead of bf16's 2 B: 24,576 x (2 - 9/16) = 35,328 B fewer weights
    assert weight_bytes(spec).total - weight_bytes(new).total == 35_328
    said = restated(spec, "0.5.23", spec.quantization.notes)
    assert any("SGLang's ModelOpt NVFP4 config reads `ignore`" in n and "0 parameters kept in 16 bits (vLLM's "
               "reading: 24,576)" in n for n in said), said


def test_a_layers_mlp_keeps_its_experts_only_in_vllm():
    # `model.layers.1.mlp`: vLLM keeps layer 1's experts (a substring of each expert's name), 24,576 parameters; SGLang
    # asks is_layer_excluded of the block `model.layers.1.mlp.experts`, which the entry neither fullmatches nor is one
    # dotted word of: quantized
    spec = _nvfp4(ignore=["model.layers.1.mlp"])
    assert spec.quantization.kept == (("experts", 24_576),)
    assert as_read(spec, "0.5.23").quantization.kept == ()


def test_fp8_reads_ignore_alone():
    # flat FP8 with `exclude_modules` and no `ignore`: vLLM falls back to it (2 x 12,288 attention kept); SGLang's FP8
    # config reads `ignore` alone: no list, everything quantized
    spec = _spec({"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["model.layers.*.self_attn*"]})
    assert spec.quantization.kept == (("attention", 24_576),)
    sglang = as_read(spec, "0.5.23").quantization
    assert sglang.kept == () and "reads no list" in " ".join(sglang.notes)


def test_where_both_read_alike_nothing_is_said():
    # the recipe's wildcard: the whole name fullmatches `model\.layers\..*\.self_attn.*` in SGLang, fnmatch in vLLM
    spec = _nvfp4(ignore=["lm_head", "model.layers.*.self_attn*"])
    assert [r for r, _ in spec.quantization.readings] == ["unread"]  # the releases before 0.5.10, below
    assert as_read(spec, "0.5.23").quantization == spec.quantization
    assert restated(spec, "0.5.23", spec.quantization.notes) == ()


def test_before_0_5_10_the_plan_says_vllms_reading_is_planned():
    # 0.5.8.post1's wheel matches otherwise (FP8 a substring, NVFP4 a fullmatch of the whole name, experts never
    # excluded), and the releases before 0.5.10 were not read one by one: vLLM's reading, said
    spec = _nvfp4(ignore=["lm_head", "attn"])
    assert as_read(spec, "0.5.9").quantization.kept == spec.quantization.kept
    said = restated(spec, "0.5.9", spec.quantization.notes)
    assert any("SGLang before 0.5.10 matches ModelOpt lists by rules not read here" in n for n in said), said


def test_an_algorithm_whose_sglang_config_was_not_read_says_so():
    spec = _spec({"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": 16, "ignore": ["lm_head"]})
    said = restated(spec, "0.5.23", spec.quantization.notes)
    assert any("SGLang's ModelOpt W4A16_NVFP4 config was not read" in n for n in said), said


def test_sglang_matching_rules():
    # is_layer_excluded: a dotted word (`mtp*` as the docstring's example), language_model. stripped, the fused
    # DeepSeek projection by its last word; the routed experts by their block only
    assert matcher("mtp*", True)("model.mtp_layers.0.eh_proj")
    assert matcher("model.layers.0.self_attn", True)("language_model.model.layers.0.self_attn.q_proj")
    assert matcher("model.layers.0.self_attn.kv_a_proj_with_mqa", True)(
        "model.layers.0.self_attn.fused_qkv_a_proj_with_mqa")
    # its docstring's own example, q_a_proj, is no substring of `fused_qkv_a_proj_with_mqa` (`qkv_a`): the code says no
    assert not matcher("model.layers.0.self_attn.q_a_proj", True)("model.layers.0.self_attn.fused_qkv_a_proj_with_mqa")
    assert matcher("model.layers.3.mlp.experts", True)("model.layers.3.mlp.experts.0.up_proj")
    assert not matcher("model.layers.3.mlp.experts.0", True)("model.layers.3.mlp.experts.0.up_proj")
    assert not matcher("attn", True)("model.layers.0.self_attn.q_proj")
