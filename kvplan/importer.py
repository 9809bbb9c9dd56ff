"""Turning a config.json (a file, a folder, or a Hub repo's) into a catalog entry on disk.

Shared by `kvplan models import` and scripts/build_catalog.py, which wrote the bundled
kvplan/model_specs/ from real configs. Files are written atomically (temp file + rename).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path

from kvplan.catalog import spec_to_dict
from kvplan.configs import spec_from_config
from kvplan.model import ModelSpec

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
               checkpoint_bytes: int | None = None, aliases=()) -> tuple[ModelSpec, list[str]]:
    spec, notices = spec_from_config(config, name or catalog_name(repo_id or "model"), source=source)
    spec = dataclasses.replace(spec, hf_repo=repo_id, checkpoint_bytes=checkpoint_bytes,
                               aliases=tuple(dict.fromkeys([*aliases, *short_aliases(spec.name)])))
    return spec, notices


def write_spec(spec: ModelSpec, directory: Path) -> Path:
    """Write `spec` as <directory>/<name>.json atomically and return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{spec.name.replace('/', '__')}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(spec_to_dict(spec), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
