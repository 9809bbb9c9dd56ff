"""`kvplan fit/models` with Hub repo ids, end to end: the CLI, the real huggingface_hub client, a fake Hub.

What a user types, against tests/hub_server.py on 127.0.0.1 (HF_ENDPOINT). The arithmetic of the
expected numbers is in the comments; weight bytes come from the safetensors headers the fake Hub
serves, summed here independently of kvplan.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app

try:
    from tests.hub_server import (
        FakeHub, FakeRepo, header_of, numpy_safetensors, point_client_at, serving, set_offline, spec_safetensors,
    )
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from hub_server import (  # type: ignore[no-redef]
        FakeHub, FakeRepo, header_of, numpy_safetensors, point_client_at, serving, set_offline, spec_safetensors,
    )

TOKEN = "hf_cliSecretToken_abcdefghijklmnop"
# A small Llama: 4 layers, 2 KV heads of 64 dims (hidden 512 / 8 heads), bf16.
TINY = {
    "model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000, "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}
# A vision-language repo: the language model nested in text_config (Gemma 3 style), 6 layers,
# 4 KV heads with an explicit head_dim of 128 (not hidden/heads = 64).
VLM = {
    "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {
        "model_type": "gemma3_text", "hidden_size": 1024, "num_hidden_layers": 6, "num_attention_heads": 16,
        "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 2048, "vocab_size": 2000,
        "max_position_embeddings": 32768, "sliding_window": 1024, "sliding_window_pattern": 6,
        "torch_dtype": "bfloat16",
    },
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 64},
    "torch_dtype": "bfloat16",
}


def weights() -> bytes:
    return numpy_safetensors({
        "model.embed_tokens.weight": np.zeros((1000, 512), np.float16),
        "model.layers.0.mlp.down_proj.weight": np.zeros((512, 1024), np.float16),
        "model.norm.weight": np.zeros((512,), np.float32),
    })


def vlm_weights() -> bytes:
    return spec_safetensors({
        "language_model.model.embed_tokens.weight": ("bfloat16", [2000, 1024]),
        "vision_tower.encoder.layers.0.mlp.fc1.weight": ("bfloat16", [256, 64]),
    })


def header_bytes(data: bytes) -> int:
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header_of(data).items() if k != "__metadata__")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    server = FakeHub(max_hang_s=20.0)
    server.add("org/tiny", FakeRepo.single({"config.json": json.dumps(TINY).encode(), "model.safetensors": weights()}))
    server.add("org/vlm",
               FakeRepo.single({"config.json": json.dumps(VLM).encode(), "model.safetensors": vlm_weights()}))
    server.add("org/gated", FakeRepo.single({"config.json": json.dumps(TINY).encode()}, gated_token=TOKEN))
    old, new = ({"config.json": json.dumps({**TINY, "num_hidden_layers": 2}).encode()},
                {"config.json": json.dumps(TINY).encode()})
    server.add("org/pinned", FakeRepo(commits={"a" * 40: old, "b" * 40: new}, refs={"main": "b" * 40}))
    server.add("org/hostile-types",
               FakeRepo.single({"config.json": json.dumps({**TINY, "num_hidden_layers": "many"}).encode()}))
    server.add("org/hostile-size",
               FakeRepo.single({"config.json": json.dumps({**TINY, "hidden_size": 10**12}).encode()}))
    server.add("org/no-keys",
               FakeRepo.single({"config.json": json.dumps({"model_type": "llama", "vocab_size": 10}).encode()}))
    server.add("org/hang", FakeRepo.single({"config.json": json.dumps(TINY).encode()}, hang="all"))
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "kvplan_home"))
    with serving(server, monkeypatch, tmp_path / "hf_home"):
        yield server


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_fit_a_hub_repo(hub):
    r = run("fit", "org/tiny", "--gpu", "h100", "--ctx", "4k", "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    assert "org/tiny from the Hugging Face Hub" in r.stderr
    plan = json.loads(r.stdout)
    # 2 (K and V) x 4 layers x 2 KV heads x 64 dims x 2 bytes = 2,048 B per token
    assert plan["kv_bytes_per_token"] == 2048
    # weights are the safetensors tensors' bytes: 1000x512x2 + 512x1024x2 + 512x4 = 2,074,624 B
    assert plan["weight_bytes"] == header_bytes(weights()) == 2_074_624


def test_multimodal_repo_plans_the_language_model_and_counts_all_weights(hub):
    r = run("fit", "org/vlm", "--gpu", "h100", "--ctx", "32k", "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    # text_config: 6 layers, 5 sliding (window 1024) + 1 global, 4 KV heads x head_dim 128 (explicit), bf16.
    # Growth per token at long context is the one global layer: 2 x 4 x 128 x 2 = 2,048 B.
    assert plan["kv_bytes_per_token"] == 2048
    # One 32,768-token sequence: global 32,768 x 2,048 + 5 sliding layers x 1,024 tokens x 2,048 B
    assert plan["kv_bytes_per_sequence"] == 32768 * 2048 + 5 * 1024 * 2048
    # weights: the language model's and the vision tower's tensors, (2000x1024 + 256x64) x 2 B
    assert plan["weight_bytes"] == header_bytes(vlm_weights()) == (2000 * 1024 + 256 * 64) * 2


def test_revision_pins_the_config(hub):
    r = run("fit", "org/pinned", "--revision", "a" * 40, "--gpu", "h100", "--ctx", "4k", "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 2 * 2 * 2 * 64 * 2  # 2 layers at that commit


def test_gated_repo_needs_a_token_that_is_never_shown(hub, monkeypatch):
    line = one_line_error(run("fit", "org/gated", "--gpu", "h100", "--ctx", "4k"), 4)
    assert "gated" in line and "HF_TOKEN" in line
    r = run("fit", "org/gated", "--gpu", "h100", "--ctx", "4k", "--gpus", "1", "--token", TOKEN, "--json")
    assert r.exit_code == 0, r.output
    assert TOKEN not in r.output
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    r = run("fit", "org/gated", "--gpu", "h100", "--ctx", "4k")
    assert r.exit_code == 0 and TOKEN not in r.output


def test_repo_not_found_suggests_catalog_names(hub):
    line = one_line_error(run("fit", "meta-llama/Llama-3.1-8B-Instructt", "--gpu", "h100"), 3)
    assert "not found" in line and "llama-3.1-8b" in line


def test_revision_not_found(hub):
    line = one_line_error(run("fit", "org/tiny", "--revision", "v9", "--gpu", "h100"), 3)
    assert "revision" in line and "v9" in line


@pytest.mark.parametrize("repo, words", [
    ("org/hostile-types", "num_hidden_layers"),
    ("org/hostile-size", "hidden_size"),
    ("org/no-keys", "hidden_size"),
])
def test_hostile_or_incomplete_config(hub, repo, words):
    line = one_line_error(run("fit", repo, "--gpu", "h100", "--ctx", "4k"), 2)
    assert words in line


def test_offline_uses_the_cache_with_a_notice_and_fails_clearly_without(hub, monkeypatch):
    assert run("fit", "org/tiny", "--gpu", "h100", "--ctx", "4k").exit_code == 0  # fills the HF cache
    set_offline(monkeypatch)
    r = run("fit", "org/tiny", "--gpu", "h100", "--ctx", "4k", "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    assert "offline" in r.stderr and json.loads(r.stdout)["kv_bytes_per_token"] == 2048
    line = one_line_error(run("fit", "org/vlm", "--gpu", "h100"), 5)
    assert "HF_HUB_OFFLINE" in line


def test_a_hub_that_never_answers_gives_up_within_the_timeout(hub):
    start = time.monotonic()
    line = one_line_error(run("fit", "org/hang", "--gpu", "h100", "--timeout", "1"), 5)
    assert time.monotonic() - start < 6  # 1 s timeout + 1 s watchdog slack, with room for a slow machine
    assert "1 s" in line or "timed out" in line.lower()


def test_import_then_fit_offline_from_the_user_catalog(hub, monkeypatch, tmp_path):
    r = run("models", "import", "org/tiny")
    assert r.exit_code == 0, r.output
    written = json.loads(open(r.stdout.strip()).read())
    assert written["hf_repo"] == "org/tiny"
    point_client_at(monkeypatch, "http://127.0.0.1:9", tmp_path / "empty_home")  # nothing listens there
    name = written["name"]
    r = run("fit", name, "--gpu", "h100", "--ctx", "4k", "--gpus", "1", "--json")
    assert r.exit_code == 0, r.output
    assert "from the catalog" in r.stderr
    assert json.loads(r.stdout)["weight_bytes"] == 2_074_624
    r = run("models", "show", name, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == name
