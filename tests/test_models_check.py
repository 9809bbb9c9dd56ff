"""`kvplan models check`: kvplan's reading beside transformers' own cache on the meta device.

The transformers side is transformers' code, not kvplan's: a model built from the config on the meta
device, run for 8 and 16 tokens, its cache tensors' shapes read layer by layer. Skips without the
[transformers] extra.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.readers.hf_meta import LayerCache, compare
from kvplan.readers.configs import spec_from_config

FIX = Path(__file__).parent / "fixtures" / "families"
runner = CliRunner()


@pytest.mark.parametrize("name", ["gemma-4-31b", "lfm2-1.2b", "mamba-codestral-7b"])
def test_models_check_agrees_with_transformers(name, kvplan_home):
    pytest.importorskip("torch")
    pytest.importorskip("transformers", reason="needs the [transformers] extra")
    r = runner.invoke(app, ["models", "check", str(FIX / f"{name}.json"), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["agrees"] is True
    # Gemma 4 31B: local layers 2 x 16 x 256 values per token, global 2 x 4 x 512, in both readings
    if name == "gemma-4-31b":
        assert {(x["kvplan_per_token"], x["hf_per_token"]) for x in data["layers"]} == {(8192, 8192), (4096, 4096)}


def test_compare_flags_a_layer_whose_per_token_cache_differs():
    spec, _ = spec_from_config(json.loads((FIX / "lfm2-1.2b.json").read_text()), "l")
    hf = [LayerCache(l.elements_per_token(1), l.state_elements(1), "x") for l in spec.layers]
    hf[2] = LayerCache(hf[2].per_token * 2, 0, "x")  # a layer transformers caches twice as wide
    rows = compare(spec, hf)
    bad = [r for r in rows if not r.agrees]
    assert len(bad) == 1 and bad[0].layers == "2" and bad[0].hf_per_token == 2 * bad[0].kvplan_per_token


def _transformers_default(model_type: str, tmp_path, **changes) -> Path:
    transformers = pytest.importorskip("transformers", reason="needs the [transformers] extra")
    pytest.importorskip("torch")
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    cfg = transformers.AutoConfig.for_model(model_type).to_dict()
    cfg.update(model_type=model_type, **changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg, default=str))
    return path


def test_an_unknown_model_type_is_derived_from_transformers_and_says_so(kvplan_home, tmp_path, monkeypatch):
    # falcon_mamba with its reader taken away (kvplan.readers.families.mamba reads it now, as vLLM does; no other
    # transformers model_type without a reader derives a layout on the meta device): transformers'
    # FalconMambaConfig defaults: 32 layers, intermediate 1536, conv_kernel 4, state_size 16. transformers keeps
    # conv_kernel columns of conv state: 1536 x 4, and the ssm state 1536 x 16, per layer; nothing per token.
    from kvplan import readers

    monkeypatch.delitem(readers.READERS, "falcon_mamba")
    path = _transformers_default("falcon_mamba", tmp_path)
    r = runner.invoke(app, ["models", "show", str(path), "--json"])
    assert r.exit_code == 0, r.output
    assert "derived from transformers' FalconMambaForCausalLM" in r.stderr
    data = json.loads(r.stdout)
    assert data["kv_bytes_per_token"] == 0
    assert data["layer_kinds"] == {"derived state (6,144 conv + 24,576 ssm values)": 32}
    assert any("not split over tensor-parallel ranks" in n for n in data["notes"])


def test_a_layer_with_both_a_kv_cache_and_a_state_is_refused(kvplan_home, tmp_path, monkeypatch):
    # Falcon-H1 runs attention and Mamba-2 side by side in every layer. kvplan.readers.families.falcon_h1 reads it now;
    # without that reader, the layout derived from transformers is refused.
    from kvplan import readers

    monkeypatch.delitem(readers.READERS, "falcon_h1")
    path = _transformers_default("falcon_h1", tmp_path)
    r = runner.invoke(app, ["fit", str(path), "--gpu", "h100", "--gpus", "1"])
    assert r.exit_code == 2 and "holds both a KV cache and a state" in r.stderr


def test_falcon_h1_reader_agrees_with_transformers_cache(kvplan_home, tmp_path):
    # FalconH1Config defaults: 32 layers, 8 KV heads x 128 (4096 / 32 heads): 2 x 8 x 128 = 2048 values per token;
    # Mamba-2 of 128 heads x 8 = mamba_d_ssm 1024, state 256, one group, conv 4: vLLM's (4 - 1) x (1024 + 2 x 256)
    # + 128 x 8 x 256 = 266,752 values, transformers' 4 conv columns 268,288 (models check allows that column).
    path = _transformers_default("falcon_h1", tmp_path)
    r = runner.invoke(app, ["models", "check", str(path), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["layers"]
    assert [(row["layers"], row["kvplan_per_token"], row["kvplan_state"], row["hf_state"], row["agrees"])
            for row in rows] == [("0-31", 2048, 266_752, 268_288, True)]
