"""A local model folder's safetensors headers added up into weight totals, as the Hub path reads a repo's.

The files are found the way transformers and vLLM look for them: `model.safetensors`, else
`model.safetensors.index.json` and the shards its `weight_map` names. Each file's header (an 8-byte
little-endian length, then that many bytes of JSON: tensor name -> dtype, shape, data_offsets;
safetensors' format, huggingface/safetensors README "Format") is read without the tensor data and
without the `safetensors` package, then checked and summed by kvplan.sources.hub_headers.sum_headers
(packed I32/U8/F4 weights count as stored; offsets must agree with dtype x shape). A file shorter than its
header says (a download cut short, a Git LFS pointer) is refused naming it, never half-counted.
"""

from __future__ import annotations

import codecs
import json
import struct
from pathlib import Path
from types import SimpleNamespace

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.sources.hub_calls import MalformedHeader
from kvplan.sources.hub_headers import HubWeights, index_shards, sum_headers

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 2**20  # the largest real headers (1M-tensor MoE shards) are a few MB
MAX_INDEX_BYTES = 50 * 2**20


def local_weights(folder: Path) -> tuple[HubWeights | None, str]:
    """(weight totals, the files read) of a local folder's safetensors checkpoint; (None, why) without one."""
    if (folder / SINGLE).is_file():
        files = [SINGLE]
    elif (folder / INDEX).is_file():
        files = _shards(folder / INDEX)
    else:
        return None, f"no {SINGLE} or {INDEX} in {folder}"
    metas = {}
    for name in files:
        try:
            metas[name] = _header(folder / name)
        except MalformedHeader as e:
            raise KvplanError(f"safetensors header of {folder / name} is malformed: {e.detail}", EXIT_USAGE) from None
    try:
        return sum_headers(metas), SINGLE if files == [SINGLE] else f"{len(files)} shards of {INDEX}"
    except MalformedHeader as e:
        raise KvplanError(f"safetensors header of {folder / e.filename} is malformed: {e.detail}", EXIT_USAGE) from None


def model_json(raw: bytes, where: str):
    """A model folder's JSON file (config.json, an index) as the engines load it: UTF-8 with no byte-order mark.
    transformers reads both as plain UTF-8 and json.loads refuses a leading mark ("Unexpected UTF-8 BOM"; 5.25.0
    configuration_utils.py L1140-1143 `_dict_from_json_file`, utils/hub.py L977-978 the shard index), and vLLM and
    SGLang load a config through it, so a file with one is refused here, saying so, rather than planned as if it would
    serve."""
    if raw.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        kind = "UTF-8" if raw.startswith(codecs.BOM_UTF8) else "UTF-16"
        raise KvplanError(f"{where} starts with a {kind} byte-order mark, which transformers (and so vLLM and SGLang) "
                          "refuses as invalid JSON; save it as UTF-8 without one", EXIT_USAGE)
    try:
        # Infinity / NaN are Python's JSON extensions and real configs use them where they size
        # nothing (Nemotron-H's time_step_limit); kvplan.readers.configs refuses them where they would.
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KvplanError(f"{where}: not valid JSON ({str(exc)[:80]})", EXIT_USAGE) from None
    except RecursionError:
        raise KvplanError(f"{where}: not valid JSON (nested too deeply)", EXIT_USAGE) from None


def _shards(index: Path) -> list[str]:
    where = str(index)
    data = model_json(read_capped(index, MAX_INDEX_BYTES, where, "a safetensors index"), where)
    shards = index_shards(data, where)
    for name in shards:
        if not (index.parent / name).is_file():
            raise KvplanError(f"{name}, listed in {where}, is not in the folder", EXIT_USAGE)
    return shards


def _header(path: Path) -> SimpleNamespace:
    """One file's header as the Hub client's metadata object: .tensors {name: .dtype, .shape, .data_offsets}."""
    name = path.name
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise MalformedHeader(name, "shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise MalformedHeader(name, f"a header of {n:,} bytes in a file of {size:,} (not a safetensors file, "
                                        "a Git LFS pointer or a download cut short)")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedHeader(name, "its header is not JSON") from None
    if not isinstance(header, dict) or not all(isinstance(v, dict) for k, v in header.items() if k != "__metadata__"):
        raise MalformedHeader(name, "header format not recognized")
    tensors = {k: SimpleNamespace(dtype=v.get("dtype"), shape=v.get("shape"), data_offsets=v.get("data_offsets"))
               for k, v in header.items() if k != "__metadata__"}
    end = max((t.data_offsets[1] for t in tensors.values() if isinstance(t.data_offsets, list)
               and len(t.data_offsets) == 2 and isinstance(t.data_offsets[1], int)), default=0)
    if 8 + n + end > size:
        raise MalformedHeader(name, f"its tensors end at byte {8 + n + end:,} of a file of {size:,} (cut short)")
    return SimpleNamespace(tensors=tensors)
