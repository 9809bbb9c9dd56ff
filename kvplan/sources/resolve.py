"""Finding the model a user named: a local path, then a catalog name or alias, then a Hub repo id.

Returns the spec and a one-line note of where it came from, which the CLI prints on stderr.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

from kvplan.core.capped import read_capped
from kvplan.core.markup import readable
from kvplan.core.errors import EXIT_NETWORK, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg
from kvplan.readers.cfg import unwrap_text_config
from kvplan.readers.modelopt import QUANT_FILE, with_quant_file
from kvplan.readers.mtp import MTP_KEYS
from kvplan.sources.catalog import find_in_catalog, unknown_model_error, suggest
from kvplan.sources.local_weights import local_weights, model_json
from kvplan.model.spec import ModelSpec
from kvplan.model.weight_formats import PLAIN_BYTES

# the float types a 16-bit or 32-bit checkpoint's tensors are stored in (safetensors dtype names), with their widths
STORED_FLOATS = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
MAX_CONFIG_BYTES = 5 * 2**20


@dataclass(frozen=True)
class Resolved:
    spec: ModelSpec
    origin: str  # "path", "catalog" or "hub"
    note: str  # one line for stderr
    notices: tuple[str, ...] = ()


def read_config_file(path: Path) -> dict:
    """A local config.json (or the folder holding it), with a ModelOpt hf_quant_config.json beside it as its
    quantization_config where it states none (kvplan.readers.modelopt.with_quant_file)."""
    return _local_config(path)[0]


def _local_config(path: Path) -> tuple[dict, bool]:
    """read_config_file's config, and whether the hf_quant_config.json beside it gave its quantization."""
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise KvplanError(f"no config.json at {path}", EXIT_NOT_FOUND)
    from kvplan.sources.gguf import is_gguf  # the GGUF reader (~10 ms): only a local path needs it

    if is_gguf(path):
        raise KvplanError(f"{path} is a GGUF file, not a config.json", EXIT_USAGE)
    quant = path.parent / QUANT_FILE
    try:
        config = _read_json(path)
    except KvplanError as exc:  # a model file kvplan reads is a GGUF (by its magic bytes, whatever its name) or JSON
        if path.suffix == ".json" or exc.exit_code != EXIT_USAGE:
            raise
        raise KvplanError(f"{path}: neither a GGUF file (its first four bytes are not the magic 'GGUF') nor a "
                          f"config.json ({exc.message.removeprefix(f'{path}: ')})", EXIT_USAGE) from None
    merged = with_quant_file(config, _read_json(quant)) if quant.is_file() and quant != path else config
    return merged, merged is not config


def _read_json(path: Path) -> dict:
    data = model_json(read_capped(path, MAX_CONFIG_BYTES, str(path), "a config.json"), str(path))
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: expected a JSON object", EXIT_USAGE)
    return data


def looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.endswith(".json") or Path(name).expanduser().exists()


def resolve_model(name: str, *, revision: str | None = None, token: str | None = None,
                  timeout: float = 10.0, catalog_dirs=(), loaded_bytes=None) -> Resolved:
    """The model `name` names. `loaded_bytes`: how an engine loads a checkpoint whose tensors are stored in another
    float width than its model dtype (kvplan.engines.served_dtype.loaded_as_model_dtype, passed by every front end);
    None plans the bytes as stored."""
    if not name or not name.strip():
        raise KvplanError("model name is empty", EXIT_USAGE)
    if revision is not None and not revision.strip():  # (else a catalog name would be looked up on the Hub)
        raise KvplanError(f"{arg('revision')} must be a non-empty branch, tag or commit", EXIT_USAGE,
                          param="revision", value=revision)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise KvplanError(f"{arg('timeout')} must be a positive number of seconds, got {timeout!r}", EXIT_USAGE,
                          param="timeout", value=timeout)  # NaN, -1 and inf were taken, whatever the model
    if looks_like_path(name):
        path = Path(name).expanduser()
        if not path.exists():
            raise KvplanError(f"no such file or folder: {name}", EXIT_NOT_FOUND)
        from kvplan.sources.gguf import gguf_in, spec_from_gguf  # the GGUF reader: only a local path needs it

        gguf = gguf_in(path)  # a folder's *.gguf are looked for only when its config.json is not there
        if gguf is not None:
            spec, notices = spec_from_gguf(gguf, readable(gguf.resolve().stem) or "local-model")
            return Resolved(spec, "path", f"model: {spec.name} from local GGUF file {gguf}", tuple(notices))
        config, with_quant = _local_config(path)
        # the folder's name for a folder or its config.json; a file of another name (qwen3-32b-yarn.json) its own
        real = path.resolve()
        label = readable(real.name if path.is_dir() else real.parent.name if real.name == "config.json"
                         else real.stem)  # UTF-8 text
        spec, notices = _from_folder(config, path, label or "local-model", loaded_bytes)
        quant = f" with its {QUANT_FILE}" if with_quant else ""
        return Resolved(spec, "path", f"model: {spec.name} from local {path}{quant}", tuple(notices))
    if revision is None:
        spec = find_in_catalog(name, catalog_dirs)
        if spec is not None:
            shown = name.strip() if spec.name == name.strip().lower() else f"{name.strip()} → {spec.name}"
            repo = f" ({spec.hf_repo})" if spec.hf_repo else ""
            # a repo id the catalog answers for (its entry's hf_repo or an alias): the user may have meant the Hub
            hub_too = f"; {arg('revision')} main reads it from the Hub" if _REPO_ID.match(name.strip()) else ""
            # what reading its checkpoint's quantization noticed, stored with the entry: said as a Hub read says it
            return Resolved(spec, "catalog", f"model: {shown}{repo} from the catalog{hub_too}",
                            spec.quantization.notes)
    if not _REPO_ID.match(name):
        raise unknown_model_error(name, catalog_dirs)
    return _from_hub(name, revision, token, timeout, catalog_dirs, loaded_bytes)


def _from_hub(repo_id: str, revision, token, timeout, catalog_dirs, loaded_bytes=None) -> Resolved:
    from kvplan.sources import hub
    from kvplan.sources.importer import build_spec

    try:
        cfg = hub.fetch_config(repo_id, revision=revision, token=token, timeout=timeout)
    except KvplanError as exc:
        if exc.exit_code == EXIT_NOT_FOUND and "revision" not in exc.message.lower():
            close = suggest(repo_id, catalog_dirs)
            if close:
                raise KvplanError(f"{exc.message}; bundled models with close names: {', '.join(close)}",
                                  exc.exit_code) from None
        raise
    notices = [cfg.notice] if cfg.notice else []
    source = f"config.json of {repo_id}@{cfg.commit or revision or 'main'}"
    config = cfg.config
    if not cfg.from_cache and config.get("quantization_config") is None:  # a ModelOpt export's own file, if any
        try:
            quant = hub.fetch_quant_file(repo_id, revision=cfg.commit or revision, token=token, timeout=timeout)
        except KvplanError as exc:
            if exc.exit_code != EXIT_NETWORK:
                raise
            quant = None
            notices.append(f"quantization: {QUANT_FILE} not read ({exc.message}); planned from config.json alone, "
                           "as an unquantized checkpoint unless its safetensors say otherwise")
        config = with_quant_file(config, quant)
        if config is not cfg.config:
            source += f" with its {QUANT_FILE}"
    cfg = dataclasses.replace(cfg, config=config)
    spec, more = build_spec(cfg.config, repo_id, source=source, towers_in_checkpoint=not cfg.from_cache)
    notices += more
    weights = None
    if not cfg.from_cache:
        weights = hub.fetch_weights(repo_id, revision=revision, token=token, timeout=timeout)
        if weights is None:  # no safetensors bytes to carry a tower kvplan cannot count: refused then
            build_spec(cfg.config, repo_id, source=source)
    if weights is not None:
        spec = _with_weights(spec, cfg.config, weights, notices, loaded_bytes)
    elif cfg.from_cache:
        notices.append("weights: safetensors headers not read (config from the cache); counted from config.json")
    else:
        notices.append("weights: the repo has no safetensors files; counted from config.json")
    rev = f"@{revision}" if revision else ""
    return Resolved(spec, "hub", f"model: {repo_id}{rev} from the Hugging Face Hub", tuple(notices))


def _from_folder(config: dict, path: Path, label: str, loaded_bytes=None) -> tuple[ModelSpec, list[str]]:
    """A local config, with its folder's safetensors headers (kvplan.sources.local_weights) read as the Hub's are."""
    from kvplan.sources.importer import build_spec

    folder = path if path.is_dir() else path.parent
    weights, files = local_weights(folder) if folder.is_dir() else (None, "")
    spec, notices = build_spec(config, None, name=label, source=str(path), towers_in_checkpoint=weights is not None)
    if weights is None:
        notices.append(f"weights: {files}; counted from config.json")
        return spec, notices
    notices.append(f"weights: read from {files} in {folder}")
    return _with_weights(spec, config, weights, notices, loaded_bytes), notices


def _with_weights(spec: ModelSpec, config: dict, weights, notices: list[str], loaded_bytes=None) -> ModelSpec:
    """The spec with its checkpoint's exact tensor bytes (the MTP modules apart), and a notice of them; as an engine
    loads them where `loaded_bytes` (spec, elements by stored dtype, bytes stored) says they differ from the bytes
    stored (kvplan.engines.served_dtype.loaded_as_model_dtype, which the caller passes down: the rule is an
    engine's)."""
    mtp = weights.mtp_bytes(spec.num_layers) if spec.mtp_layers or _declares_mtp(config) else 0
    notices.append(f"weights: {weights.total_bytes:,} B in {weights.num_files} safetensors file(s) "
                   f"({', '.join(f'{k} {v:,}' for k, v in sorted(weights.params_by_dtype.items()))})")
    if mtp:  # vLLM skips these tensors unless it serves the MTP drafter (kvplan.planning.speculative)
        notices.append(f"weights: {mtp:,} B of multi-token-prediction layers not counted (loaded only with "
                       f"{arg('speculative')} mtp)")
    stored = weights.total_bytes
    if spec.quantization.method not in PLAIN_BYTES and set(weights.params_by_dtype) <= set(STORED_FLOATS):
        # the files and the config disagree (a config edited by hand, a quantize-on-load setting): said, not guessed
        notices.append(f"weights: config.json declares {spec.quantization.method} weights but every tensor is stored "
                       f"as {', '.join(weights.params_by_dtype)} (none quantized): planned at the {stored:,} B "
                       f"stored, not at {spec.quantization.method}'s size")
    loaded = loaded_bytes(spec, weights.params_by_dtype, stored) if loaded_bytes else stored
    if loaded != stored:
        kind = next(iter(weights.params_by_dtype))
        notices.append(f"weights: every tensor is stored as {kind}, the model dtype is {spec.dtype} (config.json), "
                       f"which the engine casts them to as it loads: {loaded:,} B planned, not the {stored:,} B "
                       "stored")
        mtp = mtp * loaded // stored
    return dataclasses.replace(spec, checkpoint_bytes=loaded - mtp)


def _declares_mtp(config: dict) -> bool:
    """A config that names multi-token-prediction modules (kvplan.readers.mtp.MTP_KEYS), nested or not."""
    data, _ = unwrap_text_config(config)
    return any(isinstance(data.get(k), int) and data.get(k) > 0 for k in MTP_KEYS)
