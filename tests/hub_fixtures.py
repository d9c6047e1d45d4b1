"""A Hugging Face cache and Hub for tests, on disk and on 127.0.0.1 only: shared by tests/bertcore/test_hub.py and
tests/explorer/test_hub_window.py.

`hub_env` gives a test a private HF home and cache (never ~/.cache) and an endpoint that refuses connections;
`cache_repo` lays a repo out as huggingface_hub does (blobs, snapshot links, refs/main); `serve` starts a FakeHub
that answers what a download asks of a Hub, or answers as a broken or hostile endpoint would; `permissions_enforced`
makes permission bits count for the calling thread although the tests run as root. A test module imports the
fixtures by their function names (`hub_env_fixture`, `serve_fixture`); tests ask for them as `hub_env` and `serve`.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40
HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens here once the socket is closed


@pytest.fixture(name="hub_env")
def hub_env_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HF home and cache, no token, telemetry off, and an endpoint that refuses connections."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    for name in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME",
                 "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    # huggingface_hub read these from the environment when it was imported (the transformers fixture may have
    # switched it offline first): set them as this test's environment says.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    return home / "hub"


# --- a hand-built cache --------------------------------------------------------------------------------------


def safetensors_bytes(shapes: dict[str, tuple[tuple[int, ...], str]]) -> bytes:
    """A valid safetensors file with zero-filled tensors: name -> (shape, dtype)."""
    widths = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}
    header, offset = {}, 0
    for name, (shape, dtype) in shapes.items():
        size = widths[dtype]
        for dimension in shape:
            size *= dimension
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + bytes(offset)


def cache_repo(cache: Path, repo_id: str, files: dict[str, bytes], commit: str = COMMIT_A,
                ref: str | None = "main") -> Path:
    """models--org--name with blobs named by content and snapshot links into them, as huggingface_hub lays out."""
    storage = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (storage / "blobs").mkdir(exist_ok=True)
    for name, content in files.items():
        blob = storage / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref is not None:
        (storage / "refs").mkdir(exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return snapshot


def hub_config(model_type: str = "bert", architectures: list[str] | None = None, **fields: object) -> bytes:
    values = {"model_type": model_type, "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 8}
    if architectures is not None:
        values["architectures"] = architectures
    values.update(fields)
    return json.dumps(values).encode()


# --- a fake Hub on 127.0.0.1 ---------------------------------------------------------------------------------


@dataclass
class FakeHub:
    """Answers what a Hub is asked for a download: the model info API (GET /api/models/<repo>[/revision/<rev>])
    and HEAD/GET on resolve URLs. It can also answer as a broken or hostile endpoint (a mirror, or a plain-http
    man in the middle) would: other headers, an HTML page, redirects, a body that stalls, trickles or is cut."""

    repos: dict[str, dict[str, bytes]]
    commit: str = HUB_COMMIT
    token: str | None = None  # when set, requests without "Authorization: Bearer <token>" get 401
    forbidden: bool = False  # every request gets 403
    failing_files: set[str] = field(default_factory=set)  # GETs of these get 500
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""
    # per file name, headers that replace the usual ones (ETag, X-Repo-Commit, Content-Length); None removes one
    file_headers: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # per file name, how the GET's body comes: "stall" (headers, then nothing until the test ends), "trickle" (a
    # byte every `trickle_seconds`), "truncated" (half of it, then the connection closes), "truncated once" (so
    # the first time only), "longer" (the file and as much again, under the file's Content-Length)
    bodies: dict[str, str] = field(default_factory=dict)
    trickle_seconds: float = 2.0
    info: tuple[int, bytes, str] | None = None  # (status, body, content type) answered for the info API instead
    info_stall: bool = False  # the info API sends nothing at all (not even headers) until the test ends
    extra_listed: dict[str, int] = field(default_factory=dict)  # names (and sizes) listed beyond the repo's files
    redirects: dict[str, str] = field(default_factory=dict)  # request path -> Location of a 302 answered for it
    status_for: dict[str, int] = field(default_factory=dict)  # per file name, a status that every request gets …
    status_times: dict[str, int] = field(default_factory=dict)  # … or only its first this many requests
    # where resolve requests are redirected (302, with the file's metadata, as the Hub sends large files to its CDN):
    # another FakeHub's url, which serves the same path
    cdn: str | None = None
    authorizations: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Authorization header)
    released: threading.Event = field(default_factory=threading.Event)  # set at teardown: stalled answers end
    _truncated: set[str] = field(default_factory=set)

    def answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = unquote(urlsplit(handler.path).path)
        self.requests.append((method, handler.path))
        self.authorizations.append((handler.path, handler.headers.get("Authorization")))
        if urlsplit(handler.path).path in self.redirects:
            return self._send(handler, 302, b"", {"Location": self.redirects[urlsplit(handler.path).path]})
        if self.forbidden:
            return self._send(handler, 403, b'{"error": "forbidden"}', {"X-Error-Message": "forbidden"})
        if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, b'{"error": "Invalid username or password."}')
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:
            if self.info_stall:
                self.released.wait(60)
                return None
            repo_id = "/".join(parts[2:4])
            if repo_id not in self.repos:
                return self._send(handler, 404, b'{"error": "Repository not found"}',
                                  {"X-Error-Code": "RepoNotFound"})
            if self.info is not None:
                status, body, content_type = self.info
                return self._send(handler, status, body, {"Content-Type": content_type})
            listed = {name: len(content) for name, content in self.repos[repo_id].items()}
            listed.update(self.extra_listed)
            info = {"id": repo_id, "sha": self.commit,
                    "siblings": [{"rfilename": name, "size": size} for name, size in listed.items()]}
            return self._send(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json"})
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id, filename = "/".join(parts[:2]), "/".join(parts[4:])
            content = self.repos.get(repo_id, {}).get(filename)
            if content is None:
                return self._send(handler, 404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": self.commit})
            if filename in self.status_for and self.status_times.get(filename, 1) > 0:
                if filename in self.status_times:
                    self.status_times[filename] -= 1
                return self._send(handler, self.status_for[filename], b"error", {"Retry-After": "0"})
            if method == "GET" and filename in self.failing_files:
                return self._send(handler, 500, b"boom")
            headers: dict[str, str | None] = {"X-Repo-Commit": self.commit,
                                              "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
                                              "Content-Length": str(len(content))}
            headers.update(self.file_headers.get(filename, {}))
            sent = {name: value for name, value in headers.items() if value is not None}
            if self.cdn is not None:
                linked = {"Location": self.cdn + handler.path, "X-Repo-Commit": self.commit,
                          "X-Linked-Etag": sent.get("ETag", ""), "X-Linked-Size": str(len(content))}
                return self._send(handler, 302, b"", linked)
            if method == "HEAD":
                return self._send(handler, 200, b"", sent, length=None)
            start = _range_start(handler.headers.get("Range"))
            if start is not None and 0 < start < len(content):
                sent.update({"Content-Length": str(len(content) - start),
                             "Content-Range": f"bytes {start}-{len(content) - 1}/{len(content)}"})
                return self._send_body(handler, content[start:], sent, self.bodies.get(filename, ""), status=206)
            how = self.bodies.get(filename, "")
            if how == "truncated once":
                how = "" if filename in self._truncated else "truncated"
                self._truncated.add(filename)
            return self._send_body(handler, content, sent, how)
        return self._send(handler, 404, b"")

    def _send_body(self, handler: BaseHTTPRequestHandler, content: bytes, headers: dict[str, str], how: str,
                   status: int = 200) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.flush()
        if how == "stall":
            self.released.wait(60)
        elif how == "trickle":
            for byte in content:
                if self.released.wait(self.trickle_seconds):
                    break
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
        elif how == "truncated":
            handler.wfile.write(content[: len(content) // 2])
            handler.close_connection = True
        elif how == "longer":
            handler.wfile.write(content + content)
        else:
            handler.wfile.write(content)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        handler.send_response(status)
        headers = dict(headers or {})
        if "Content-Length" not in headers:
            headers["Content-Length"] = str(len(body) if length is None else length)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if body and handler.command != "HEAD":
            handler.wfile.write(body)


def _range_start(header: str | None) -> int | None:
    if header is None or not header.startswith("bytes=") or not header.endswith("-"):
        return None
    text = header[len("bytes="):-1]
    return int(text) if text.isdigit() else None


def start_fake_hub(repos: dict[str, dict[str, bytes]], **options: object) -> tuple[FakeHub, ThreadingHTTPServer]:
    """A FakeHub serving `repos` on 127.0.0.1 (its address in `hub.url`), and its server, for the caller to shut
    down (the `serve` fixture, the fault audit and the download benchmark all start theirs here)."""
    hub = FakeHub(repos, **options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a Hub answers: a client must not rely on the close
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait for the client's ACK

        def do_GET(self):
            hub.answer(self, "GET")

        def do_HEAD(self):
            hub.answer(self, "HEAD")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a stalled answer never holds the caller's end
    server.block_on_close = False
    server.handle_error = lambda request, address: None  # a client hanging up (a cancel) is no news here
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    return hub, server


@pytest.fixture(name="serve")
def serve_fixture(monkeypatch: pytest.MonkeyPatch):
    """serve(repos) -> a FakeHub listening on 127.0.0.1, with HF_ENDPOINT pointing at it."""
    servers = []

    def start(repos: dict[str, dict[str, bytes]], **options: object) -> FakeHub:
        hub, server = start_fake_hub(repos, **options)
        servers.append((server, hub))
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        return hub

    yield start
    for server, hub in servers:
        hub.released.set()
        server.shutdown()
        server.server_close()


# --- permission bits for root ----------------------------------------------------------------------------------

_CAPABILITY_VERSION_3 = 0x20080522
_DAC_OVERRIDES = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


@contextlib.contextmanager
def permissions_enforced():
    """Within the block, permission bits count for this thread (and the threads it starts) as they do for any
    user: the tests run as root, whom they do not stop, so CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH are dropped from
    the thread's effective capabilities, and raised again after. Skips the test where that cannot be done."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "capget"):  # root elsewhere than Linux
        pytest.skip("no capabilities to drop here: permission bits cannot be made to count for root")
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    capabilities = (ctypes.c_uint32 * 6)()  # {effective, permitted, inheritable} for capabilities 0-31, 32-63
    if libc.capget(header, capabilities) != 0:
        pytest.skip("capget failed: cannot make permission bits count for root here")
    saved = list(capabilities)
    capabilities[0] &= ~_DAC_OVERRIDES
    if libc.capset(header, capabilities) != 0:
        pytest.skip("capset failed: cannot make permission bits count for root here")
    try:
        yield
    finally:
        restored = (ctypes.c_uint32 * 6)(*saved)
        libc.capset((ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0), restored)
