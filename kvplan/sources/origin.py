"""Where a spec came from, as an engine loads it: its Hub repo, else the local folder (or GGUF file) it was read
from."""

from __future__ import annotations

from pathlib import Path


def model_arg(model) -> str:
    """What the engine should load: the Hub repo, else the local folder the spec was read from, or the GGUF file
    (kvplan.sources.gguf: llama.cpp's -m takes the file, and a split model's first part), known from the spec without
    opening the file again."""
    if model.hf_repo:
        return model.hf_repo
    if model.gguf_file:
        return model.gguf_file
    src = Path(model.source or "")
    if model.source and src.exists():  # a folder or its config.json: engines take the folder
        return str((src.parent if src.is_file() else src).resolve())
    return model.name
