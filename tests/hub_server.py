"""A fake Hugging Face Hub for tests: a threaded stdlib HTTP server on 127.0.0.1 speaking what huggingface_hub calls.

Served routes (what huggingface_hub 2.4 sends, see its file_download.py, hf_api.py, utils/_http.py):

* HEAD/GET /{repo_id}/resolve/{revision}/{filename}: 200 with X-Repo-Commit, ETag (git sha1 for
  regular files, sha256 for LFS-like *.safetensors), Content-Length, Accept-Ranges; a `Range:
  bytes=a-b` GET is answered 206 + Content-Range (416 beyond the end). With `lfs_redirect`, a
  *.safetensors file answers 302 like the real Hub: X-Repo-Commit, X-Linked-Etag, X-Linked-Size and
  a Location on a *different origin* (http://localhost:port/cdn/<sha256>, the "CDN"), which the
  client must not send the token to.
* GET /api/models/{repo_id} and /api/models/{repo_id}/revision/{rev}: JSON with id, sha, siblings.
* Errors carry the headers hf_raise_for_status keys on: X-Error-Code RepoNotFound (401 without a
  token, 404 with one, like the Hub), GatedRepo (401 without a token, 403 with a wrong one),
  RevisionNotFound (404), EntryNotFound (404, with X-Repo-Commit), plus X-Error-Message.
* A repo with `hang="all"` never answers (its handler waits, bounded by `max_hang_s`, and is
  released at once by stop()); `hang="get"` answers HEAD but not GET of its files.

`hang="get-once"` hangs the first GET only, so a client that retries eventually finishes.

The safetensors builders at the bottom write real files with the `safetensors` package.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import re
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

import numpy as np


def commit_sha(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# The client reads HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE... into huggingface_hub.constants at import;
# tests that change them reload that module (every client module reads constants.X at call time).
CLIENT_ENV = (
    "HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT", "HF_OIDC_RESOURCE", "HUGGINGFACE_CO_STAGING", "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "HF_DEBUG",
)

def reload_client_constants() -> None:
    import huggingface_hub.constants

    importlib.reload(huggingface_hub.constants)


def set_offline(monkeypatch, on: bool = True) -> None:
    if on:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    reload_client_constants()


@contextlib.contextmanager
def serving(server: "FakeHub", monkeypatch, hf_home: Path):
    """Start `server`, point the client at it (HF_ENDPOINT, a fresh HF_HOME), and undo both after."""
    server.start()
    point_client_at(monkeypatch, server.url, hf_home)
    try:
        yield server
    finally:
        monkeypatch.undo()
        reload_client_constants()
        server.stop()


def point_client_at(monkeypatch, endpoint: str, hf_home: Path) -> None:
    for name in CLIENT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_UPDATE_CHECK", "1")
    reload_client_constants()



@dataclass
class FakeRepo:
    commits: dict[str, dict[str, bytes]]  # commit sha -> {filename: content}
    refs: dict[str, str]  # branch or tag -> commit sha
    gated_token: str | None = None  # gated: only "Bearer <gated_token>" may read files
    hang: str | None = None  # None | "all" | "get" | "get-once" (only the first GET of a file hangs)
    lfs_redirect: bool = False  # *.safetensors through a 302 to the CDN origin

    @classmethod
    def single(cls, files: dict[str, bytes], **kwargs) -> FakeRepo:
        sha = commit_sha(sorted(files.items()))
        return cls(commits={sha: dict(files)}, refs={"main": sha}, **kwargs)

    @property
    def main(self) -> str:
        return self.refs["main"]

    def resolve(self, revision: str) -> str | None:
        if revision in self.refs:
            return self.refs[revision]
        if revision in self.commits:
            return revision
        return None


@dataclass
class Recorded:
    method: str
    host: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


class FakeHub:
    def __init__(self, max_hang_s: float = 30.0):
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Recorded] = []
        self.max_hang_s = max_hang_s
        self._stop = threading.Event()
        self._cdn: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._hung_once: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases hanging handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cdn_url(self) -> str:  # another origin (host differs), same process
        return f"http://localhost:{self.port}"

    def add(self, repo_id: str, repo: FakeRepo) -> FakeRepo:
        self.repos[repo_id] = repo
        for files in repo.commits.values():
            for data in files.values():
                self._cdn[hashlib.sha256(data).hexdigest()] = data
        return repo

    def requests_for(self, needle: str) -> list[Recorded]:
        return [r for r in self.requests if needle in r.path]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.0"  # one request per connection: simple and robust
    server_version = "FakeHub/1.0"

    def log_message(self, format, *args):  # noqa: A002 - keep pytest output clean
        pass

    def do_HEAD(self):  # noqa: N802
        self._dispatch("HEAD")

    def do_GET(self):  # noqa: N802
        self._dispatch("GET")

    # -- routing -----------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        raw_path = urlsplit(self.path).path
        self.fake.requests.append(Recorded(method, self.headers.get("Host", ""), raw_path,
                                           {k.lower(): v for k, v in self.headers.items()}))
        try:
            if raw_path.startswith("/cdn/"):
                return self._cdn(method, raw_path[len("/cdn/"):])
            if raw_path.startswith("/api/models/"):
                return self._model_info(method, raw_path[len("/api/models/"):])
            if "/resolve/" in raw_path:
                return self._resolve(method, raw_path)
            self._error(method, 404, None, "Not Found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _repo(self, method: str, repo_id: str, *, files: bool) -> FakeRepo | None:
        repo = self.fake.repos.get(repo_id)
        auth = self.headers.get("Authorization")
        if repo is None:
            self._error(method, 404 if auth else 401, "RepoNotFound", "Repository not found")
            return None
        hang = repo.hang == "all" or (repo.hang == "get" and method == "GET" and files)
        if repo.hang == "get-once" and method == "GET" and files:
            with self.fake._lock:
                hang = repo_id not in self.fake._hung_once
                self.fake._hung_once.add(repo_id)
        if hang:
            self.fake._stop.wait(self.fake.max_hang_s)
            self.close_connection = True
            return None  # never answers: the connection just closes
        if files and repo.gated_token is not None and auth != f"Bearer {repo.gated_token}":
            if auth:
                self._error(method, 403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not "
                                                      "in the authorized list.")
            else:
                self._error(method, 401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have "
                                                      "access to it and be authenticated to access it.")
            return None
        return repo

    def _resolve(self, method: str, raw_path: str) -> None:
        left, right = raw_path.split("/resolve/", 1)
        repo_id = unquote(left.lstrip("/"))
        if "/" not in right:
            return self._error(method, 404, None, "Not Found")
        rev_quoted, file_quoted = right.split("/", 1)
        revision, filename = unquote(rev_quoted), unquote(file_quoted)
        repo = self._repo(method, repo_id, files=True)
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            return self._error(method, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        data = repo.commits[commit].get(filename)
        if data is None:
            return self._error(method, 404, "EntryNotFound", f"{filename} does not exist on \"{revision}\"",
                               extra={"X-Repo-Commit": commit})
        lfs = filename.endswith(".safetensors")
        sha256 = hashlib.sha256(data).hexdigest()
        if lfs and repo.lfs_redirect:
            self.send_response(302)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("X-Linked-Etag", f'"{sha256}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", f'"{git_blob_sha1(data)}"')
            self.send_header("Location", f"{self.fake.cdn_url}/cdn/{sha256}?sig=fake")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        etag = sha256 if lfs else git_blob_sha1(data)
        self._send_bytes(method, data, {"X-Repo-Commit": commit, "ETag": f'"{etag}"'},
                         "application/octet-stream" if lfs else "application/json")

    def _cdn(self, method: str, key: str) -> None:
        data = self.fake._cdn.get(key)
        if data is None:
            return self._error(method, 404, None, "NoSuchKey")
        if self.headers.get("Authorization"):  # a signed URL; a token here is a leak
            return self._error(method, 400, None, "Authorization header must not be sent to the CDN")
        self._send_bytes(method, data, {"ETag": f'"{key}"'}, "application/octet-stream")

    def _model_info(self, method: str, rest: str) -> None:
        revision = None
        if "/revision/" in rest:
            rest, rev_quoted = rest.split("/revision/", 1)
            revision = unquote(rev_quoted)
        repo_id = unquote(rest)
        repo = self._repo(method, repo_id, files=False)
        if repo is None:
            return
        commit = repo.resolve(revision or "main")
        if commit is None:
            return self._error(method, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        body = json.dumps({
            "_id": commit[:24], "id": repo_id, "modelId": repo_id, "sha": commit, "private": False,
            "gated": "manual" if repo.gated_token else False, "disabled": False, "downloads": 0, "likes": 0,
            "tags": [], "library_name": "transformers", "lastModified": "2025-01-01T00:00:00.000Z",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": name} for name in sorted(repo.commits[commit])],
        }).encode()
        self._send_bytes(method, body, {}, "application/json", ranges=False)

    # -- responses ---------------------------------------------------------------------------
    def _send_bytes(self, method: str, data: bytes, headers: dict[str, str], content_type: str,
                    *, ranges: bool = True) -> None:
        status, body, extra = 200, data, {}
        range_header = self.headers.get("Range") if ranges else None
        if range_header:
            span = _parse_range(range_header, len(data))
            if span is None:
                return self._error(method, 416, None, "Requested Range Not Satisfiable",
                                   extra={"Content-Range": f"bytes */{len(data)}"})
            start, end = span
            status, body = 206, data[start:end + 1]
            extra = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
        self.send_response(status)
        for k, v in {**headers, **extra}.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", "Root=fake-request-id")
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def _error(self, method: str, status: int, code: str | None, message: str,
               extra: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)


_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    m = _RANGE.match(header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):  # suffix: the last n bytes
        n = int(m.group(2))
        return (max(size - n, 0), size - 1) if n and size else None
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else size - 1
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


def resolve_url(hub: FakeHub, repo_id: str, revision: str, filename: str) -> str:
    return f"{hub.url}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"


# ----------------------------------------------------------------------------------------------
# safetensors files, written by the safetensors package


def numpy_safetensors(tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    """Types numpy has (F32, F16, I32, U8...) through safetensors.numpy.save."""
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def spec_safetensors(tensors: dict[str, tuple[str, list[int]]], metadata: dict[str, str] | None = None) -> bytes:
    """Any safetensors dtype numpy lacks (bfloat16, float8_e4m3fn, float4_e2m1fn_x2...) via TensorSpec.

    `tensors` maps a name to (dtype as safetensors' constructor spells it, storage shape); the data are
    zeros. For packed float4_e2m1fn_x2 the storage shape counts bytes and the header doubles the last dim.
    """
    from safetensors import TensorSpec, serialize

    bits = {"bfloat16": 16, "float16": 16, "float32": 32, "int32": 32, "uint8": 8, "float8_e4m3fn": 8,
            "float8_e5m2": 8, "float8_e8m0fnu": 8, "float4_e2m1fn_x2": 8, "int8": 8, "int64": 64}
    buffers, specs = [], {}
    for name, (dtype, shape) in tensors.items():
        n = int(np.prod(shape)) if shape else 1
        buf = np.zeros(max(n * bits[dtype] // 8, 1), dtype=np.uint8)
        buffers.append(buf)  # keep alive during serialize
        specs[name] = TensorSpec(dtype=dtype, shape=list(shape), data_ptr=buf.ctypes.data,
                                 data_len=n * bits[dtype] // 8)
    return serialize(specs, metadata=metadata)


def header_of(data: bytes) -> dict:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


def with_length_prefix(data: bytes, claimed: int) -> bytes:
    """The same file with its 8-byte little-endian header length replaced (a lying prefix)."""
    return struct.pack("<Q", claimed) + data[8:]


def with_header(header: dict, data_len: int) -> bytes:
    """A file from a hand-written header (for headers the serializer would refuse to write)."""
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(data_len)
