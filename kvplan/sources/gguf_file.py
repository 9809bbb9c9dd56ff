"""A GGUF file's header read without its tensor data: the typed metadata and every tensor's name, shape and type.

The layout is ggml's (ggml-org/ggml@d99724f2 docs/gguf.md "File Structure", and the reader src/gguf.cpp
gguf_init_from_file_impl): the magic "GGUF", a uint32 version (2 or 3; 1 is refused there too), uint64 tensor and
metadata counts, the metadata pairs (a string key, a uint32 value type, the value; an array is its element type, a
uint64 length and the elements; gguf.cpp refuses an array of arrays), then per tensor a string name (under 64 bytes,
GGML_MAX_NAME), a uint32 dimension count (at most 4), uint64 dimensions, a uint32 ggml type and a uint64 offset into
the data section, which starts at the next multiple of `general.alignment` (32 by default). Little-endian.

The header is read linearly and bounded: counts and lengths are checked against what is left of the file (and of
MAX_HEADER_BYTES) before anything is allocated; long arrays (a tokenizer's 150k tokens) are stepped over, their
length kept. As gguf.cpp and llama.cpp's loader do, each tensor's offset must follow the previous tensor (aligned),
each row must be whole blocks, and the data must end within the file (a download cut short is refused, naming it).
Any fault is a one-line KvplanError naming the file.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

from kvplan.core.dtypes import GGML_TYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.core.intmath import round_up

MAGIC = b"GGUF"
MAX_HEADER_BYTES = 256 * 2**20  # real headers (a 262k-token vocabulary with scores and merges) are tens of MB
MAX_TENSORS = 1_000_000  # the largest MoE files hold tens of thousands
MAX_KV = 100_000
MAX_KEPT_ARRAY = 4096  # arrays up to this length are kept (per-layer head counts); longer ones only counted
MAX_KEPT_STRING = 1 << 20
MAX_NAME = 64  # GGML_MAX_NAME: a tensor name is shorter
MAX_DIMS = 4  # GGML_MAX_DIMS
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT

_CHUNK = 1 << 20  # a long string array is stepped over a MiB at a time
_U64 = struct.Struct("<Q")
# gguf_metadata_value_type -> struct format of one scalar (8: string, 9: array)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[int, ...]  # ne[0] first: the row length, then the rows
    type_name: str
    offset: int  # in the data section
    nbytes: int  # ggml_nbytes: rows x row bytes (whole blocks)

    @property
    def elements(self) -> int:
        return math.prod(self.dims)


@dataclass(frozen=True)
class ArrayInfo:
    """An array too long to keep: its element type and length (a tokenizer's tokens)."""

    type: int
    length: int


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    metadata: dict  # key -> int, float, bool, str, list, or ArrayInfo
    tensors: tuple[Tensor, ...]
    data_start: int

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


class _Reader:
    """Bounded little-endian reads over an open file: every length is checked before it is read or skipped."""

    def __init__(self, f, size: int, where: str):
        self.f, self.size, self.where, self.pos = f, size, where, 0

    def fail(self, why: str) -> KvplanError:
        return KvplanError(f"{self.where}: not a readable GGUF file: {why}", EXIT_USAGE)

    def room(self, n: int, what: str) -> None:
        end = self.pos + n
        if n < 0 or end > self.size:
            raise self.fail(f"{what} runs past the end of the file at byte {self.size:,} (cut short?)")
        if end > MAX_HEADER_BYTES:
            raise self.fail(f"{what} would make the header longer than {MAX_HEADER_BYTES // 2**20} MiB")

    def take(self, n: int, what: str) -> bytes:
        self.room(n, what)
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail(f"{what}: the file ends early")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self.room(n, what)
        self.f.seek(n, 1)
        self.pos += n

    def skip_strings(self, n: int, what: str) -> None:
        """Steps over `n` length-prefixed strings, reading the file a chunk at a time (a 150k-token vocabulary and
        its merges in tenths of a second, not one read per string); each length is checked before it is skipped."""
        limit, unpack = min(self.size, MAX_HEADER_BYTES), _U64.unpack_from
        buf, i, base = b"", 0, self.pos  # buf[0] is the file's byte `base`
        for _ in range(n):
            if len(buf) - i < 8:
                buf, base, i = buf[i:] + self.f.read(_CHUNK), base + i, 0
                if len(buf) < 8:
                    self.pos = base
                    self.room(8, f"{what}'s length")
                    raise self.fail(f"{what}: the file ends early")
            end = i + 8 + unpack(buf, i)[0]
            if base + end > limit:
                self.pos = base + i
                self.room(end - i, what)
            i = end
            if i > len(buf):  # a string longer than what is buffered: the rest skipped in the file
                self.f.seek(i - len(buf), 1)
                buf, base, i = b"", base + i, 0
        self.pos = base + i
        self.f.seek(i - len(buf), 1)  # the bytes read ahead, given back

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str, keep: bool = True, limit: int = MAX_KEPT_STRING) -> str | None:
        n = self.unpack("Q", f"{what}'s length")
        if not keep or n > limit:
            self.skip(n, what)
            return None
        return self.take(n, what).decode("utf-8", errors="replace")


def read_gguf(path: Path) -> GGUFHeader:
    """The header of the GGUF file at `path` (metadata and tensor infos), checked; no tensor data is read."""
    where = str(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            return _read(_Reader(f, size, where), path)
    except OSError as exc:
        raise KvplanError(f"{where}: cannot read ({exc.strerror or exc})", EXIT_USAGE) from None


def _read(r: _Reader, path: Path) -> GGUFHeader:
    if r.take(4, "the magic") != MAGIC:
        raise r.fail("its first four bytes are not the magic 'GGUF'")
    version = r.unpack("I", "the version")
    if version not in (2, 3):
        why = "big-endian or corrupt" if version & 0xFFFF == 0 else "GGUF v1 files are not read (llama.cpp refuses "\
              "them too)" if version == 1 else "kvplan reads versions 2 and 3"
        raise r.fail(f"version {version} ({why})")
    n_tensors, n_kv = r.unpack("Q", "the tensor count"), r.unpack("Q", "the metadata count")
    # a metadata pair takes at least 8 + 1 + 4 + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8
    if n_kv > MAX_KV or n_kv * 14 > r.size:
        raise r.fail(f"a metadata count of {n_kv:,} (at most {MAX_KV:,}, and what the file's size can hold)")
    if n_tensors > MAX_TENSORS or n_tensors * 33 > r.size:
        raise r.fail(f"a tensor count of {n_tensors:,} (at most {MAX_TENSORS:,}, and what the file's size can hold)")
    metadata: dict = {}
    for i in range(n_kv):
        key = r.string(f"metadata key {i}", limit=65_535)
        if not key:
            raise r.fail(f"metadata key {i} is empty or longer than 65,535 bytes")
        if key in metadata:
            raise r.fail(f"metadata key {key!r} appears twice")
        metadata[key] = _value(r, key)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment {alignment!r} is not a power of two")
    infos = [_tensor_info(r, i) for i in range(n_tensors)]
    data_start = round_up(r.pos, alignment)
    tensors, expected, names = [], 0, set()
    for name, dims, type_id, offset in infos:
        if name in names:
            raise r.fail(f"tensor {name!r} appears twice")
        names.add(name)
        kind, block, block_bytes = GGML_TYPES[type_id]
        if dims[0] % block:
            raise r.fail(f"tensor {name!r}: rows of {dims[0]:,} values are not whole {kind} blocks of {block}")
        nbytes = math.prod(dims[1:]) * (dims[0] // block) * block_bytes
        if offset != expected:
            raise r.fail(f"tensor {name!r} has offset {offset:,}, expected {expected:,}")
        expected = offset + round_up(nbytes, alignment)
        if data_start + offset + nbytes > r.size:
            raise r.fail(f"tensor {name!r} ends at byte {data_start + offset + nbytes:,} of a file of {r.size:,} "
                         "(a download cut short?)")
        tensors.append(Tensor(name, dims, kind, offset, nbytes))
    return GGUFHeader(path, version, metadata, tuple(tensors), data_start)


def _value(r: _Reader, key: str):
    kind = r.unpack("I", f"{key}'s type")
    if kind != ARRAY:
        return _scalar(r, kind, key)
    item, n = r.unpack("I", f"{key}'s element type"), r.unpack("Q", f"{key}'s length")
    if item == ARRAY:
        raise r.fail(f"{key} is an array of arrays (gguf.cpp refuses them)")
    if item != STRING and item not in _SCALARS:
        raise r.fail(f"{key} has elements of unknown type {item}")
    width = 8 if item == STRING else struct.calcsize(_SCALARS[item])
    r.room(n * width, f"{key}'s {n:,} elements")  # before anything is read or allocated
    if n > MAX_KEPT_ARRAY:
        if item == STRING:
            r.skip_strings(n, key)
        else:
            r.skip(n * width, key)
        return ArrayInfo(item, n)
    if item == STRING:
        return [r.string(key) for _ in range(n)]
    if item == 7:
        return [_scalar(r, 7, key) for _ in range(n)]
    return list(struct.unpack(f"<{n}{_SCALARS[item]}", r.take(n * width, key)))


def _scalar(r: _Reader, kind: int, key: str):
    if kind == STRING:
        return r.string(key)
    if kind not in _SCALARS:
        raise r.fail(f"{key} has unknown value type {kind}")
    if kind == 7:
        b = r.unpack("B", key)
        if b > 1:
            raise r.fail(f"{key} is a bool of value {b} (not 0 or 1)")
        return bool(b)
    return r.unpack(_SCALARS[kind], key)


def _tensor_info(r: _Reader, i: int) -> tuple[str, tuple[int, ...], int, int]:
    name = r.string(f"tensor {i}'s name", limit=MAX_NAME - 1)
    if not name:
        raise r.fail(f"tensor {i}'s name is empty or {MAX_NAME} bytes or longer")
    n_dims = r.unpack("I", f"tensor {name!r}'s dimension count")
    if not 1 <= n_dims <= MAX_DIMS:
        raise r.fail(f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS})")
    dims = tuple(r.unpack("Q", f"tensor {name!r}'s dimensions") for _ in range(n_dims))
    total = math.prod(dims)
    if total >= 2**63:
        raise r.fail(f"tensor {name!r} has {total:,} elements")
    type_id = r.unpack("I", f"tensor {name!r}'s type")
    if type_id not in GGML_TYPES:
        raise r.fail(f"tensor {name!r} has ggml type {type_id}, which is not one ggml defines for GGUF files")
    return name, dims, type_id, r.unpack("Q", f"tensor {name!r}'s offset")
