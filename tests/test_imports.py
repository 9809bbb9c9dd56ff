"""Every kvplan module imports alone, and no two modules import each other at load time.

One fresh interpreter imports each module after forgetting every kvplan module imported before
(so none relies on another having been loaded first); the load-time import graph (imports at
module level, not the lazy ones inside functions) is read with ast and must have no cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "kvplan"


def modules() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_module_imports_alone():
    script = (
        "import importlib, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for m in [m for m in sys.modules if m == 'kvplan' or m.startswith('kvplan.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        failed.append(f'{name}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    names = [m for m in modules() if m != "kvplan.__main__"]  # the entry point runs the CLI when imported
    r = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=120,
                       cwd=PKG.parent)
    assert r.returncode == 0, r.stdout + r.stderr


def _load_time_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """kvplan modules `path` imports at load time (module level and class bodies, not in functions)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    out = set()
    for f in found:  # a module's package __init__ runs first too
        parts = f.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in out if m in known and m != name}


def test_no_import_cycles():
    names = modules()
    known = set(names)
    graph = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[name] = _load_time_imports(path, name, known)
    state: dict[str, int] = {}

    def walk(n, stack):
        state[n] = 1
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
            if m not in state:
                walk(m, stack + [m])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            walk(n, [n])
