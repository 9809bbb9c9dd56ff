"""The package layout is the architecture: a layer imports only from layers below it, and no cycle.

Every import statement anywhere in a module counts (module level, inside functions, under
TYPE_CHECKING), relative imports resolved, and importing `kvplan.a.b` also runs the package
`kvplan.a`'s __init__ (an edge to it). The order is ARCHITECTURE.md's layer map.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import kvplan

ROOT = Path(kvplan.__file__).parent

# Lowest first. A module belongs to the layer of its first package under kvplan/.
LAYERS = ("core", "model", "readers", "sources", "hardware", "planning", "speed", "engines", "compare",
          "simulator", "bench", "report", "validate", "cli")
TOP = ("kvplan", "kvplan.api", "kvplan.__main__")  # the public API and `python -m kvplan`: above every layer
# Third-party packages a module may import inside a function: a command that does not need one does not
# pay for it. Import cost on the 2-core development machine (min of 5 runs, after what `fit` loads anyway).
HEAVY = {
    "torch": "4.1 s (validate, transformers-derived layouts)",
    "transformers": "1.7 s (models check, configs with no reader)",
    "numpy": "0.23 s (tests and GGUF tools only)",
    "safetensors": "with numpy (tests only)",
    "huggingface_hub": "0.12 s for its errors, 0.44 s with HfApi (only a Hub id needs it)",
    "httpx2": "0.13 s (huggingface_hub's HTTP client, for a Hub error's status)",
    "plotly": "74 ms (only an .html report)",
    "rich": "console 60 ms, table 20 ms, progress 18 ms (--json and -o runs draw nothing)",
    "yaml": "35 ms (only a command that reads a GPU profile or a prices file)",
}
# kvplan modules imported inside a function, each with why: start-up cost of the CLI only.
LAZY = {
    ("kvplan.cli.validate", "kvplan.validate.run"): "torch at module level (4.1 s): `validate --help` and the "
                                                     "refusal without the [validate] extra must not pay it",
    ("kvplan.cli.validate", "kvplan.validate.dist_run"): "torch at module level (4.1 s), as above",
    ("kvplan.cli.validate", "kvplan.validate.transformers_backend"): "torch at module level (4.1 s), as above",
    ("kvplan.cli.step_times", "kvplan.validate.steptime"): "torch at module level (4.1 s): `step-times --help` and "
                                                            "its flag errors must not pay it",
    ("kvplan.cli.step_times", "kvplan.validate.blueprint"): "validate's package, beside steptime (as above)",
    ("kvplan.cli.main", "kvplan.sources.catalog"): "the catalog (0.1 s) for every command's start-up: only a MODEL "
                                                    "typed in several words (`fit llama 3.1 8b`) reads it there",
    ("kvplan.sources.resolve", "kvplan.sources.importer"): "the config reader, all of readers/ (13 ms, 6% of `fit`'s "
                                                           "CPU): a bundled model reads no config",
    ("kvplan.sources.resolve", "kvplan.sources.hub"): "the Hub client (7 ms): only a Hub id needs it",
    ("kvplan.sources.resolve", "kvplan.sources.gguf"): "the GGUF reader (10 ms, with readers.gguf and the file, "
                                                       "split and role readers): only a local path needs it",
    ("kvplan.sources.gguf", "kvplan.sources.importer"): "the config reader, as for resolve: only a GGUF file given "
                                                        "as the model needs it",
}
# Modules that import kvplan modules by name (importlib): registries, whose entries are found at run time.
BY_NAME = {
    "kvplan": "the public API's names (kvplan.api and the result types), loaded when first read (PEP 562), "
              "so `import kvplan`, which every command runs, loads none of them",
    "kvplan.cli.main": "the command module a command line names (the others are not imported)",
    "kvplan.engines.registry": "the engine package a user names (`fit` without --engine imports none)",
    "kvplan.readers": "the family reader a config's model_type names",
}
# The one name a lower layer may take from the package root: Python runs kvplan/__init__.py before any
# kvplan module, so reading its version costs nothing and starts no cycle through what the API imports.
ROOT_NAMES = {"__version__"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


class Import:
    """One import statement's kvplan target (a module of MODULES), where it is and what it names."""

    def __init__(self, source: str, target: str, line: int, in_function: bool, names: tuple[str, ...]):
        self.source, self.target, self.line, self.in_function, self.names = source, target, line, in_function, names

    def __repr__(self) -> str:
        where = "in a function" if self.in_function else "at module level"
        return f"{self.source}:{self.line} -> {self.target} ({where})"


def _known(name: str) -> str | None:
    """The longest prefix of a dotted name that is a kvplan module (`kvplan.x.y.func` -> `kvplan.x.y`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@lru_cache(maxsize=None)
def imports_of(name: str) -> tuple[Import, ...]:
    """Every kvplan import in module `name`, anywhere in its AST; and every other import inside a function
    as an Import whose target is the external module's name (for the lazy-import rule)."""
    path = MODULES[name]
    return tuple(imports_in(name, path.read_text(), path.name == "__init__.py"))


def imports_in(name: str, text: str, is_package: bool = False) -> list[Import]:
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(text, name)
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            # `from kvplan.x import y` imports module kvplan.x.y when there is one, else names of kvplan.x
            pairs = [(f"{base}.{a.name}", ()) if f"{base}.{a.name}" in MODULES else (base, (a.name,))
                     for a in node.names]
        else:
            continue
        for target, names in pairs:
            inner = id(node) in in_function
            if target == "kvplan" or target.startswith("kvplan."):
                known = _known(target)
                assert known is not None, f"{name}:{node.lineno} imports {target}, which is not a kvplan module"
                if known != name:
                    out.append(Import(name, known, node.lineno, inner, names))
            elif inner:
                out.append(Import(name, target, node.lineno, True, names))
    return out


def kvplan_imports() -> list[Import]:
    return [i for name in sorted(MODULES) for i in imports_of(name) if i.target.startswith("kvplan")]


def layer_of(module: str) -> int:
    """Index in LAYERS; len(LAYERS) for the top (the root package and __main__)."""
    if module in TOP:
        return len(LAYERS)
    return LAYERS.index(module.split(".")[1])


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph() -> dict[str, set[str]]:
    """Module -> the kvplan modules loading it loads directly: its imports, and each target's packages
    (their __init__ runs first) other than the importer's own."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in kvplan_imports():
        if imp.target == "kvplan" and set(imp.names) <= ROOT_NAMES:
            continue  # the root's version: see ROOT_NAMES
        mine = set(_ancestors(imp.source)) | {imp.source}
        edges[imp.source].update(t for t in [*_ancestors(imp.target), imp.target] if t not in mine)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer():
    top = [m for m in MODULES if m.count(".") == 1 and m not in TOP and m.split(".")[1] not in LAYERS]
    assert top == [], f"modules directly in kvplan/ outside the layers: {top}"
    assert {m.split(".")[1] for m in MODULES if m not in TOP} == set(LAYERS)  # no layer without a package


def test_five_or_fewer_modules_directly_in_kvplan():
    direct = [p.name for p in ROOT.glob("*.py")]
    assert len(direct) <= 5, direct


def test_each_layer_package_says_which_layer_it_is():
    for i, layer in enumerate(LAYERS, 1):
        doc = ast.get_docstring(ast.parse((ROOT / layer / "__init__.py").read_text())) or ""
        assert doc.startswith(f"Layer {i} of {len(LAYERS)}, {layer}: "), f"kvplan/{layer}/__init__.py: {doc[:60]!r}"


def test_a_layer_imports_only_from_layers_below_it():
    up = [i for i in kvplan_imports()
          if layer_of(i.target) > layer_of(i.source) and not (i.target == "kvplan" and set(i.names) <= ROOT_NAMES)]
    assert up == [], "imports up the layers:\n" + "\n".join(map(repr, up))


def test_no_import_cycle_function_level_imports_included():
    assert cycles(graph()) == []


def test_the_walk_sees_every_kind_of_import():
    """Not vacuous: relative, function-level, TYPE_CHECKING and package-implied imports are edges, and a
    planted cycle and an upward import are found."""
    seen = {(i.source, i.target) for i in kvplan_imports()}
    assert ("kvplan.cli.fit", "kvplan.cli._common") in seen
    assert "kvplan.engines" in graph()["kvplan.compare.sweep"]  # importing kvplan.engines.x runs kvplan.engines
    src = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
           "    from .deploy import Deployment\ndef f():\n    from ..engines import base\n    import numpy\n")
    found = {(i.target, i.in_function) for i in imports_in("kvplan.planning.fake", src)}
    assert found == {("kvplan.planning.deploy", False), ("kvplan.engines.base", True), ("numpy", True)}, found
    planted = {k: set(v) for k, v in graph().items()}
    planted["kvplan.core.units"].add("kvplan.cli.fit")
    assert cycles(planted) != []
    assert layer_of("kvplan.planning.deploy") < layer_of("kvplan.engines.base")


def _top(name: str) -> str:
    return name.split(".")[0]


def test_a_function_level_import_is_a_heavy_dependency_or_on_the_lazy_list():
    lazy = [i for name in sorted(MODULES) for i in imports_of(name) if i.in_function]
    bad = [i for i in lazy if (i.source, i.target) not in LAZY
           and not (not i.target.startswith("kvplan") and _top(i.target) in HEAVY)]
    assert bad == [], "function-level imports neither heavy nor on LAZY (hoist them, or add a reason):\n" + \
        "\n".join(map(repr, bad))
    used = {(i.source, i.target) for i in lazy}
    assert set(LAZY) <= used, f"LAZY entries no longer lazy: {set(LAZY) - used}"


def test_only_the_registries_import_kvplan_modules_by_name():
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if called in ("import_module", "__import__"):
                    found.add(name)
    assert found == set(BY_NAME), found


def _family_tests(tree: ast.AST) -> list[int]:
    """Lines that decide on a model family: a comparison involving `.family`, `family`, `model_type` or the
    key "model_type", and any read of the key "model_type"."""
    def names_family(node) -> bool:
        return any((isinstance(m, ast.Attribute) and m.attr in ("family", "model_type"))
                   or (isinstance(m, ast.Name) and m.id in ("family", "model_type"))
                   or (isinstance(m, ast.Constant) and m.value == "model_type") for m in ast.walk(node))

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and names_family(node):
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == "model_type":
            lines.append(node.lineno)
    return sorted(set(lines))


# Modules that read a field named model_type that is not a config's: never a family test.
OTHER_MODEL_TYPES = {"kvplan.bench.llamabench": "llama-bench's display column `model_type` ('qwen2 7B Q4_K - Medium'), "
                                                "shown as the run's model name, never compared"}


def test_family_knowledge_lives_only_in_readers():
    """Planning, engines, validate and the rest ask the spec or a reader's function (kvplan.readers.mlp_layout,
    kvplan.readers.mtp.why_no_mtp), never test a model_type themselves."""
    found = []
    for name, path in sorted(MODULES.items()):
        if name == "kvplan.readers" or name.startswith("kvplan.readers.") or name in OTHER_MODEL_TYPES:
            continue
        found += [f"{name}:{line}" for line in _family_tests(ast.parse(path.read_text()))]
    assert found == [], found
    planted = ast.parse("def f(spec, cfg):\n    if spec.family in ('llama4',):\n        return cfg.get('model_type')\n")
    assert _family_tests(planted) == [2, 3]


def test_architecture_md_is_the_map():
    """ARCHITECTURE.md lists the layers in the order enforced here, and names every module."""
    text = (ROOT.parent / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `(\w+)/` \|", text, re.M)
    assert [name for _, name in rows] == list(LAYERS) and [int(n) for n, _ in rows] == list(range(1, len(LAYERS) + 1))
    missing = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
               if p.name != "__init__.py" and not re.search(rf"(?<!\w){re.escape(p.stem)}(?!\w)", text)]
    assert missing == [], f"modules ARCHITECTURE.md does not name: {missing}"
