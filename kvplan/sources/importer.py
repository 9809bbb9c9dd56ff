"""Turning a config.json (a file, a folder, or a Hub repo's) into a catalog entry on disk.

Shared by `kvplan models import` and scripts/build_catalog.py, which wrote the bundled
kvplan/sources/model_specs/ from real configs. Files are written atomically by kvplan.core.files.atomic_write.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from kvplan.core.files import atomic_write, write_error
from kvplan.model.spec import ModelSpec
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import spec_to_dict

_SUFFIXES = ("-instruct", "-hf", "-it", "-base", "-chat", "-thinking", "-v0.1", "-2407", "-8k", "-base-8k")


def catalog_name(repo_or_name: str) -> str:
    """`meta-llama/Meta-Llama-3.1-8B` -> `llama-3.1-8b`; `Qwen/Qwen3-32B` -> `qwen3-32b`."""
    name = repo_or_name.rstrip("/").split("/")[-1].lower()
    name = re.sub(r"^meta-(?=llama)", "", name)
    return name


def short_aliases(name: str) -> list[str]:
    """Names people also type: without -instruct / -hf / -it ... (the caller drops clashes)."""
    out, current = [], name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if current.endswith(suffix):
                current = current[: -len(suffix)]
                out.append(current)
                changed = True
    return out


def build_spec(config: dict, repo_id: str | None, *, name: str | None = None, source: str,
               checkpoint_bytes: int | None = None, aliases=(),
               towers_in_checkpoint: bool = False) -> tuple[ModelSpec, list[str]]:
    """A spec from `config`. With `checkpoint_bytes` (or `towers_in_checkpoint`: the caller will set
    them) a tower kvplan cannot count is left to the checkpoint's bytes instead of refused."""
    spec, notices = spec_from_config(config, name or catalog_name(repo_id or "model"), source=source,
                                     towers_in_checkpoint=towers_in_checkpoint or bool(checkpoint_bytes))
    spec = dataclasses.replace(spec, hf_repo=repo_id, checkpoint_bytes=checkpoint_bytes,
                               aliases=tuple(dict.fromkeys([*aliases, *short_aliases(spec.name)])))
    return spec, notices


def write_spec(spec: ModelSpec, directory: Path) -> Path:
    """Write `spec` as <directory>/<name>.json atomically (kvplan.core.files' one writer) and return the path.

    Every OSError is a one-line KvplanError naming the path: exit 2 when the path itself is wrong
    (KVPLAN_HOME naming a file), 1 otherwise (permissions, a full disk).
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(directory, exc) from None
    path = directory / f"{spec.name.replace('/', '__')}.json"
    atomic_write(path, json.dumps(spec_to_dict(spec), indent=1) + "\n")
    return path
