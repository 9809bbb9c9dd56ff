"""`kvplan validate`: a real torch decode whose measured cache must equal the planner's prediction.

Every config in ../shared/configs is built at a few layers (random weights, real cache geometry,
small MLP/vocab/hidden widths), prefilled and decoded; the bytes of its cache storages must
equal kv_profile(...).sequence_bytes(ctx, paged=False) x batch exactly, and cached decode must
give the same greedy tokens as uncached recomputation. Hand arithmetic for a few cases is in
the comments, so the planner is not only compared with itself.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="validate needs torch (the [validate] extra)")

from typer.testing import CliRunner  # noqa: E402

from kvplan.cli import app  # noqa: E402
from kvplan.readers.configs import spec_from_config  # noqa: E402
from kvplan.validate.blueprint import Widths  # noqa: E402
from kvplan.validate.compare import Check, all_ok, failures  # noqa: E402
from kvplan.validate.measure import CpuTracker, storage_bytes  # noqa: E402
from kvplan.validate.run import TORCH_DTYPES, Settings, validate  # noqa: E402

from conftest import CONFIGS, REPO, shared_config  # noqa: E402

TINY = Widths(hidden=128, mlp=64, expert=32, experts=4, vocab=256)
CONFIG_NAMES = sorted(p.stem for p in CONFIGS.glob("*.json")) if CONFIGS.is_dir() else ["(../shared absent)"]
DTYPES = [d for d in ("bf16", "fp16", "fp32", "fp8") if d in TORCH_DTYPES]
runner = CliRunner()


def spec_of(name: str, **overrides):
    cfg = dict(shared_config(name))
    if "text_config" in cfg:  # multimodal: the language model's keys live there
        cfg["text_config"] = {**cfg["text_config"], **overrides}
    else:
        cfg.update(overrides)
    return spec_from_config(cfg, name)[0]


def run(spec, **kw):
    kw.setdefault("widths", TINY)
    record, checks = validate(spec, Settings(**kw))
    return record, {c.name: c for c in checks}


@pytest.mark.parametrize("i,name", list(enumerate(CONFIG_NAMES)))
def test_every_family_cache_bytes_equal_prediction(i, name):
    """Each config at 1-2 layers, batch 2, a short context; the KV dtype rotates over the list."""
    spec = spec_of(name)
    mla_or_state = any(layer.kind in ("mla", "state") for layer in spec.layers[:2])
    layers = 1 if mla_or_state else min(2, spec.num_layers)
    kv = DTYPES[i % len(DTYPES)]
    record, checks = run(spec, batch=1 if mla_or_state else 2, ctx=24 if mla_or_state else 40, steps=3, layers=layers,
                         kv_dtype=kv,
                         state_dtype=kv)
    assert record["measured_kv_bytes"] == record["predicted_kv_bytes"] > 0
    assert checks["kv_cache"].ok and checks["kv_cache_after_decode"].ok
    assert record["tokens_match"], "cached decode differs from uncached recomputation"
    assert checks["weights"].ok, checks["weights"]
    assert record["ok"], record["checks"]


def test_llama_hand_arithmetic():
    # Llama 3.1 8B: 8 KV heads x 128 x 2 (K, V) x 2 B (bf16) = 4,096 B per token per layer;
    # 2 layers x 64 tokens x 3 sequences = 4,096 x 384 = 1,572,864 B.
    record, _ = run(spec_of("meta-llama__Llama-3.1-8B-Instruct"), batch=3, ctx=64, steps=4, layers=2, kv_dtype="bf16")
    assert record["measured_kv_bytes"] == 1_572_864


@pytest.mark.parametrize("ctx,kv", [(100, "bf16"), (200, "fp8"), (300, "fp32")])
def test_sliding_window_shorter_and_longer_than_window(ctx, kv):
    # gpt-oss: layer 0 sliding (window 128), layer 1 full; 8 KV heads x 64 x 2 = 1,024 values/token.
    # bytes = 1,024 x b x (min(ctx, 128) + ctx) per sequence.
    b = {"bf16": 2, "fp8": 1, "fp32": 4}[kv]
    record, _ = run(spec_of("openai__gpt-oss-20b"), batch=1, ctx=ctx, steps=4, layers=2, kv_dtype=kv)
    assert record["measured_kv_bytes"] == 1024 * b * (min(ctx, 128) + ctx)
    assert record["tokens_match"]


@pytest.mark.parametrize("ctx", [200, 600])
def test_gemma3_window_512(ctx):
    # Gemma 3 1B: layers 0-4 sliding (window 512), 1 KV head x 256 x 2 = 512 values/token, bf16:
    # 2 layers x min(ctx, 512) x 1,024 B.
    record, _ = run(spec_of("google__gemma-3-1b-it"), batch=1, ctx=ctx, steps=2, layers=2, kv_dtype="bf16")
    assert record["measured_kv_bytes"] == 2 * min(ctx, 512) * 1024
    assert record["tokens_match"]


@pytest.mark.parametrize("ctx", [20, 80])
def test_chunked_local_shorter_and_longer_than_chunk(ctx):
    # Llama 4 Scout with attention_chunk_size lowered to 32 (8,192 in the real config; the code
    # path is the same): layers 0-2 chunked, layer 3 global NoPE. 8 KV heads x 128 x 2 x 2 B =
    # 4,096 B/token: 3 x min(ctx, 32) + ctx tokens.
    spec = spec_of("meta-llama__Llama-4-Scout-17B-16E-Instruct", attention_chunk_size=32)
    record, _ = run(spec, batch=1, ctx=ctx, steps=4, layers=4, kv_dtype="bf16")
    assert record["measured_kv_bytes"] == 4096 * (3 * min(ctx, 32) + ctx)
    assert record["tokens_match"]


def test_mla_latent_hand_arithmetic():
    # DeepSeek-V2-Lite: 512 latent + 64 rope = 576 values per token, no x2; fp8: 1 B each.
    # 2 layers x 30 tokens x 576 B x 2 sequences = 69,120 B.
    record, _ = run(spec_of("deepseek-ai__DeepSeek-V2-Lite"), batch=2, ctx=30, steps=3, layers=2, kv_dtype="fp8")
    assert record["measured_kv_bytes"] == 69_120
    assert record["tokens_match"]


def test_gated_deltanet_state_hand_arithmetic():
    # Qwen3-Next layer 0 (linear attention): conv (4-1) x (2 x 16 x 128 + 32 x 128) = 24,576,
    # ssm 32 x 128 x 128 = 524,288 values; in bf16 x 2 B = 1,097,728 B per sequence, any length.
    for ctx in (12, 40):
        record, _ = run(spec_of("Qwen__Qwen3-Next-80B-A3B-Thinking"), batch=1, ctx=ctx, steps=2, layers=1)
        assert record["measured_kv_bytes"] == 1_097_728
        assert record["tokens_match"]


def test_storage_bytes_counts_each_storage_once():
    base = torch.zeros(10, 10)  # 400 B
    assert storage_bytes([base, base[2:], base.t()]) == 400
    assert storage_bytes([base, torch.zeros(3, dtype=torch.float8_e4m3fn)]) == 403


def test_cpu_tracker_follows_allocations():
    with CpuTracker() as tr:
        a = torch.empty(1000)  # 4,000 B
        b = torch.empty(500, dtype=torch.float16)  # 1,000 B
        view = a[10:]
        assert tr.live == 5000
        del a
        assert tr.live == 5000  # the view keeps the storage alive
        del view, b
    assert tr.live == 0 and tr.peak == 5000 and tr.count == 2


def test_comparison_exact_for_kv_and_tolerant_for_weights():
    assert not Check("kv_cache", 1000, 1001, 0.0).ok  # one byte off fails
    assert Check("kv_cache", 1000, 1000, 0.0).ok
    assert Check("weights", 1000, 1004, 0.005).ok
    assert not Check("weights", 1000, 1006, 0.005).ok
    assert Check("info", 10, 99, 0.01, enforced=False).ok
    checks = [Check("kv_cache", 1000, 1001, 0.0)]
    assert not all_ok(checks, True)
    assert failures(checks, False) == ["kv_cache: measured 1,001 B, predicted 1,000 B (must be equal)",
                                       "cached decode and uncached recomputation gave different tokens"]


# --- the command ------------------------------------------------------------------------------

CLI_RUN = ["validate", "llama-3.2-1b-instruct", "--ctx", "48", "--steps", "3", "--layers", "2", "--batch", "2",
           "--shrink", "--hidden", "128"]


def test_cli_success_json():
    result = runner.invoke(app, [*CLI_RUN, "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    # Llama 3.2 1B: 8 KV heads x 64 x 2 x 2 B = 2,048 B/token; 2 layers x 48 x 2 seqs = 393,216 B.
    assert record["measured_kv_bytes"] == record["predicted_kv_bytes"] == 393_216
    assert record["ok"] and record["tokens_match"] and record["layers"] == 2 and record["layers_total"] == 16


def test_cli_table_says_what_is_reduced():
    result = runner.invoke(app, CLI_RUN)
    assert result.exit_code == 0, result.output
    assert "all checks passed" in result.stdout
    assert "first 2 of 16 layers" in result.stderr and "shrunk for this run" in result.stderr


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_cli_output_appends_runs(tmp_path, suffix):
    out = tmp_path / f"results{suffix}"
    for _ in range(2):
        result = runner.invoke(app, [*CLI_RUN, "--output", str(out)])
        assert result.exit_code == 0, result.output
    from kvplan.validate.results import read_results

    runs = read_results(out)
    assert len(runs) == 2
    assert runs[1]["measured_kv_bytes"] == 393_216 and runs[1]["torch_version"] == torch.__version__
    assert runs[0]["checks"][0]["name"] == "kv_cache"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("args,code,text", [
    (["--kv-dtype", "q4_0"], 2, "no torch dtype"),
    (["--kv-dtype", "nonsense"], 2, "unknown KV cache dtype"),
    (["--ctx", "3"], 2, "must exceed --steps"),
    (["--layers", "99"], 2, "--layers must be between 1 and 16"),
    (["--output", "results.txt"], 2, ".json or .csv"),
    (["--backend", "vllm"], 2, "--backend"),
    (["--dtype", "fp8"], 2, "--dtype"),
])
def test_cli_bad_input_one_line(args, code, text):
    result = runner.invoke(app, [*CLI_RUN, *args])
    assert result.exit_code == code, result.output
    assert text in result.stderr and result.stderr.count("\n") <= 2 and "Traceback" not in result.output


def test_cli_dtype_errors_name_the_option():
    for args, text in ((["--dtype", "int4"], "--dtype 'int4': weights and compute run in fp32, bf16 or fp16"),
                       (["--state-dtype", "fp4"], "--state-dtype 'fp4': unknown dtype; validate supports auto")):
        result = runner.invoke(app, [*CLI_RUN, *args])
        assert result.exit_code == 2, result.output
        assert text in result.stderr and "KV cache" not in result.stderr, result.stderr


def _help_text() -> str:
    result = runner.invoke(app, ["validate", "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.replace("│", " ").split())  # the help box, unwrapped


def test_cli_help_shows_brackets_and_its_own_batch():
    text = _help_text()
    assert "needs the [transformers] extra" in text
    assert "decode speed and fits" not in text and "Sequences decoded together" in text


def test_cli_unknown_model():
    result = runner.invoke(app, ["validate", "no-such-model-xyz", "--ctx", "32"])
    assert result.exit_code == 3 and "unknown model" in result.stderr


@pytest.mark.parametrize("name, text", [
    ("notes.json", '{"not": "runs"}'),  # JSON that is not a list of runs
    ("list.json", '[{"a": 1}]'),  # a list, but of foreign records
    ("other.csv", "x,y\n1,2\n"),  # a CSV without the results header
])
def test_cli_output_refuses_a_foreign_file(tmp_path, name, text):
    out = tmp_path / name
    out.write_text(text)
    result = runner.invoke(app, [*CLI_RUN, "--output", str(out)])
    assert result.exit_code == 2 and "not a results file" in result.stderr, result.output
    assert out.read_text() == text


@pytest.mark.parametrize("name,text", [("missing/r.json", "no such directory"), ("folder.csv", "is a directory")])
def test_cli_output_checked_before_the_run(tmp_path, name, text):
    (tmp_path / "folder.csv").mkdir()
    result = runner.invoke(app, [*CLI_RUN, "--output", str(tmp_path / name)])
    assert result.exit_code == 2 and text in result.stderr, result.output
    assert result.stdout == "" and "note:" not in result.stderr  # refused before the model was built


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_cli_output_read_only_folder_checked_before_the_run(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = runner.invoke(app, [*CLI_RUN, "--output", str(folder / "r.json")])
    finally:
        folder.chmod(0o755)
    assert result.exit_code == 2 and "not writable" in result.stderr and result.stdout == "", result.output


def test_results_go_through_the_one_atomic_writer(tmp_path, monkeypatch):
    import kvplan.core.files
    from kvplan.validate.results import write_results

    calls = []
    real = kvplan.core.files.atomic_write
    monkeypatch.setattr(kvplan.core.files, "atomic_write",
                        lambda path, content, **kw: calls.append(path) or real(path, content, **kw))
    record = {"model": "m", "layers": 1, "batch": 1, "ctx": 8, "kv_dtype": "bf16", "predicted_kv_bytes": 1,
              "measured_kv_bytes": 1, "checks": [], "ok": True}
    for suffix in (".json", ".csv"):
        assert write_results(tmp_path / f"r{suffix}", record) == 1
        assert write_results(tmp_path / f"r{suffix}", record) == 2
    assert len(calls) == 4


def test_cli_output_writes_through_a_symlink(tmp_path):
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    link.symlink_to(target.name)
    result = runner.invoke(app, [*CLI_RUN, "--output", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and len(json.loads(target.read_text())) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_cli_output_refuses_a_pipe(tmp_path):
    pipe = tmp_path / "r.csv"
    os.mkfifo(pipe)
    result = runner.invoke(app, [*CLI_RUN, "--output", str(pipe)])
    assert result.exit_code == 2 and "not a regular file" in result.stderr and result.stdout == "", result.output
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


@pytest.mark.parametrize("args,text", [
    # Llama 3.2 1B cache: 2,048 B/token/layer in bf16; 10^9 tokens x 1 layer = 2.05 TB, more than any test machine.
    (["--ctx", "1000000000", "--steps", "1"], "KV cache 1.86 TiB"),
    # --hidden 10^8 with the shrunk 1,024-token vocabulary: embedding + lm_head alone 2 x 1,024 x 10^8 x 4 B = 819 GB.
    (["--hidden", "100000000"], "weights as built"),
])
def test_cli_refuses_a_run_bigger_than_memory(args, text):
    result = runner.invoke(app,
                           ["validate", "llama-3.2-1b-instruct", "--shrink", "--layers", "1", "--ctx", "32", *args])
    assert result.exit_code == 2, result.output
    assert text in result.stderr and "available" in result.stderr and "--layers" in result.stderr
    assert "internal error" not in result.stderr and result.stderr.count("\n") <= 2


def test_cli_allocation_failure_during_the_run_is_one_line(monkeypatch):
    import kvplan.validate.run as run_module

    monkeypatch.setattr(run_module, "available_bytes", lambda dev: 2**90)  # let the run start, so torch fails
    # 2^21 sequences x 2^30 tokens x 2,048 B: the cache's first tensor alone is 2^61 B, beyond any address space.
    result = runner.invoke(app, ["validate", "llama-3.2-1b-instruct", "--shrink", "--layers", "1",
                                 "--ctx", str(2**30), "--batch", str(2**21)])
    assert result.exit_code == 1, result.output
    assert "ran out of memory on cpu" in result.stderr and "internal error" not in result.stderr
    assert result.stderr.count("\n") <= 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error a machine without CUDA gives")
def test_cli_cuda_unavailable():
    result = runner.invoke(app, [*CLI_RUN, "--device", "cuda"])
    assert result.exit_code == 2 and "CUDA is not available" in result.stderr


def test_importing_the_cli_does_not_import_torch():
    code = "import kvplan.cli, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# --- CUDA (skipped without a GPU; see scripts/validate_gpu.sh) ---------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", ["meta-llama__Llama-3.1-8B-Instruct", "openai__gpt-oss-20b",
                                  "deepseek-ai__DeepSeek-V2-Lite", "Qwen__Qwen3-Next-80B-A3B-Thinking"])
def test_cuda_cache_bytes_equal_prediction(name):
    record, checks = run(spec_of(name), batch=2, ctx=300, steps=4, layers=4, device="cuda", kv_dtype="bf16",
                         compute_dtype="fp32")
    assert record["measured_kv_bytes"] == record["predicted_kv_bytes"]
    assert record["measured_reserved_bytes"] is not None
    assert record["tokens_match"] and record["ok"], record["checks"]


def test_script_for_gpu_machines_exists():
    script = REPO / "scripts" / "validate_gpu.sh"
    text = script.read_text()
    assert 'validate "$@" --device "$DEV" --output "$OUT"' in text and 'DEV="${2:-cuda}"' in text
    subprocess.run(["bash", "-n", str(script)], check=True)


# --- --backend transformers (the [transformers] extra; skipped when it is not installed) ---------

def _transformers():
    return pytest.importorskip("transformers", reason="the [transformers] extra is not installed")


def _hf_run(name, ctx, layers=2):
    _transformers()
    path = CONFIGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"../shared/configs/{name}.json is not here")
    result = runner.invoke(app, ["validate", str(path), "--backend", "transformers", "--ctx", str(ctx), "--steps", "3",
                                 "--layers", str(layers), "--batch", "2", "--shrink", "--kv-dtype", "fp32", "--json"])
    return result, json.loads(result.stdout)


def test_transformers_llama_cache_equals_prediction():
    # Llama 3.2 1B: 8 KV heads x 64 x 2 x 4 B (fp32) = 4,096 B/token; 2 layers x 100 x 2 seqs = 1,638,400 B.
    result, record = _hf_run("meta-llama__Llama-3.2-1B-Instruct", 100)
    assert result.exit_code == 0, result.output
    assert record["measured_kv_bytes"] == record["predicted_kv_bytes"] == 1_638_400
    assert record["tokens_match"]


def test_transformers_mla_latent():
    # transformers >= 5.15 caches DeepSeek-V2's latent: 576 x 4 B x 100 tokens x 2 layers x 2 seqs = 921,600 B.
    result, record = _hf_run("deepseek-ai__DeepSeek-V2-Lite", 100)
    transformers = _transformers()
    from kvplan.engines.base import parse_version

    if parse_version(transformers.__version__) < (5, 15, 0):
        pytest.skip("older transformers expands MLA per head")
    assert record["measured_kv_bytes"] == 921_600 and result.exit_code == 0


def test_transformers_sliding_layer_storage():
    # Gemma 3 1B, 2 sliding layers (W = 512), ctx 700: each layer shows the last W - 1 = 511 tokens,
    # as a view into the W-token tensor of its last update, whose storage stays alive:
    # 1 KV head x 256 x 2 x 4 B = 2,048 B/token; visible 2 layers x 511 x 2 seqs x 2,048 = 4,186,112 B,
    # held 2 x 512 x 2 x 2,048 = 4,194,304 B.
    result, record = _hf_run("google__gemma-3-1b-it", 700)
    assert record["measured_kv_visible_bytes"] == 4_186_112
    assert record["measured_kv_bytes"] == 4_194_304
    assert record["predicted_kv_bytes"] == 4_194_304 and record["ok"]
    assert record["tokens_match"]


def test_cpu_auto_shrink_when_the_full_build_would_take_minutes():
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.core.dtypes import BF16
    from kvplan.validate.run import cpu_shrink_reason

    llama = find_in_catalog("llama-3.2-1b-instruct")
    # 4 layers of ~60.8M linear weights (q, o 2048^2; k, v 2048 x 512; MLP 3 x 2048 x 8192), 2 x 1,024 tokens,
    # cached pass + recomputation: 2 x 243M x 2 x 2,048 = 2.0 TFLOP, plus the tied 128,256 x 2,048 head over
    # 2,048 tokens 1.1 TFLOP: 3.1 TFLOP, far past the 0.2 TFLOP budget.
    why = cpu_shrink_reason(llama, 4, Settings(batch=2, ctx=1024, layers=4), BF16, "fp32")
    assert why is not None and "3.1 TFLOP" in why
    assert cpu_shrink_reason(llama, 2, Settings(batch=2, ctx=48, layers=2), BF16, "fp32") is None


def test_cli_says_it_shrank_by_itself(monkeypatch):
    import kvplan.validate.run as run_module

    monkeypatch.setattr(run_module, "CPU_FLOP_BUDGET", 1)  # any full-width build is "too slow" now
    result = runner.invoke(app, ["validate", "llama-3.2-1b-instruct", "--ctx", "40", "--steps", "2", "--layers", "1"])
    assert result.exit_code == 0, result.output
    assert "shrunk automatically on CPU" in result.stderr and "cache geometry unchanged" in result.stderr


def test_cpu_peak_has_no_eager_scores_for_sdpa_layers():
    from kvplan.validate.blueprint import SMALL, blueprint
    from kvplan.validate.run import _scores_bytes

    spec = spec_of("openai__gpt-oss-20b") if (CONFIGS / "openai__gpt-oss-20b.json").is_file() else None
    if spec is None:
        from kvplan.sources.catalog import find_in_catalog

        spec = find_in_catalog("gpt-oss-20b")
    bp = blueprint(spec, 4, SMALL)
    s = Settings(batch=2, ctx=2048, layers=4, widths=SMALL)
    # The query and RoPE's copies of it: 4 x B x T x (64 heads x 64) x 4 B = 133,693,440 B, everywhere.
    query = 4 * 2 * 2040 * 64 * 64 * 4
    # CUDA's math path may hold B x H x T x T fp32 twice: 2 x 2 x 64 x 2,040^2 x 4 = 4,261,478,400 B.
    assert _scores_bytes(bp, s, 2040, 4, "cuda") == 2 * 2 * 64 * 2040 * 2040 * 4 + query
    # On CPU, F.scaled_dot_product_attention holds no T x T buffer (the README run measured 0.36 GB in all).
    assert _scores_bytes(bp, s, 2040, 4, "cpu") == query
