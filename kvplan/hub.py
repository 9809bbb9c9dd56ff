"""Hugging Face Hub access for `kvplan fit <repo_id>`: fetch a repo's config.json and its safetensors weight totals.

That is this module's one purpose. All network and cache work goes through `huggingface_hub`
(imported inside the functions, so `import kvplan.hub` stays cheap on the CLI start-up path);
there is no hand-written HTTP here. How each call is bounded, cached and
mapped to an error lives in kvplan.hub_calls. Environment (HF_ENDPOINT, HF_HOME / HF_HUB_CACHE,
HF_HUB_OFFLINE, HF_TOKEN) is honoured the way the client honours it: read by huggingface_hub
when it is first imported, which is inside these functions, never at kvplan import time.

Decisions worth knowing:

* Timeouts. `timeout` (seconds) bounds every step: one metadata request, one small download,
  or one shard header. The client's own timeouts are passed where it takes them
  (`get_hf_file_metadata(timeout=)`, `hf_hub_download(etag_timeout=)`,
  `parse_safetensors_file_metadata(timeout=)`), but some of its paths ignore them
  (`hf_hub_download` fetches the body with HF_HUB_DOWNLOAD_TIMEOUT and retries up to five
  times; when its HEAD fails and nothing is cached it retries with a 60 s timeout), so each
  step also runs under a watchdog: a server that stops answering makes the call fail
  (EXIT_NETWORK) after about `timeout` + 1 s, never later. The abandoned request finishes in
  a daemon thread and cannot keep the process alive.
* Offline. With HF_HUB_OFFLINE=1, or when the Hub cannot be reached (connection refused,
  timeout, HTTP 5xx/429), a config.json already in the HF cache for that repo and revision is
  used: `from_cache=True` and a one-line `notice`. Access problems (gated, private, 401/403)
  are never papered over with a cached copy. Without a cached copy: KvplanError(EXIT_NETWORK).
  `fetch_weights` offline can only use weight files that are fully in the HF cache (their
  headers are parsed locally); otherwise it raises KvplanError(EXIT_NETWORK), which a caller
  may catch to carry on without weight totals.
* Weights. The logic of `huggingface_hub.get_safetensors_metadata` (model.safetensors first,
  else model.safetensors.index.json and its shards) is followed step by step with the client's
  public pieces instead of calling it, because in 2.4 it gives no timeout to its `file_exists`
  probes, turns a missing repo or revision into "not a safetensors repo", downloads the index
  without a timeout, and may fetch shards of a moved branch; here every shard is read at the
  one commit the first probe resolved. Byte totals are computed from each tensor's dtype and
  shape (packed I32/U8/F4 weights count as stored) and must agree with the header's
  data_offsets.
* Malformed safetensors headers (not JSON, a length prefix bigger than the file or above the
  client's 25 MB cap, offsets that disagree with dtype x shape) raise KvplanError(EXIT_USAGE)
  naming the file: the repo is broken, and kvplan refuses to guess rather than silently
  reporting partial totals. A caller that prefers a config-only estimate can catch it.
* Tokens are passed to the client and never formatted into a message; every message is also
  scrubbed of the token argument and of HF_TOKEN before it leaves this module.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kvplan.errors import EXIT_NETWORK, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.hub_calls import (
    HubCall, MalformedHeader, StepTimeout, commit_of_cached_path, is_commit, network_error_types,
)

CONFIG_FILE = "config.json"
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 5 * 1024 * 1024  # a real config.json is a few kB; 5 MB is hostile or a mistake
MAX_INDEX_BYTES = 64 * 1024 * 1024  # the biggest real indexes (tens of thousands of tensors) are a few MB
SHARD_WORKERS = 8

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
class HubConfig:
    repo_id: str
    revision: str | None  # as asked (None: the default branch)
    commit: str | None  # the commit the config.json was read at, when known
    config: dict
    from_cache: bool  # True when the Hub was not consulted (offline, unreachable, or a cached pinned commit)
    notice: str | None  # one line for the user when the config came from the cache because of offline/network


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


# ----------------------------------------------------------------------------------------------
# public API


def fetch_config(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> HubConfig:
    """Read `config.json` of a model repo (network, else the HF cache), as a dict.

    Raises KvplanError: EXIT_NOT_FOUND (repo, revision or config.json missing), EXIT_ACCESS
    (gated/private/refused token), EXIT_NETWORK (unreachable or too slow, nothing cached),
    EXIT_USAGE (bad arguments; config.json too big, not JSON or not a JSON object).
    """
    ctx = HubCall.make(repo_id, revision, token, timeout, CONFIG_FILE)
    try:
        return _fetch_config(ctx)
    except KvplanError as e:
        raise KvplanError(ctx.scrub(e.message), e.exit_code) from e
    except Exception as e:  # noqa: BLE001 - the one-line promise holds for library surprises too
        raise ctx.map_error(e) from e


def fetch_weights(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> HubWeights | None:
    """Sum the safetensors headers of a model repo: elements per dtype and exact tensor bytes.

    Returns None when the repo has neither model.safetensors nor model.safetensors.index.json.
    Raises KvplanError like fetch_config; a malformed or lying header is EXIT_USAGE.
    """
    ctx = HubCall.make(repo_id, revision, token, timeout, SAFETENSORS_SINGLE)
    try:
        return _fetch_weights(ctx)
    except KvplanError as e:
        raise KvplanError(ctx.scrub(e.message), e.exit_code) from e
    except Exception as e:  # noqa: BLE001
        raise ctx.map_error(e) from e


# ----------------------------------------------------------------------------------------------
# config


def _fetch_config(ctx: HubCall) -> HubConfig:
    import huggingface_hub as hf
    from huggingface_hub import constants

    if constants.is_offline_mode():
        path = ctx.cached(CONFIG_FILE)
        if path is None:
            raise KvplanError(
                f"offline (HF_HUB_OFFLINE is set) and config.json of {ctx.repo_id} (revision {ctx.rev}) "
                f"is not in the Hugging Face cache ({constants.HF_HUB_CACHE}): unset HF_HUB_OFFLINE "
                "and run once with network access",
                EXIT_NETWORK,
            )
        return _config_from_path(ctx, path, notice=f"offline: using cached config.json for {ctx.repo_id} "
                                                   f"(revision {ctx.rev})")

    # A pinned commit already in the cache is immutable: no request, as the client itself does.
    if is_commit(ctx.rev):
        path = ctx.cached(CONFIG_FILE)
        if path is not None:
            return _config_from_path(ctx, path, notice=None)

    # One metadata request of our own first: it has a real timeout and no hidden retries, its
    # errors are precise, it tells a network failure (-> cache) from an answer, and it gives the
    # size so a huge file is refused before it is downloaded.
    try:
        meta = ctx.run(lambda: hf.get_hf_file_metadata(
            hf.hf_hub_url(ctx.repo_id, CONFIG_FILE, revision=ctx.rev), token=ctx.token, timeout=ctx.timeout,
        ))
    except Exception as e:  # noqa: BLE001
        if ctx.is_unreachable(e):
            path = ctx.cached(CONFIG_FILE)
            if path is not None:
                return _config_from_path(ctx, path, notice=(
                    f"offline: using cached config.json for {ctx.repo_id} (revision {ctx.rev}); "
                    f"the Hub could not be reached ({ctx.describe_network(e)})"))
        raise
    if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
        raise _too_big(ctx, meta.size)

    from huggingface_hub.utils import silent_tqdm

    path = ctx.run(lambda: hf.hf_hub_download(
        ctx.repo_id, CONFIG_FILE, revision=ctx.rev, token=ctx.token, etag_timeout=ctx.timeout,
        tqdm_class=silent_tqdm,
    ))
    return _config_from_path(ctx, str(path), notice=None, from_cache=False)


def _config_from_path(ctx: HubCall, path: str, *, notice: str | None, from_cache: bool = True) -> HubConfig:
    config = _read_json_object(ctx, path, CONFIG_FILE, MAX_CONFIG_BYTES)
    return HubConfig(
        repo_id=ctx.repo_id, revision=ctx.revision, commit=commit_of_cached_path(path),
        config=config, from_cache=from_cache, notice=notice,
    )


def _read_json_object(ctx: HubCall, path: str, filename: str, limit: int) -> dict:
    where = f"{filename} of {ctx.repo_id} (revision {ctx.rev})"
    size = os.path.getsize(path)
    if size > limit:
        raise _too_big(ctx, size, filename, limit)
    with open(path, "rb") as f:
        raw = f.read(limit + 1)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise KvplanError(f"{where} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})",
                          EXIT_USAGE) from e
    except (ValueError, RecursionError) as e:  # bad encoding, absurd nesting
        raise KvplanError(f"{where} is not valid JSON ({type(e).__name__})", EXIT_USAGE) from e
    if not isinstance(data, dict):
        raise KvplanError(f"{where} is a JSON {_json_kind(data)}, not an object", EXIT_USAGE)
    return data


def _too_big(ctx: HubCall, size: int, filename: str = CONFIG_FILE, limit: int = MAX_CONFIG_BYTES) -> KvplanError:
    return KvplanError(
        f"{filename} of {ctx.repo_id} (revision {ctx.rev}) is {size} bytes; kvplan refuses files over "
        f"{limit // (1024 * 1024)} MB", EXIT_USAGE)


# ----------------------------------------------------------------------------------------------
# weights


def _fetch_weights(ctx: HubCall) -> HubWeights | None:
    import huggingface_hub as hf
    from huggingface_hub import constants
    from huggingface_hub.errors import RemoteEntryNotFoundError

    if constants.is_offline_mode():
        weights = _weights_from_cache(ctx, ctx.rev)
        if weights is None:
            raise KvplanError(
                f"offline (HF_HUB_OFFLINE is set): the safetensors headers of {ctx.repo_id} (revision "
                f"{ctx.rev}) are read from the Hub and its weight files are not in the Hugging Face cache; "
                "unset HF_HUB_OFFLINE to read them", EXIT_NETWORK)
        return weights

    def head(filename: str, revision: str):
        return ctx.run(lambda: hf.get_hf_file_metadata(
            hf.hf_hub_url(ctx.repo_id, filename, revision=revision), token=ctx.token, timeout=ctx.timeout))

    # 1. model.safetensors? (its answer also resolves the revision to one commit)
    try:
        meta = head(SAFETENSORS_SINGLE, ctx.rev)
        commit, files = meta.commit_hash, [SAFETENSORS_SINGLE]
    except RemoteEntryNotFoundError as e:
        commit, files = e.response.headers.get("X-Repo-Commit"), None
    except Exception as e:  # noqa: BLE001
        if ctx.is_unreachable(e):
            weights = _weights_from_cache(ctx, ctx.rev)
            if weights is not None:
                return weights
        raise
    pinned = commit if commit and is_commit(commit) else ctx.rev

    # 2. else the sharded index
    if files is None:
        ctx.filename = SAFETENSORS_INDEX
        try:
            head(SAFETENSORS_INDEX, pinned)
        except RemoteEntryNotFoundError:
            return None  # not a safetensors repo
        from huggingface_hub.utils import silent_tqdm

        index_path = ctx.run(lambda: hf.hf_hub_download(
            ctx.repo_id, SAFETENSORS_INDEX, revision=pinned, token=ctx.token, etag_timeout=ctx.timeout,
            tqdm_class=silent_tqdm))
        files = _shards_of_index(ctx, _read_json_object(ctx, str(index_path), SAFETENSORS_INDEX, MAX_INDEX_BYTES))

    # 3. one ranged read per file, at the pinned commit, a few at a time
    api = hf.HfApi()

    def parse(filename: str) -> Callable[[], Any]:
        def task():
            try:
                return api.parse_safetensors_file_metadata(
                    ctx.repo_id, filename, revision=pinned, token=ctx.token, timeout=ctx.timeout)
            except RemoteEntryNotFoundError as e:
                raise KvplanError(f"{filename}, listed in {SAFETENSORS_INDEX}, not found in {ctx.repo_id} "
                                  f"(revision {ctx.rev})", EXIT_NOT_FOUND) from e
            except Exception as e:  # noqa: BLE001
                raise _as_header_problem(filename, e) from e
        return task

    ctx.filename = SAFETENSORS_SINGLE if files == [SAFETENSORS_SINGLE] else f"{len(files)} safetensors shards"
    metas = ctx.run_all([parse(f) for f in files], workers=SHARD_WORKERS)
    return _sum_headers(ctx, dict(zip(files, metas)))


def _shards_of_index(ctx: HubCall, index: dict) -> list[str]:
    where = f"{SAFETENSORS_INDEX} of {ctx.repo_id} (revision {ctx.rev})"
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise KvplanError(f"{where} has no weight_map", EXIT_USAGE)
    shards = set()
    for name in weight_map.values():
        if (not isinstance(name, str) or not name or name.startswith("/") or "\\" in name
                or any(part in ("", ".", "..") for part in name.split("/"))):
            raise KvplanError(f"{where} names a shard file {str(name)[:80]!r} that is not a relative path",
                              EXIT_USAGE)
        shards.add(name)
    return sorted(shards)


def _as_header_problem(filename: str, e: Exception) -> Exception:
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


def _sum_headers(ctx: HubCall, metas: Mapping[str, Any]) -> HubWeights:
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


def _weights_from_cache(ctx: HubCall, revision: str) -> HubWeights | None:
    """Weights from safetensors files fully present in the HF cache (headers parsed locally)."""
    from huggingface_hub import parse_local_safetensors_file_metadata

    single = ctx.cached(SAFETENSORS_SINGLE, revision)
    if single is not None:
        paths = {SAFETENSORS_SINGLE: single}
    else:
        index = ctx.cached(SAFETENSORS_INDEX, revision)
        if index is None:
            return None
        paths = {}
        for shard in _shards_of_index(ctx, _read_json_object(ctx, index, SAFETENSORS_INDEX, MAX_INDEX_BYTES)):
            path = ctx.cached(shard, revision)
            if path is None:
                return None
            paths[shard] = path
    metas = {}
    for name, path in paths.items():
        try:
            metas[name] = parse_local_safetensors_file_metadata(path)
        except Exception as e:  # noqa: BLE001
            raise _as_header_problem(name, e) from e
    return _sum_headers(ctx, metas)


def _is_nat(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)
