"""Engine registry: how kvplan, vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers size the KV cache.

Each engine is one package here (`vllm/`, `sglang/`, ...) whose `engine` module holds one `Engine`
subclass (kvplan.engines.base) named `ENGINE`; beside it live the engine's other rules (start-up
budget, pool, layout) and its log check (`reconcile`). The registry finds the packages, and
`resolve_engine` configures one from the user's flags. No engine code is copied, only its arithmetic
restated; the sources (file and version) are in each module and in docs/engines.md. Engine packages
are imported on demand, so `fit` without --engine stays light.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import import_module

from kvplan.core.errors import EXIT_USAGE, KvplanError

@lru_cache(maxsize=1)
def _modules() -> tuple[str, ...]:
    """The engine packages here: adding an engine is adding a package with an `engine` module."""
    import pkgutil

    return tuple(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and not m.name.startswith("_"))


@lru_cache(maxsize=1)
def _registry() -> tuple[dict[str, type], dict[str, str]]:
    """Every engine module's ENGINE class by name, and its aliases (imported only when an engine is
    named, so `fit` without --engine stays light)."""
    classes, aliases = {}, {}
    for mod in _modules():
        cls = import_module(f"{__name__}.{mod}.engine").ENGINE
        classes[cls.name] = cls
        aliases.update({a: cls.name for a in cls.aliases})
    return dict(sorted(classes.items())), aliases


def _squash(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _named(key: str):
    """The ENGINE class whose name or alias is `key`, from the modules named like it ("vllm",
    "llama.cpp" -> llamacpp, "transformers" -> hf_transformers): naming one engine imports that
    engine only. None when no such module answers to it (the whole registry then decides)."""
    if not _squash(key):
        return None
    for mod in _modules():
        if _squash(key) in _squash(mod):
            cls = import_module(f"{__name__}.{mod}.engine").ENGINE
            if key == cls.name or key in cls.aliases:
                return cls
    return None


def engine_names() -> tuple[str, ...]:
    return tuple(_registry()[0])


def canonical_engine(name: str) -> str:
    key = str(name).strip().lower()
    found = _named(key)  # names and aliases are unique across engines (tests/test_engines.py)
    if found is not None:
        return found.name
    classes, aliases = _registry()
    key = aliases.get(key, key)
    if key not in classes:
        raise KvplanError(f"unknown engine {name!r}; choose one of: {', '.join(classes)}", EXIT_USAGE)
    return key


def emitters() -> tuple[str, ...]:
    """The engines whose serve command `fit --emit` writes (Engine.emits)."""
    classes = _registry()[0]
    return tuple(n for n in classes if classes[n].emits)


def engine_class(name: str):
    """The Engine subclass for `name` (an alias or any case)."""
    found = _named(str(name).strip().lower())
    return found if found is not None else _registry()[0][canonical_engine(name)]


def resolve_engine(name: str | None = None, version: str | None = None, opt_items=(), **explicit):
    """A configured engine: the engine-neutral planner for None, else the named engine with its
    version, `--engine-opt KEY=VALUE` items and the explicit flags (gpu_memory_utilization,
    block_size). Unknown names, versions and options are one-line errors before any work."""
    from kvplan.engines.base import parse_engine_opts

    if name is None:
        from kvplan.engines.neutral import NeutralEngine

        return NeutralEngine(None, {}, explicit)
    return engine_class(name)(version, parse_engine_opts(opt_items), explicit)
