"""Where a spec came from, as an engine loads it: its Hub repo, else the local folder it was read from."""

from __future__ import annotations

from pathlib import Path


def model_arg(model) -> str:
    """What the engine should load: the Hub repo, else the local folder the spec was read from."""
    if model.hf_repo:
        return model.hf_repo
    src = Path(model.source or "")
    if model.source and src.exists():  # a folder or its config.json: engines take the folder
        return str((src.parent if src.is_file() else src).resolve())
    return model.name
