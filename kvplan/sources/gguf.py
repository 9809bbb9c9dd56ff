"""A local GGUF file (or a folder holding one, or the parts of a split one) planned from the file alone: its header's
metadata as the model's layout (kvplan.readers.gguf), its tensors' exact bytes as the weights.

The weights are the sum over the file's tensors of ggml_nbytes (rows x whole blocks of the tensor's own type, as
kvplan.sources.gguf_file reads them), not a mix's average bits per weight, and so is each role's share
(kvplan.sources.gguf_roles: the embedding and output head at the types the file stores them in). A split model
(kvplan.sources.gguf_split) is all of its parts. The weight dtype the plan names is the
file's `general.file_type` where kvplan has one for it (Q4_K_M -> q4_k_m), else the type that holds most of the
file's matrix bytes; the bytes are the file's either way. The parameter count the layout implies is checked against
the elements the tensors hold: a file whose tensors disagree with what the metadata says by more than 1 % is
refused, since the layout would then be a guess.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kvplan.core.dtypes import GGUF_TYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.spec import ModelSpec, Quantization
from kvplan.readers.gguf import FILE_TYPE_NAMES, FILE_TYPES, config_from_gguf
from kvplan.sources.gguf_file import MAGIC, GGUFHeader
from kvplan.sources.gguf_roles import bytes_by_role
from kvplan.sources.gguf_split import split_first, read_split

_PLAIN = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}  # ggml's plain types -> kvplan's weight dtypes
_TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def is_gguf(path: Path) -> bool:
    """A GGUF file: its first four bytes are the magic "GGUF" (ggml-org/ggml docs/gguf.md, "File Structure")."""
    try:
        with path.open("rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def gguf_in(path: Path) -> Path | None:
    """The GGUF file `path` names: itself (known by its magic bytes, whatever its name), or the one *.gguf of a folder
    without a config.json, or the first part of the one split model it holds; None when it names no GGUF. A folder of
    several GGUF models is refused, listing them."""
    if path.is_file():
        return path if is_gguf(path) else None
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(g for g in path.glob("*.gguf") if g.is_file() and is_gguf(g))
    firsts = {split_first(g) for g in found}
    if len(found) > 1 and len(firsts) == 1 and None not in firsts:
        return firsts.pop()  # the parts of one split model (a missing part is refused by read_split, naming it)
    if len(found) > 1:
        raise KvplanError(f"{path} holds {len(found)} GGUF files ({', '.join(g.name for g in found[:4])}"
                          f"{', ...' if len(found) > 4 else ''}); name the one to plan", EXIT_USAGE)
    return found[0] if found else None


def spec_from_gguf(path: Path, name: str) -> tuple[ModelSpec, list[str]]:
    """The spec of the GGUF file at `path` and notices for the user."""
    from kvplan.sources.importer import build_spec

    header, parts = read_split(path)
    path = header.path  # a split model's first part, which holds its metadata and which llama.cpp's -m names
    where, meta = str(path), header.metadata
    _refuse_non_model(meta, where)
    config = config_from_gguf(meta, {t.name: t.dims for t in header.tensors}, where)
    method, said = weight_format(header)
    config["torch_dtype"] = _TORCH.get(method, "float16")  # a quantized file's other tensors: f32 norms, f16 compute
    spec, notices = build_spec(config, None, name=name, source=where, checkpoint_bytes=header.total_bytes)
    _check_params(spec, header, where, str(meta["general.architecture"]))
    roles = bytes_by_role(header.tensors)
    # an MXFP4_MOE file (gpt-oss) quantizes only its routed experts, as kvplan's mxfp4 means
    quant = Quantization(method, experts_only=method == "mxfp4")
    spec = dataclasses.replace(spec, quantization=quant, file_weights=roles,
                               gguf_file=str(path.resolve()))
    notices.append(f"layout: read from the GGUF v{header.version} metadata of llama.cpp architecture "
                   f"{meta['general.architecture']}")
    files = f"the {parts} parts of the split file" if parts > 1 else "the file"
    notices.append(f"weights: {header.total_bytes:,} B in {len(header.tensors)} tensors of {files} ({said}; by "
                   f"type: {_by_type(header)}), planned as {method}; by role, as stored: token_embd "
                   f"{roles.embedding:,}, output {roles.lm_head:,}" + (" (tied to token_embd)" if not roles.lm_head
                                                                       else ""))
    return spec, notices


def _refuse_non_model(meta: dict, where: str) -> None:
    """An adapter or a multimodal projector is not a whole model."""
    kind = meta.get("general.type")
    if kind not in (None, "model"):
        raise KvplanError(f"{where}: general.type is {kind!r}, not a model kvplan can plan alone", EXIT_USAGE)


def weight_format(header: GGUFHeader) -> tuple[str, str]:
    """(kvplan's weight dtype for the file, what the file says it is, in words)."""
    ftype = header.metadata.get("general.file_type")
    if isinstance(ftype, int) and ftype in FILE_TYPES:
        return FILE_TYPES[ftype], f"file type {FILE_TYPE_NAMES[ftype]}"
    said = f"file type {FILE_TYPE_NAMES.get(ftype, ftype)}" if isinstance(ftype, int) else "no general.file_type"
    matrices = _bytes_by_type(t for t in header.tensors if len(t.dims) >= 2)
    if not matrices:
        raise KvplanError(f"{header.path}: no weight matrices in its tensors", EXIT_USAGE)
    most = max(matrices, key=lambda k: (matrices[k], k))
    method = _PLAIN.get(most, most)
    if method not in _PLAIN.values() and method not in GGUF_TYPES:
        raise KvplanError(f"{header.path}: most of its weights are ggml type {most}, which kvplan has no weight dtype "
                          "for", EXIT_USAGE)
    return method, f"{said}, mostly {most}"


def _bytes_by_type(tensors) -> dict[str, int]:
    """The tensors' bytes summed by ggml type name."""
    totals: dict[str, int] = {}
    for t in tensors:
        totals[t.type_name] = totals.get(t.type_name, 0) + t.nbytes
    return totals


def _by_type(header: GGUFHeader) -> str:
    totals = _bytes_by_type(header.tensors)
    return ", ".join(f"{k} {v:,}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]))


def _check_params(spec: ModelSpec, header: GGUFHeader, where: str, arch: str) -> None:
    """The parameters the layout implies against the elements the file holds: within 1 %, or refused."""
    held = sum(t.elements for t in header.tensors)
    planned = spec.params.total
    if abs(planned - held) * 100 > held:
        raise KvplanError(f"{where}: its {arch} metadata describes {planned:,} parameters but its tensors hold "
                          f"{held:,}; kvplan does not read this file's layout right, so it is refused", EXIT_USAGE)
