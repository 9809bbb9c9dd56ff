"""A config.json without a KV-head count (kvplan/readers/kv_heads.py): planned as multi-head attention and said where
transformers' class makes it so, refused where the class would take a fixed count instead, silent where MHA is the
architecture.

Sources: transformers 5.25.0 `models/llama/configuration_llama.py` L68 (`num_key_value_heads: int | None = None`),
L88-89 (None -> num_attention_heads); `models/mistral/configuration_mistral.py` L67 (`num_key_value_heads: int = 8`);
GPT2Config has no such field. vLLM 0.19.0 wheel `transformers_utils/model_arch_config_convertor.py` L71-86
(get_total_num_kv_heads reads the config object's attribute, else num_attention_heads).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.readers.configs import spec_from_config

runner = CliRunner()
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
NOTE = "config.json gives no num_key_value_heads: planned as multi-head attention, 4 KV heads"


def _fit(tmp_path: Path, config: dict, *extra: str):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return runner.invoke(app, ["fit", str(folder), "--gpu", "h100", "--ctx", "1k", *extra])


def test_llama_without_the_key_is_mha_and_said(kvplan_home, tmp_path):
    r = _fit(tmp_path, LLAMA, "--explain")
    assert r.exit_code == 0, r.output
    assert f"note: {NOTE}" in r.stderr
    # 2 layers x (2 x 16) x 4 KV heads x 2 B = 512 B a token: head_dim 64 / 4 = 16, K and V, bf16
    assert "2 full layers × 2 × 16 × 4 KV heads × 2 B (bf16) = 512 B/token" in r.stdout
    assert "(KV heads = num_attention_heads:" in r.stdout  # --explain says the heads are transformers' rule


def test_the_key_given_says_nothing(kvplan_home, tmp_path):
    for kv in (4, 2):
        spec, notices = spec_from_config({**LLAMA, "num_key_value_heads": kv}, f"kv{kv}")
        assert not any("num_key_value_heads" in n for n in notices) and spec.layers[0].num_kv_heads == kv
        assert not any("num_key_value_heads" in n for n in spec.notes)
    r = _fit(tmp_path, {**LLAMA, "num_key_value_heads": 4}, "--explain")
    assert r.exit_code == 0 and "num_key_value_heads" not in r.output


def test_a_fixed_class_default_is_refused(kvplan_home, tmp_path):
    # MistralConfig gives a missing key 8, not num_attention_heads: planning 4 (or 32) heads would be silently wrong
    mistral = {**LLAMA, "model_type": "mistral", "architectures": ["MistralForCausalLM"]}
    one_line_error(_fit(tmp_path, mistral), 2, "transformers' mistral config then takes its class default")


@pytest.mark.parametrize("config", [
    {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 1000, "n_positions": 1024},
    # Falcon-7B's form: one KV head by multi_query, nothing assumed
    {**LLAMA, "model_type": "falcon", "multi_query": True},
])
def test_no_note_where_the_architecture_says(config):
    spec, notices = spec_from_config(config, "x")
    assert not any("num_key_value_heads" in n for n in notices)
    assert spec.layers[0].num_kv_heads == (1 if config.get("multi_query") else 4)


@pytest.mark.parametrize("model_type", ["mistral3", "llama4"])
def test_a_wrapper_whose_text_config_names_no_class_is_refused(model_type):
    # a text_config naming no model_type is built as the wrapper's text class (transformers 5.25.0: Mistral3Config
    # `configuration_mistral3.py` L51-54 as "mistral", whose default is 8, `configuration_mistral.py` L67;
    # Llama4Config `configuration_llama4.py` L226 as Llama4TextConfig, default 8, L135): 8 KV heads, not these 4
    text = {k: v for k, v in LLAMA.items() if k not in ("model_type", "architectures")}
    with pytest.raises(KvplanError, match=f"transformers' {model_type} config then takes its class default"):
        spec_from_config({"model_type": model_type, "text_config": text}, "x")


def test_a_type_without_a_reader_does_not_claim_transformers_rule():
    # StableLmConfig defaults a missing count to 32 (transformers 5.25.0 `configuration_stablelm.py`): kvplan, which
    # has not read that class, plans vLLM's fallback and says the class was not read
    spec, notices = spec_from_config({**LLAMA, "model_type": "stablelm", "architectures": ["StableLmForCausalLM"]}, "x")
    assert spec.layers[0].num_kv_heads == 4
    note = next(n for n in notices if "num_key_value_heads" in n)
    assert "has not read model_type 'stablelm'" in note and "transformers' and vLLM's rule" not in note
    spec, notices = spec_from_config(LLAMA, "x")
    assert any("transformers' and vLLM's rule for model_type 'llama'" in n for n in notices)
