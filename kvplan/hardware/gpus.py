"""The GPU catalog: the profiles kvplan plans against, loaded and looked up by key or alias.

Profiles are YAML files, one per GPU (schema: kvplan/hardware/profiles/README.md; one read into a `GPU`:
kvplan.hardware.gpu_profile). The bundled ones ship inside the package (kvplan/hardware/profiles/, beside this
module); users add or override profiles with extra directories (`--hw-profiles DIR`). Every problem in a profile
is a KvplanError with a one-line message naming the file and the field. The names of the modules this one was
cut from stay importable from here (`GPU`, `load_yaml_strict`, `ProfileChecker`, ...).
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg
from kvplan.hardware.gpu_profile import (  # noqa: F401 (re-exported: kvplan.hardware.gpus.GPU, ...)
    GPU, PRECISIONS, USABLE_SOURCE_PREFIXES, parse_profile,
)
from kvplan.hardware.profile_check import (  # noqa: F401 (re-exported)
    CONFIDENCE_LEVELS, ProfileChecker, norm_name as _norm,
)
from kvplan.hardware.yaml_strict import MAX_YAML_BYTES, MAX_YAML_NODES, load_yaml_strict, show  # noqa: F401

PROFILE_SUFFIXES = (".yaml", ".yml")


def _profile_files(files: Iterable[Any]) -> list[Any]:
    """The profile files among `files` (Paths or importlib Traversables), sorted by name."""
    return sorted((f for f in files if f.name.endswith(PROFILE_SUFFIXES) and f.is_file()), key=lambda f: f.name)


def _read_profile(f: Any) -> str:
    path = str(f)
    try:
        if not isinstance(f, Path):  # a bundled profile, inside the package
            return f.read_text(encoding="utf-8")
        return read_capped(f, MAX_YAML_BYTES, f"hw profile {path}", "a GPU profile").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KvplanError(f"hw profile {path}: cannot read: {exc}", EXIT_USAGE) from None


def _load_files(files: Iterable[Any], parse_file=None) -> list[GPU]:
    """Parse the profile files of one directory, sorted by name (`parse_file(f)`: a cached parse)."""
    gpus: dict[str, GPU] = {}
    for f in _profile_files(files):
        gpu = parse_file(f) if parse_file else parse_profile(_read_profile(f), str(f))
        if gpu.key in gpus:
            raise KvplanError(f"hw profile {f}: field 'key' {gpu.key!r} is already defined by "
                              f"{gpus[gpu.key].path}", EXIT_USAGE)
        gpus[gpu.key] = gpu
    return list(gpus.values())


# The package's own directory, not importlib.resources: that import (tempfile, zipfile, ...) costs
# every `fit` a few ms, and kvplan is never run from a zip.
_BUNDLED_DIR = Path(__file__).parent / "profiles"


@lru_cache(maxsize=None)
def _bundled_profile(f: Path) -> GPU:
    return parse_profile(_read_profile(f), str(f))


@lru_cache(maxsize=1)
def _bundled() -> tuple[GPU, ...]:
    return tuple(_load_files(_BUNDLED_DIR.iterdir(), _bundled_profile))


def _names_written(text: str) -> Iterable[str]:
    """The names on a profile's `key:` line and one-line `aliases: [...]`, read as text (a hint, not YAML)."""
    for line in text.splitlines():
        if line.startswith("key:"):
            yield line[4:].split("#")[0].strip().strip("'\"")
        elif line.startswith("aliases:"):
            flow = line[8:].split("#")[0].strip()
            if flow.startswith("[") and flow.endswith("]"):
                yield from (a.strip().strip("'\"") for a in flow[1:-1].split(","))


@lru_cache(maxsize=1)
def _bundled_hints() -> dict[str, Path]:
    """Lookup name -> the bundled file whose text names it: where find_gpu looks first, so that a
    lookup parses one profile instead of all of them (parsing is most of `find_gpu`'s time)."""
    hints: dict[str, Path] = {}
    for f in _profile_files(_BUNDLED_DIR.iterdir()):
        for name in _names_written(_read_profile(f)):
            hints.setdefault(_norm(name), f)
    return hints


def _bundled_lookup(query: str) -> GPU | None:
    """The bundled GPU named `query` (normalised), from the one file a hint points at once that file
    is parsed in full (the same strict loader) and its key or aliases confirm the name; else None,
    and the whole catalog decides. That is the catalog's own answer: bundled names never clash
    (tests/test_hardware.py loads them all)."""
    f = _bundled_hints().get(query)
    if f is None:
        return None
    gpu = _bundled_profile(f)
    return gpu if query in {_norm(n) for n in (gpu.key, *gpu.aliases)} else None


def _user_dir(directory: str | Path) -> list[GPU]:
    d = Path(directory).expanduser()
    if not d.is_dir():
        what = "is not a directory" if d.exists() else "does not exist"
        raise KvplanError(f"hw profiles directory '{directory}' {what}", EXIT_NOT_FOUND)
    gpus = _load_files(d.iterdir())
    if not gpus:  # a mistyped folder would otherwise plan silently on the bundled profiles alone
        raise KvplanError(f"hw profiles directory '{directory}' holds no profile "
                          f"({' or '.join(PROFILE_SUFFIXES)} file)", EXIT_NOT_FOUND)
    return gpus


def _catalog(extra_dirs: Sequence[str | Path]) -> tuple[dict[str, GPU], dict[str, tuple[str, GPU]]]:
    """All profiles in load order (a later source replaces an earlier key) and the lookup index."""
    if isinstance(extra_dirs, (str, Path)):
        extra_dirs = [extra_dirs]
    gpus: dict[str, GPU] = {}
    for group in [list(_bundled())] + [_user_dir(d) for d in extra_dirs]:
        for gpu in group:
            gpus.pop(gpu.key, None)  # re-insert so the dict order is the load order
            gpus[gpu.key] = gpu
    index: dict[str, tuple[str, GPU]] = {}  # norm(name) -> (name as written, GPU)
    for gpu in gpus.values():
        for fieldname, name in [("key", gpu.key)] + [("aliases", a) for a in gpu.aliases]:
            first = index.setdefault(_norm(name), (name, gpu))[1]
            if first.key != gpu.key:  # blame the profile loaded later: a user file over a bundled one
                raise KvplanError(f"hw profile {gpu.path}: field '{fieldname}' name {name!r} clashes with "
                                  f"GPU '{first.key}' ({first.path})", EXIT_USAGE)
    return gpus, index


def load_gpus(extra_dirs: Sequence[str | Path] = ()) -> dict[str, GPU]:
    """Every known GPU by key: the bundled catalog plus profiles in extra_dirs (which may override keys)."""
    return dict(_catalog(extra_dirs)[0])


def gpu_by_device_name(name: str | None, extra_dirs: Sequence[str | Path] = ()) -> GPU | None:
    """The profile whose `device_name` is exactly `name` as torch or nvidia-smi prints it (case aside), or None:
    never a guess from a similar name."""
    name = (name or "").lower()
    return next((g for g in load_gpus(extra_dirs).values() if name and g.device_name and g.device_name.lower() == name),
                None)


def find_gpu(name: str, extra_dirs: Sequence[str | Path] = ()) -> GPU:
    """The GPU whose key or alias matches name (case-insensitive; '-', '_' and spaces are ignored)."""
    if isinstance(extra_dirs, (list, tuple)) and not extra_dirs:  # bundled only: parse the one file
        hit = _bundled_lookup(_norm(name))
        if hit is not None:
            return hit
    gpus, index = _catalog(extra_dirs)
    hit = index.get(_norm(name))
    if hit is not None:
        return hit[1]

    query = _norm(name)
    best: dict[str, tuple[float, str]] = {}  # GPU key -> (best score, shortest matching name)
    for norm, (shown, gpu) in index.items():
        # Similarity, nudged towards names with the same first letter ('h1000' -> h100, h200).
        score = difflib.SequenceMatcher(None, query, norm).ratio() + (0.1 if norm[:1] == query[:1] else 0.0)
        if score >= 0.6:
            old_score, old_shown = best.get(gpu.key, (0.0, shown))
            best[gpu.key] = (max(score, old_score), min(shown, old_shown, key=len))
    ranked = sorted(best.values(), key=lambda item: -item[0])
    suggestions = [shown for _, shown in ranked[:3]]
    if suggestions:
        hint = "did you mean: " + ", ".join(suggestions) + "?"
    else:
        hint = f"no close match among {len(gpus)} known GPUs (add your own with {arg('hw_profiles')} DIR)"
    raise KvplanError(f"unknown GPU {name!r}; {hint}", EXIT_NOT_FOUND, param="gpu", value=name)
