"""`kvplan models list | show | import`: the model catalog from the command line."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli import JsonOpt, RevisionOpt, TokenOpt, _stderr, cli_errors

models_app = typer.Typer(help="The model catalog: list, show, import.", no_args_is_help=True)


def _kv_per_token(spec) -> tuple[int, int]:
    """(bytes a token adds at long context, bytes a token costs while every window still holds it)."""
    from kvplan.dtypes import canonical_kv_dtype
    from kvplan.planner import kv_profile

    dt = canonical_kv_dtype("auto", spec.dtype)
    prof = kv_profile(spec.layers, 1, dt, dt, 1)
    return prof.growth_bytes_per_token(), prof.slot_bytes_per_token()


def _summary(spec) -> dict:
    from kvplan.layers import describe

    kinds = Counter(describe(layer) for layer in spec.layers)
    return {
        "name": spec.name, "aliases": list(spec.aliases), "hf_repo": spec.hf_repo, "family": spec.family,
        "architecture": spec.architecture, "params": spec.params.total, "params_active": spec.params.active,
        "kv_bytes_per_token": _kv_per_token(spec)[0],
        "kv_bytes_per_token_within_windows": _kv_per_token(spec)[1], "max_context": spec.max_context, "dtype": spec.dtype,
        "weight_format": spec.quantization.method, "checkpoint_bytes": spec.checkpoint_bytes,
        "layers": len(spec.layers), "layer_kinds": dict(kinds), "notes": list(spec.notes), "source": spec.source,
    }


@models_app.command("list")
@cli_errors
def list_models(as_json: JsonOpt = False):
    """Every model in the catalog, with family, parameters and KV bytes per token."""
    from kvplan.catalog import load_catalog

    specs = sorted(load_catalog(), key=lambda s: (s.family, s.name))
    rows = [_summary(s) for s in specs]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False)
    # KV/token: what a token costs while every sliding window still holds it; beyond windows: what
    # one more token adds at long context (0 when every layer is windowed or a fixed state).
    numeric = ("params", "active", "KV/token", "beyond windows", "max ctx")
    for col in ("name", "family", *numeric, "aliases"):
        table.add_column(col, justify="right" if col in numeric else "left", no_wrap=col != "aliases")
    for r in rows:
        table.add_row(r["name"], r["family"], f"{r['params'] / 1e9:,.2f}B", f"{r['params_active'] / 1e9:,.2f}B",
                      f"{r['kv_bytes_per_token_within_windows']:,} B", f"{r['kv_bytes_per_token']:,} B",
                      f"{r['max_context']:,}", ", ".join(r["aliases"]))
    # A terminal gets its own width; a pipe or file gets every column whole (rich would assume 80).
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@models_app.command("show")
@cli_errors
def show(
    name: Annotated[str, typer.Argument(help="Catalog name, alias, path or Hub repo id.")],
    revision: RevisionOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
):
    """The parsed spec of one model: geometry, per-layer kinds, weights by role."""
    import dataclasses

    from kvplan.resolve import resolve_model

    resolved = resolve_model(name, revision=revision, token=token)
    _stderr(resolved.note)
    for n in resolved.notices:
        _stderr(f"note: {n}")
    data = _summary(resolved.spec)
    data["params_by_role"] = dataclasses.asdict(resolved.spec.params)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    for key, value in data.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v:,}" if isinstance(v, int) else f"  {k}: {v}")
        else:
            print(f"{key}: {value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"{key}: {value}")


@models_app.command("import")
@cli_errors
def import_model(
    name: Annotated[str, typer.Argument(help="A folder or config.json, or a Hub repo id.")],
    as_name: Annotated[Optional[str], typer.Option("--name", help="Catalog name to store it under.")] = None,
    directory: Annotated[Optional[Path], typer.Option("--dir", help="Catalog directory (default: $KVPLAN_HOME/models).")] = None,
    revision: RevisionOpt = None, token: TokenOpt = None,
):
    """Write a catalog entry for offline use (a user catalog; the bundled one is built the same way)."""
    import dataclasses

    from kvplan.catalog import user_catalog_dir
    from kvplan.importer import write_spec
    from kvplan.resolve import resolve_model

    resolved = resolve_model(name, revision=revision, token=token)
    spec = resolved.spec
    if as_name:
        spec = dataclasses.replace(spec, name=as_name.strip().lower())
    path = write_spec(spec, directory or user_catalog_dir())
    _stderr(resolved.note)
    print(str(path))
