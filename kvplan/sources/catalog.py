"""The model catalog: ModelSpecs stored as kvplan's own JSON, bundled and user-added, and name lookup.

Bundled entries live in kvplan/sources/model_specs/*.json and were written by `kvplan models import`
from real config.json files; users add their own with the same command (written to
$KVPLAN_HOME/models, default ~/.local/share/kvplan/models). A spec on disk holds the parsed
layers (run-length encoded) and parameter counts, not the config it came from.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.model.checkpoint_kv import CheckpointKV
from kvplan.model.compressed import CompressedMLA
from kvplan.model.layers import (ATTENTION_FEATURES, ChunkedLocal, FullAttention, IndexedMLA, Kind, LayerSpec,
                                 MLALatent,
                                 NoCache, SlidingWindow)
from kvplan.model.recurrent import ParallelHybrid, RecurrentState
from kvplan.model.spec import ModelSpec, ParamCounts, Quantization, RopeScaling
from kvplan.readers.block_scales import with_block_shapes

FORMAT_VERSION = 1
# a catalog run's kind -> the spec it builds (IndexedMLA, ParallelHybrid and CompressedMLA are read by their own keys)
LAYER_TYPES: dict[Kind, type[LayerSpec]] = {
    cls.kind: cls for cls in (FullAttention, SlidingWindow, ChunkedLocal, MLALatent, RecurrentState, NoCache)
}


def user_catalog_dir() -> Path:
    home = os.environ.get("KVPLAN_HOME")
    base = Path(home) if home else Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "kvplan"
    return base / "models"


# a recurrent layer's head widths and chunk (RecurrentState); left out where not read (0)
_WIDTHS = ("value_heads", "key_head_dim", "value_head_dim", "chunk")


def _fields(value: dict) -> dict:
    """A layer's catalog fields: its dataclass fields, less the attention features it does not have."""
    return {k: _fields(v) if isinstance(v, dict) else v for k, v in value.items()
            if not (k in ATTENTION_FEATURES and v is False) and not (k in _WIDTHS and v == 0)}


def _runs(layers) -> list[dict]:
    runs: list[dict] = []
    for layer in layers:
        entry = {"kind": layer.kind.value, **_fields(dataclasses.asdict(layer))}
        if runs and {k: v for k, v in runs[-1].items() if k != "count"} == entry:
            runs[-1]["count"] += 1
        else:
            runs.append({**entry, "count": 1})
    return runs


def _params(p: ParamCounts) -> dict:
    """The counts, without `vision_replicated` when 0 (written only by multimodal entries)."""
    return {k: v for k, v in dataclasses.asdict(p).items() if k != "vision_replicated" or v}


def spec_to_dict(spec: ModelSpec) -> dict:
    runs = _runs(spec.layers)
    mtp = {} if not spec.mtp_layers else {  # multi-token-prediction modules (kvplan.readers.mtp)
        "mtp": {"layers": _runs(spec.mtp_layers), "params": _params(spec.mtp_params)}}
    return {
        "format": FORMAT_VERSION,
        "name": spec.name,
        "aliases": list(spec.aliases),
        "hf_repo": spec.hf_repo,
        "family": spec.family,
        "architecture": spec.architecture,
        "source": spec.source,
        "num_attention_heads": spec.num_attention_heads,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "max_context": spec.max_context,
        "dtype": spec.dtype,
        "quantization": _quantization(spec.quantization),
        "checkpoint_bytes": spec.checkpoint_bytes,
        "rope_cache_elems": spec.rope_cache_elems,
        **({"rope_scaling": dataclasses.asdict(spec.rope_scaling)} if spec.rope_scaling else {}),
        "params": _params(spec.params),
        "layers": runs,
        **mtp,
        **({"vision_dims": list(spec.vision_dims)} if spec.vision_dims else {}),
        **({"mm_tokens_per_image": spec.mm_tokens_per_image} if spec.mm_tokens_per_image else {}),
        **({"mla_kv_heads": spec.mla_kv_heads} if spec.mla_kv_heads else {}),
        **({"checkpoint_kv": dataclasses.asdict(spec.checkpoint_kv)} if spec.checkpoint_kv else {}),
        "notes": list(spec.notes),
    }


def _layer(kind: str, run: dict) -> LayerSpec:
    """One layer spec from its catalog fields (the kinds whose spec has a subclass: IndexedMLA, ParallelHybrid)."""
    if kind == "mla" and "compress_ratio" in run:
        return CompressedMLA(**run)
    if kind == "mla" and "index_head_dim" in run:
        return IndexedMLA(**run)
    if kind == "full" and "attention" in run:
        return ParallelHybrid(FullAttention(**run["attention"]), RecurrentState(**run["state"]))
    return LAYER_TYPES[kind](**run)


def _read_runs(runs, where: str) -> list[LayerSpec]:
    layers: list[LayerSpec] = []
    for run in runs:
        run = dict(run)
        kind, count = run.pop("kind"), run.pop("count", 1)
        if kind not in LAYER_TYPES:
            raise KvplanError(f"model spec {where}: unknown layer kind {kind!r}", EXIT_USAGE)
        layers.extend([_layer(kind, run)] * int(count))
    return layers


def _quantization(q: Quantization) -> dict:
    """`q` as an entry stores it: its readings' too, each without the block shapes (derived where the entry is read,
    kvplan.readers.block_scales.with_block_shapes)."""
    out = {k: v for k, v in dataclasses.asdict(q).items()
           if (k in ("method", "group_size", "experts_only") or v) and k not in ("block_shapes", "readings")}
    if q.readings:
        out["readings"] = [[rule, r if isinstance(r, str) else _quantization(r)] for rule, r in q.readings]
    return out


def entry_quantization(q: dict) -> Quantization:
    """An entry's quantization. Its `weight_only` (W8A16: compressed-tensors FP8 weights, activations not quantized)
    is stored from round 41 on where true, and a W8A8 scheme's `input_quant` from round 39 on: a compressed-tensors FP8
    entry that stores neither was written before round 41 and does not say which it is, so weight_only is None
    (unknown), which an engine that plans the two apart refuses in one line (kvplan.engines.vllm.marlin_fp8.check)."""
    out = Quantization(**q)
    if (out.quant_method == "compressed-tensors" and out.method == "fp8" and "weight_only" not in q
            and not out.input_quant):
        return dataclasses.replace(out, weight_only=None)
    return out


def spec_from_dict(data: dict, where: str) -> ModelSpec:
    try:
        layers = _read_runs(data["layers"], where)
        mtp = data.get("mtp") or {}
        if all(layer.kind == "none" for layer in layers):
            raise KvplanError(f"model spec {where}: no layer attends or keeps a state; not a decoder kvplan can plan",
                              EXIT_USAGE)
        return with_block_shapes(ModelSpec(  # the shapes are derived, not stored (kvplan.readers.block_scales)
            name=str(data["name"]),
            layers=tuple(layers),
            params=ParamCounts(**data["params"]),
            num_attention_heads=int(data["num_attention_heads"]),
            hidden_size=int(data["hidden_size"]),
            intermediate_size=int(data["intermediate_size"]),
            vocab_size=int(data["vocab_size"]),
            max_context=int(data["max_context"]),
            dtype=str(data.get("dtype", "bf16")),
            quantization=entry_quantization(data.get("quantization", {})),
            checkpoint_bytes=data.get("checkpoint_bytes"),
            rope_cache_elems=int(data.get("rope_cache_elems", 0)),
            rope_scaling=RopeScaling(**data["rope_scaling"]) if data.get("rope_scaling") else None,
            family=str(data.get("family", "")),
            architecture=str(data.get("architecture", "")),
            hf_repo=data.get("hf_repo"),
            aliases=tuple(data.get("aliases", ())),
            notes=tuple(data.get("notes", ())),
            source=str(data.get("source", where)),
            mtp_layers=tuple(_read_runs(mtp.get("layers", ()), where)),
            mtp_params=ParamCounts(**mtp["params"]) if mtp else None,
            vision_dims=tuple(int(v) for v in data.get("vision_dims", ())),
            mm_tokens_per_image=int(data.get("mm_tokens_per_image", 0)),
            mla_kv_heads=int(data.get("mla_kv_heads", 0)),
            checkpoint_kv=CheckpointKV(**data["checkpoint_kv"]) if data.get("checkpoint_kv") else None,
        ))
    except KvplanError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise KvplanError(f"model spec {where}: malformed ({type(exc).__name__}: {exc})", EXIT_USAGE) from None


def _read_json(f) -> dict:
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        raise KvplanError(f"model spec {f}: unreadable ({exc})", EXIT_USAGE) from None


def _read_dir(files) -> list[ModelSpec]:
    return [spec_from_dict(_read_json(f), str(f)) for f in sorted(files, key=lambda p: p.name)
            if f.name.endswith(".json")]


class _Bundled(NamedTuple):
    """A bundled entry by its names, before its spec is built (a lookup builds only the one it finds)."""

    name: str
    aliases: tuple
    hf_repo: str | None
    index: int


@lru_cache(maxsize=1)
def _bundled_data() -> tuple[tuple[dict, str], ...]:
    folder = Path(__file__).parent / "model_specs"  # (not importlib.resources: see kvplan.hardware.gpus._BUNDLED_DIR)
    return tuple((_read_json(f), str(f)) for f in sorted(folder.iterdir(), key=lambda p: p.name)
                 if f.name.endswith(".json"))


@lru_cache(maxsize=None)
def _bundled_spec(index: int) -> ModelSpec:
    return spec_from_dict(*_bundled_data()[index])


@lru_cache(maxsize=1)
def bundled_specs() -> tuple[ModelSpec, ...]:
    return tuple(_bundled_spec(i) for i in range(len(_bundled_data())))


def _entries(extra_dirs) -> list:
    """Bundled entries (_Bundled), then the user's catalog, then extra dirs; later ones override by name."""
    return _entries_in((user_catalog_dir(), *map(Path, extra_dirs)))


def _entries_in(dirs) -> list:
    by_name: dict = {str(d["name"]): _Bundled(str(d["name"]), tuple(d.get("aliases", ())), d.get("hf_repo"), i)
                     for i, (d, _) in enumerate(_bundled_data())}
    for d in dirs:
        if d.is_dir():
            for s in _read_dir(d.iterdir()):
                by_name[s.name] = s
    return list(by_name.values())


def _spec(entry) -> ModelSpec:
    return _bundled_spec(entry.index) if isinstance(entry, _Bundled) else entry


def load_catalog(extra_dirs=()) -> list[ModelSpec]:
    """Bundled specs, then the user's catalog, then extra dirs; later ones override by name."""
    return [_spec(e) for e in _entries(extra_dirs)]


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def catalog_index(specs) -> dict[str, ModelSpec]:
    index: dict[str, ModelSpec] = {}
    for s in specs:  # names first, so an alias never shadows another model's own name
        index[_key(s.name)] = s
    for s in specs:
        for key in [*s.aliases, *( [s.hf_repo] if s.hf_repo else [])]:
            index.setdefault(_key(key), s)
    return index


def bundled_clashes(spec: ModelSpec) -> list[tuple[str, ModelSpec]]:
    """(name, bundled model) for each of spec's name and aliases that a bundled model also answers to.

    An imported entry with such a name would shadow the bundled model (a user entry of the same
    name replaces it; a user name equal to a bundled alias wins the lookup). The bundled entry
    itself clashes with nothing.
    """
    bundled = bundled_specs()
    names: dict[str, ModelSpec] = {}
    for s in bundled:
        for n in (s.name, *s.aliases):
            names.setdefault(_key(n), s)
    out = []
    for n in dict.fromkeys((spec.name, *spec.aliases)):
        hit = names.get(_key(n))
        if hit is not None and hit != spec:
            out.append((n, hit))
    return out


def find_in_catalog(name: str, extra_dirs=()) -> ModelSpec | None:
    """The spec `name` names (load_catalog's answer; of the bundled specs only that one is built). The index is
    built once per state of the catalog folders (_folders_stamp), not per call."""
    hit = _index(_folders_stamp((user_catalog_dir(), *map(Path, extra_dirs)))).get(_key(name))
    return None if hit is None else _spec(hit)


def require_in_catalog(name: str, extra_dirs=()) -> ModelSpec:
    """find_in_catalog for a caller that cannot go on without the model (a corpus record's, a benchmark case's): an
    unknown name is the one-line unknown_model_error, not a None that fails later with an AttributeError."""
    spec = find_in_catalog(name, extra_dirs)
    if spec is None:
        raise unknown_model_error(name, extra_dirs)
    return spec


def _folders_stamp(dirs) -> tuple:
    """What the catalog folders hold, as a cache key: each folder's path with the name, inode, size and mtime of
    every .json in it (None for a folder that is not there), so an import (core.files.atomic_write: a new inode), an
    edit or another KVPLAN_HOME is a new key."""
    stamp = []
    for d in dirs:
        try:
            files = tuple(sorted((e.name, st.st_ino, st.st_size, st.st_mtime_ns) for e in os.scandir(d)
                                 if e.name.endswith(".json") for st in (e.stat(),)))
        except OSError:  # not there, not a folder, unreadable: _entries_in says what it said before
            files = None
        stamp.append((str(d), files))
    return tuple(stamp)


@lru_cache(maxsize=8)
def _index(stamp: tuple) -> dict:
    """catalog_index of the entries the folders in `stamp` (_folders_stamp) hold, with the bundled ones."""
    return catalog_index(_entries_in(Path(d) for d, _ in stamp))


def suggest(name: str, extra_dirs=(), n: int = 3) -> list[str]:
    index = catalog_index(load_catalog(extra_dirs))
    names = difflib.get_close_matches(_key(name), list(index), n=n * 3, cutoff=0.5)
    out: list[str] = []
    for key in names:
        canonical = index[key].name
        if canonical not in out:
            out.append(canonical)
    return out[:n]


def unknown_model_error(name: str, extra_dirs=()) -> KvplanError:
    close = suggest(name, extra_dirs)
    hint = f"; did you mean: {', '.join(close)}?" if close else "; see `kvplan models list`"
    return KvplanError(f"unknown model {name!r}{hint}", EXIT_NOT_FOUND, param="model", value=name)
