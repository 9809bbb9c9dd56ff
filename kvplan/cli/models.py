"""`kvplan models list | show | import | check`: the model catalog from the command line (a sub-app the main app
mounts)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli._common import (JsonOpt, RevisionOpt, TokenOpt, cli_errors, markup_safe, print_notes, print_result,
                                stderr, table)
from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.core.units import human_bytes, human_tokens
from kvplan.model.compressed import has_compressed
from kvplan.model.weight_formats import row_count, scale_count
from kvplan.planning.profile import kv_profile
from kvplan.readers.hf_meta import TOKENS, cache_profile, compare
from kvplan.report.fitted import print_stacked
from kvplan.sources import hub
from kvplan.sources.catalog import bundled_clashes, bundled_specs, find_in_catalog, load_catalog, user_catalog_dir
from kvplan.sources.importer import build_spec, short_aliases, write_spec
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import looks_like_path, read_config_file, resolve_model

models_app = typer.Typer(help="The model catalog: list, show, import, check.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")


LIST_CAPTION = ("KV/token: what a token adds at long context, past every sliding window (fit's KV per token, "
                "--json's kv_bytes_per_token; 0 B where every layer is windowed); in windows: what a token costs "
                "while every window still holds it (kv_bytes_per_token_within_windows); the cache in the model's dtype")


def _kv_per_token(spec) -> tuple[int, int]:
    """(bytes a token adds at long context, bytes a token costs while every window still holds it)."""
    dt = canonical_kv_dtype("auto", spec.dtype)
    prof = kv_profile(spec.layers, 1, dt, dt, 1)
    return prof.growth_bytes_per_token(), prof.slot_bytes_per_token()


def _summary(spec) -> dict:
    kinds = Counter(layer.describe() for layer in spec.layers)
    return {
        "name": spec.name, "aliases": list(spec.aliases), "hf_repo": spec.hf_repo, "family": spec.family,
        "architecture": spec.architecture, "params": spec.params.total, "params_active": spec.params.active,
        "kv_bytes_per_token": _kv_per_token(spec)[0],
        "kv_bytes_per_token_within_windows": _kv_per_token(spec)[1], "max_context": spec.max_context,
        "dtype": spec.dtype,
        "weight_format": spec.quantization.method, "checkpoint_bytes": spec.checkpoint_bytes,
        "layers": len(spec.layers), "layer_kinds": dict(kinds),
        # multi-token-prediction modules: counted only with --speculative mtp (kvplan.planning.speculative)
        "mtp_layers": len(spec.mtp_layers), "mtp_params": spec.mtp_params.total if spec.mtp_params else 0,
        "notes": list(spec.notes), "source": spec.source,
    }


@models_app.command("list")
@cli_errors
def list_models(as_json: JsonOpt = False):
    """Every model in the catalog, with family, parameters and KV bytes per token."""
    specs = sorted(load_catalog(), key=lambda s: s.name)  # by name, as a reader looks one up
    rows = [_summary(s) for s in specs]

    def render(console) -> None:
        # KV/token is fit's "KV per token" and --json's kv_bytes_per_token (what a token adds at long context, past
        # every window); "in windows" what a token costs while every sliding window still holds it (Gemma 3 27B:
        # 80 against 496 KiB, which a "KV/token" column showed while fit said 80). Aliases, family, exact bytes and
        # the rest: `models show NAME` or --json (80 columns hold no more).
        numeric = ("params", "active", "KV/token", "in windows", "max ctx")
        t = table(["name", *numeric], right=numeric, title=LIST_CAPTION)
        for r in rows:
            t.add_row(markup_safe(r["name"]), f"{r['params'] / 1e9:,.1f}B", f"{r['params_active'] / 1e9:,.1f}B",
                      human_bytes(r["kv_bytes_per_token"]), human_bytes(r["kv_bytes_per_token_within_windows"]),
                      human_tokens(r["max_context"]))
        print_stacked(console, t)  # a name too long for its column on a line of its own, never broken

    print_result(as_json, rows, render)


@models_app.command("show")
@cli_errors
def show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Catalog name, alias, path or Hub repo id.")],
    revision: RevisionOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
):
    """The parsed spec of one model: geometry, per-layer kinds, weights by role."""
    resolved = resolve_model(name, revision=revision, token=token, loaded_bytes=loaded_as_model_dtype)
    print_notes(resolved)
    data = _summary(resolved.spec)
    q = resolved.spec.quantization
    if q.block_shapes and q.per_row:  # GPTQ / AWQ group_size -1: one fp16 scale and one zero per output row
        data["row_scales"] = row_count(q.block_shapes)
    elif q.block_shapes:  # a block-FP8 checkpoint's fp32 scales, one per block x block tile of each quantized tensor
        data["block_scales"] = scale_count(q.block_shapes, q.group_size)
    data["quantization_notes"] = list(q.notes)  # what reading its quantization noticed (stderr's notes too)
    data["params_by_role"] = dataclasses.asdict(resolved.spec.params)
    print_result(as_json, data, lambda console: print("\n".join(_show_line(k, v) for k, v in data.items())))


def _show_line(key: str, value) -> str:
    """One `key: value` (or a key and indented lines) as people read it: no Python reprs."""
    if isinstance(value, dict):
        return "\n".join([f"{key}:", *(f"  {_show_value(k, v)}" for k, v in value.items())])
    if isinstance(value, (list, tuple)):
        if key in ("notes", "quantization_notes"):  # sentences: one per line
            return "\n".join([f"{key}:", *(f"  - {v}" for v in value)]) if value else f"{key}: none"
        return f"{key}: {', '.join(map(str, value)) if value else 'none'}"
    return _show_value(key, value)


def _show_value(key: str, value) -> str:
    if value is None:
        return f"{key}: unknown"
    if isinstance(value, bool):
        return f"{key}: {'yes' if value else 'no'}"
    if isinstance(value, int):
        return f"{key}: {value:,}"
    return f"{key}: {value}"


MAX_NAME = 100  # catalog names are file names: well inside any filesystem's 255-byte limit


@models_app.command("import")
@cli_errors
def import_model(
    name: Annotated[str, typer.Argument(metavar="NAME", help="A folder or config.json, or a Hub repo id.")],
    as_name: Annotated[Optional[str], typer.Option("--name", help="Catalog name to store it under.")] = None,
    directory: Annotated[Optional[Path],
                         typer.Option("--dir", help="Catalog directory (default: $KVPLAN_HOME/models).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Store it even if its name or an alias is a bundled model's "
                                                        "(the import then answers to that name).")] = False,
    revision: RevisionOpt = None, token: TokenOpt = None,
):
    """Write a catalog entry for offline use (a user catalog; the bundled one is built the same way)."""
    resolved = resolve_model(name, revision=revision, token=token, loaded_bytes=loaded_as_model_dtype)
    spec = resolved.spec
    if as_name:
        new_name = as_name.strip().lower()
        if not new_name:
            raise KvplanError("--name is empty", EXIT_USAGE)
        if len(new_name) > MAX_NAME or not new_name.isprintable():
            raise KvplanError(f"--name must be at most {MAX_NAME} printable characters (it names a file), "
                              f"got {len(new_name)}", EXIT_USAGE)
        # The aliases came from the old name (llama-3.1-70b-instruct -> llama-3.1-70b): derive them anew.
        spec = dataclasses.replace(spec, name=new_name, aliases=tuple(short_aliases(new_name)))
    clashes = bundled_clashes(spec)
    if resolved.origin == "catalog" and spec in bundled_specs() and not as_name and not force:  # issue 25
        raise KvplanError(f"{spec.name} is a bundled model; importing it would write a copy that shadows it: "
                          "choose another name with --name NAME (or write the copy with --force)", EXIT_USAGE)
    if clashes and not force:
        taken, bundled = clashes[0]
        what = "name" if taken == spec.name else "alias"
        raise KvplanError(f"{what} {taken!r} is taken by the bundled model {bundled.name}"
                          f"{f' ({bundled.hf_repo})' if bundled.hf_repo else ''}; importing it would shadow that "
                          f"model: choose another name with --name NAME (or replace it with --force)", EXIT_USAGE)
    path = write_spec(spec, directory or user_catalog_dir())
    stderr(resolved.note)
    print(str(path))


@models_app.command("check")
@cli_errors
def check(
    name: Annotated[str, typer.Argument(
        metavar="NAME", help="A folder or config.json, a Hub repo id, or a catalog name (its Hub repo).")],
    revision: RevisionOpt = None, token: TokenOpt = None, as_json: JsonOpt = False,
):
    """Compare kvplan's reading with transformers' own cache, built on the meta device (needs \\[transformers])."""
    config, label = _raw_config(name, revision, token)
    spec, _ = build_spec(config, None, name=label, source=label)
    if has_compressed(spec.layers):
        raise KvplanError(f"{label}: kvplan sizes DeepSeek-V4 as vLLM allocates it (one 584-byte fp8 latent per window "
                          "token and per compressed entry, fp32 compressor states); transformers' own cache for it "
                          "holds other tensors, so the two are not compared (vLLM's layout is checked in "
                          "tests/test_deepseek_v4.py)", EXIT_USAGE)
    rows = compare(spec, cache_profile(config))
    ok = all(r.agrees for r in rows)
    data = {"model": label, "agrees": ok, "tokens": TOKENS,
            "layers": [{**dataclasses.asdict(r), "agrees": r.agrees} for r in rows]}

    def render(console) -> None:
        # values (not bytes) per token and per sequence; states: kvplan follows vLLM's layout
        # (conv kernel - 1 columns), transformers may keep one more column.
        numeric = ("kvplan/token", "hf/token", "kvplan state", "hf state")
        t = table(["layers", *numeric, "agrees"], right=numeric, whole=("agrees",),
                  title=f"{label}: cache values, kvplan vs transformers (meta device)")
        for r in rows:
            t.add_row(r.layers, f"{r.kvplan_per_token:,}", f"{r.hf_per_token:,}", f"{r.kvplan_state:,}",
                      f"{r.hf_state:,}", "yes" if r.agrees else "NO")
        console.print(t)

    print_result(as_json, data, render)
    if not ok:
        raise KvplanError(f"{label}: kvplan's per-token cache differs from transformers' in some layers", EXIT_ERROR)


def _raw_config(name: str, revision, token) -> tuple[dict, str]:
    """The config.json behind NAME: a local file or folder, a Hub repo, or a catalog entry's Hub repo."""
    if looks_like_path(name):
        path = Path(name).expanduser()
        if not path.exists():
            raise KvplanError(f"no such file or folder: {name}", EXIT_NOT_FOUND)
        return read_config_file(path), str(path)
    repo = name
    spec = find_in_catalog(name, ()) if revision is None else None
    if spec is not None:
        if not spec.hf_repo:
            raise KvplanError(f"{spec.name} has no Hub repo to read its config.json from; pass a path", EXIT_NOT_FOUND)
        repo = spec.hf_repo
    return hub.fetch_config(repo, revision=revision, token=token).config, repo
