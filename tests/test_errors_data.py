"""Errors are data: below the CLI no string names a kvplan flag; inputs are named by keyword (`arg`),
and the CLI turns each keyword into its flag (kvplan.cli._common.flag) in the one place it catches errors."""

import ast
import functools
import re
from pathlib import Path

import pytest

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, inputs_named, out_of_range

ROOT = Path(__file__).resolve().parents[1] / "kvplan"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

# Modules below the CLI whose strings may name flags: only engines' own flags, in the command lines
# `--emit` prints, in notes about those command lines, and in the engine logs kvplan parses.
ENGINE_FLAGS = {
    # vLLM's serve command (--emit vllm), its notes, and the engine settings it names
    "engines/vllm/api_servers.py": {"--api-server-count", "--data-parallel-size"},  # the note on its API servers
    "engines/vllm/engine.py": {"--decode-context-parallel-size"},
    "engines/lognodes.py": {"--nnodes"},  # SGLang's and vLLM's own flag, read from a launch line in a log
    "engines/vllm/capacity.py": {"--max-model-len"},  # vLLM's, in the notes on what `--max-model-len auto` sets
    "engines/vllm/plan_notes.py": {"--kv-cache-memory-bytes"},  # vLLM's, in the note on a release without it
    "engines/vllm/command.py": {"--block-size", "--data-parallel-size", "--decode-context-parallel-size",
                                "--enable-expert-parallel", "--gpu-memory-utilization", "--kv-cache-dtype",
                                "--kv-cache-memory-bytes", "--max-model-len", "--max-num-seqs", "--quantization",
                                "--max-cudagraph-capture-size"},  # vLLM's, emitted (engines/vllm/capture_list.py)
    "engines/vllm/boot.py": {"--gpu-memory-utilization", "--max-model-len"},
    "engines/vllm/autofit.py": {"--max-model-len"},
    "engines/vllm/cache_dtype.py": {"--kv-cache-dtype"},
    "engines/sglang/cache_dtype.py": {"--kv-cache-dtype"},  # SGLang's, in its rule for a checkpoint's KV cache
    "engines/emit.py": {"--dtype", "--load-format", "--quantization"},  # vLLM's and SGLang's weight flags
    "engines/served_dtype.py": {"--dtype"},  # vLLM's and SGLang's, in the note on a float32 config's served dtype
    # vLLM's and SGLang's LoRA flags: the notes on which layers vLLM wraps, and --emit
    "engines/lora.py": {"--enable-lora", "--lora-target-modules", "--max-lora-rank", "--max-loras",
                        "--max-loras-per-batch"},
    # the flags that make a server one pool of a disaggregated deployment (kvplan disagg)
    "engines/disagg.py": {"--kv-transfer-config", "--disaggregation-mode", "--disaggregation-transfer-backend",
                          "--tensor-parallel-size"},  # the last: vLLM's, first in llm-d's values
    # trtllm-serve's (--tp_size, --pp_size, --max_*, --kv_cache_*, --extra_llm_api_options), cut at "_"
    "engines/trtllm/disagg.py": {"--backend", "--extra", "--kv", "--max", "--pp", "--tp"},
    "engines/vllm/speculative.py": {"--speculative-config"},  # vLLM's, emitted
    "engines/vllm/multimodal.py": {"--limit-mm-per-prompt", "--mm-processor-cache-gb"},  # vLLM's, emitted
    "engines/vllm/v0_chunked.py": {"--enable-chunked-prefill", "--num-scheduler-steps"},  # V0's, emitted and noted
    "planning/deploy.py": {"--enable-expert-parallel"},  # vLLM's, in a refusal's reason
    "validate/shard.py": {"--enable-expert-parallel"},  # vLLM's, in a refusal's reason
    "readers/families/mimo_v2.py": {"--kv-cache-dtype"},  # what vLLM's model ignores
    "readers/towers/vision.py": {"--language-model-only"},  # vLLM's, in a refusal's advice
    # SGLang's launch command (--emit sglang) and its server arguments
    "engines/sglang/command.py": {"--context-length", "--dcp-size", "--dp-size", "--enable-dp-attention", "--ep-size",
                                  "--kv-cache-dtype", "--max-running-requests", "--mem-fraction-static", "--model-path",
                                  "--page-size", "--pp-size", "--quantization", "--tp-size", "--enable-multimodal",
                                  "--attention-backend", "--chunked-prefill-size"},
    "engines/sglang/multimodal.py": {"--enable-multimodal"},  # SGLang's flag, named where it is refused
    "engines/sglang/layout.py": {"--disable-shared-experts-fusion", "--enable-dp-lm-head",
                                 "--enforce-shared-experts-fusion", "--moe-dense-tp-size", "--enable-mixed-chunk"},
    "engines/sglang/boot.py": {"--mem-fraction-static"},
    "engines/sglang/fp8_default.py": {"--quantization"},  # SGLang's, in the warning on its FP8 default
    "engines/sglang/defaults.py": {"--dp-size", "--tp-size"},  # SGLang's, in the DP attention refusals
    "engines/sglang/dsv4.py": {"--page-size", "--swa-full-tokens-ratio"},  # SGLang's: a refusal's reason, emitted
    "engines/sglang/mamba.py": {"--max-mamba-cache-size", "--mamba-ssm-dtype", "--mamba-full-memory-ratio",
                                "--disable-radix-cache", "--mamba-radix-cache-strategy",
                                "--mamba-scheduler-strategy"},
    # llama-server's command (--emit llama.cpp) and convert_hf_to_gguf.py's
    "engines/llamacpp/engine.py": {"--kv-unified", "--outtype", "--swa-full"},
    # engines' offload tiers (--emit with --offload): vLLM's CPU tier by release, LMCache's connector, SGLang HiCache
    "engines/vllm/offload.py": {"--kv-offloading-backend", "--kv-offloading-size", "--kv-transfer-config",
                                "--swap-space"},
    "engines/lmcache.py": {"--kv-transfer-config"},
    "engines/sglang/offload.py": {"--enable-hierarchical-cache", "--hicache-ratio", "--hicache-size"},
    # engines' own command lines as their logs print them (vLLM, SGLang)
    "engines/logparse.py": {"--model", "--quantization"}, "engines/logparse_sglang.py": {"--model"},
}


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


@functools.cache
def _core_modules() -> tuple:
    """(path under kvplan/, AST) of every module below cli/: parsed once per test process, read by three tests
    (never changed by them)."""
    return tuple((rel, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(ROOT.rglob("*.py"))
                 for rel in [path.relative_to(ROOT).as_posix()] if not rel.startswith("cli/"))


@functools.cache
def _flags_by_module() -> dict:
    return {rel: _flags_in_strings(tree) for rel, tree in _core_modules()}


def _flags_in_strings(tree) -> set[str]:
    """Every --flag in the module's string literals (f-string parts too), docstrings aside."""
    docs = _docstrings(tree)
    return {f for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            for f in FLAG.findall(node.value)}


def test_no_string_below_the_cli_names_a_kvplan_flag():
    offenders = {}
    for rel, flags in _flags_by_module().items():
        extra = flags - ENGINE_FLAGS.get(rel, set())
        if extra:
            offenders[rel] = sorted(extra)
    assert not offenders, f"name inputs with kvplan.core.errors.arg, not flags: {offenders}"


def test_the_engine_flag_allowlist_has_no_stale_entry():
    used = _flags_by_module()
    stale = {rel: sorted(flags - used.get(rel, set())) for rel, flags in ENGINE_FLAGS.items()
             if flags - used.get(rel, set())}
    assert not stale, f"drop these from ENGINE_FLAGS: {stale}"


def test_the_scan_sees_a_flag_in_an_f_string_and_skips_docstrings():
    tree = ast.parse('"""Uses --tp."""\ndef f(x):\n    """--pp here."""\n    return f"{x} --gpus {x}"\n')
    assert _flags_in_strings(tree) == {"--gpus"}


def _names_used() -> set[str]:
    """Keywords the core names inputs by: arg("x"), out_of_range("x", ...), param="x" literals."""
    names = set()
    for _, tree in _core_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if fn in ("arg", "out_of_range") and node.args and isinstance(node.args[0], ast.Constant):
                    names.add(node.args[0].value)
                for kw in node.keywords:
                    if kw.arg == "param" and isinstance(kw.value, ast.Constant) and kw.value.value is not None:
                        names.add(kw.value.value)
    return names


def _cli_options() -> dict[str, set[str]]:
    """command path -> its --options, from the Typer app itself."""
    import typer

    from kvplan.cli import app

    out = {}

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            out[path] = {o for p in cmd.params for o in p.opts if o.startswith("--")}

    walk(typer.main.get_command(app), "")
    return out


def test_every_keyword_the_core_names_is_a_flag_of_some_command():
    from kvplan.cli._common import flag

    names = _names_used()
    # keywords passed through a variable: layout_from_flags' loop, the units parsers and validate's dtypes
    names |= {"gpus", "tp", "pp", "dp", "ep", "dcp", "context", "gpu_memory_utilization", "overhead",
              "kv_cache_memory", "max_model_len", "kv_dtype", "state_dtype", "dtype"}
    assert {"tp", "speculative", "engine_opts", "output", "token"} <= names  # the scan finds them
    every = set().union(*_cli_options().values())
    missing = {n: flag(n) for n in names if flag(n) not in every}
    assert not missing, f"keywords whose flag no command has (add them to kvplan.cli._common.FLAGS): {missing}"


def test_a_core_error_names_the_keyword_and_carries_its_data():
    from kvplan.planning.layout import layout_from_flags
    from kvplan.sources.catalog import find_in_catalog

    spec = find_in_catalog("llama-3.1-8b")
    with pytest.raises(KvplanError) as e:
        layout_from_flags(spec, 8, None, 3)
    err = e.value
    assert str(err) == "gpus 8 is not a multiple of pp 3 × dp 1"
    assert (err.param, err.value, err.exit_code) == ("gpus", 8, EXIT_USAGE)
    with pytest.raises(KvplanError) as e:
        layout_from_flags(spec, None, 5000, None)
    assert (e.value.param, e.value.value, e.value.allowed) == ("tp", 5000, (1, 4096))
    assert str(e.value) == "tp must be between 1 and 4096, got 5000"


def test_the_cli_naming_turns_keywords_into_flags():
    import functools

    from kvplan.cli._common import flag
    from kvplan.core.units import parse_tokens

    with inputs_named(functools.partial(flag, command="fit")):
        assert arg("context") == "--ctx" and arg("engine_opts") == "--engine-opt" and arg("tp") == "--tp"
        with pytest.raises(KvplanError, match=r"^--ctx '12q' is not a token count") as e:
            parse_tokens("12q", "context")
    assert (e.value.param, e.value.value) == ("context", "12q")
    assert arg("context") == "context"  # restored after the block
    err = out_of_range("concurrency", 0, 1, 1_000_000)
    assert str(err) == "concurrency must be between 1 and 1,000,000, got 0" and err.allowed == (1, 1_000_000)


def test_the_cli_prints_core_errors_with_its_flags(tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--pp", "3"])
    assert r.exit_code == EXIT_USAGE
    assert r.output.strip().endswith("Error: --gpus 8 is not a multiple of --pp 3 × --dp 1")
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--engine-opt", "x=1"])
    assert "Error: unknown --engine-opt 'x' for vllm" in r.output
