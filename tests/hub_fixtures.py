"""A Hugging Face cache and Hub for tests, on disk and on 127.0.0.1 only: shared by tests/bertcore/test_hub.py and
tests/explorer/test_hub_window.py.

`hub_env` gives a test a private HF home and cache (never ~/.cache) and an endpoint that refuses connections;
`cache_repo` lays a repo out as huggingface_hub does (blobs, snapshot links, refs/main); `serve` starts a FakeHub
that answers what huggingface_hub asks of a Hub. A test module imports the fixtures by their function names
(`hub_env_fixture`, `serve_fixture`); tests ask for them as `hub_env` and `serve`.
"""

from __future__ import annotations

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
    """Answers what huggingface_hub asks of a Hub: the model info API and HEAD/GET on resolve URLs."""

    repos: dict[str, dict[str, bytes]]
    commit: str = HUB_COMMIT
    token: str | None = None  # when set, requests without "Authorization: Bearer <token>" get 401
    forbidden: bool = False  # every request gets 403
    failing_files: set[str] = field(default_factory=set)  # GETs of these get 500
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""

    def answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = unquote(urlsplit(handler.path).path)
        self.requests.append((method, handler.path))
        if self.forbidden:
            return self._send(handler, 403, b'{"error": "forbidden"}', {"X-Error-Message": "forbidden"})
        if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, b'{"error": "Invalid username or password."}')
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:
            repo_id = "/".join(parts[2:4])
            if repo_id not in self.repos:
                return self._send(handler, 404, b'{"error": "Repository not found"}',
                                  {"X-Error-Code": "RepoNotFound"})
            info = {"id": repo_id, "sha": self.commit, "siblings": [
                {"rfilename": name, "size": len(content)} for name, content in self.repos[repo_id].items()]}
            return self._send(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json"})
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id, filename = "/".join(parts[:2]), "/".join(parts[4:])
            content = self.repos.get(repo_id, {}).get(filename)
            if content is None:
                return self._send(handler, 404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": self.commit})
            if method == "GET" and filename in self.failing_files:
                return self._send(handler, 500, b"boom")
            headers = {"X-Repo-Commit": self.commit, "ETag": f'"{hashlib.sha256(content).hexdigest()}"'}
            return self._send(handler, 200, content if method == "GET" else b"", headers, length=len(content))
        return self._send(handler, 404, b"")

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None,
              length: int | None = None) -> None:
        handler.send_response(status)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body) if length is None else length))
        handler.end_headers()
        if body:
            handler.wfile.write(body)


@pytest.fixture(name="serve")
def serve_fixture(monkeypatch: pytest.MonkeyPatch):
    """serve(repos) -> a FakeHub listening on 127.0.0.1, with HF_ENDPOINT pointing at it."""
    servers = []

    def start(repos: dict[str, dict[str, bytes]], **options: object) -> FakeHub:
        hub = FakeHub(repos, **options)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                hub.answer(self, "GET")

            def do_HEAD(self):
                hub.answer(self, "HEAD")

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        hub.url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        return hub

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
