"""Hugging Face Hub access for `kvplan fit <repo_id>`: fetch a repo's config.json and its safetensors weight totals.

That is this module's one purpose. All network and cache work goes through `huggingface_hub`
(imported inside the functions, so `import kvplan.sources.hub` stays cheap on the CLI start-up path);
there is no hand-written HTTP here. How each call is bounded, cached and
mapped to an error lives in kvplan.sources.hub_calls. Environment (HF_ENDPOINT, HF_HOME / HF_HUB_CACHE,
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
  reporting partial totals. A caller that prefers a config-only estimate can catch it. Adding the
  headers up and checking each entry is kvplan.sources.hub_headers' (no network there).
* Tokens are passed to the client and never formatted into a message; every message is also
  scrubbed of the token argument and of HF_TOKEN before it leaves this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvplan.core.errors import EXIT_NETWORK, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.sources.hub_calls import HubCall, commit_of_cached_path, is_commit
from kvplan.sources.hub_headers import HubWeights, as_header_problem, index_shards, sum_headers
from kvplan.sources.local_weights import model_json

CONFIG_FILE = "config.json"
QUANT_FILE = "hf_quant_config.json"  # kvplan.readers.modelopt.QUANT_FILE
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 5 * 1024 * 1024  # a real config.json is a few kB; 5 MB is hostile or a mistake
MAX_INDEX_BYTES = 64 * 1024 * 1024  # the biggest real indexes (tens of thousands of tensors) are a few MB
SHARD_WORKERS = 8

@dataclass(frozen=True)
class HubConfig:
    repo_id: str
    revision: str | None  # as asked (None: the default branch)
    commit: str | None  # the commit the config.json was read at, when known
    config: dict
    from_cache: bool  # True when the Hub was not consulted (offline, unreachable, or a cached pinned commit)
    notice: str | None  # one line for the user when the config came from the cache because of offline/network


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
    return _guarded(HubCall.make(repo_id, revision, token, timeout, CONFIG_FILE), _fetch_config)


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
    return _guarded(HubCall.make(repo_id, revision, token, timeout, SAFETENSORS_SINGLE), _fetch_weights)


def fetch_quant_file(
    repo_id: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    timeout: float = 10.0,
) -> dict | None:
    """Read `hf_quant_config.json` of a model repo (ModelOpt's older exports state their quantization there and
    not in config.json: kvplan.readers.modelopt), or None when the repo has none. Errors as fetch_config's."""
    return _guarded(HubCall.make(repo_id, revision, token, timeout, QUANT_FILE), _fetch_quant_file)


def _guarded(ctx: HubCall, fetch):
    """`fetch(ctx)` with every failure one KvplanError: the token scrubbed from kvplan's own messages, and a
    library's surprise mapped to its one-line message and exit code (HubCall.map_error)."""
    try:
        return fetch(ctx)
    except KvplanError as e:
        raise KvplanError(ctx.scrub(e.message), e.exit_code) from e
    except Exception as e:  # noqa: BLE001 - the one-line promise holds for library surprises too
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


def _fetch_quant_file(ctx: HubCall) -> dict | None:
    import huggingface_hub as hf
    from huggingface_hub.errors import RemoteEntryNotFoundError
    from huggingface_hub.utils import silent_tqdm

    try:
        meta = ctx.run(lambda: hf.get_hf_file_metadata(
            hf.hf_hub_url(ctx.repo_id, QUANT_FILE, revision=ctx.rev), token=ctx.token, timeout=ctx.timeout))
    except RemoteEntryNotFoundError:
        return None
    if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
        raise _too_big(ctx, meta.size, QUANT_FILE)
    path = ctx.run(lambda: hf.hf_hub_download(
        ctx.repo_id, QUANT_FILE, revision=ctx.rev, token=ctx.token, etag_timeout=ctx.timeout,
        tqdm_class=silent_tqdm))
    return _read_json_object(ctx, str(path), QUANT_FILE, MAX_CONFIG_BYTES)


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
    data = model_json(raw, where)  # as `fit ./folder` reads one: a byte-order mark refused alike
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
    ctx.filename = SAFETENSORS_SINGLE if files == [SAFETENSORS_SINGLE] else f"{len(files)} safetensors shards"
    metas = ctx.run_all([_header_task(ctx, api, f, pinned) for f in files], workers=SHARD_WORKERS)
    return sum_headers(dict(zip(files, metas)))


def _header_task(ctx: HubCall, api, filename: str, pinned: str) -> Callable[[], Any]:
    """One file's safetensors header read at the pinned commit, as a task for ctx.run_all."""
    from huggingface_hub.errors import RemoteEntryNotFoundError

    def task():
        try:
            return api.parse_safetensors_file_metadata(
                ctx.repo_id, filename, revision=pinned, token=ctx.token, timeout=ctx.timeout)
        except RemoteEntryNotFoundError as e:
            raise KvplanError(f"{filename}, listed in {SAFETENSORS_INDEX}, not found in {ctx.repo_id} "
                              f"(revision {ctx.rev})", EXIT_NOT_FOUND) from e
        except Exception as e:  # noqa: BLE001
            raise as_header_problem(filename, e) from e
    return task


def _shards_of_index(ctx: HubCall, index: dict) -> list[str]:
    return index_shards(index, f"{SAFETENSORS_INDEX} of {ctx.repo_id} (revision {ctx.rev})")


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
            raise as_header_problem(name, e) from e
    return sum_headers(metas)


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)
