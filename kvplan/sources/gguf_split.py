"""A GGUF model split over several files (llama.cpp's gguf-split) read as one: every part's tensors, the first part's
metadata, each part checked as llama.cpp's loader checks it.

gguf-split (ggml-org/llama.cpp@3e00f05f tools/gguf-split/gguf-split.cpp, split_strategy) writes the model's metadata
into the first part only (`gguf_set_kv` for split 0) and into every part `split.no` (uint16, counted from 0),
`split.count` (uint16, the number of parts) and `split.tensors.count` (int32, the tensors of all parts together); the
parts are named by llama_split_path, "%s-%05d-of-%05d.gguf" with the part's number counted from 1 (src/llama.cpp
SPLIT_PATH_FORMAT): `model-00001-of-00003.gguf`. llama.cpp's loader opens the others from the first one's name and
refuses a part whose `split.no` is not its place, or a tensor total other than `split.tensors.count`; so does this.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.sources.gguf_file import GGUFHeader, read_gguf

_PART = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
MAX_PARTS = 1000  # the largest published splits have tens of parts


def part_name(prefix: str, no: int, count: int) -> str:
    """The file name of part `no` (counted from 1) of `count`, as llama_split_path writes it."""
    return f"{prefix}-{no:05d}-of-{count:05d}.gguf"


def split_first(path: Path) -> Path | None:
    """The first part of the split model `path` names by its file name (a `-0000k-of-0000n.gguf` part), else None."""
    m = _PART.match(path.name)
    return path.with_name(part_name(m["prefix"], 1, int(m["count"]))) if m else None


def read_split(path: Path) -> tuple[GGUFHeader, int]:
    """The model whose part (any) `path` is, as one header (the first part's metadata, every part's tensors), and
    its number of parts: 1 for a file that is not split."""
    header = given = read_gguf(path)
    count = _u(header, "split.count", 1)
    if count <= 1:
        return header, 1
    first = split_first(path)
    if first is None:
        raise KvplanError(f"{path}: part of a GGUF split into {count} files (split.count), but not named as "
                          "llama.cpp names the parts (<name>-00001-of-00003.gguf), so the others cannot be found",
                          EXIT_USAGE)
    if int(_PART.match(path.name)["count"]) != count:
        raise KvplanError(f"{path}: named as one of {int(_PART.match(path.name)['count'])} parts, but its split.count "
                          f"is {count}", EXIT_USAGE)
    if first != path:
        header = read_gguf(first) if first.is_file() else _missing(first, 1, count)
    if count > MAX_PARTS:
        raise KvplanError(f"{path}: split.count {count} (at most {MAX_PARTS})", EXIT_USAGE)
    prefix = _PART.match(first.name)["prefix"]
    tensors, names = list(header.tensors), {t.name for t in header.tensors}
    for no in range(count):
        part = first.with_name(part_name(prefix, no + 1, count))
        if not part.is_file():
            _missing(part, no + 1, count)
        h = header if no == 0 else given if part == path else read_gguf(part)  # each part's header read once
        if _u(h, "split.no", -1) != no or _u(h, "split.count", 0) != count:
            raise KvplanError(f"{part}: its split.no / split.count say part {_u(h, 'split.no', -1) + 1} of "
                              f"{_u(h, 'split.count', 0)}, not {no + 1} of {count}", EXIT_USAGE)
        for t in h.tensors if no else ():
            if t.name in names:
                raise KvplanError(f"{part}: tensor {t.name!r} is in another part too", EXIT_USAGE)
            names.add(t.name)
            tensors.append(t)
    expected = _u(header, "split.tensors.count", -1)
    if expected != len(tensors):
        raise KvplanError(f"{first}: split.tensors.count says {expected:,} tensors, the {count} parts hold "
                          f"{len(tensors):,}", EXIT_USAGE)
    return dataclasses.replace(header, tensors=tuple(tensors)), count


def _u(header: GGUFHeader, key: str, default: int) -> int:
    v = header.metadata.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < (default if default < 0 else 0):
        raise KvplanError(f"{header.path}: {key} must be a whole number, got {v!r}", EXIT_USAGE)
    return v


def _missing(part: Path, no: int, count: int):
    raise KvplanError(f"{part}: part {no} of the {count}-file split GGUF is missing; kvplan reads all of its parts, "
                      "as llama.cpp loads them", EXIT_NOT_FOUND)
