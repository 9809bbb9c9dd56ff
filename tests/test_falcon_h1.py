"""Falcon-H1: every layer caches K and V AND keeps a Mamba-2 state, as vLLM allocates them.

vLLM v0.11.0 `model_executor/models/falcon_h1.py`: FalconH1ParallelHybrid holds an Attention of
num_key_value_heads x head_dim (config.head_dim when given) and a MambaMixer2 registered under layer
index num_hidden_layers + i; get_mamba_state_shape_from_config passes intermediate = mamba_d_ssm,
mamba_n_groups, mamba_n_heads, mamba_d_head, mamba_d_state, mamba_d_conv to
`MambaStateShapeCalculator.mamba2_state_shape`: conv (d_conv - 1, (intermediate + 2 G' S) / tp) with the
groups replicated up to tp (G' = tp when tp does not divide G), temporal (heads / tp, head_dim, S).
Everything bf16 (mamba_cache_dtype auto = the model dtype).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import engine_figures, meta_param_count

from kvplan.readers.configs import spec_from_config
from kvplan.core.dtypes import BF16
from kvplan.planning.profile import kv_profile

FIX = Path(__file__).parent / "fixtures" / "families" / "falcon-h1-7b.json"
N = 44
KV_PER_LAYER = 2 * 2 * 128 * 2  # K and V x 2 KV heads x 128 x bf16 = 1024 B per token
STATE_TP1 = 2 * (3 * (3072 + 2 * 1 * 256) + 24 * 128 * 256)  # conv 3 x 3584 + ssm 786,432 values = 1,594,368 B
STATE_TP2 = 2 * (3 * (3072 // 2 + 2 * 2 * 256 // 2) + 12 * 128 * 256)  # one group replicated to 2: 798,720 B


def cfg(**changes) -> dict:
    return {**json.loads(FIX.read_text()), **changes}


def profile(spec, tp: int):
    return kv_profile(spec.layers, tp, BF16, BF16, 1)


def test_every_layer_holds_attention_and_a_mamba_state():
    spec, _ = spec_from_config(cfg(), "falcon-h1-7b")
    assert len(spec.layers) == N
    assert profile(spec, 1).growth_bytes_per_token() == N * KV_PER_LAYER == 45_056
    assert profile(spec, 1).sequence_bytes(0, paged=False) == N * STATE_TP1 == 70_152_192
    assert profile(spec, 2).growth_bytes_per_token() == N * KV_PER_LAYER // 2
    assert profile(spec, 2).sequence_bytes(0, paged=False) == N * STATE_TP2
    # one sequence of 1000 tokens: its K/V plus its states
    assert profile(spec, 1).sequence_bytes(1000, paged=False) == N * (1000 * KV_PER_LAYER + STATE_TP1)


def test_pipeline_stages_keep_each_layer_whole():
    from kvplan.planning.deploy import split_layers

    spec, _ = spec_from_config(cfg(), "falcon-h1-7b")
    stages = split_layers(spec.num_layers, 4)
    assert sum(b - a for a, b in stages) == N  # decoder layers, not 2N caches
    for a, b in stages:
        assert profile(type(spec)(**{**spec.__dict__, "layers": spec.layers[a:b]}), 1).sequence_bytes(
            0, paged=False) == (b - a) * STATE_TP1


def test_vllm_sees_one_attention_and_one_mamba_layer_per_decoder_layer(kvplan_home, tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg()))
    r = CliRunner().invoke(app,
                           ["fit", str(path), "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--engine", "vllm",
                            "--json"])
    assert r.exit_code == 0, r.output
    figures = engine_figures(json.loads(r.stdout))
    # 44 FullAttentionSpec + 44 MambaSpec: group size 44, two groups. The attention block grows until its page
    # covers the Mamba page (model_executor/models/config.py HybridAttentionMambaModelConfig):
    # 16 x cdiv(1,594,368, 16 x 1024) = 16 x 98 = 1568 tokens; page = 1568 x 1024 = 1,605,632 B.
    assert figures["block (page) size"] == 1568
    assert figures["groups x layers per group"] == [2, 44]
    assert figures["bytes per block id"] == 44 * 1568 * KV_PER_LAYER


@pytest.mark.parametrize("engine", ["trtllm", "llama.cpp", "transformers"])  # SGLang: tests/test_sglang_mamba.py
def test_engines_whose_allocation_is_unread_refuse(kvplan_home, tmp_path, engine):
    from typer.testing import CliRunner

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg()))
    r = CliRunner().invoke(app, ["fit", str(path), "--gpu", "h100", "--ctx", "8k", "--engine", engine])
    assert r.exit_code == 2 and "Falcon-H1" in r.stderr


def test_a_mixer_width_that_disagrees_is_refused():
    from kvplan.core.errors import KvplanError

    with pytest.raises(KvplanError, match="mamba_d_ssm"):
        spec_from_config(cfg(mamba_d_head=64), "bad")


def test_catalog_round_trip_keeps_both_caches():
    from kvplan.sources.catalog import spec_from_dict, spec_to_dict

    spec, _ = spec_from_config(cfg(), "falcon-h1-7b")
    again = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))), "falcon-h1-7b")
    assert again.layers == spec.layers


def test_parameters_equal_transformers_meta_model():
    config = cfg()
    spec, _ = spec_from_config(config, "falcon-h1-7b")
    assert spec.params.total == meta_param_count(config)


def test_explain_shows_both_halves_of_a_layer(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", str(FIX), "--gpu", "h100", "--gpus", "1", "--ctx", "32k", "--explain"])
    assert r.exit_code == 0, r.output
    assert f"44 full layers × 2 × 128 × 2 KV heads × 2 B (bf16) = {N * KV_PER_LAYER:,} B/token" in r.stdout
    assert "44 mamba2 layers × 797,184 state values × 2 B" in r.stdout


def test_the_attention_half_has_its_rope_table():
    # falcon_h1.py: get_rope(head_size=head_dim, rotary_dim=head_dim, max_position=max_position_embeddings):
    # a cos/sin cache of 262,144 positions x 128 values (kvplan.readers.rope's rule for a default rope)
    spec, _ = spec_from_config(cfg(), "falcon-h1-7b")
    assert spec.rope_cache_elems == 262_144 * 128
