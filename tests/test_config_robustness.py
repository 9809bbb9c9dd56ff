"""Malformed or hostile config values: a one-line usage error naming the key, never an internal error.

Issue 15's cases (quantization_config values trusted blindly, no caching layer, mlp_only_layers
not a list, a hybrid_override_pattern shorter than the model) and issue 11's Infinity/NaN rule:
accepted where they size nothing, refused where they would size the cache or the weights.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app
from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError

runner = CliRunner()
BASE = {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
        "num_hidden_layers": 4, "vocab_size": 32000, "intermediate_size": 4096}


def fit(tmp_path, cfg: dict, *args):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--gpus", "1", *args])


@pytest.mark.parametrize("quant, needle", [
    ({"quant_method": "awq", "bits": "four"}, "quantization_config.bits must be an integer, got 'four'"),
    ({"quant_method": "awq", "bits": 3}, "3-bit weights are not supported"),
    ({"quant_method": "fp8", "weight_block_size": "abc"}, "weight_block_size must be a list of two integers"),
    ({"quant_method": "fp8", "weight_block_size": ["a", "b"]}, "weight_block_size must be an integer"),
    ({"quant_method": "gptq", "bits": 4, "group_size": [128]}, "group_size must be an integer, got [128]"),
    ({"quant_method": "mxfp4", "modules_to_not_convert": [1]}, "modules_to_not_convert must be a list of module names"),
    ({"quant_method": "compressed-tensors", "config_groups": "x"}, "config_groups must be an object of objects"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "8"}}}},
     "num_bits must be an integer"),
])
def test_malformed_quantization_config_is_a_usage_error(kvplan_home, tmp_path, quant, needle):
    one_line_error(fit(tmp_path, {**BASE, "quantization_config": quant}), 2, needle)


def test_well_formed_quantization_configs_still_read():
    # GPTQ 4-bit, group 128 (group_size -1 is per-row: Quantization.per_row, group_size kept at 128)
    for group in (128, -1):
        spec, _ = spec_from_config(
            {**BASE, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": group}}, "x")
        assert (spec.quantization.method, spec.quantization.group_size) == ("int4", 128)
    spec, _ = spec_from_config(
        {**BASE, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, "x")
    assert (spec.quantization.method, spec.quantization.group_size) == ("fp8", 128)


def test_a_model_with_no_caching_layer_is_refused(kvplan_home, tmp_path):
    cfg = {**BASE, "model_type": "nemotron_h", "hybrid_override_pattern": "-E-E"}
    one_line_error(fit(tmp_path, cfg), 2, "no layer attends or keeps a state")


@pytest.mark.parametrize("cfg, needle", [
    ({**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
      "mlp_only_layers": 3}, "mlp_only_layers must be a list of layer indices, got 3"),
    ({**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
      "mlp_only_layers": ["a"]}, "mlp_only_layers must be a list"),
    ({**BASE, "hybrid_override_pattern": "M*", "layer_types": ["full_attention"] * 4}, "2 symbols for 4 layers"),
    ({**BASE, "hybrid_override_pattern": 7}, "hybrid_override_pattern must be a string"),
    ({**BASE, "layer_types": "full_attention"}, "layer_types must be a list"),
])
def test_layout_keys_of_the_wrong_shape_are_usage_errors(kvplan_home, tmp_path, cfg, needle):
    one_line_error(fit(tmp_path, cfg), 2, needle)


def test_infinity_and_nan_are_accepted_where_they_size_nothing(kvplan_home, tmp_path):
    # Nemotron-H's real config has "time_step_limit": [0.0, Infinity]; rope and norm floats too.
    text = json.dumps({**BASE, "rms_norm_eps": 1e-5})[:-1] + ', "time_step_limit": [0.0, Infinity], "x": NaN}'
    (tmp_path / "config.json").write_text(text)
    r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--gpus", "1", "--json"])
    assert r.exit_code == 0, r.output
    # 4 layers x 2 x 4 KV heads x 64 x 2 B
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 4 * 2 * 4 * 64 * 2


@pytest.mark.parametrize("key", ["num_key_value_heads", "head_dim", "sliding_window", "num_hidden_layers"])
@pytest.mark.parametrize("value", ["Infinity", "NaN", "-Infinity"])
def test_infinity_and_nan_are_refused_where_they_size_the_cache(kvplan_home, tmp_path, key, value):
    cfg = {k: v for k, v in BASE.items() if k != key}
    (tmp_path / "config.json").write_text(json.dumps(cfg)[:-1] + f', "{key}": {value}}}')
    r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--gpus", "1"])
    one_line_error(r, 2, f"{key} must be an integer, got {value}")


def test_spec_from_config_never_raises_anything_but_kvplan_errors_on_these():
    for bad in ({**BASE, "quantization_config": {"quant_method": "gptq", "bits": None, "group_size": {}}},
                {**BASE, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"a": 1}}}):
        try:
            spec_from_config(bad, "x")
        except KvplanError:
            pass


@pytest.mark.parametrize("extra, needle", [
    ({"block_configs": [{"attention": {"n_heads_in_group": 8}}] * 4}, "block_configs"),
    ({"mamba_d_ssm": 1024, "mamba_n_heads": 64, "attn_layer_indices": [1]}, "mamba_d_ssm"),
    ({"layer_types": ["linear_attention", "full_attention"] * 2}, "layer_types (linear_attention)"),
    ({"global_head_dim": 512, "num_global_key_value_heads": 4}, "global_head_dim"),
    ({"index_topk": 2048, "index_head_dim": 128}, "index_head_dim"),
])
def test_unknown_model_type_with_layout_keys_is_refused_not_guessed(kvplan_home, tmp_path, extra, needle):
    cfg = {**BASE, "model_type": "brand_new_arch", **extra}
    line = one_line_error(fit(tmp_path, cfg), 2, needle)
    assert "no reader" in line and "does not guess" in line


def test_unknown_model_type_with_only_standard_keys_is_read_and_says_so(kvplan_home, tmp_path):
    cfg = {**BASE, "model_type": "brand_new_arch", "rope_theta": 1e6, "rms_norm_eps": 1e-5, "bos_token_id": 1,
           "layer_types": ["full_attention"] * 4}
    r = fit(tmp_path, cfg, "--json")
    assert r.exit_code == 0, r.output
    assert "no dedicated reader" in r.stderr
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 4 * 2 * 4 * 64 * 2


def test_a_known_mla_family_with_a_dsa_indexer_is_refused_not_undercounted(kvplan_home, tmp_path):
    # An indexer key cache beside the latent is read only for deepseek_v3/deepseek_v32/glm_moe_dsa
    # (kvplan.readers.families.dsa, tests/test_dsa.py); another MLA family that declares one is refused.
    cfg = {**BASE, "model_type": "kimi_k2", "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}
    one_line_error(fit(tmp_path, cfg), 2, "Sparse Attention indexer")


def test_a_catalog_entry_with_no_caching_layer_is_refused(kvplan_home):
    # A user catalog spec (kvplan's own JSON) whose every layer caches nothing: an OverflowError before.
    from pathlib import Path

    src = json.loads((Path(__file__).resolve().parents[1] / "kvplan" / "sources" / "model_specs" / "gpt2.json")
                     .read_text())
    src.update(name="allnone", aliases=[], hf_repo=None, layers=[{"kind": "none", "count": 12}])
    (kvplan_home / "models").mkdir(parents=True)
    (kvplan_home / "models" / "allnone.json").write_text(json.dumps(src))
    one_line_error(runner.invoke(app, ["fit", "allnone", "--gpu", "h100"]), 2, "no layer attends or keeps a state")


def test_a_boolean_key_spelled_as_a_string_is_refused_not_read_as_true(kvplan_home, tmp_path):
    # "false" is a non-empty string: read with Python's bool() it would tie the embeddings (and drop the
    # lm_head's 32000 x 1024 weights) while the config says the opposite.
    one_line_error(fit(tmp_path, {**BASE, "tie_word_embeddings": "false"}), 2,
                   "tie_word_embeddings must be true or false, got 'false'")
    for ok in (False, 0):  # JSON false, and the 0 some configs write, still read
        spec, _ = spec_from_config({**BASE, "tie_word_embeddings": ok}, "x")
        assert spec.params.lm_head == 32000 * 1024
