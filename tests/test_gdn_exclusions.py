"""Exclusion lists naming a Gated DeltaNet's projections (Qwen3-Next, Qwen3.5): each named projection is kept in
16 bits, the rest of the layer quantized, and an engine's block-FP8 shard check leaves the kept ones alone.

What the published checkpoints list: Qwen/Qwen3-Next-80B-A3B-Instruct-FP8's `modules_to_not_convert` names
`model.layers.N.linear_attn.in_proj_ba` for every linear-attention layer (sgl-project/sglang#23973, 2026-04-28: "they
are real, unified tensors in the Qwen3-Next FP8 checkpoint, listed explicitly in modules_to_not_convert"; vLLM's
"ba_proj doesn't support blockwise fp8 quantization", vllm-project/vllm#25079, 2025-09-17); Qwen's Qwen3.5/3.6 FP8
checkpoints name the split tensors in_proj_a and in_proj_b (and in_proj_ba), conv1d, A_log, dt_bias and norm
(friendli.ai's page of gsting/Qwen3.6-35B-A3B-abliterated-FP8, "matches Qwen's modules_to_not_convert"); THUDM/slime's
FP8 converter keeps the same (THUDM/slime@624b824a8:tools/convert_hf_to_fp8.py#L133-L158).
"""

from __future__ import annotations

import copy
import json

import pytest
from conftest import shared_config
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines import fp8_linear
from kvplan.model.weights import weight_bytes
from kvplan.sources.catalog import find_in_catalog
from kvplan.sources.importer import build_spec

NAME = "Qwen__Qwen3-Next-80B-A3B-Thinking"
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
# Qwen3-Next-80B-A3B (its config.json): hidden 2048, 48 layers, full_attention_interval 4 -> 36 Gated DeltaNet
# layers (0, 1, 2, 4, ...); linear_num_key_heads 16, linear_num_value_heads Hv 32, head sizes 128:
# K = 16 x 128 = 2048, V = 32 x 128 = 4096
GDN_LAYERS = [i for i in range(48) if i % 4 != 3]
BA = 2 * 32 * 2048  # in_proj_ba: 2 x Hv x hidden = 131,072 parameters a layer (262,144 B at 16 bits)
QKVZ = 2048 * (2 * 2048 + 2 * 4096)  # in_proj_qkvz: hidden x (2K + 2V) = 25,165,824


def _spec(entries: list[str], method: dict = FP8):
    config = copy.deepcopy(shared_config(NAME))
    config["quantization_config"] = {**method, "modules_to_not_convert": entries}
    return build_spec(config, "test/qwen3-next-fp8", source="test")[0]


def _next_list() -> list[str]:
    """Qwen3-Next-80B-A3B-Instruct-FP8's list as the sources above give it: lm_head, each linear-attention layer's
    in_proj_ba, each layer's router and shared_expert_gate."""
    out = ["lm_head"]
    for i in range(48):
        out += [f"model.layers.{i}.linear_attn.in_proj_ba"] if i in GDN_LAYERS else []
        out += [f"model.layers.{i}.mlp.gate", f"model.layers.{i}.mlp.shared_expert_gate"]
    return out


def test_qwen3_next_in_proj_ba_kept_in_16_bits():
    # 36 layers x 131,072 = 4,718,592 parameters kept (9,437,184 B at 16 bits instead of fp8)
    model = _spec(_next_list())
    assert model.quantization.kept == (("attention", 36 * BA),)
    assert model.quantization.kept_modules == ("linear_attn.in_proj_a", "linear_attn.in_proj_b")
    assert 36 * BA == 4_718_592
    # bytes: 9,437,184 at 16 bits instead of 4,718,592 fp8 + its block scales as the engines allocate them, one fp32
    # scale per 128 x 128 tile of each layer's 64 x 2048 in_proj_ba: cdiv(64, 128) x cdiv(2048, 128) = 1 x 16 = 16
    # a layer (vLLM 0.33.0 create_fp8_scale_parameter: [cdiv(out, block_n), cdiv(in, block_k)]; the pooled count,
    # 131,072 / 128^2 = 8 a layer, lost the partly filled tiles), 36 x 16 = 576 scales x 4 B = 2,304 B:
    # 4,718,592 + 2,304 = 4,720,896, so keeping it adds 9,437,184 - 4,720,896 = 4,716,288 B
    others = [e for e in _next_list() if "in_proj_ba" not in e]
    assert weight_bytes(model).total - weight_bytes(_spec(others)).total == 9_437_184 - 4_720_896 == 4_716_288
    assert not [n for n in model.quantization.notes if "block scales" in n]  # every quantized tensor's shape read


def test_qwen35_spellings_and_state_tensors_give_the_same_count():
    # Qwen3.5's checkpoints: in_proj_b and in_proj_a (Hv x hidden each), beside the fused name and the GDN's
    # non-linear tensors (conv1d, A_log, dt_bias, norm: 16 bits already), under model.language_model.
    entries = ["lm_head"]
    for i in GDN_LAYERS:
        entries += [f"model.language_model.layers.{i}.linear_attn.{p}"
                    for p in ("in_proj_ba", "in_proj_b", "in_proj_a", "conv1d", "A_log", "dt_bias", "norm")]
    assert _spec(entries).quantization.kept == (("attention", 36 * BA),)
    # no layer index: vLLM 0.33.0's fp8 matches full names only (is_layer_skipped, exact), so the entry names no layer
    # and vLLM quantizes in_proj_ba; SGLang's dotted-path reading (sglang#23467) keeps all 36: 36 x 131,072 =
    # 4,718,592 parameters, said in a note. AWQ tests it as a substring (vLLM auto_awq.py L294-299): all 36 kept.
    bare = _spec(["linear_attn.in_proj_ba"]).quantization
    assert bare.kept == () and len(bare.notes) == 1 and "keeps 4,718,592 more parameters in 16 bits" in bare.notes[0]
    assert _spec(["linear_attn.in_proj_ba"], AWQ).quantization.kept == (("attention", 36 * BA),)


def test_in_proj_qkvz_and_both_spellings_counted_once():
    # in_proj_qkvz of every GDN layer: 36 x 25,165,824 = 905,969,664; named again as in_proj_qkv + in_proj_z
    # (h x (2K + V) = 2048 x 8192 and h x V = 2048 x 4096) it is not counted twice
    entries = [f"model.layers.{i}.linear_attn.{p}" for i in GDN_LAYERS for p in ("in_proj_qkvz", "in_proj_qkv",
                                                                                   "in_proj_z")]
    model = _spec(entries)
    assert model.quantization.kept == (("attention", 36 * QKVZ),) and 36 * QKVZ == 905_969_664
    assert 2048 * 8192 + 2048 * 4096 == QKVZ


def test_half_of_a_fused_pair_is_refused():
    # vLLM loads Qwen3.5's in_proj_b and in_proj_a as one layer, in_proj_ba (packed_modules_mapping, 0.33.0 wheel
    # models/qwen3_5.py L307-317), and is_layer_skipped raises when its shards disagree
    with pytest.raises(KvplanError, match=r"keeps in_proj_a of layer 0's linear attention in 16 bits but not "
                                          r"in_proj_b"):
        _spec(["model.language_model.layers.0.linear_attn.in_proj_a"])


def test_block_fp8_check_skips_the_kept_in_proj_ba_only():
    # in_proj_ba kept: vLLM builds it unquantized (UnquantizedLinearMethod), so its 64 / 4 = 16 wide shard is not
    # checked; in_proj_qkvz (12288 / 4 = 3072), out_proj (4096 / 4 = 1024) and the full layers' qkv_proj and o_proj
    # still are
    model = _spec(_next_list())
    names = {x.name for x in fp8_linear.linears(model, fp8_linear.Splits(4, 4, 4), fp8_linear.Rule("vLLM", "0.33.0"),
                                                4)}
    assert {"in_proj_qkvz", "out_proj", "qkv_proj", "o_proj"} <= names and "in_proj_ba" not in names


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_qwen3_next_fp8_plans_where_engines_serve_it(tmp_path, tp, engine):
    # vLLM's recipe serves Qwen3-Next-80B-A3B-Instruct-FP8 at tp 4; SGLang's CI at --tp-size 4
    # (sgl-project/sglang#23973); before the reader mapped in_proj_ba, every tp was refused
    config = shared_config(NAME)
    config["quantization_config"] = {**FP8, "modules_to_not_convert": _next_list()}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["fit", str(tmp_path), "--gpu", "h200-sxm", "--tp", str(tp), "--engine", engine,
                                      "--json"])
    assert result.exit_code == 0, result.output


def test_gated_query_doubles_the_q_part():
    # Qwen3.5-397B-A17B (its config.json: 32 heads of 256, 2 KV heads, attn_output_gate true): vLLM's
    # Qwen3NextAttention builds qkv_proj with 32 x (1 + 1) query heads (0.33.0 wheel models/qwen3_next.py L317-325),
    # so its q part is 2 x 32 x 256 = 16,384 wide (not 8,192); at tp 8 the 2 KV heads are replicated, one a rank:
    # 8 x 256 = 2,048 each for k and v
    model = find_in_catalog("qwen3.5-397b-a17b")
    assert any(getattr(x, "output_gate", False) for x in model.layers)
    names = {(x.name, x.widths) for x in fp8_linear.linears(model, fp8_linear.Splits(8, 8, 8),
                                                            fp8_linear.Rule("SGLang", "0.5.23"), 8)}
    assert ("qkv_proj", (16_384, 2_048, 2_048)) in names


# Entries naming the multi-token-prediction module (Qwen3-Next / Qwen3.5 checkpoints keep it under `mtp.`). vLLM maps
# `mtp.` to None for the target model and applies that mapper to the quantization config's lists (0.33.0 wheel
# models/qwen3_next.py L823, qwen3_5.py L327-329 and L476-479; quant_utils WeightsMapper.apply_list drops a None):
# the entries change nothing of the target. A drafter built from the module would read them: kvplan refuses to
# guess which of its modules they keep.
MTP_LIST = ["mtp.fc", "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.mlp.experts.0.gate_proj", "mtp"]


def test_mtp_entries_leave_the_target_model_alone():
    plain, with_mtp = _spec(_next_list()), _spec(_next_list() + MTP_LIST)
    assert with_mtp.quantization.kept == plain.quantization.kept == (("attention", 36 * BA),)
    assert weight_bytes(with_mtp).total == weight_bytes(plain).total
    assert with_mtp.quantization.mtp_kept == tuple(MTP_LIST) and plain.quantization.mtp_kept == ()
    assert _spec(["re:mtp\\..*"]).quantization.mtp_kept == ("re:mtp\\..*",)
    assert _spec(["re:.*lm_head"]).quantization.mtp_kept == ()


def test_mtp_drafter_refused_where_the_list_reaches_it():
    from kvplan.planning import speculative

    req = speculative.parse("mtp")
    assert speculative.apply(_spec(_next_list()), req).speculative.method == "mtp"
    with pytest.raises(KvplanError, match="keeps part of its MTP module in 16 bits \\(mtp.fc, "):
        speculative.apply(_spec(_next_list() + MTP_LIST), req)


# A Gated DeltaNet module named whole: its five projections kept, not every layer's attention (before, the bare
# `linear_attn` kept the 12 full-attention layers' self_attn too). Per layer (hidden 2048, K 2048, V 4096, Hv 32):
# in_proj_qkv 2048 x (2 x 2048 + 4096) = 16,777,216, in_proj_z 2048 x 4096 = 8,388,608, in_proj_b + in_proj_a
# 2 x 2048 x 32 = 131,072, out_proj 4096 x 2048 = 8,388,608: 33,685,504; x 36 layers = 1,212,678,144.
GDN_LAYER = 16_777_216 + 8_388_608 + 131_072 + 8_388_608


def test_whole_linear_attn_keeps_the_gdn_projections_only():
    # AWQ matches an entry as a substring of the layer's name (vLLM 0.33.0 auto_awq.py L294-299), as kvplan reads
    # a name's words: a bare `linear_attn` keeps every GDN layer's five projections
    assert GDN_LAYER == 33_685_504
    bare = _spec(["linear_attn"], AWQ).quantization
    assert bare.kept == (("attention", 36 * GDN_LAYER),) and 36 * GDN_LAYER == 1_212_678_144
    assert bare.kept == _spec(["re:.*linear_attn.*"], AWQ).quantization.kept
    assert len(bare.kept_modules) == 5 and "linear_attn.out_proj" in bare.kept_modules
    assert _spec(["model.layers.0.linear_attn"], AWQ).quantization.kept == (("attention", GDN_LAYER),)
    with pytest.raises(KvplanError, match="names a linear-attention module no layer of this model has"):
        _spec(["model.layers.3.linear_attn"], AWQ)  # layer 3 is a full-attention layer (interval 4)


def test_fp8_reads_a_module_name_whole_as_vllm_does():
    # mem35's finding: vLLM 0.33.0's Fp8Config keeps a layer only where an entry is its full name
    # (ignored_layers_match_mode "exact", fp8.py L118-120, is_layer_skipped L619-693): a bare `linear_attn` and
    # `model.layers.0.linear_attn` name no linear layer, so every GDN projection is fp8 as in the plain checkpoint;
    # SGLang keeps them (its dotted-path match, sglang#23467): 36 x 33,685,504 = 1,212,678,144, and 33,685,504
    plain = _spec([]).quantization
    for entries, theirs in ((["linear_attn"], 1_212_678_144), (["model.layers.0.linear_attn"], GDN_LAYER)):
        q = _spec(entries).quantization
        assert q.kept == plain.kept == () and q.kept_modules == ()
        assert len(q.notes) == 1 and f"keeps {theirs:,} more parameters in 16 bits" in q.notes[0], q.notes
    # a `re:` entry stays a regular expression (compressed-tensors' form) whatever the method in kvplan's vLLM reading;
    # SGLang's fp8 reads it as a literal name and keeps nothing (tests/test_sglang_exclusions.py)
    assert _spec(["re:.*linear_attn.*"]).quantization.kept == (("attention", 36 * GDN_LAYER),)
    # the full names of all five (Qwen3-Next's fused spellings) keep layer 0's, and say nothing
    full = _spec([f"model.layers.0.linear_attn.{p}" for p in ("in_proj_qkvz", "in_proj_ba", "out_proj")]).quantization
    assert full.kept == (("attention", GDN_LAYER),) and full.notes == ()
