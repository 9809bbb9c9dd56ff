"""What `kvplan fit` does not do at start-up (issue 10: cold start no slower than before), checked
by what it imports and builds, never by timing: benchmarks/cold_start.py measures the time.

* The console entry builds only the command it runs (kvplan.cli.main.app_for); that command's help,
  usage errors and output read exactly as in the whole app.
* Naming one engine imports that engine's module only; a catalog model does not import the
  config.json readers; nothing imports importlib.resources.
"""

import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.cli.main import COMMANDS, app_for

runner = CliRunner()


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_commands_name_every_command_of_the_app():
    assert sorted(typer.main.get_command(app).commands) == sorted(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("tail", [["--help"], [], ["--no-such-flag"], ["x", "--json", "--batch", "abc"]])
def test_one_command_app_reads_as_the_whole_app(name, tail):
    args = [name, *tail]
    whole, alone = runner.invoke(app, args), runner.invoke(app_for(args), args)
    assert (alone.exit_code, alone.stdout, alone.stderr) == (whole.exit_code, whole.stdout, whole.stderr)


def test_models_subcommands_read_as_in_the_whole_app():
    for args in (["models", "--help"], ["models", "list", "--json"], ["models", "show", "gpt2", "--json"],
                 ["models", "nope"]):
        whole, alone = runner.invoke(app, args), runner.invoke(app_for(args), args)
        assert (alone.exit_code, alone.stdout, alone.stderr) == (whole.exit_code, whole.stdout, whole.stderr), args


def test_without_a_command_name_the_whole_app_runs():
    assert app_for([]) is app and app_for(["--help"]) is app and app_for(["fitt"]) is app
    assert list(typer.main.get_command(app_for(["fit", "gpt2"])).commands) == ["fit"]


def test_console_entry_runs_a_command_and_refuses_an_unknown_one():
    ok = subprocess.run([sys.executable, "-m", "kvplan", "fit", "gpt2", "--gpu", "t4", "--json"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and '"plans"' in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "kvplan", "fitt"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("Error: No such command 'fitt'"), bad.stderr


def test_engine_names_and_aliases_are_unique():
    """canonical_engine looks in the module named like the engine first; that gives the registry's
    answer only while no name or alias means two engines."""
    from kvplan.engines.registry import _registry

    classes, _ = _registry()
    said = [n for cls in classes.values() for n in (cls.name, *cls.aliases)]
    assert len(said) == len(set(said)), said


def test_naming_an_engine_imports_that_engine_only():
    loaded = _modules_after("from kvplan.engines import resolve_engine; resolve_engine('llama.cpp')")
    engines = {m for m in loaded if m.startswith("kvplan.engines.")}
    # the interface (base and what it reports, its version and option readers), the registry, the default
    # engine's rules, the serve commands' and the LoRA slots' shared pieces, every engine's context-limit rules
    # (kvplan.engines.context, no engine package) and the float32 config's served dtype it applies first
    # (kvplan.engines.served_dtype), the rule for a checkpoint's declared KV cache every engine applies
    # (kvplan.engines.checkpoint_kv), the user's layers per pipeline stage every engine checks
    # (kvplan.engines.stage_split), then llama.cpp's package and no other engine's
    assert engines == {"kvplan.engines.base", "kvplan.engines.capacity", "kvplan.engines.versions",
                       "kvplan.engines.checkpoint_kv", "kvplan.engines.stage_split",
                       "kvplan.engines.options", "kvplan.engines.registry", "kvplan.engines.neutral",
                       "kvplan.engines.emit",
                       "kvplan.engines.lora", "kvplan.engines.context", "kvplan.engines.served_dtype",
                       "kvplan.engines.llamacpp",
                       "kvplan.engines.llamacpp.engine", "kvplan.engines.llamacpp.uma"}, engines
    loaded = _modules_after("from kvplan.engines import canonical_engine; "
                            "assert canonical_engine('TRT-LLM') == 'trtllm'")
    assert "kvplan.engines.vllm.engine" not in loaded and "kvplan.engines.trtllm.engine" in loaded


def test_fit_on_a_catalog_model_reads_no_config_and_no_package_resources():
    loaded = _modules_after(
        "import sys, runpy\n"
        "sys.argv = ['kvplan', 'fit', 'llama-3-70b', '--gpu', 'a100-80', '--ctx', '128k']\n"
        "try:\n    runpy.run_module('kvplan', run_name='__main__')\nexcept SystemExit:\n    pass")
    assert "kvplan.planning.plan" in loaded  # (it did plan)
    assert not loaded & {"kvplan.sources.importer", "kvplan.readers.configs", "kvplan.sources.gguf",
                         "importlib.resources",
                         "pkgutil"}


def test_every_bundled_gpu_name_is_found_from_its_own_file_as_the_catalog_finds_it():
    """find_gpu parses only the file whose text names the GPU; for every key and alias that file
    must give the whole catalog's answer (so no bundled name is left to the slow path)."""
    from kvplan.hardware import gpus as hardware
    _, index = hardware._catalog(())
    assert len(index) > 100
    for norm, (shown, gpu) in index.items():
        assert hardware._bundled_lookup(norm) == gpu, shown
        assert hardware.find_gpu(shown.upper()) == gpu


def test_a_gpu_lookup_parses_one_profile():
    loaded = _modules_after(
        "from kvplan.hardware import gpus as hardware\n"
        "assert hardware.find_gpu('a100-80').key == 'a100-sxm-80'\n"
        "assert hardware._bundled_profile.cache_info().currsize == 1 and not hardware._bundled.cache_info().currsize")
    assert "yaml" in loaded  # (it parsed)


def test_an_unknown_or_overridden_gpu_goes_to_the_whole_catalog(tmp_path):
    from kvplan.hardware import gpus as hardware
    from kvplan.core.errors import KvplanError

    with pytest.raises(KvplanError, match="did you mean: h100"):
        hardware.find_gpu("h1000")
    (tmp_path / "mine.yaml").write_text(
        (hardware._BUNDLED_DIR / "h100-sxm.yaml").read_text().replace("memory_usable_bytes:",
                                                                      "memory_usable_bytes: 1000 #"))
    mine = hardware.find_gpu("h100", [tmp_path])
    assert mine.memory_usable_bytes == 1000 and mine.path == str(tmp_path / "mine.yaml")
    assert hardware.find_gpu("h100").memory_usable_bytes != 1000


def test_assemble_makes_the_plan_the_dataclass_would():
    """kvplan.planning.plan.assemble builds Plans without Plan.__init__ (a sweep makes 100,000): every field
    is set, and the object is the one Plan(**fields) makes (equal, same hash, still frozen)."""
    import dataclasses

    from kvplan.sources.catalog import find_in_catalog
    from kvplan.planning.deploy import Deployment
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Plan, Request

    for model, ctx in (("llama-3.1-8b", 8192), ("gemma-3-27b-it", 200_000), ("qwen3-8b", 10**6)):
        plan = resolve_engine().plan(find_in_catalog(model), find_gpu("l4"), Deployment(1, 1), Request(context=ctx))
        names = [f.name for f in dataclasses.fields(Plan)]
        assert sorted(vars(plan)) == sorted(names)
        same = Plan(**{n: getattr(plan, n) for n in names})
        assert plan == same and hash(plan) == hash(same) and repr(plan) == repr(same)
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.fits = True


def test_find_rate_reads_a_trace_once(tmp_path, monkeypatch):
    import json

    from kvplan.simulator import session, traces
    # 400 requests: 40 were one burst at any rate, every rate up to 2^19 req/s "met" (refused now: no steady state)
    rows = "".join(f'{{"timestamp": {i * 200}, "input_length": {900 + i}, "output_length": 20}}\n' for i in range(400))
    (tmp_path / "t.jsonl").write_text(rows)
    calls = []
    real = traces.load_trace
    # (kvplan.simulator.session.load_requests is the one caller of load_trace, for the CLI and the API)
    monkeypatch.setattr(session, "load_trace", lambda *a, **k: calls.append(a) or real(*a, **k))
    r = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", str(tmp_path / "t.jsonl"),
                            "--find-rate", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["meta"]["rate_search"]["rate"] > 0
    assert len(calls) == 1


def test_a_catalog_lookup_builds_one_spec_and_finds_what_the_whole_catalog_finds(tmp_path):
    from kvplan.sources import catalog
    index = catalog.catalog_index(catalog.load_catalog())
    assert len(index) > 100
    for key, spec in index.items():
        assert catalog.find_in_catalog(key) == spec, key
    # A user entry named as a bundled model replaces it, by name and by its aliases, as before.
    mine = catalog.spec_to_dict(catalog.find_in_catalog("gpt2"))
    (tmp_path / "gpt2.json").write_text(__import__("json").dumps({**mine, "max_context": 77, "aliases": ["my-gpt"]}))
    assert catalog.find_in_catalog("gpt2", [tmp_path]).max_context == 77
    assert catalog.find_in_catalog("my-gpt", [tmp_path]).max_context == 77
    loaded = _modules_after(
        "from kvplan.sources import catalog\n"
        "assert catalog.find_in_catalog('llama-3-70b').name == 'llama-3.1-70b'\n"
        "assert catalog._bundled_spec.cache_info().currsize == 1 and not catalog.bundled_specs.cache_info().currsize")
    assert "kvplan.sources.catalog" in loaded
