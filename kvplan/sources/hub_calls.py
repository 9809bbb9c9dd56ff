"""The plumbing under kvplan.sources.hub: each huggingface_hub call run under a watchdog, cache look-ups, error mapping.

kvplan.sources.hub says what to fetch; this module says how one call is made safely: arguments checked,
every step bounded by `timeout` (+1 s of slack) even where the client ignores its own timeouts,
the HF cache consulted, and every failure turned into one KvplanError line with the right exit
code, scrubbed of tokens. huggingface_hub is imported inside the functions only.
"""

from __future__ import annotations

import os
import queue
import threading
from urllib.parse import urlsplit
from collections.abc import Callable
from typing import Any

from kvplan.core.errors import (
    EXIT_ACCESS, EXIT_ERROR, EXIT_NETWORK, EXIT_NOT_FOUND, EXIT_USAGE, KvplanError, arg,
)

_WATCHDOG_SLACK_S = 1.0  # the client's own timeout should fire first; the watchdog is the backstop

class StepTimeout(Exception):
    """The watchdog gave up on a step (the client's own timeout did not fire in time)."""


class MalformedHeader(Exception):
    def __init__(self, filename: str, detail: str):
        super().__init__(detail)
        self.filename = filename
        self.detail = detail




# shared plumbing


class HubCall:
    """One call: its arguments, the watchdog, cache look-ups and the error mapping."""

    def __init__(self, repo_id: str, revision: str | None, token: str | None, timeout: float, filename: str):
        self.repo_id = repo_id
        self.revision = revision
        self.rev = revision or "main"
        self.token = token
        self.timeout = float(timeout)
        self.filename = filename  # what the current step reads, for messages

    @classmethod
    def make(cls, repo_id: Any, revision: Any, token: Any, timeout: Any, filename: str) -> HubCall:
        if not isinstance(repo_id, str) or not repo_id.strip():
            raise KvplanError("a Hugging Face repo id is needed (like meta-llama/Llama-3.1-8B)", EXIT_USAGE)
        if revision is not None and (not isinstance(revision, str) or not revision.strip()):
            raise KvplanError(f"{arg('revision')} must be a non-empty branch, tag or commit", EXIT_USAGE,
                              param="revision", value=revision)
        if token is not None and not isinstance(token, str):
            raise KvplanError("the Hub token must be a string", EXIT_USAGE)
        if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                or not 0 < timeout <= 3600):
            raise KvplanError(f"the Hub timeout must be a number of seconds in (0, 3600], not {timeout!r}",
                              EXIT_USAGE)
        ctx = cls(repo_id.strip(), revision.strip() if revision else None, token or None, timeout, filename)
        check_endpoint()
        try:
            from huggingface_hub.utils import validate_repo_id
        except ImportError as e:  # pragma: no cover - huggingface_hub is a hard dependency
            raise KvplanError("the huggingface_hub package is not installed: pip install huggingface_hub",
                              EXIT_ERROR) from e
        try:
            validate_repo_id(ctx.repo_id)
        except ValueError as e:
            raise KvplanError(ctx.scrub(f"{ctx.repo_id[:120]!r} is not a valid Hugging Face repo id "
                                        "(expected name or namespace/name)"), EXIT_USAGE) from e
        return ctx

    # -- secrets -----------------------------------------------------------------------------
    def secrets(self) -> list[str]:
        found = [self.token, os.environ.get("HF_TOKEN"), os.environ.get("HUGGING_FACE_HUB_TOKEN")]
        return [s.strip() for s in found if s and len(s.strip()) >= 4]

    def scrub(self, message: str) -> str:
        for secret in self.secrets():
            message = message.replace(secret, "***")
        return " ".join(message.split())[:600]

    # -- cache -------------------------------------------------------------------------------
    def cached(self, filename: str, revision: str | None = None) -> str | None:
        from huggingface_hub import try_to_load_from_cache

        try:
            path = try_to_load_from_cache(self.repo_id, filename, revision=revision or self.rev)
        except (OSError, ValueError):
            return None
        return path if isinstance(path, str) and os.path.isfile(path) else None

    # -- watchdog ----------------------------------------------------------------------------
    def run(self, fn: Callable[[], Any]) -> Any:
        return self.run_all([fn], workers=1)[0]

    def run_all(self, tasks: list[Callable[[], Any]], *, workers: int) -> list[Any]:
        """Run tasks on daemon threads; give up when none finishes for timeout + slack seconds."""
        if not tasks:
            return []
        todo: queue.SimpleQueue = queue.SimpleQueue()
        for item in enumerate(tasks):
            todo.put(item)
        done: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                try:
                    i, task = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((i, True, task()))
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                    done.put((i, False, e))

        for n in range(min(workers, len(tasks))):
            threading.Thread(target=worker, name=f"kvplan-hub-{n}", daemon=True).start()
        results: list[Any] = [None] * len(tasks)
        for _ in tasks:
            try:
                i, ok, value = done.get(timeout=self.timeout + _WATCHDOG_SLACK_S)
            except queue.Empty:
                stop.set()
                raise StepTimeout() from None
            if not ok:
                stop.set()
                raise value
            results[i] = value
        return results

    # -- errors ------------------------------------------------------------------------------
    def is_unreachable(self, e: BaseException) -> bool:
        """A failure to talk to the Hub at all, where a cached copy is the right fallback."""
        from huggingface_hub.errors import FileMetadataError, HfHubHTTPError, OfflineModeIsEnabled

        if isinstance(e, (StepTimeout, OfflineModeIsEnabled, FileMetadataError)):
            return True
        if isinstance(e, HfHubHTTPError):
            status = _status(e)
            return status is not None and (status >= 500 or status in (408, 429))
        return isinstance(e, network_error_types())

    def describe_network(self, e: BaseException) -> str:
        from huggingface_hub import constants
        from huggingface_hub.errors import FileMetadataError, HfHubHTTPError, OfflineModeIsEnabled

        endpoint = constants.ENDPOINT
        if isinstance(e, StepTimeout) or _is_timeout(e):
            return f"no answer from {endpoint} within {self.timeout:g} s"
        if isinstance(e, OfflineModeIsEnabled):
            return "HF_HUB_OFFLINE is set"
        if isinstance(e, FileMetadataError):
            return f"{endpoint} did not answer like a Hugging Face Hub (check HF_ENDPOINT)"
        if isinstance(e, HfHubHTTPError):
            return f"{endpoint} answered HTTP {_status(e)}"
        return f"cannot connect to {endpoint}: {_first_line(e) or type(e).__name__}"

    def map_error(self, e: BaseException) -> KvplanError:
        message, exit_code = self._message(e)
        return KvplanError(self.scrub(message), exit_code)

    def _message(self, e: BaseException) -> tuple[str, int]:
        from huggingface_hub import constants
        from huggingface_hub.errors import (
            DisabledRepoError, FileMetadataError, GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError,
            OfflineModeIsEnabled, RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError,
        )

        repo, rev, endpoint = self.repo_id, self.rev, constants.ENDPOINT
        if isinstance(e, MalformedHeader):
            return (f"safetensors header of {e.filename} in {repo} (revision {rev}) is malformed: {e.detail}",
                    EXIT_USAGE)
        if isinstance(e, GatedRepoError):  # before RepositoryNotFoundError: it is a subclass
            return (f"{repo} is a gated repo: request access on its model page ({endpoint}/{repo}), then set "
                    f"HF_TOKEN or pass {arg('token')} with a token of an account that was granted access", EXIT_ACCESS)
        if isinstance(e, RevisionNotFoundError):
            return f"revision {rev!r} not found in {repo} on {endpoint}", EXIT_NOT_FOUND
        if isinstance(e, RemoteEntryNotFoundError):
            return f"{self.filename} not found in {repo} (revision {rev})", EXIT_NOT_FOUND
        if isinstance(e, RepositoryNotFoundError):
            return (f"repo {repo} not found on {endpoint} (if it is private, set HF_TOKEN or pass {arg('token')})",
                    EXIT_NOT_FOUND)
        if isinstance(e, DisabledRepoError):
            return f"access to {repo} is disabled on {endpoint}", EXIT_ACCESS
        if isinstance(e, HfHubHTTPError):
            status = _status(e)
            if status == 401:
                return (f"{endpoint} refused the token for {repo} (HTTP 401): check HF_TOKEN or {arg('token')}",
                        EXIT_ACCESS)
            if status == 403:
                return (f"{endpoint} refused access to {repo} (HTTP 403): the token lacks permission for it",
                        EXIT_ACCESS)
            if status == 429:
                return f"{endpoint} is rate-limiting requests (HTTP 429): try again later", EXIT_NETWORK
            if status is not None and status >= 500:
                return f"{endpoint} failed to serve {repo} (HTTP {status}): try again later", EXIT_NETWORK
            return f"{endpoint} answered HTTP {status} for {self.filename} of {repo}", EXIT_ERROR
        if isinstance(e, (OfflineModeIsEnabled, LocalEntryNotFoundError)):
            return (f"{self.filename} of {repo} (revision {rev}) is not in the Hugging Face cache and the Hub "
                    "cannot be used (HF_HUB_OFFLINE is set or there is no network)", EXIT_NETWORK)
        if isinstance(e, (StepTimeout, FileMetadataError)) or isinstance(e, network_error_types()):
            return (f"could not fetch {self.filename} of {repo}: {self.describe_network(e)}; check the network "
                    "or HF_ENDPOINT (there is no cached copy to fall back on)", EXIT_NETWORK)
        if isinstance(e, OSError):
            return (f"local file error while fetching {self.filename} of {repo} "
                    f"(Hugging Face cache {constants.HF_HUB_CACHE}): {e.strerror or _first_line(e)}", EXIT_ERROR)
        return (f"unexpected error while fetching {self.filename} of {repo}: {type(e).__name__}: "
                f"{_first_line(e)[:200]}", EXIT_ERROR)


def check_endpoint() -> None:
    """Refuse an HF_ENDPOINT that is no http(s) URL with a host, before huggingface_hub is imported: its constants
    module splits the URL at import, and a malformed one (`http://[::1`) raised ValueError there, an internal error;
    another (`not a url`, `ftp://x`) reached the network layer and failed only after its retries."""
    endpoint = os.environ.get("HF_ENDPOINT")
    if not endpoint:  # unset or empty: the client's default, huggingface.co
        return
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise KvplanError(f"HF_ENDPOINT {endpoint[:120]!r} is not an http(s) URL with a host "
                          "(like https://huggingface.co); unset it to use the Hub", EXIT_USAGE)


def network_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import httpx2

        types += [httpx2.TransportError, httpx2.TooManyRedirects, httpx2.DecodingError]
    except ImportError:  # pragma: no cover - another client transport
        pass
    return tuple(types)


def _is_timeout(e: BaseException) -> bool:
    try:
        import httpx2

        if isinstance(e, httpx2.TimeoutException):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(e, TimeoutError)


def _status(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def is_commit(revision: str) -> bool:
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)


def commit_of_cached_path(path: str) -> str | None:
    """The HF cache keeps files at .../snapshots/<commit>/<filename>."""
    parent = os.path.dirname(path)
    commit = os.path.basename(parent)
    return commit if is_commit(commit) and os.path.basename(os.path.dirname(parent)) == "snapshots" else None
