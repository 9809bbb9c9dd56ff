"""Architectures kvplan cannot size yet are refused with their reason, on the published config.json files.

MiniMax-M3 (block-sparse attention with index keys: sparse_attention_config) and Kimi K3 (a kimi_linear config
with latent experts and attention residuals); tests/fixtures/families/README.md gives their source. Before these
refusals Kimi K3 met a quantization-exclusion one, which named a symptom, not the layout. DeepSeek-V4, once
refused here, has a reader (tests/test_deepseek_v4.py); what stays refused is vLLM before 0.20.0, which has no
such model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError

FIX = Path(__file__).parent / "fixtures" / "families"


@pytest.mark.parametrize("name, needles", [
    ("minimax-m3.json", ("'minimax_m3' is refused", "sparse_attention_config", "index keys")),
    ("kimi-k3.json", ("routed_expert_hidden_size", "attn_res_block_size", "refused rather than guessed")),
])
def test_layouts_kvplan_cannot_size_are_refused_with_their_reason(name, needles):
    with pytest.raises(KvplanError) as err:
        spec_from_config(json.loads((FIX / name).read_text()), name)
    for needle in needles:
        assert needle in err.value.message


def test_kimi_k3_refusal_comes_from_the_layout_not_its_quantization():
    config = json.loads((FIX / "kimi-k3.json").read_text())
    config["text_config"].pop("quantization_config")
    with pytest.raises(KvplanError, match="latent experts"):
        spec_from_config(config, "kimi-k3")
    for key in ("routed_expert_hidden_size", "latent_moe_use_norm", "attn_res_block_size", "mla_use_output_gate"):
        config["text_config"].pop(key)
    with pytest.raises(KvplanError, match="vision_config"):  # then its vision tower, which kvplan cannot count
        spec_from_config(config, "kimi-k3-without")
    config.pop("vision_config")
    spec, _ = spec_from_config(config, "kimi-k3-without")  # the rest is Kimi Linear's layout, read as before
    assert {la.kind for la in spec.layers} == {"mla", "state"}


def test_fit_refuses_deepseek_v4_on_a_vllm_without_it_in_one_line(kvplan_home, tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli import app

    path = tmp_path / "config.json"
    path.write_text((FIX / "deepseek-v4-flash.json").read_text())
    r = CliRunner().invoke(app, ["fit", str(path), "--gpu", "h200", "--gpus", "8", "--ctx", "32k", "--kv-dtype", "fp8",
                                 "--engine", "vllm", "--engine-version", "0.19.1"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    last = r.stderr.strip().splitlines()[-1]  # after the model's notes, one line saying why
    assert last.startswith("Error: ") and "0.20.0" in last and r.stdout == ""
