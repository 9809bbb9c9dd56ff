"""Safetensors headers to weight totals: what `kvplan.sources.hub.fetch_weights` returns, computed without network.

A checkpoint's headers list every tensor's dtype, shape and data_offsets. `sum_headers` adds them up:
elements per dtype, exact bytes (elements x bits / 8, which must match the offsets: packed I32/U8/F4
weights count as stored), and the bytes of each decoder layer and of the multi-token-prediction
modules (`HubWeights.mtp_bytes`). A header that is not self-consistent raises MalformedHeader naming
the file (kvplan.sources.hub_calls maps it to KvplanError(EXIT_USAGE)); `as_header_problem` sorts the Hub
client's parsing failures into the same; `index_shards` reads a sharded checkpoint's index (the Hub's and a
folder's alike). Fetching the headers is kvplan.sources.hub's work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.sources.hub_calls import MalformedHeader, StepTimeout, network_error_types

# Bits per element of every safetensors dtype (safetensors' Dtype enum). Sub-byte types pack
# several elements per byte; a tensor's bytes are elements x bits / 8 and must be whole.
SAFETENSORS_DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8,
    "F8_E4M3": 8, "F8_E5M2": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}


@dataclass(frozen=True)
class HubWeights:
    params_by_dtype: Mapping[str, int]  # safetensors dtype name (BF16, F8_E4M3, I32, U8, F32...) -> elements
    total_bytes: int  # exact sum of tensor byte sizes over all files (header excluded)
    num_files: int
    # bytes of `model.layers.N.*` tensors by N, and of tensors under an `mtp.` / `model.mtp_layers.` prefix:
    # what tells a checkpoint's multi-token-prediction modules (layers past num_hidden_layers) apart
    layer_bytes: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    mtp_prefix_bytes: int = 0

    def mtp_bytes(self, num_layers: int) -> int:
        """Bytes of the MTP modules of a checkpoint whose main model has `num_layers` layers."""
        return self.mtp_prefix_bytes + sum(b for i, b in self.layer_bytes.items() if i >= num_layers)


def as_header_problem(filename: str, e: Exception) -> Exception:
    """Parsing failures of one file's header become MalformedHeader; HTTP/network errors pass."""
    from huggingface_hub.errors import HfHubHTTPError, SafetensorsParsingError

    if isinstance(e, SafetensorsParsingError):
        # The client's message: "Failed to parse safetensors header for 'f' (repo ..): <reason>."
        detail = str(e).split("): ", 1)[-1].split(" Please make sure", 1)[0]
        return MalformedHeader(filename, detail)
    if isinstance(e, (HfHubHTTPError, StepTimeout, *network_error_types())):
        return e
    if isinstance(e, (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError)):
        # The client's parser assumes a dict of dicts; anything else surfaces as these.
        return MalformedHeader(filename, f"header format not recognized ({type(e).__name__})")
    return e


def sum_headers(metas: Mapping[str, Any]) -> HubWeights:
    """Weight totals from parsed headers ({file: its header's metadata, with .tensors}), each entry checked."""
    params: dict[str, int] = {}
    layers: dict[int, int] = {}
    total = mtp = 0
    for filename, meta in metas.items():
        for name, t in meta.tensors.items():
            nbytes, elements = _tensor_bytes(filename, name, t.dtype, t.shape, t.data_offsets)
            params[t.dtype] = params.get(t.dtype, 0) + elements
            total += nbytes
            layer = _LAYER_NAME.match(str(name))
            if layer:
                layers[int(layer.group(1))] = layers.get(int(layer.group(1)), 0) + nbytes
            elif str(name).startswith(_MTP_PREFIXES):
                mtp += nbytes
        _check_contiguous(filename, meta.tensors)
    return HubWeights(params_by_dtype=MappingProxyType(dict(sorted(params.items()))),
                      total_bytes=total, num_files=len(metas), layer_bytes=MappingProxyType(layers),
                      mtp_prefix_bytes=mtp)


# DeepSeek-V3 / GLM-4.5 keep their MTP module as layer num_hidden_layers (model.layers.61); Qwen3-Next /
# Qwen3.5 under mtp.*, MiMo under model.mtp_layers.* (the prefixes vLLM's *_mtp.py loaders rename)
_LAYER_NAME = re.compile(r"^(?:model\.|model\.language_model\.|language_model\.model\.)?layers\.(\d{1,6})\.")
_MTP_PREFIXES = ("mtp.", "model.mtp.", "model.mtp_layers.", "model.language_model.mtp.")


def _tensor_bytes(filename: str, name: str, dtype: Any, shape: Any, offsets: Any) -> tuple[int, int]:
    """(bytes, elements) of one header entry; MalformedHeader when it is not self-consistent."""
    label = f"tensor {str(name)[:80]!r}"
    if not isinstance(dtype, str) or not dtype:
        raise MalformedHeader(filename, f"{label} has no dtype")
    if not isinstance(shape, list) or not all(_is_nat(d) for d in shape):
        raise MalformedHeader(filename, f"{label} has a shape that is not a list of non-negative integers")
    if not (isinstance(offsets, (list, tuple)) and len(offsets) == 2 and all(_is_nat(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise MalformedHeader(filename, f"{label} has invalid data_offsets")
    elements = 1
    for d in shape:
        elements *= d
    stored = offsets[1] - offsets[0]
    bits = SAFETENSORS_DTYPE_BITS.get(dtype)
    if bits is None:  # a dtype newer than this table: trust the offsets for bytes
        return stored, elements
    if elements * bits % 8:
        raise MalformedHeader(filename, f"{label} ({dtype}, shape {shape}) does not fill whole bytes")
    nbytes = elements * bits // 8
    if nbytes != stored:
        raise MalformedHeader(
            filename, f"{label} ({dtype}, shape {shape}) needs {nbytes} bytes but its data_offsets span {stored}")
    return nbytes, elements


def _check_contiguous(filename: str, tensors: Mapping[str, Any]) -> None:
    """A file's tensors tile its data from byte 0, in offset order, with no gap and no overlap, as the safetensors
    library requires before it loads any (Metadata::validate: `s != start || e < s` is InvalidOffset,
    huggingface/safetensors@24b0b28:safetensors/src/tensor.rs#L627-L638). Overlapping offsets would count the
    shared bytes twice; a gap, bytes no tensor holds. Entries whose offsets are not two integers are left to
    `_tensor_bytes`, which has checked each entry first."""
    spans = sorted((tuple(t.data_offsets), str(name)) for name, t in tensors.items())
    start = 0
    for (s, e), name in spans:
        if s != start:
            how = (f"overlap the bytes before {start}, another tensor's" if s < start
                   else f"leave bytes {start} to {s} to no tensor")
            raise MalformedHeader(filename, f"tensor {name[:80]!r}: data_offsets [{s}, {e}] {how} (the safetensors "
                                            "library refuses such a file: InvalidOffset)")
        start = e


def _is_nat(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def index_shards(index: Any, where: str) -> list[str]:
    """The shard files a safetensors index (model.safetensors.index.json, read as JSON) lists, once each and
    sorted; each must be a relative path inside the checkpoint (no absolute path, `..`, `.` or backslash),
    the Hub's or a folder's alike. `where` names the index in the one-line error."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise KvplanError(f"{where} has no weight_map", EXIT_USAGE)
    shards = set()
    for name in weight_map.values():
        if (not isinstance(name, str) or not name or name.startswith("/") or "\\" in name
                or any(part in ("", ".", "..") for part in name.split("/"))):
            raise KvplanError(f"{where} names a shard file {str(name)[:80]!r} that is not a relative path", EXIT_USAGE)
        shards.add(name)
    return sorted(shards)
