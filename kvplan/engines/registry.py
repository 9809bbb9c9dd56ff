"""The engine registry: every engine package here, found by name or alias, and its `Engine` class.

An engine is a package under kvplan/engines/ with an `engine` module whose `ENGINE` is an Engine
subclass (kvplan.engines.base); the registry finds them on disk (adding an engine is adding a
package) and imports one only when it is named, so `fit` without --engine stays light.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import import_module
from pathlib import Path

from kvplan.core.errors import EXIT_USAGE, KvplanError

_PACKAGE = __package__  # kvplan.engines


@lru_cache(maxsize=1)
def _modules() -> tuple[str, ...]:
    """The engine packages here: adding an engine is adding a package with an `engine` module."""
    here = Path(__file__).parent  # (not pkgutil: fit's cold start imports neither it nor importlib.resources)
    return tuple(sorted(p.name for p in here.iterdir()
                        if (p / "__init__.py").is_file() and p.name.isidentifier() and not p.name.startswith("_")))


@lru_cache(maxsize=1)
def _registry() -> tuple[dict[str, type], dict[str, str]]:
    """Every engine module's ENGINE class by name, and its aliases (imported only when an engine is
    named, so `fit` without --engine stays light)."""
    classes, aliases = {}, {}
    for mod in _modules():
        cls = import_module(f"{_PACKAGE}.{mod}.engine").ENGINE
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
            cls = import_module(f"{_PACKAGE}.{mod}.engine").ENGINE
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
        raise KvplanError(f"unknown engine {name!r}; choose one of: {', '.join(classes)}", EXIT_USAGE, param="engine",
                          value=name, allowed=tuple(classes))
    return key


def emitters() -> tuple[str, ...]:
    """The engines whose serve command `fit --emit` writes (Engine.emits)."""
    classes = _registry()[0]
    return tuple(n for n in classes if classes[n].emits)


def engine_class(name: str):
    """The Engine subclass for `name` (an alias or any case)."""
    found = _named(str(name).strip().lower())
    return found if found is not None else _registry()[0][canonical_engine(name)]
