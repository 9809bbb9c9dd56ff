"""The CLI's structure and its cross-command conventions.

Every kvplan module imports alone (no partially initialised module, as `kvplan.cli_models` once
crashed), no module-level import cycle, `--version`, tables that fit 80 columns in a terminal and
a pipe, and `sweep -o` taking its format from the extension.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from conftest import one_line_error
from kvplan.cli import app

ROOT = Path(kvplan.__file__).parent


def _modules() -> list[str]:
    # __main__ runs the CLI when imported; `python -m kvplan --version` below covers it.
    return [m.name for m in pkgutil.walk_packages(kvplan.__path__, "kvplan.") if not m.name.endswith("__main__")]


def test_every_module_imports_alone():
    # One interpreter; before each import every kvplan module is dropped from sys.modules, so each
    # import starts from nothing of kvplan (third-party modules such as torch stay cached: speed).
    # Each module body runs afresh every time; only its bytecode is compiled once and kept (by path and source
    # text, as a .pyc would be): where PYTHONDONTWRITEBYTECODE is set no .pyc is read or written, and compiling
    # the same sources again was over half of this test's 43 CPU-s.
    code = (
        "import importlib, importlib.machinery, sys, traceback\n"
        "compiled, to_code = {}, importlib.machinery.SourceFileLoader.source_to_code\n"
        "def source_to_code(self, data, path, **kw):\n"
        "    key = (path, bytes(data))\n"
        "    if key not in compiled:\n"
        "        compiled[key] = to_code(self, data, path, **kw)\n"
        "    return compiled[key]\n"
        "importlib.machinery.SourceFileLoader.source_to_code = source_to_code\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [m for m in sys.modules if m == 'kvplan' or m.startswith('kvplan.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        bad.append(name + ': ' + traceback.format_exc().strip().splitlines()[-1])\n"
        "print('\\n'.join(bad))\n"
    )
    names = _modules()
    assert "kvplan.cli.fit" in names and "kvplan.cli._common" in names and len(names) > 30
    out = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout


def _top_level_imports(path: Path, name: str, is_package: bool, known: set[str]) -> set[str]:
    """kvplan modules `name` imports when it is loaded (module level, not inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
                found.update(subs or [base])
            elif isinstance(node, (ast.If, ast.Try)) and not (isinstance(node, ast.If)
                                                              and "TYPE_CHECKING" in ast.dump(node.test)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return {m for m in found if m in known}


def test_no_import_cycles():
    infos = {m.name: m for m in pkgutil.walk_packages(kvplan.__path__, "kvplan.")}
    known = set(infos) | {"kvplan"}
    graph = {"kvplan": _top_level_imports(ROOT / "__init__.py", "kvplan", True, known)}
    for name, info in infos.items():
        rel = Path(*name.split(".")[1:])
        path = ROOT / rel / "__init__.py" if info.ispkg else (ROOT / rel).with_suffix(".py")
        graph[name] = _top_level_imports(path, name, info.ispkg, known)
    assert "kvplan.cli._common" in graph["kvplan.cli.fit"]  # the parser sees real edges
    assert not any(m.startswith("kvplan.cli") for m in graph["kvplan.cli._common"])

    cycles = []
    state: dict[str, int] = {}

    def walk(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    assert cycles == []


# No file of kvplan/cli (nor of the rest of kvplan/) past 400 lines: tests/test_code_shape.py.


# --- --version --------------------------------------------------------------------------------------

def test_version():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout == f"kvplan {kvplan.__version__}\n"
    out = subprocess.run([sys.executable, "-m", "kvplan", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == f"kvplan {kvplan.__version__}\n", out.stderr


# --- 80 columns ---------------------------------------------------------------------------------------

TABLES = [
    ["gpus"],
    ["models", "list"],
    ["sweep", "--models", "llama-3.1-70b,deepseek-v3,gemma-2-9b", "--gpu", "h100,mi300x,l40s", "--ctx", "8k,128k",
     "--kv-dtype", "bf16,fp8", "--weight-dtype", "auto,int4", "--top", "30"],
    ["cheapest", "llama-3.1-70b", "--ctx", "128k", "--concurrency", "32", "--gpu", "all", "--top", "40"],
    ["fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k"],
    ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "10"],
    ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "10", "--compare"],
    ["disagg", "deepseek-v3", "--gpu", "h200", "--isl", "8k", "--osl", "1k", "--prefill-tp", "8", "--decode-tp", "8",
     "--engine", "sglang", "--manifest"],
    ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "2k", "--osl", "256", "--qps", "20", "--duration", "5",
     "--max-gpus", "4"],
]


def _check_fits(stdout: str, width: int = 80) -> None:
    lines = stdout.splitlines()
    assert len(lines) > 3
    too_wide = [line for line in lines if len(line) > width]
    assert too_wide == [], too_wide[:3]
    # No cell cut to '…' (cheapest's own "… and N more" line is prose, not a cut cell).
    assert [line for line in lines if "…" in line and not line.startswith("… and ")] == []


@pytest.mark.parametrize("args", TABLES, ids=lambda a: " ".join(a[:2]))
def test_tables_fit_80_columns(args, kvplan_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = CliRunner().invoke(app, args)
    assert r.exit_code in (0, 6), r.output
    _check_fits(r.stdout)


@pytest.mark.parametrize("args", TABLES[:3], ids=lambda a: " ".join(a[:2]))
def test_tables_fit_a_pipe(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["KVPLAN_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    _check_fits(out.stdout)


def test_narrow_tables_still_name_every_gpu_and_model(kvplan_home, monkeypatch):
    from kvplan.sources.catalog import load_catalog
    from kvplan.hardware.gpus import load_gpus

    monkeypatch.setenv("COLUMNS", "80")
    gpus = CliRunner().invoke(app, ["gpus"]).stdout
    first_column = {line.split("│")[0].strip() for line in gpus.splitlines() if "│" in line}
    assert set(load_gpus()) <= first_column
    models = CliRunner().invoke(app, ["models", "list"]).stdout
    # A name longer than its column has a line of its own above its row (issue 22), whole, never folded.
    cells = {line.split("│")[0].strip() for line in models.splitlines() if "│" in line}
    own = {line.strip() for line in models.splitlines() if "│" not in line}
    for spec in load_catalog():
        assert spec.name in cells | own, spec.name


# --- sweep -o / --json / --csv ------------------------------------------------------------------------

SWEEP = ["sweep", "--models", "llama-3.1-8b", "--gpu", "h100,l40s", "--ctx", "8k,32k", "--gpu-counts", "1,2"]


def test_sweep_outputs_by_extension(tmp_path, kvplan_home):
    files = [tmp_path / "p.csv", tmp_path / "p.JSON", tmp_path / "p.html"]
    r = CliRunner().invoke(app, [*SWEEP, "-o", str(files[0]), "--output", str(files[1]), "-o", str(files[2])])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(files[0].read_text())))
    doc = json.loads(files[1].read_text())
    assert len(rows) == len(doc["plans"]) == 2 * 2 * 2  # 1 model x 2 GPUs x 2 counts x 2 contexts
    assert files[2].read_text().lstrip().lower().startswith("<!doctype html")
    assert "Best 8 of 8 plans" in r.stdout  # files written, the table still shown
    for f in files:
        assert f"wrote" in r.stderr and str(f) in r.stderr


def test_sweep_json_and_csv_flags_print_to_stdout(kvplan_home):
    r = CliRunner().invoke(app, [*SWEEP, "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["plans"]) == 8
    r = CliRunner().invoke(app, [*SWEEP, "--csv"])
    assert r.exit_code == 0, r.output
    assert len(list(csv.DictReader(io.StringIO(r.stdout)))) == 8


@pytest.mark.parametrize("extra, needle", [
    (["-o", "{tmp}/plan.txt"], ".csv, .json or .html"),
    (["-o", "{tmp}/plan"], ".csv, .json or .html"),
    (["-o", "-"], ".csv, .json or .html"),
    (["-o", "{tmp}/a.csv", "-o", "{tmp}/a.csv"], "given twice"),
    (["-o", "{tmp}/a.csv", "-o", "{tmp}/missing/b.json"], "does not exist"),
    (["--json", "--csv"], "both want stdout"),
])
def test_sweep_output_errors_are_one_line_and_write_nothing(tmp_path, kvplan_home, extra, needle):
    out = tmp_path / "out"
    out.mkdir()
    r = CliRunner().invoke(app, [*SWEEP, *[e.format(tmp=out) for e in extra]])
    one_line_error(r, 2, needle)
    assert list(out.iterdir()) == []


def test_json_is_a_flag_everywhere():
    # `--json` never takes a value: `--json FILE` is an unexpected argument, not a file name.
    import typer.main

    group = typer.main.get_command(app)
    seen = []

    def visit(cmd, path):
        for param in cmd.params:
            if "--json" in getattr(param, "opts", []):
                assert param.is_flag, path
                seen.append(path)
            if "--output" in getattr(param, "opts", []):
                assert "-o" in param.opts and not param.is_flag, path
        for name, sub in getattr(cmd, "commands", {}).items():
            visit(sub, f"{path} {name}")

    visit(group, "kvplan")
    assert {"kvplan fit", "kvplan sweep", "kvplan cheapest", "kvplan gpus", "kvplan models list",
            "kvplan check-log", "kvplan validate", "kvplan simulate"} <= set(seen)


def test_gpu_names_and_gpus_counts_one_meaning_each():
    import typer.main

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        for param in cmd.params:
            if "--gpu" in param.opts:
                assert "-g" in param.opts and param.type.name in ("str", "text"), name
            if "--gpus" in param.opts:
                assert param.type.name in ("int", "integer"), name
            if "-g" in param.opts:
                assert "--gpu" in param.opts, name


def test_sweep_table_keeps_names_whole_in_80_columns(monkeypatch):
    """One KV dtype for every row is said once in the title; model names and GPU keys are not
    folded mid-word when only one dtype of each is swept (issue 15: 80 columns)."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    monkeypatch.setenv("COLUMNS", "80")
    r = CliRunner().invoke(app, ["sweep", "--models", "gpt-oss-120b,llama-3.1-70b", "--gpu", "h100,a100-80,mi300x",
                                 "--ctx", "8k,32k"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert "· KV bf16" in lines[0]
    body = "\n".join(lines)
    assert "gpt-oss-120b" in body and "a100-sxm-80" in body and "h100-sxm" in body


def test_gpus_shows_usable_memory_as_fit_does(kvplan_home, monkeypatch):
    # the a100-sxm-80 profile plans with 79.25 GiB (fit's 'usable memory' row, human_bytes' 2 decimals); the GPU table
    # showed 79.2, rounded to one
    monkeypatch.setenv("COLUMNS", "120")
    row = next(line for line in CliRunner().invoke(app, ["gpus"]).stdout.splitlines()
               if line.startswith("a100-sxm-80 "))
    fit = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "a100-sxm-80", "--ctx", "8k"]).stdout
    usable = next(line for line in fit.splitlines() if "usable memory" in line).split("│")[1].split()[0]
    assert row.split("│")[1].strip() == usable == "79.25"
