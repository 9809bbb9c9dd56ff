"""A checkpoint's declared KV-cache quantization read exactly, and the cache each engine release really uses for it
(issue 22): kvplan.readers.kv_quant, kvplan.engines.checkpoint_kv and the engines' rules (vllm/sglang/trtllm
cache_dtype.py, each citing the release files it restates).

Hand arithmetic: Llama-3.3-70B caches 2 (K, V) x 80 layers x 8 KV heads x 128 = 163,840 elements a token: 163,840 B in
fp8, 327,680 B in bf16. The independent check is TensorRT-LLM#6294's log (tests/fixtures/logs/corpus/index.yaml):
TensorRT-LLM 0.20.0 running nvidia/Llama-3.1-8B-Instruct-FP8 under trtllm-bench (kv_cache_config.dtype auto; the
thread's next run prints "Using checkpoint KV quantization") allocated 52.51 GiB for 860,320 tokens, 65,530.1 ..
65,542.5 B a token (52.505 .. 52.515 GiB), which only an FP8 cache gives: 2 x 32 layers x 8 KV heads x 128 x 1 B =
65,536 B (bf16 would be 131,072 B).
"""

from __future__ import annotations

import json

import pytest

from kvplan import api
from kvplan.core.dtypes import KV_DTYPES
from kvplan.core.errors import KvplanError
from kvplan.sources.catalog import spec_from_dict, spec_to_dict
from kvplan.sources.importer import build_spec
from conftest import unwrapped

try:
    from tests.hub_server import FakeHub, FakeRepo, serving
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    from hub_server import FakeHub, FakeRepo, serving  # type: ignore[no-redef]

FP8_TOKEN, BF16_TOKEN = 163_840, 327_680  # Llama-3.3-70B: 2 x 80 x 8 x 128 x 1 B, x 2 B


def llama_70b() -> dict:
    """A Llama-3.3-70B-shaped config.json (meta-llama/Llama-3.3-70B-Instruct's geometry: 80 layers, 64 heads of 128
    over hidden 8,192, 8 KV heads, FFN 28,672, vocab 128,256), the fields kvplan reads and no more: the tests need its
    KV arithmetic, not the checkpoint's file (so they run in a clone without ../shared)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
            "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
            "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}

# ModelOpt's file form (nvidia/Llama-3.3-70B-Instruct-FP8's kind of export: hf_quant_config.json beside config.json)
MODELOPT_FP8 = {"producer": {"name": "modelopt", "version": "0.19.0"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
# llm-compressor's FP8 weights with an FP8 KV cache (RedHatAI's "-FP8-KV" form): config.json's quantization_config
CT_FP8_KV = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                 "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}}},
             "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                 "symmetric": True}}


def _folder(tmp_path, quant: dict | None = None, config_quant: dict | None = None, name="llama-70b-fp8",
            config: dict | None = None):
    d = tmp_path / name
    d.mkdir()
    config = config or llama_70b()
    if config_quant is not None:
        config["quantization_config"] = config_quant
    (d / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (d / "hf_quant_config.json").write_text(json.dumps(quant))
    return str(d)


def _plan(model, engine=None, version=None, kv_dtype="auto", gpu="h200"):
    return api.plan(model, gpu, context=8192, engine=engine, engine_version=version, kv_dtype=kv_dtype)


def _said(plan) -> list[str]:
    return [w.message for w in plan.warnings if "KV cache" in w.message]


def test_reader_takes_modelopts_declaration_and_says_where(tmp_path):
    spec = api.load_model(_folder(tmp_path, MODELOPT_FP8))
    ckv = spec.checkpoint_kv
    assert (ckv.producer, ckv.kind, ckv.dtype, ckv.source) == ("modelopt", "FP8", "fp8", "hf_quant_config.json")
    assert ckv.describe() == "kv_cache_quant_algo FP8 in hf_quant_config.json"
    # a null declaration, or none at all, is no declaration
    none = {**MODELOPT_FP8, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}
    assert api.load_model(_folder(tmp_path, none, name="none")).checkpoint_kv is None


def test_reader_takes_a_compressed_tensors_scheme():
    config = {**llama_70b(), "quantization_config": CT_FP8_KV}
    ckv = build_spec(config, "test/ct-fp8-kv", source="test")[0].checkpoint_kv
    assert (ckv.producer, ckv.kind, ckv.dtype, ckv.static_per_tensor) == ("compressed-tensors", "FP8", "fp8", True)
    assert ckv.source == "config.json quantization_config" and "strategy tensor" in ckv.describe()
    dynamic = {**CT_FP8_KV, "kv_cache_scheme": {**CT_FP8_KV["kv_cache_scheme"], "dynamic": "local"}}
    ckv = build_spec({**config, "quantization_config": dynamic}, "test/ct", source="test")[0].checkpoint_kv
    assert ckv.scheme_dynamic is True and not ckv.static_per_tensor


@pytest.mark.parametrize("kv", [123, "FP8; rm -rf /", "X" * 40, ["FP8"]])
def test_hostile_algo_is_refused_naming_the_key(tmp_path, kv):
    quant = {**MODELOPT_FP8, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": kv}}
    with pytest.raises(KvplanError, match="kv_cache_quant_algo must be a short name") as info:
        api.load_model(_folder(tmp_path, quant))
    assert "\n" not in info.value.message


@pytest.mark.parametrize("scheme, key", [({"num_bits": "8", "type": "float"}, "num_bits"),
                                         ({"num_bits": 10**9, "type": "float"}, "num_bits"),
                                         ({"num_bits": True}, "num_bits"),
                                         ({"num_bits": 8, "type": "float\nx"}, "type"),
                                         ({"num_bits": 8, "type": "float", "dynamic": "yes"}, "dynamic"),
                                         ("fp8", "kv_cache_scheme")])
def test_hostile_scheme_is_refused_naming_the_key(scheme, key):
    config = {**llama_70b(),
              "quantization_config": {**CT_FP8_KV, "kv_cache_scheme": scheme}}
    with pytest.raises(KvplanError, match=key):
        build_spec(config, "test/bad", source="test")


def test_catalog_round_trip_keeps_the_declaration(tmp_path):
    spec = api.load_model(_folder(tmp_path, MODELOPT_FP8))
    back = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))), "test")
    assert back.checkpoint_kv == spec.checkpoint_kv


@pytest.mark.parametrize("engine, version, token", [
    (None, None, FP8_TOKEN),  # kvplan's own plan follows ModelOpt's FP8, as every engine's current auto does
    ("vllm", "0.11.0", BF16_TOKEN),  # 0.13.0 and before: arg_utils passes auto as given, the model dtype
    ("vllm", "0.15.0", FP8_TOKEN),  # from 0.14.0: resolve_kv_cache_dtype_string -> fp8_e4m3
    ("vllm", "0.33.0", FP8_TOKEN),
    ("sglang", "0.4.9", BF16_TOKEN),  # to 0.5.1.post3: auto is self.dtype
    ("sglang", "0.5.3", FP8_TOKEN),  # from 0.5.3: kv_cache_quant_algo FP8 -> float8_e4m3fn
    ("sglang", "0.5.23", FP8_TOKEN),
    ("trtllm", "0.20.0", FP8_TOKEN),  # "Using checkpoint KV quantization"
    ("trtllm", "1.2.0", FP8_TOKEN),
])
def test_auto_follows_modelopt_fp8_as_each_release_does(tmp_path, engine, version, token):
    plan = _plan(_folder(tmp_path, MODELOPT_FP8), engine, version)
    assert plan.kv_bytes_per_token == token
    assert plan.request.kv_dtype.name == ("fp8" if token == FP8_TOKEN else "bf16")
    said = _said(plan)
    assert len(said) == 1 and "kv_cache_quant_algo FP8 in hf_quant_config.json" in said[0]
    if token == BF16_TOKEN:  # the declared cache is said to be a name away
        assert said[0].startswith("KV cache bf16") and said[0].endswith("; kv_dtype fp8 plans the declared cache")


@pytest.mark.parametrize("engine, version, token", [
    (None, None, BF16_TOKEN),  # kvplan's own plan keeps the model dtype, as vLLM does
    ("vllm", "0.33.0", BF16_TOKEN),  # get_kv_cache_quant_algo_string reads a ModelOpt config only
    ("sglang", "0.5.3", BF16_TOKEN),  # 0.5.3's CompressedTensorsConfig has no kv_cache_quant_algo
    ("sglang", "0.5.23", FP8_TOKEN),  # 0.5.23's: FP8 for a static symmetric per-tensor 8-bit float scheme
])
def test_compressed_tensors_kv_scheme_by_engine(tmp_path, engine, version, token):
    plan = _plan(_folder(tmp_path, config_quant=CT_FP8_KV), engine, version)
    assert plan.kv_bytes_per_token == token


# Fp8Config's form with a kv_cache_quant_algo key (SGLang's Fp8Config.from_config reads it from 0.5.18)
FP8_CONFIG_KV = {"quant_method": "fp8", "activation_scheme": "dynamic", "kv_cache_quant_algo": "FP8"}


@pytest.mark.parametrize("version, ct_token, fp8_token", [
    ("0.5.10", BF16_TOKEN, BF16_TOKEN),  # 0.5.10 wheel: kv_cache_quant_algo in modelopt_quant.py alone
    ("0.5.17", BF16_TOKEN, BF16_TOKEN),  # 0.5.17 wheel: neither fp8.py nor compressed_tensors.py has it
    ("0.5.18", BF16_TOKEN, FP8_TOKEN),  # 0.5.18 wheel: fp8.py L326-328 reads the key; compressed_tensors.py not
    ("0.5.19", FP8_TOKEN, FP8_TOKEN),  # 0.5.19 wheel: compressed_tensors.py L137-146, the static per-tensor FP8
])
def test_sglang_follows_fp8config_from_0_5_18_and_compressed_tensors_from_0_5_19(tmp_path, version, ct_token,
                                                                                  fp8_token):
    ct = _plan(_folder(tmp_path, config_quant=CT_FP8_KV, name="ct"), "sglang", version)
    fp8 = _plan(_folder(tmp_path, config_quant=FP8_CONFIG_KV, name="fp8"), "sglang", version)
    assert (ct.kv_bytes_per_token, fp8.kv_bytes_per_token) == (ct_token, fp8_token)
    for plan in (ct, fp8):
        said = _said(plan)
        assert len(said) == 1 and f"SGLang {version}" in said[0] and "has not read" not in said[0]


# A weight scheme TensorRT-LLM 1.3.0rc19's update_quant_config_from_compressed_tensors loads (8-bit channel weights,
# per-token inputs: FP8_PER_CHANNEL_PER_TOKEN) with llm-compressor's FP8 KV scheme
CT_FP8_CHANNEL_KV = {**CT_FP8_KV, "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": CT_FP8_KV["config_groups"]["group_0"]["weights"],
    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}


def test_trtllm_before_1_3_0rc19_plans_a_compressed_tensors_scheme_at_the_model_dtype(tmp_path):
    # no release read before 1.3.0rc19 reads kv_cache_scheme: 2 x 80 x 8 x 128 x 2 B = 327,680 B, said unread
    for version in ("0.20.0", "1.2.0"):
        plan = _plan(_folder(tmp_path, config_quant=CT_FP8_CHANNEL_KV, name=f"ct-{version}"), "trtllm", version)
        assert plan.kv_bytes_per_token == BF16_TOKEN == 2 * 80 * 8 * 128 * 2
        said = _said(plan)
        assert len(said) == 1 and said[0].startswith("KV cache bf16") and "has not read" in said[0]
        assert "7b437aaa" in said[0] and said[0].endswith("; kv_dtype fp8 plans the declared cache")


def test_trtllm_from_1_3_0rc19_follows_an_8_bit_float_scheme_of_any_strategy():
    # quant_config_utils.py L81-83 at 2a26169d: num_bits 8 and type float -> kv_cache_quant_algo FP8, the strategy and
    # dynamic flag unread; the cache is then 2 x 80 x 8 x 128 x 1 B = 163,840 B a token
    from kvplan.engines.checkpoint_kv import resolve
    from kvplan.engines.trtllm.cache_dtype import checkpoint_kv_rule
    from kvplan.planning.plan import KV_FOLLOWED, Request

    base = {**llama_70b(), "quantization_config": CT_FP8_CHANNEL_KV}
    for strategy, dynamic in (("tensor", False), ("head", False), ("tensor", True)):
        scheme = {**CT_FP8_KV["kv_cache_scheme"], "strategy": strategy, "dynamic": dynamic}
        model = build_spec({**base, "quantization_config": {**CT_FP8_CHANNEL_KV, "kv_cache_scheme": scheme}},
                           "test/ct", source="test")[0]
        rule = checkpoint_kv_rule(model.checkpoint_kv, "1.3.0rc19")
        assert rule.follows and "1.3.0rc19" in rule.why and "2a26169d" in rule.why
        req, warnings = resolve(rule, model, Request(context=8192, kv_auto=True))
        assert req.kv_dtype.name == "fp8" and [w.topic for w in warnings] == [KV_FOLLOWED]
        assert warnings[0].note  # the engine's 'auto' as it ships: a note, not a warning
        assert warnings[0].message.startswith("KV cache fp8: the checkpoint declares kv_cache_scheme")
        assert 2 * 80 * 8 * 128 * req.kv_dtype.bytes_for(1) == FP8_TOKEN
        with pytest.raises(KvplanError, match="a 16-bit cache of this checkpoint has no setting"):
            resolve(rule, model, Request(context=8192, kv_dtype=KV_DTYPES["bf16"]))
    # any other scheme raises ValueError("Unsupported kv_cache_scheme") at L89-90: the checkpoint does not load
    int8 = {**CT_FP8_KV["kv_cache_scheme"], "type": "int"}
    model = build_spec({**base, "quantization_config": {**CT_FP8_CHANNEL_KV, "kv_cache_scheme": int8}},
                       "test/ct-int8", source="test")[0]
    with pytest.raises(KvplanError, match="refuses to load .*Unsupported kv_cache_scheme"):
        checkpoint_kv_rule(model.checkpoint_kv, "1.3.0rc19")
    assert not checkpoint_kv_rule(model.checkpoint_kv, "1.2.0").follows  # before: unread, the model dtype


def test_a_dtype_asked_by_name_is_honoured_and_said(tmp_path):
    folder = _folder(tmp_path, MODELOPT_FP8)
    plan = _plan(folder, "vllm", None, kv_dtype="bf16")
    assert plan.kv_bytes_per_token == BF16_TOKEN
    assert _said(plan) == ["KV cache bf16 as asked, not the FP8 cache the checkpoint declares "
                           "(kv_cache_quant_algo FP8 in hf_quant_config.json)"]
    assert not any(w.note for w in plan.warnings if "KV cache" in w.message)  # a departure asked: a warning
    assert _said(_plan(folder, "vllm", None, kv_dtype="fp8")) == []  # the declaration itself: nothing to say


def test_a_16_bit_cache_with_no_engine_setting_is_refused(tmp_path):
    folder = _folder(tmp_path, MODELOPT_FP8)
    # TensorRT-LLM: kv_cache_config.dtype takes auto, fp8, nvfp4; auto is the checkpoint's FP8
    with pytest.raises(KvplanError, match="a 16-bit cache of this checkpoint has no setting"):
        _plan(folder, "trtllm", None, kv_dtype="bf16")
    # SGLang 0.5.3: --kv-cache-dtype auto, fp8_e5m2, fp8_e4m3 (bf16 from 0.5.4)
    with pytest.raises(KvplanError, match="bf16 from 0.5.4"):
        _plan(folder, "sglang", "0.5.3", kv_dtype="bf16")
    assert _plan(folder, "sglang", "0.5.23", kv_dtype="bf16").kv_bytes_per_token == BF16_TOKEN
    # refused before any layout is searched, not hidden as "no layout is valid"
    with pytest.raises(KvplanError, match="no setting"):
        api.plan(folder, "h100", gpus=2, context=8192, engine="trtllm", kv_dtype="bf16")


def test_a_followed_kind_kvplan_cannot_size_is_refused(tmp_path):
    nvfp4 = {**MODELOPT_FP8, "quantization": {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "NVFP4"}}
    folder = _folder(tmp_path, nvfp4)
    # vLLM maps nvfp4 from 0.20.0 (MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP), TensorRT-LLM takes any ModelOpt algo
    for engine, version in (("vllm", "0.20.0"), ("trtllm", None)):
        with pytest.raises(KvplanError, match="kvplan has no NVFP4 cache dtype"):
            _plan(folder, engine, version)
    # vLLM 0.19.1 and SGLang fall back to the model dtype (said); kvplan's own plan too
    for engine, version in (("vllm", "0.19.1"), ("sglang", None), (None, None)):
        plan = _plan(folder, engine, version)
        assert plan.kv_bytes_per_token == BF16_TOKEN and _said(plan)[0].startswith("KV cache bf16")


def test_emitted_command_names_the_cache_where_auto_would_differ(tmp_path):
    # vLLM >= 0.14's auto is this checkpoint's FP8: the plan's bf16 must be asked for by name, its fp8 need not be
    from typer.testing import CliRunner

    from kvplan.cli import app

    folder = _folder(tmp_path, MODELOPT_FP8)
    for kv, flag in (("bf16", "--kv-cache-dtype bfloat16"), ("auto", None)):
        r = CliRunner().invoke(app, ["fit", folder, "--gpu", "h200", "--ctx", "8k", "--engine", "vllm",
                                     "--kv-dtype", kv, "--emit", "vllm"])
        assert r.exit_code == 0, r.output
        line = next(x for x in unwrapped(r.output).splitlines() if x.startswith("vllm serve"))
        assert (flag in line) if flag else "--kv-cache-dtype" not in line, line


def test_trtllm_6294_log_bytes_a_token_are_the_checkpoints_fp8(tmp_path):
    # nvidia/Llama-3.1-8B-Instruct-FP8 declares an FP8 KV cache; TensorRT-LLM 0.20.0's auto follows it: 65,536 B a
    # token, inside the log's 65,530.1 .. 65,542.5 B (52.51 GiB for 860,320 tokens); bf16's 131,072 B is not
    # Llama-3.1-8B's geometry: 32 layers, 32 heads of 128 over hidden 4,096, 8 KV heads, FFN 14,336
    llama_8b = {**llama_70b(), "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
                "num_hidden_layers": 32}
    folder = _folder(tmp_path, MODELOPT_FP8, name="llama-8b-fp8", config=llama_8b)
    per_token = _plan(folder, "trtllm", "0.20.0", gpu="h100").kv_bytes_per_token
    low, high = 52.505 * 2**30 / 860_320, 52.515 * 2**30 / 860_320
    assert per_token == 65_536 and low <= per_token <= high
    assert not low <= 2 * per_token <= high


def test_hub_checkpoint_reads_hf_quant_config_json(tmp_path, monkeypatch):
    # the same declaration over the Hub API (kvplan.sources.hub fetches hf_quant_config.json beside config.json)
    server = FakeHub(max_hang_s=30.0)
    config = llama_70b()
    server.add("nvidia/Llama-3.3-70B-Instruct-FP8", FakeRepo.single({
        "config.json": json.dumps(config).encode(), "hf_quant_config.json": json.dumps(MODELOPT_FP8).encode()}))
    with serving(server, monkeypatch, tmp_path / "hf_home"):
        plan = api.plan("nvidia/Llama-3.3-70B-Instruct-FP8", "h200", context=8192, engine="trtllm", timeout=5)
    assert plan.kv_bytes_per_token == FP8_TOKEN and plan.request.kv_dtype.name == "fp8"


def test_llamacpp_is_not_applicable_and_says_why(tmp_path):
    # llama.cpp serves a GGUF conversion: no declaration travels with it; its cache is cache_type_k / _v's
    said = _said(_plan(_folder(tmp_path, MODELOPT_FP8), "llama.cpp"))
    assert len(said) == 1 and "GGUF conversion" in said[0] and "plans the declared cache" not in said[0]


def test_sweep_and_cheapest_leave_auto_to_the_engine_too(tmp_path):
    folder = _folder(tmp_path, MODELOPT_FP8)
    # kvplan's own grid and vLLM 0.11.0 (auto is bf16 there); auto and bf16 by name are two plans of this checkpoint
    own = api.sweep([folder], context=[8192], gpu="h200", gpu_counts=[1], kv_dtype=["auto", "bf16"])
    assert sorted(p.kv_bytes_per_token for p in own.plans) == [FP8_TOKEN, BF16_TOKEN]
    old = api.sweep([folder], context=[8192], gpu="h200", gpu_counts=[1], engine="vllm", engine_version="0.11.0")
    assert [p.kv_bytes_per_token for p in old.plans] == [BF16_TOKEN]
    best = api.cheapest(folder, context=8192, concurrency=1, gpu="h200", engine="trtllm")[0]
    assert best.plan.kv_bytes_per_token == FP8_TOKEN


def _cli(args):
    from typer.testing import CliRunner

    from kvplan.cli import app

    return CliRunner().invoke(app, args)


def test_sweep_rows_and_notes_say_what_each_plan_did_with_the_declaration(tmp_path):
    # vLLM 0.11.0's auto keeps bf16 for a ModelOpt FP8-KV checkpoint (it follows from 0.14.0), 0.33.0's takes fp8;
    # fp8 by name is "asked" (no warning of its own). A checkpoint declaring nothing: null, and no note.
    folder, plain = _folder(tmp_path, MODELOPT_FP8), _folder(tmp_path, name="llama-70b")
    base = ["sweep", "-m", f"{folder},{plain}", "-c", "8k", "-g", "h200", "--gpu-counts", "1", "--json"]
    r = _cli([*base, "--kv-dtype", "auto,fp8", "--engine", "vllm", "--engine-version", "0.11.0"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["plans"]
    got = sorted((p["model"], p["kv_dtype"], p["checkpoint_kv"]) for p in rows)
    assert got == [("llama-70b", "bf16", None), ("llama-70b", "fp8", None),
                   ("llama-70b-fp8", "bf16", "not followed"), ("llama-70b-fp8", "fp8", "asked")]
    notes = [x for x in r.stderr.splitlines() if x.startswith("note: llama-70b")]
    assert len(notes) == 1 and notes[0].startswith("note: llama-70b-fp8: KV cache bf16: the checkpoint declares "
                                                   "kv_cache_quant_algo FP8"), notes
    assert "vLLM 0.11.0" in notes[0]
    r = _cli([*base[:-1], "--csv", "--engine", "vllm", "--engine-version", "0.33.0"])
    assert r.exit_code == 0, r.output
    import csv
    import io

    rows = {p["model"]: p for p in csv.DictReader(io.StringIO(r.stdout))}
    assert rows["llama-70b-fp8"]["checkpoint_kv"] == "followed" and rows["llama-70b-fp8"]["kv_dtype"] == "fp8"
    assert rows["llama-70b"]["checkpoint_kv"] == ""
    assert any(x.startswith("note: llama-70b-fp8: KV cache fp8: the checkpoint declares")
               for x in r.stderr.splitlines())
    # auto (fp8 under 0.33.0) and bf16 are two plans of the declaring checkpoint, one of the other: 3, said so
    r = _cli([*base, "--kv-dtype", "auto,bf16", "--engine", "vllm", "--engine-version", "0.33.0"])
    assert r.exit_code == 0 and "sweep: 3 plans to make" in r.stderr and len(json.loads(r.stdout)["plans"]) == 3
    r = _cli(["sweep", "-m", plain, "-c", "8k", "-g", "h200", "--gpu-counts", "1"])  # no declaration: not a word
    assert r.exit_code == 0 and "checkpoint declares" not in r.output


def test_cheapest_notes_the_declaration_and_rows_carry_it(tmp_path):
    folder = _folder(tmp_path, MODELOPT_FP8)
    r = _cli(["cheapest", folder, "-c", "8k", "-g", "h200", "--concurrency", "1", "--engine", "trtllm",
              "--json"])
    assert r.exit_code == 0, r.output
    assert {row["checkpoint_kv"] for row in json.loads(r.stdout)["meets"]} == {"followed"}
    notes = [x for x in r.stderr.splitlines() if "the checkpoint declares" in x]
    assert len(notes) == 1 and notes[0].startswith("note: llama-70b-fp8: KV cache fp8:") and "TensorRT-LLM" in notes[0]
