"""kvplan.sources.hub against a real local HTTP server speaking the Hub's API, with the real huggingface_hub client.

huggingface_hub reads HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE... into `huggingface_hub.constants` when
it is first imported. In a CLI run that is inside kvplan.sources.hub's functions, after the environment is
set. In this test process it was imported once already, so the fixture sets the environment and
then reloads `huggingface_hub.constants` (every client module reads `constants.X` at call time),
and restores both afterwards. One subprocess test checks the plain env-before-import path too.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kvplan.core.errors import EXIT_ACCESS, EXIT_ERROR, EXIT_NETWORK, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.sources.hub import HubConfig, HubWeights, fetch_config, fetch_weights
from kvplan.api import load_model

try:
    from tests.hub_server import (
        CLIENT_ENV, FakeHub, FakeRepo, header_of, numpy_safetensors, reload_client_constants,
        serving, set_offline, spec_safetensors, with_header, with_length_prefix,
    )
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from hub_server import (  # type: ignore[no-redef]
        CLIENT_ENV, FakeHub, FakeRepo, header_of, numpy_safetensors, reload_client_constants,
        serving, set_offline, spec_safetensors, with_header, with_length_prefix,
    )

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_kvplanTestSecretToken0123456789"
LLAMA_CONFIG = {
    "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "bfloat16",
}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there now: connection refused


# ----------------------------------------------------------------------------------------------
# the fake repo set


def single_file_weights() -> bytes:
    """An AWQ-like layout: packed int32 weights and zeros, fp16 scales, and fp32/uint8 odds and ends."""
    return numpy_safetensors({
        "model.embed_tokens.weight": np.zeros((1000, 256), np.float16),
        "model.layers.0.mlp.down_proj.qweight": np.zeros((512, 32), np.int32),
        "model.layers.0.mlp.down_proj.qzeros": np.zeros((4, 32), np.int32),
        "model.layers.0.mlp.down_proj.scales": np.zeros((4, 256), np.float16),
        "model.norm.weight": np.zeros((256,), np.float32),
        "model.layers.0.mlp.experts.blocks": np.zeros((3, 7), np.uint8),
        "scalar": np.zeros((), np.float32),
    }, metadata={"format": "pt"})


def shard_files() -> dict[str, bytes]:
    s1 = spec_safetensors({
        "model.embed_tokens.weight": ("bfloat16", [1000, 256]),
        "model.layers.0.self_attn.q_proj.weight": ("float8_e4m3fn", [256, 256]),
        "model.layers.0.self_attn.q_proj.weight_scale_inv": ("float32", [2, 2]),
    }, metadata={"format": "pt"})
    s2 = spec_safetensors({
        "model.layers.1.mlp.experts.gate_up_proj_blocks": ("uint8", [4, 64, 16]),
        "model.layers.1.mlp.experts.gate_up_proj_scales": ("float8_e8m0fnu", [4, 64, 2]),
        "model.layers.1.mlp.down_proj.weight": ("float4_e2m1fn_x2", [256, 64]),
        "lm_head.weight": ("bfloat16", [1000, 256]),
    }, metadata={"format": "pt"})
    names = {"model-00001-of-00002.safetensors": s1, "model-00002-of-00002.safetensors": s2}
    weight_map = {t: fname for fname, data in names.items() for t in header_of(data) if t != "__metadata__"}
    index = {"metadata": {"total_size": sum(len(d) for d in names.values())}, "weight_map": weight_map}
    return {"model.safetensors.index.json": json.dumps(index).encode(), **names}


def expected_from_headers(files: dict[str, bytes]) -> tuple[dict[str, int], int]:
    """Independent of kvplan: element counts from shapes, bytes from each header's data_offsets."""
    params: dict[str, int] = {}
    total = 0
    for name, data in files.items():
        if not name.endswith(".safetensors"):
            continue
        for tname, t in header_of(data).items():
            if tname == "__metadata__":
                continue
            params[t["dtype"]] = params.get(t["dtype"], 0) + int(np.prod(t["shape"], dtype=np.int64))
            total += t["data_offsets"][1] - t["data_offsets"][0]
    return params, total


def cfg(**overrides) -> bytes:
    return json.dumps({**LLAMA_CONFIG, **overrides}).encode()


def build_repos(hub: FakeHub) -> None:
    hub.add("org/llama", FakeRepo.single({"config.json": cfg(), "model.safetensors": single_file_weights()},
                                         lfs_redirect=True))
    hub.add("org/sharded", FakeRepo.single({"config.json": cfg(), **shard_files()}, lfs_redirect=True))
    old = {"config.json": cfg(num_hidden_layers=2)}
    new = {"config.json": cfg(num_hidden_layers=6), "model.safetensors": single_file_weights()}
    hub.add("org/pinned", FakeRepo(commits={"a" * 40: old, "b" * 40: new}, refs={"main": "b" * 40, "v1": "a" * 40}))
    hub.add("org/gated", FakeRepo.single({"config.json": cfg(), **shard_files()}, gated_token=TOKEN,
                                         lfs_redirect=True))
    hub.add("gpt2", FakeRepo.single({"config.json": cfg(model_type="gpt2")}))  # no safetensors, no namespace
    hub.add("org/no-config", FakeRepo.single({"README.md": b"# nothing"}))
    hub.add("org/not-json", FakeRepo.single({"config.json": b"{'model_type': llama,"}))
    hub.add("org/json-array", FakeRepo.single({"config.json": b"[1, 2, 3]"}))
    hub.add("org/bom-config", FakeRepo.single({"config.json": codecs.BOM_UTF8 + cfg()}))
    hub.add("org/huge-config", FakeRepo.single({"config.json": b"{" + b" " * (6 * 1024 * 1024) + b"}"}))
    hub.add("org/hang", FakeRepo.single({"config.json": cfg(), "model.safetensors": single_file_weights()},
                                        hang="all"))
    hub.add("org/hang-get", FakeRepo.single({"config.json": cfg()}, hang="get-once"))
    good = single_file_weights()
    hub.add("org/lying-prefix", FakeRepo.single({"config.json": cfg(),
                                                 "model.safetensors": with_length_prefix(good, len(good) + 4096)}))
    hub.add("org/huge-prefix", FakeRepo.single({"config.json": cfg(),
                                                "model.safetensors": with_length_prefix(good, 1 << 40)}))
    bad_offsets = {"w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 16]}}  # needs 32 bytes
    hub.add("org/bad-offsets",
            FakeRepo.single({"config.json": cfg(), "model.safetensors": with_header(bad_offsets, 16)}))
    missing_shard = shard_files()
    del missing_shard["model-00002-of-00002.safetensors"]
    hub.add("org/missing-shard", FakeRepo.single({"config.json": cfg(), **missing_shard}))
    hub.add("org/header-list", FakeRepo.single({"config.json": cfg(), "model.safetensors": with_header([1, 2], 0)}))


@pytest.fixture
def hub(tmp_path, monkeypatch):
    server = FakeHub(max_hang_s=30.0)
    build_repos(server)
    with serving(server, monkeypatch, tmp_path / "hf_home"):
        yield server


def fails(fn, *args, **kwargs) -> KvplanError:
    with pytest.raises(KvplanError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert "\n" not in err.message and err.message.strip() == err.message and err.message
    assert "Traceback" not in err.message
    return err


# ----------------------------------------------------------------------------------------------
# start-up path


def test_import_does_not_load_the_client():
    code = "import sys, kvplan.sources.hub; print(sorted(m for m in ('huggingface_hub', 'httpx2') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_env_set_before_import_in_a_fresh_process(hub, tmp_path):
    """The CLI's situation: HF_ENDPOINT/HF_HOME set before huggingface_hub is ever imported."""
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "fresh_home"), HF_HUB_DISABLE_TELEMETRY="1")
    code = ("import json; from kvplan.sources.hub import fetch_config, fetch_weights; c = fetch_config('org/llama', "
            "timeout=5); w = fetch_weights('org/llama', timeout=5); "
            "print(json.dumps([c.commit, c.config['num_hidden_layers'], w.total_bytes]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    commit, layers, total = json.loads(out.stdout)
    assert commit == hub.repos["org/llama"].main and layers == 4
    assert total == expected_from_headers(hub.repos["org/llama"].commits[commit])[1]
    assert (tmp_path / "fresh_home" / "hub" / "models--org--llama").is_dir()


# ----------------------------------------------------------------------------------------------
# success


def test_fetch_config(hub):
    got = fetch_config("org/llama", timeout=5)
    assert isinstance(got, HubConfig)
    assert got.config == LLAMA_CONFIG
    assert got.commit == hub.repos["org/llama"].main
    assert (got.repo_id, got.revision, got.from_cache, got.notice) == ("org/llama", None, False, None)
    again = fetch_config("org/llama", timeout=5)  # cached file, still checked against the Hub
    assert again == got


def test_fetch_config_repo_without_namespace(hub):
    assert fetch_config("gpt2", timeout=5).config["model_type"] == "gpt2"


def test_modelopt_hf_quant_config_json_is_read_beside_config(hub):
    # ModelOpt's older exports state NVFP4 and its exclusions in hf_quant_config.json, not config.json
    # (kvplan.readers.modelopt): the Hub read fetches it where config.json has no quantization_config. The fake
    # Llama: hidden 256, 4 layers, 8 heads of 32, 2 KV heads; attention per layer q 256x256 + k, v 2 x 256x64 +
    # o 256x256 = 163,840; x 4 = 655,360 kept in bf16
    from kvplan.sources.resolve import resolve_model

    quant = {"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}}
    hub.add("org/fp4", FakeRepo.single({"config.json": cfg(), "hf_quant_config.json": json.dumps(quant).encode()}))
    q = resolve_model("org/fp4", timeout=5).spec.quantization
    assert (q.method, q.kept) == ("nvfp4", (("attention", 655_360),))
    assert resolve_model("org/llama", timeout=5).spec.quantization.method == "bf16"  # no such file: None


def test_weights_single_file(hub):
    got = fetch_weights("org/llama", timeout=5)
    assert isinstance(got, HubWeights)
    params, total = expected_from_headers(hub.repos["org/llama"].commits[hub.repos["org/llama"].main])
    assert dict(got.params_by_dtype) == params
    assert got.total_bytes == total
    assert got.num_files == 1
    # by hand: 1000*256*2 + 512*32*4 + 4*32*4 + 4*256*2 + 256*4 + 3*7 + 4
    assert total == 512000 + 65536 + 512 + 2048 + 1024 + 21 + 4
    assert params == {"F16": 256000 + 1024, "I32": 16384 + 128, "F32": 257, "U8": 21}


def test_weights_sharded_through_cdn_redirect(hub):
    repo = hub.repos["org/sharded"]
    got = fetch_weights("org/sharded", timeout=5)
    params, total = expected_from_headers(repo.commits[repo.main])
    assert dict(got.params_by_dtype) == params
    assert got.total_bytes == total
    assert got.num_files == 2
    assert set(params) == {"BF16", "F8_E4M3", "F32", "U8", "F8_E8M0", "F4"}
    assert params["F4"] == 256 * 128 and params["U8"] == 4 * 64 * 16  # F4 packs two per byte
    # every shard header was read at the one commit the first probe resolved
    shard_reads = [r for r in hub.requests_for("/resolve/") if "-of-" in r.path and r.method == "GET"]
    assert len(shard_reads) == 2 and all(f"/resolve/{repo.main}/" in r.path for r in shard_reads)
    assert len([r for r in hub.requests if r.path.startswith("/cdn/")]) == 2


def test_not_a_safetensors_repo(hub):
    assert fetch_weights("gpt2", timeout=5) is None


def test_revision_pinned(hub):
    repo = hub.repos["org/pinned"]
    main = fetch_config("org/pinned", timeout=5)
    v1 = fetch_config("org/pinned", revision="v1", timeout=5)
    assert (main.config["num_hidden_layers"], main.commit) == (6, "b" * 40)
    assert (v1.config["num_hidden_layers"], v1.commit, v1.revision) == (2, "a" * 40, "v1")
    by_commit = fetch_config("org/pinned", revision="a" * 40, timeout=5)
    assert by_commit.config == v1.config and by_commit.commit == "a" * 40
    # a pinned commit already cached is immutable: answered without a request, like the client does
    before = len(hub.requests)
    cached = fetch_config("org/pinned", revision="a" * 40, timeout=5)
    assert cached.config == v1.config and cached.from_cache and cached.notice is None
    assert len(hub.requests) == before
    assert fetch_weights("org/pinned", revision="v1", timeout=5) is None  # v1 had no weights
    assert fetch_weights("org/pinned", timeout=5).num_files == 1
    assert repo.refs["main"] == "b" * 40


# ----------------------------------------------------------------------------------------------
# access and not-found errors


def test_gated_without_token(hub):
    err = fails(fetch_config, "org/gated", timeout=5)
    assert err.exit_code == EXIT_ACCESS
    # the token input by its keyword outside the CLI (the CLI words it --token: tests/test_errors_data.py)
    assert "org/gated" in err.message and "HF_TOKEN or pass token with" in err.message
    assert f"{hub.url}/org/gated" in err.message  # the model page to request access on
    assert fails(fetch_weights, "org/gated", timeout=5).exit_code == EXIT_ACCESS


def test_gated_with_token_and_token_never_shown(hub, capsys, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    repo = hub.repos["org/gated"]
    got = fetch_config("org/gated", token=TOKEN, timeout=5)
    assert got.config == LLAMA_CONFIG and got.commit == repo.main
    weights = fetch_weights("org/gated", token=TOKEN, timeout=5)
    assert weights.total_bytes == expected_from_headers(repo.commits[repo.main])[1]
    # the token went to the Hub origin only, never to the CDN
    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in hub.requests_for("/resolve/"))
    assert all("authorization" not in r.headers for r in hub.requests if r.path.startswith("/cdn/"))
    # HF_TOKEN is the client's default when no token is passed
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert fetch_config("org/gated", timeout=5).config == LLAMA_CONFIG
    monkeypatch.delenv("HF_TOKEN")
    # a wrong token: access error, and neither token appears anywhere
    wrong = "hf_wrongTokenABCDEFGHIJKLMNOP"
    err = fails(fetch_config, "org/gated", token=wrong, timeout=5)
    assert err.exit_code == EXIT_ACCESS
    messages = [err.message]
    messages.append(fails(fetch_config, "org/missing", token=TOKEN, timeout=5).message)
    messages.append(fails(fetch_weights, "org/gated", revision="nope", token=TOKEN, timeout=5).message)
    messages.append(fails(fetch_config, "org/hang", token=TOKEN, timeout=0.5).message)
    out = capsys.readouterr()
    seen = "\n".join(messages + [out.out, out.err, caplog.text]
                     + [str(r.args) + r.getMessage() for r in caplog.records])
    assert TOKEN not in seen and wrong not in seen


def test_repo_not_found(hub):
    for fn in (fetch_config, fetch_weights):
        err = fails(fn, "org/does-not-exist", timeout=5)
        assert err.exit_code == EXIT_NOT_FOUND
        assert "org/does-not-exist" in err.message and "not found" in err.message


def test_revision_not_found(hub):
    for fn in (fetch_config, fetch_weights):
        err = fails(fn, "org/llama", revision="no-such-branch", timeout=5)
        assert err.exit_code == EXIT_NOT_FOUND
        assert "no-such-branch" in err.message and "org/llama" in err.message


def test_missing_config_json(hub):
    err = fails(fetch_config, "org/no-config", timeout=5)
    assert err.exit_code == EXIT_NOT_FOUND
    assert "config.json" in err.message and "org/no-config" in err.message


@pytest.mark.parametrize("repo_id, words", [
    ("org/not-json", "not valid JSON"),
    ("org/json-array", "JSON array, not an object"),
    ("org/huge-config", "refuses files over 5 MB"),
])
def test_malformed_config_json(hub, repo_id, words):
    err = fails(fetch_config, repo_id, timeout=5)
    assert err.exit_code == EXIT_USAGE
    assert words in err.message and repo_id in err.message


def test_a_config_with_a_byte_order_mark_is_refused_as_a_folder_refuses_it(hub, tmp_path):
    # transformers loads config.json with json.loads of the file read as UTF-8, which refuses a leading BOM
    # ("Unexpected UTF-8 BOM": 5.25.0 configuration_utils.py L1140-1143), so vLLM and SGLang cannot serve the repo;
    # json.loads on the raw bytes would strip it and plan the model: the Hub's file is read as a folder's is
    err = fails(fetch_config, "org/bom-config", timeout=5)
    assert err.exit_code == EXIT_USAGE and "org/bom-config" in err.message
    (tmp_path / "config.json").write_bytes(codecs.BOM_UTF8 + cfg())
    with pytest.raises(KvplanError) as local:
        load_model(str(tmp_path))
    said = "starts with a UTF-8 byte-order mark, which transformers (and so vLLM and SGLang) refuses as invalid JSON"
    assert said in err.message and said in local.value.message


def test_huge_config_is_refused_before_download(hub):
    fails(fetch_config, "org/huge-config", timeout=5)
    assert [r.method for r in hub.requests_for("org/huge-config/resolve/")] == ["HEAD"]


@pytest.mark.parametrize("bad", ["", "a/b/c", "org/with--dashes", "../etc"])
def test_invalid_repo_id(hub, bad):
    assert fails(fetch_config, bad).exit_code == EXIT_USAGE
    assert not hub.requests


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), True, "10"])
def test_invalid_timeout(hub, timeout):
    assert fails(fetch_config, "org/llama", timeout=timeout).exit_code == EXIT_USAGE


# ----------------------------------------------------------------------------------------------
# offline and network failures


def test_offline_with_cache(hub, monkeypatch):
    online = fetch_config("org/llama", timeout=5)
    v1 = fetch_config("org/pinned", revision="v1", timeout=5)
    set_offline(monkeypatch)
    before = len(hub.requests)
    got = fetch_config("org/llama", timeout=5)
    assert got.config == online.config and got.commit == online.commit
    assert got.from_cache is True
    assert got.notice == "offline: using cached config.json for org/llama (revision main)"
    pinned = fetch_config("org/pinned", revision="v1", timeout=5)
    assert pinned.config == v1.config and pinned.commit == "a" * 40 and "revision v1" in pinned.notice
    assert len(hub.requests) == before  # offline means no request at all


def test_unreachable_hub_with_cache(hub, monkeypatch):
    online = fetch_config("org/llama", timeout=5)
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    reload_client_constants()
    got = fetch_config("org/llama", timeout=5)
    assert got.from_cache and got.config == online.config and got.commit == online.commit
    assert got.notice.startswith("offline: using cached config.json for org/llama (revision main);")
    assert "could not be reached" in got.notice and "\n" not in got.notice


def test_offline_without_cache(hub, monkeypatch):
    set_offline(monkeypatch)
    err = fails(fetch_config, "org/llama", timeout=5)
    assert err.exit_code == EXIT_NETWORK
    assert "HF_HUB_OFFLINE" in err.message and "org/llama" in err.message
    assert not hub.requests
    err = fails(fetch_weights, "org/llama", timeout=5)
    assert err.exit_code == EXIT_NETWORK and "HF_HUB_OFFLINE" in err.message


def test_unreachable_hub_without_cache(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    reload_client_constants()
    start = time.monotonic()
    for fn in (fetch_config, fetch_weights):
        err = fails(fn, "org/llama", timeout=5)
        assert err.exit_code == EXIT_NETWORK
        assert "cannot connect" in err.message and "HF_ENDPOINT" in err.message and "no cached copy" in err.message
    assert time.monotonic() - start < 5  # refused at once: no retry loop


def test_weights_offline_from_cached_files(hub, monkeypatch):
    """Weight files fully in the HF cache (e.g. downloaded by an engine) are parsed locally when offline."""
    from huggingface_hub import hf_hub_download

    online_single = fetch_weights("org/llama", timeout=5)
    online_sharded = fetch_weights("org/sharded", timeout=5)
    hf_hub_download("org/llama", "model.safetensors")
    for name in shard_files():
        hf_hub_download("org/sharded", name)
    set_offline(monkeypatch)
    assert fetch_weights("org/llama", timeout=5) == online_single
    assert fetch_weights("org/sharded", timeout=5) == online_sharded


@pytest.mark.parametrize("fn", [fetch_config, fetch_weights])
def test_server_that_never_answers(hub, fn):
    timeout = 1.0
    start = time.monotonic()
    err = fails(fn, "org/hang", timeout=timeout)
    elapsed = time.monotonic() - start
    assert err.exit_code == EXIT_NETWORK
    assert "no answer" in err.message and "1 s" in err.message
    assert elapsed < timeout + 2.0, elapsed


def test_server_that_stalls_the_download(hub, monkeypatch):
    """HEAD answers, the GET does not: hf_hub_download waits HF_HUB_DOWNLOAD_TIMEOUT (not our timeout)
    and then retries; the watchdog gives up after timeout + 1 s instead."""
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "3")  # so the abandoned download ends soon (see below)
    reload_client_constants()
    timeout = 1.0
    start = time.monotonic()
    err = fails(fetch_config, "org/hang-get", timeout=timeout)
    elapsed = time.monotonic() - start
    assert err.exit_code == EXIT_NETWORK and "org/hang-get" in err.message and "no answer" in err.message
    assert elapsed < timeout + 2.0, elapsed
    # The abandoned daemon thread times out at 3 s, retries and completes: wait for it so that it does
    # not log into later tests (in the CLI the process exits and takes it along).
    for thread in threading.enumerate():
        if thread.name.startswith("kvplan-hub"):
            thread.join(15)
            assert not thread.is_alive()


# ----------------------------------------------------------------------------------------------
# malformed safetensors headers: refused, naming the file (the caller may fall back to the config)


@pytest.mark.parametrize("repo_id, words", [
    ("org/lying-prefix", "not json"),
    ("org/huge-prefix", "too big"),
    ("org/bad-offsets", "needs 32 bytes but its data_offsets span 16"),
    ("org/header-list", "not recognized"),
])
def test_malformed_safetensors_header(hub, repo_id, words):
    start = time.monotonic()
    err = fails(fetch_weights, repo_id, timeout=5)
    assert err.exit_code == EXIT_USAGE
    assert "model.safetensors" in err.message and repo_id in err.message and "malformed" in err.message
    assert words in err.message
    assert time.monotonic() - start < 5


# ----------------------------------------------------------------------------------------------
# the fake Hub itself speaks what the client expects


def test_fake_hub_model_info(hub):
    from huggingface_hub import HfApi

    api = HfApi()
    info = api.model_info("org/pinned", timeout=5)
    assert info.sha == "b" * 40 and {s.rfilename for s in info.siblings} == {"config.json", "model.safetensors"}
    assert api.model_info("org/pinned", revision="v1", timeout=5).sha == "a" * 40
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/nope", timeout=5)
    with pytest.raises(RevisionNotFoundError):
        api.model_info("org/pinned", revision="zzz", timeout=5)
    # and the client's own safetensors reader agrees with kvplan's totals
    meta = api.get_safetensors_metadata("org/sharded", timeout=5)
    assert meta.parameter_count == dict(fetch_weights("org/sharded", timeout=5).params_by_dtype)


def test_index_naming_a_missing_shard(hub):
    err = fails(fetch_weights, "org/missing-shard", timeout=5)
    assert err.exit_code == EXIT_NOT_FOUND
    assert "model-00002-of-00002.safetensors" in err.message and "org/missing-shard" in err.message


def test_unexpected_library_error_is_one_line(hub, monkeypatch):
    import huggingface_hub

    def boom(*args, **kwargs):
        raise RuntimeError(f"boom with {TOKEN}\nand a second line")

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", boom)
    for fn in (fetch_config, fetch_weights):
        err = fails(fn, "org/llama", timeout=5)
        assert err.exit_code == EXIT_ERROR
        assert "RuntimeError: boom" in err.message and TOKEN not in err.message
