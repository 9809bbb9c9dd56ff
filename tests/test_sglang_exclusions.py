"""`--engine sglang` plans an exclusion list as SGLang reads it (kvplan.readers.exclusion_rules), one test per method.

Read in the SGLang wheels (`srt/layers/quantization/`): fp8 and fbgemm_fp8 go through utils.py is_layer_skipped, at
dotted-path boundaries from 0.5.11 (`_module_path_match`, 0.5.23 L48-59, 0.5.11 L46-57; sgl-project/sglang#23467) and
as a substring in 0.5.10 (L68, L80), a FusedMoE (`model.layers.N.<block>.experts`) also kept by an entry saying
`experts` that holds its prefix (0.5.23 L115-122); fp8's config reads the first of `ignored_layers`,
`modules_to_not_convert` present (fp8.py L354-356) and each entry with and without `model.` (L357-364); fbgemm_fp8's
reads `modules_to_not_convert` (0.5.15 fpgemm_fp8.py L74). AWQ (awq/awq.py L61-62, a substring of the name) and
compressed-tensors read as in vLLM: no reading of their own. Sizes are hand arithmetic on the small configs of
tests/test_exclusion_rules.py: a 2-layer Llama, attention 12,288 and MLP 24,576 parameters a layer; its Mixtral twin,
4 experts x 3 x 64 x 128 = 98,304 expert parameters a layer.
"""

from __future__ import annotations

import pytest
from test_exclusion_rules import CT_GROUPS, MOE, _q

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.sglang.quant_methods import as_read, restated
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request

FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic"}
FBGEMM = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}


def _kept(qc: dict, version: str = "0.5.23", base=None):
    model = _q(qc) if base is None else _q(qc, base)
    return model.quantization.kept, as_read(model, version).quantization.kept


def _weights(model, version: str) -> int:
    res = resolve_engine("sglang", version, []).result(model, find_gpu("h100-sxm"), Deployment(), Request(context=1024))
    return res.plan.weight_bytes_per_gpu


@pytest.mark.parametrize("qc, key, more", [(FP8, "ignored_layers", 24_576),
                                           (FBGEMM, "modules_to_not_convert", 24_576 - 1_536)])
def test_a_bare_module_name_is_kept_by_sglang(qc, key, more):
    # `self_attn` names no linear layer in full: vLLM quantizes it (is_layer_skipped, exact); SGLang's
    # `.self_attn.` is a dotted run of every attention projection's name (0.5.11 on) and a substring of it (0.5.10):
    # both layers' attention, 2 x 12,288 = 24,576 parameters, 2 B instead of fp8's 1 B: 24,576 B more per GPU; less,
    # for fbgemm_fp8, the fp32 scale per output channel those layers no longer carry: (q 64 + k 32 + v 32 + o 64)
    # x 2 layers x 4 B = 1,536 B
    listed, plain = _q(dict(qc, **{key: ["self_attn"]})), _q(dict(qc, **{key: []}))
    for version in ("0.5.10", "0.5.11", "0.5.15"):
        assert as_read(listed, version).quantization.kept == (("attention", 24_576),)
        assert _weights(listed, version) - _weights(plain, version) == more
    assert listed.quantization.kept == ()
    assert resolve_engine("vllm").result(listed, find_gpu("h100-sxm"), Deployment(), Request(context=1024)) \
        .plan.weight_bytes_per_gpu == resolve_engine("vllm").result(
            plain, find_gpu("h100-sxm"), Deployment(), Request(context=1024)).plan.weight_bytes_per_gpu


def test_mlp_gate_by_release():
    # sglang#23467's own case: `mlp.gate` (a MoE template's router) is a substring of `mlp.gate_proj`, so 0.5.10 keeps
    # gate_proj but not up_proj, the two shards of one fused gate_up_proj, and raises at start-up ("Detected some but
    # not all shards ... are quantized"); from 0.5.11 `.mlp.gate.` is no dotted run of it: nothing kept
    model = _q(dict(FP8, ignored_layers=["mlp.gate"]))
    with pytest.raises(KvplanError, match="SGLang's reading .* keeps only gate_proj"):
        as_read(model, "0.5.10")
    assert as_read(model, "0.5.11").quantization.kept == () == model.quantization.kept
    # the dotted reading keeps what vLLM's does and says nothing, so the reader leaves it out; the notices under 0.5.11
    # are the reader's, and nothing is restated for it (this was a KeyError in `kvplan fit --engine sglang`)
    assert [r for r, _ in model.quantization.readings] == ["substring"]
    assert restated(model, "0.5.11", ("other",)) == ("other",)


def test_fp8_reads_the_first_key_present():
    # `ignored_layers: []` beside layer 0's four attention projections under `modules_to_not_convert`: vLLM falls back
    # to the second key (12,288 parameters kept), SGLang's get_from_keys_or takes the first key present, empty: none
    full = [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"]
    vllm, sglang = _kept(dict(FP8, ignored_layers=[], modules_to_not_convert=full))
    assert vllm == (("attention", 12_288),) and sglang == ()
    # with no `ignored_layers` key SGLang reads `modules_to_not_convert` too: the same 12,288
    assert _kept(dict(FP8, modules_to_not_convert=full)) == ((("attention", 12_288),),) * 2


def test_fp8_an_entry_with_model_prefix_names_its_module_path():
    # `model.layers.1.mlp` is no linear layer's full name (vLLM keeps nothing), but a dotted prefix of layer 1's
    # gate, up and down projections in SGLang: 24,576 parameters
    assert _kept(dict(FP8, ignored_layers=["model.layers.1.mlp"])) == ((), (("mlp", 24_576),))


def test_fp8_experts_by_fused_moe_prefix():
    # a bare `experts` is the last dotted word of each layer's FusedMoE prefix
    # `model.layers.N.block_sparse_moe.experts`: both layers' experts, 2 x 98,304 = 196,608, where vLLM's exact reading
    # keeps none
    assert _kept(dict(FP8, ignored_layers=["experts"]), base=MOE) == ((), (("experts", 196_608),))
    # one expert's full name holds layer 1's FusedMoE prefix: all of layer 1's experts (98,304) in both engines, the
    # `model.`-less copy SGLang adds as well (it holds no `model.layers.1...experts`: the copy with `model.` does)
    one = dict(FP8, ignored_layers=["model.layers.1.block_sparse_moe.experts.0.w1"])
    assert _kept(one, base=MOE) == ((("experts", 98_304),),) * 2
    assert _kept(one, "0.5.10", base=MOE) == ((("experts", 98_304),),) * 2


def test_fp8_a_regex_entry_is_a_literal_to_sglang():
    # nothing in SGLang's fp8.py or utils.py reads the `re:` form: `re:.*self_attn.*` is compared as a name and keeps
    # nothing; kvplan's vLLM reading keeps both layers' attention, 24,576, as before (said in the reading's note)
    model = _q(dict(FP8, ignored_layers=["re:.*self_attn.*"]))
    assert model.quantization.kept == (("attention", 24_576),)
    theirs = as_read(model, "0.5.23").quantization
    assert theirs.kept == () and any("`re:` entry as a literal" in n for n in theirs.notes)


def test_sglang_notes_replace_the_vllm_reading_notes():
    # the reader's note says what vLLM plans and how much more SGLang keeps; under SGLang the reading's own note
    model = _q(dict(FP8, ignored_layers=["self_attn"]))
    assert len(model.quantization.notes) == 1 and "keeps 24,576 more parameters" in model.quantization.notes[0]
    said = restated(model, "0.5.23", ("other", *model.quantization.notes))
    assert said[0] == "other" and len(said) == 2 and "dotted-path boundaries" in said[1]
    assert said[1].endswith("24,576 parameters kept in 16 bits (vLLM's reading: 0)")
    assert "as a substring (0.5.10)" in restated(model, "0.5.10", model.quantization.notes)[0]


def test_fbgemm_reads_only_modules_to_not_convert():
    # SGLang's FBGEMMFp8Config reads `modules_to_not_convert` only: an `ignored_layers` beside it keeps nothing there
    qc = dict(FBGEMM, modules_to_not_convert=[], ignored_layers=["model.layers.0.self_attn.q_proj"])
    assert _kept(qc) == ((), ())


def test_awq_and_compressed_tensors_read_alike_in_both_engines():
    # AWQ: SGLang's is_layer_skipped_awq tests a substring, as vLLM's AWQ does: `self_attn` keeps both layers'
    # attention, 24,576, in both, and no reading of its own is kept; compressed-tensors' should_ignore_layer is vLLM's
    awq = _q({"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
              "modules_to_not_convert": ["self_attn"]})
    assert awq.quantization.kept == (("attention", 24_576),) and awq.quantization.readings == ()
    assert as_read(awq, "0.5.23") is awq
    ct = _q({"quant_method": "compressed-tensors", "config_groups": CT_GROUPS,
             "ignore": ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                        "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"]})
    assert ct.quantization.kept == (("attention", 12_288),) and as_read(ct, "0.5.23") is ct


def test_an_fp8_list_sglang_reads_as_vllm_does_keeps_no_reading():
    # every entry a full name: both engines keep layer 0's attention (12,288), and the spec carries no second reading
    full = [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"] + ["lm_head"]
    model = _q(dict(FP8, ignored_layers=full))
    assert model.quantization.kept == (("attention", 12_288),) and model.quantization.readings == ()


@pytest.mark.parametrize("qc, why", [
    ({"activation_scale_ub": 1200.0}, "needs `modules_to_not_convert`"),
    ({"modules_to_not_convert": []}, "needs `activation_scale_ub`"),
    ({}, "needs `modules_to_not_convert` and `activation_scale_ub`"),
    ({"modules_to_not_convert": [], "activation_scale_ub": "1200"}, r"activation_scale_ub must be a number"),
    ({"modules_to_not_convert": [], "activation_scale_ub": 1200.0, "weight_block_size": [128, 128]},
     "reads no `weight_block_size`")])
def test_fbgemm_without_its_keys_is_refused(qc, why):
    # vLLM's and SGLang's FBGEMMFp8Config.from_config read both keys with get_from_keys, which raises without them
    # (vLLM 0.33.0 fbgemm_fp8.py L75-76; SGLang 0.5.15 fpgemm_fp8.py L74-75); the bound becomes a float32 tensor
    # (L142-145); the method allocates one scale per output channel and reads no block size (L133-134)
    with pytest.raises(KvplanError, match=why):
        _q({"quant_method": "fbgemm_fp8", **qc})
    # `modules_to_not_convert: null` is there (get_from_keys returns it; the config keeps an empty list): planned
    assert _q({"quant_method": "fbgemm_fp8", "modules_to_not_convert": None,
               "activation_scale_ub": 1200}).quantization \
        .method == "fp8"


def test_sglang_reading_counts_block_scales_of_what_it_quantizes():
    # a block-FP8 checkpoint ([128, 128]) with `ignored_layers: [self_attn]`: SGLang keeps both layers' attention in
    # 16 bits (above), so its reading carries no attention tiles. Attention a layer is qkv_proj (64 + 32 + 32) x 64
    # and o_proj 64 x 64, one 128 x 128 tile each: 2 layers x 2 scales x 4 B = 16 B fewer scales, so the weights grow
    # by 24,576 x (2 - 1) B - 16 B = 24,560 B (the MLP's tiles, gate_up 256 x 64 and down 64 x 128, stay in both)
    qc = dict(FP8, weight_block_size=[128, 128])
    listed, plain = _q(dict(qc, ignored_layers=["self_attn"])), _q(dict(qc, ignored_layers=[]))
    read = as_read(listed, "0.5.23").quantization
    assert {(s.rows, s.cols) for s in read.block_shapes} == {(256, 64), (64, 128)}
    assert _weights(listed, "0.5.23") - _weights(plain, "0.5.23") == 24_560
