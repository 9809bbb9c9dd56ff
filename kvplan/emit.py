"""`--emit`: the serve command line that runs the plan kvplan just made, with the same numbers.

Each engine that has a server writes its own flags (`emit_args` in kvplan/engines/<engine>.py) and
the margin they leave (`emit_note`); this module holds what they share: the model argument, the
choice of a cache dtype flag, the slots.
"""

from __future__ import annotations

import shlex
from pathlib import Path


def model_arg(model) -> str:
    """What the engine should load: the Hub repo, else the local folder the spec was read from."""
    if model.hf_repo:
        return model.hf_repo
    src = Path(model.source or "")
    if model.source and src.exists():  # a folder or its config.json: engines take the folder
        return str((src.parent if src.is_file() else src).resolve())
    return model.name


def kv_dtype_arg(kv, model, spelling: dict[str, str]) -> str | None:
    """The engine's spelling of the cache dtype (`spelling`: its Engine.kv_dtype_flags), or None for the
    engine default (the model's dtype; a 16-bit cache of a 16-bit model is the default too)."""
    if kv is None or kv.name == model.dtype or (kv.name in ("bf16", "fp16") and model.dtype in ("bf16", "fp16")):
        return None
    return spelling.get(kv.name, kv.name)


def serve_seqs(plan) -> int:
    """As many full-length requests as the plan holds, at least the asked batch."""
    return max(plan.request.batch, plan.max_concurrency)


def emit(engine, result, model) -> str:
    """One shell command line for `result` (an EngineResult made by `engine`, a configured Engine)."""
    return shlex.join(engine.emit_args(result.plan, model, result.settings))
