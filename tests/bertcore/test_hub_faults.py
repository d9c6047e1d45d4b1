"""Faults round 3 (issue 34) in the Hub download: every name a server or a user supplies is checked before it becomes
a path, nothing is written outside the cache, what arrives is what was announced, every failure is a CheckpointError
(never a raw ValueError, JSONDecodeError or TooManyRedirects), and a cancel acts within a second whatever the server
does. The cache as it is read (refs, snapshots, permissions, the listing): test_hub_cache_faults.py.

Downloads come from tests/hub_fixtures.FakeHub on 127.0.0.1, answering as a hostile or broken endpoint would; the
cache is the test's own (HF_HOME in tmp_path). "Outside the cache" is everything else under tmp_path, including a
victims/ folder with a notes file and a site-packages folder where a planted .pth file would run at the next start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bertcore.errors import CheckpointError, DownloadCancelled
from bertcore.models.hub import resolve_model
from bertcore.models.hub_download import download_model
from tests.hub_fixtures import (
    COMMIT_A,
    COMMIT_B,
    HUB_COMMIT,
    hub_config,
    hub_env_fixture,  # noqa: F401 (a fixture: tests ask for it as `hub_env`)
    permissions_enforced,
    safetensors_bytes,
    serve_fixture,  # noqa: F401 (a fixture: tests ask for it as `serve`)
)

REPO = "org/tiny"
FILES = {"config.json": hub_config(architectures=["BertForMaskedLM"]),
         "model.safetensors": safetensors_bytes({"bert.embeddings.word_embeddings.weight": ((10, 8), "F32")}),
         "vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n",
         "tokenizer_config.json": b'{"do_lower_case": true}'}


@pytest.fixture(autouse=True)
def private_hub(hub_env: Path) -> Path:
    return hub_env


@pytest.fixture
def victims(tmp_path: Path) -> Path:
    """Files outside the cache a hostile answer would aim at."""
    folder = tmp_path / "victims"
    (folder / "site-packages").mkdir(parents=True)
    (folder / "notes.txt").write_text("the user's notes\n")
    return folder


def outside_the_cache(tmp_path: Path, cache: Path) -> dict[str, str]:
    """Everything under tmp_path but the cache: each path with its kind and content hash."""
    seen = {}
    for path in sorted(tmp_path.rglob("*")):
        if path == cache or cache in path.parents or path in cache.parents:  # the folders on the way may be made
            continue
        if path.is_symlink():
            seen[str(path)] = "link " + os.readlink(path)
        elif path.is_file():
            seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[str(path)] = "folder"
    return seen


def assert_nothing_opened(hub_env: Path, repo_id: str = REPO) -> None:
    """No ref names a snapshot of the repo, no snapshot holds a file of it: nothing of a failed download opens."""
    storage = hub_env / ("models--" + repo_id.replace("/", "--"))
    assert not (storage / "refs").exists() or not any((storage / "refs").rglob("*"))
    assert not (storage / "snapshots").exists() or not any((storage / "snapshots").rglob("*"))
    with pytest.raises(CheckpointError):
        resolve_model(repo_id)


def git_blob_sha1(content: bytes) -> str:
    """The git blob hash as git itself computes it: the independent reference for a Hub's small-file ETag."""
    return subprocess.run(["git", "hash-object", "--stdin"], input=content, capture_output=True,
                          check=True).stdout.decode().strip()


# ---- 1. names a server supplies ----------------------------------------------------------------------------------

HOSTILE_NAMES = {
    "an absolute path into site-packages": "{victims}/site-packages/planted.pth",
    "a relative path out of the cache": "../../../../victims/site-packages/planted.pth",
    "'..'": "..",
    "empty": "",
    "a name with a slash": "sub/planted",
    "not a hash": "planted",
    "a hash one digit short": "0" * 39,
    "not hex": "g" * 40,
}


@pytest.mark.parametrize("header", ["ETag", "X-Linked-Etag"])
@pytest.mark.parametrize("name", list(HOSTILE_NAMES))
def test_an_etag_that_is_no_content_hash_never_becomes_a_path(serve, hub_env: Path, tmp_path: Path, victims: Path,
                                                              header: str, name: str):
    """huggingface_hub named the blob after the ETag: an absolute path planted a .pth file Python runs at start."""
    etag = HOSTILE_NAMES[name].format(victims=victims)
    serve({REPO: FILES}, file_headers={"vocab.txt": {header: f'"{etag}"'}})
    before = outside_the_cache(tmp_path, hub_env)

    with pytest.raises(CheckpointError, match=r"named vocab\.txt of org/tiny .* \(its ETag\), where a Hugging Face "
                                              r"Hub names a file by its content's hash"):
        download_model(REPO)

    assert outside_the_cache(tmp_path, hub_env) == before
    assert not list(victims.rglob("planted*")) and not list(hub_env.rglob("planted*"))
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("commit", ["../../../../victims/commit", "{victims}/commit", COMMIT_B])
def test_a_commit_header_other_than_the_listings_is_refused(serve, hub_env: Path, tmp_path: Path, victims: Path,
                                                           commit: str):
    """X-Repo-Commit names the snapshot folder: a path there gave a raw ValueError, another hash another snapshot."""
    serve({REPO: FILES}, file_headers={"vocab.txt": {"X-Repo-Commit": commit.format(victims=victims)}})
    before = outside_the_cache(tmp_path, hub_env)

    with pytest.raises(CheckpointError, match=rf"answered for vocab\.txt of org/tiny at commit .* but its listing "
                                              rf"named commit {HUB_COMMIT}"):
        download_model(REPO)

    assert outside_the_cache(tmp_path, hub_env) == before
    assert not (hub_env / "models--org--tiny" / "snapshots" / COMMIT_B).exists()
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("listed", ["../../outside.txt", "/etc/passwd", "a/../../b", "a\\..\\..\\b", "./x", "a//b"])
def test_a_listing_naming_a_file_outside_the_repo_is_refused(serve, hub_env: Path, listed: str):
    serve({REPO: {**FILES, listed: b"x"}})
    with pytest.raises(CheckpointError, match=r"listed a file of org/tiny as .*which is not a file name a repo "
                                              r"can hold"):
        download_model(REPO)
    assert_nothing_opened(hub_env)


def test_a_listing_whose_commit_is_a_path_is_refused(serve, hub_env: Path):
    serve({REPO: FILES}, commit="../../../victims")
    with pytest.raises(CheckpointError, match=r"answered for org/tiny without a commit hash "
                                              r"\('\.\./\.\./\.\./victims'\)"):
        download_model(REPO)
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("shard", ["../../../../victims/x.safetensors", "/tmp/x.safetensors", "sub/x.safetensors"])
def test_a_weights_index_naming_a_shard_outside_the_snapshot_is_refused(serve, hub_env: Path, tmp_path: Path,
                                                                       victims: Path, shard: str):
    """shard_files' ValueError used to escape as it was."""
    index = json.dumps({"weight_map": {"a": shard}}).encode()
    repo = {name: content for name, content in FILES.items() if name != "model.safetensors"}
    repo["model.safetensors.index.json"] = index
    serve({REPO: repo})
    before = outside_the_cache(tmp_path, hub_env)
    with pytest.raises(CheckpointError, match=r"model\.safetensors\.index\.json"):
        download_model(REPO)
    assert outside_the_cache(tmp_path, hub_env) == before
    assert_nothing_opened(hub_env)


def test_a_redirect_to_a_file_url_is_refused(serve, hub_env: Path):
    serve({REPO: FILES}, redirects={f"/{REPO}/resolve/{HUB_COMMIT}/vocab.txt": "file:///etc/passwd"})
    with pytest.raises(CheckpointError, match=r"redirects to 'file:///etc/passwd', which is no http\(s\) address"):
        download_model(REPO)
    assert_nothing_opened(hub_env)


@pytest.mark.slow
def test_large_files_come_from_the_cdn_a_redirect_names_and_the_token_stays_with_the_hub(serve, hub_env: Path):
    cdn = serve({REPO: FILES})
    hub = serve({REPO: FILES}, cdn=cdn.url)

    resolved = download_model(REPO, token="hf_secret")

    assert all((resolved.folder / name).read_bytes() == content for name, content in FILES.items())
    assert {header for _, header in hub.authorizations} == {"Bearer hf_secret"}
    assert cdn.authorizations and {header for _, header in cdn.authorizations} == {None}


# ---- 2. names a user supplies: the revision ------------------------------------------------------------------------

HOSTILE_REVISIONS = ["{victims}/notes.txt", "../../../../victims/notes.txt", "..", "main/../../x", "refs/../../x",
                     "/main", "main/", "a//b", "with space", "x.lock", ".hidden", "a:b", "tab\there", "", "@"]


@pytest.mark.parametrize("revision", HOSTILE_REVISIONS)
def test_a_revision_that_is_no_ref_name_is_refused_before_any_request(serve, hub_env: Path, tmp_path: Path,
                                                                      victims: Path, revision: str):
    """revision='/home/u/notes.txt' overwrote that file with the commit hash (refs/<revision> joined as it came)."""
    hub = serve({REPO: FILES})
    before = outside_the_cache(tmp_path, hub_env)

    with pytest.raises(CheckpointError, match=r"is not a revision: .*give a branch"):
        download_model(REPO, revision=revision.format(victims=victims))

    assert hub.requests == []
    assert outside_the_cache(tmp_path, hub_env) == before
    assert (victims / "notes.txt").read_text() == "the user's notes\n"


@pytest.mark.parametrize("revision, ref", [("v1.0", "refs/v1.0"), ("refs/pr/1", "refs/refs/pr/1"),
                                           ("feature/x", "refs/feature/x")])
def test_a_branch_a_tag_or_a_pull_request_is_downloaded_under_its_own_ref(serve, hub_env: Path, revision: str,
                                                                          ref: str):
    serve({REPO: FILES})
    resolved = download_model(REPO, revision=revision)
    storage = hub_env / "models--org--tiny"
    assert (storage / ref).read_text() == HUB_COMMIT and not (storage / "refs" / "main").exists()
    assert resolve_model(REPO, revision=revision) == resolved


def test_a_commit_hash_the_server_answers_with_another_commit_is_refused(serve, hub_env: Path):
    serve({REPO: FILES})
    with pytest.raises(CheckpointError, match=f"answered for commit {COMMIT_A} of org/tiny with commit {HUB_COMMIT}"):
        download_model(REPO, revision=COMMIT_A)
    assert_nothing_opened(hub_env)


# ---- 3. what arrives is what was announced -------------------------------------------------------------------------

def test_a_body_that_does_not_have_its_etags_hash_is_not_kept(serve, hub_env: Path):
    """A body substituted on the way (or by a mirror) under the right size was kept as the model's weights."""
    other = hashlib.sha256(b"other bytes").hexdigest()
    serve({REPO: FILES}, file_headers={"model.safetensors": {"ETag": f'"{other}"'}})
    with pytest.raises(CheckpointError, match=r"bytes .* sent for model\.safetensors of org/tiny do not have the "
                                              rf"hash it announced \({other}\)"):
        download_model(REPO)
    assert not (hub_env / "models--org--tiny" / "blobs" / other).exists()
    assert not list(hub_env.rglob("*.incomplete"))
    assert_nothing_opened(hub_env)


@pytest.mark.slow
def test_a_small_file_is_checked_against_its_git_blob_hash(serve, hub_env: Path):
    """A Hub's ETag for a file kept in git (not LFS) is the file's git blob SHA-1 (git hash-object)."""
    config_blob = git_blob_sha1(FILES["config.json"])
    hub = serve({REPO: FILES}, file_headers={"config.json": {"ETag": f'W/"{config_blob}"'}})

    resolved = download_model(REPO)

    assert (resolved.folder / "config.json").resolve() == hub_env / "models--org--tiny" / "blobs" / config_blob
    hub.file_headers["config.json"] = {"ETag": f'"{git_blob_sha1(b"another config")}"'}
    shutil.rmtree(hub_env / "models--org--tiny")
    with pytest.raises(CheckpointError, match="do not have the hash it announced"):
        download_model(REPO)


def test_a_size_that_disagrees_with_the_listing_is_refused(serve, hub_env: Path):
    size = len(FILES["model.safetensors"])
    serve({REPO: FILES}, file_headers={"model.safetensors": {"Content-Length": str(size + 10)}})
    with pytest.raises(CheckpointError, match=rf"lists model\.safetensors of org/tiny as {size:,} bytes but answers "
                                              rf"{size + 10:,} bytes"):
        download_model(REPO)
    assert_nothing_opened(hub_env)


def test_a_connection_that_drops_once_is_resumed_where_it_stopped(serve, hub_env: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    from bertcore.models import hub_download

    monkeypatch.setattr(hub_download, "_RETRY_WAIT_SECONDS", 0.01)
    hub = serve({REPO: FILES}, bodies={"model.safetensors": "truncated once"})

    resolved = download_model(REPO)

    assert (resolved.folder / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    weights = [path for method, path in hub.requests if method == "GET" and path.endswith("model.safetensors")]
    assert len(weights) == 2  # the first cut at half, the second from there (a Range request)


def test_a_body_cut_every_time_is_a_clear_error_and_nothing_is_kept(serve, hub_env: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    from bertcore.models import hub_download

    monkeypatch.setattr(hub_download, "_RETRY_WAIT_SECONDS", 0.01)
    serve({REPO: FILES}, bodies={"model.safetensors": "truncated"})
    with pytest.raises(CheckpointError, match=r"the download of model\.safetensors of org/tiny from .* broke off "
                                              r"\d+ times .*check the network connection"):
        download_model(REPO)
    assert not list(hub_env.rglob("*.incomplete"))
    assert_nothing_opened(hub_env)


# ---- 4. every failure a CheckpointError ----------------------------------------------------------------------------

@pytest.mark.parametrize("body, kind", [
    (b"<!DOCTYPE html><html><body>Sign in to your Wi-Fi</body></html>", "an HTML page"),
    (b"\xff\xfe not text", r"b'\xff\xfe not text'"),
    (b"[1, 2, 3]", None),
    (b'{"sha": "' + HUB_COMMIT.encode() + b'", "siblings": "all of them"}', None),
    (b'{"sha": "' + HUB_COMMIT.encode() + b'", "siblings": [{"rfilename": "config.json", "size": "big"}]}', None),
    (b'{"sha": "' + HUB_COMMIT.encode() + b'", "siblings": [{"size": 3}]}', None),
])
def test_a_listing_that_is_no_model_info_is_a_clear_error(serve, hub_env: Path, body: bytes, kind: str | None):
    """An HTML page (a captive portal, a proxy's login) gave a raw JSONDecodeError."""
    serve({REPO: FILES}, info=(200, body, "text/html"))
    with pytest.raises(CheckpointError, match=r"is HF_ENDPOINT a Hugging Face Hub \(or a mirror of one\)\?") as caught:
        download_model(REPO)
    if kind is not None:
        assert f"answered the listing of org/tiny with {kind}, not the JSON" in str(caught.value)
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("where", ["/api/models/org/tiny", f"/{REPO}/resolve/{HUB_COMMIT}/model.safetensors"])
def test_a_redirect_loop_is_a_clear_error(serve, hub_env: Path, where: str):
    """httpx2's TooManyRedirects used to escape as it was."""
    serve({REPO: FILES}, redirects={where: where})
    with pytest.raises(CheckpointError, match=r"redirected more than 10 times \(a redirect loop\); check HF_ENDPOINT"):
        download_model(REPO)
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("status, message", [
    (404, r"lists vocab\.txt in org/tiny but answers 404 for it"),
    (401, r"did not let us read org/tiny without a token \(401\)"),
    (403, r"forbids reading org/tiny with this token \(403\)"),
    (500, r"answered 500 while downloading org/tiny; try again later"),
])
def test_an_error_status_for_one_file_is_named(serve, hub_env: Path, status: int, message: str):
    serve({REPO: FILES}, status_for={"vocab.txt": status})
    with pytest.raises(CheckpointError, match=message):
        download_model(REPO)
    assert_nothing_opened(hub_env)


def test_a_cache_that_is_a_file_is_named_by_every_entry_point(serve, hub_env: Path):
    from bertcore.models.hub_listing import scan_cache

    hub_env.parent.mkdir(parents=True, exist_ok=True)
    hub_env.write_text("not a folder")
    serve({REPO: FILES})
    with pytest.raises(CheckpointError, match=rf"the Hugging Face cache at {hub_env} is not a folder"):
        download_model(REPO)
    with pytest.raises(CheckpointError, match=rf"the Hugging Face cache at {hub_env} is a regular file, not a folder"):
        resolve_model(REPO)
    assert "is a file, not a folder" in scan_cache().problem
    assert hub_env.read_text() == "not a folder"


def test_a_read_only_cache_is_a_clear_error_on_download(serve, hub_env: Path):
    serve({REPO: FILES})
    hub_env.mkdir(parents=True)
    hub_env.chmod(0o555)
    try:
        with permissions_enforced(), pytest.raises(CheckpointError, match=r"cannot write org/tiny into the Hugging "
                                                                          r"Face cache \(Permission denied"):
            download_model(REPO)
    finally:
        hub_env.chmod(0o755)
    assert list(hub_env.iterdir()) == []


def test_a_cache_link_leading_out_of_the_cache_is_never_written_through(serve, hub_env: Path, tmp_path: Path,
                                                                       victims: Path):
    """blobs/ replaced by a link to another folder: the download refuses to write there."""
    storage = hub_env / "models--org--tiny"
    storage.mkdir(parents=True)
    (storage / "blobs").symlink_to(victims)
    serve({REPO: FILES})
    before = outside_the_cache(tmp_path, hub_env)
    with pytest.raises(CheckpointError, match=rf"{storage / 'blobs'} in the Hugging Face cache leads to {victims}, "
                                              "outside the cache; nothing was written there"):
        download_model(REPO)
    assert outside_the_cache(tmp_path, hub_env) == before


# ---- 5. cancel, whatever the server does -------------------------------------------------------------------------

class CancelWhen:
    """cancel() for download_model: True from the first time `condition()` holds; `at` is when that was."""

    def __init__(self, condition: Callable[[], bool]):
        self.condition = condition
        self.at: float | None = None

    def __call__(self) -> bool:
        if self.at is None and self.condition():
            self.at = time.monotonic()
        return self.at is not None


def within(seconds: float, work: Callable[[], object]) -> BaseException | object:
    """Run `work` in a thread; what it returned or raised, or a test failure when it took longer than `seconds`
    (the thread is left to end by itself when the server is released)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the test's thread to assert on
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"no answer within {seconds} s")
    return outcome[0]


def requested(hub, name: str, delay: float) -> Callable[[], bool]:
    """True once `delay` seconds have passed since the hub was first asked for `name`'s bytes."""
    asked: list[float] = []

    def condition() -> bool:
        if not asked and any(method == "GET" and path.endswith(name) for method, path in list(hub.requests)):
            asked.append(time.monotonic())
        return bool(asked) and time.monotonic() - asked[0] >= delay

    return condition


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stall", "trickle"])
def test_cancel_acts_within_a_second_while_the_server_stalls_or_trickles(serve, hub_env: Path, how: str):
    """Cancel was polled between chunks only: a stall took 67 s and a timeout error, a trickle 55 s."""
    hub = serve({REPO: FILES}, bodies={"model.safetensors": how}, trickle_seconds=0.5)
    cancel = CancelWhen(requested(hub, "model.safetensors", delay=1.2))  # a few bytes of a trickle have come

    outcome = within(15, lambda: download_model(REPO, cancel=cancel))

    assert isinstance(outcome, DownloadCancelled), outcome
    assert time.monotonic() - cancel.at < 1.0
    storage = hub_env / "models--org--tiny"
    assert not storage.exists() or not list(storage.rglob("*"))
    assert not list(hub_env.rglob("*.incomplete"))


@pytest.mark.slow
def test_cancel_acts_within_a_second_while_the_listing_never_answers(serve, hub_env: Path):
    hub = serve({REPO: FILES}, info_stall=True)
    cancel = CancelWhen(lambda: bool(hub.requests))

    outcome = within(15, lambda: download_model(REPO, cancel=cancel))

    assert isinstance(outcome, DownloadCancelled), outcome
    assert time.monotonic() - cancel.at < 1.0
    assert not (hub_env / "models--org--tiny").exists()


@pytest.mark.slow
def test_a_stall_without_cancel_ends_in_a_clear_error(serve, hub_env: Path, monkeypatch: pytest.MonkeyPatch):
    from bertcore.models import hub_download

    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.3")
    monkeypatch.setattr(hub_download, "_RETRY_WAIT_SECONDS", 0.01)
    serve({REPO: FILES}, bodies={"model.safetensors": "stall"})

    outcome = within(15, lambda: download_model(REPO))

    assert isinstance(outcome, CheckpointError), outcome
    assert str(outcome).startswith("http://127.0.0.1:")
    assert "stopped sending model.safetensors of org/tiny: no data for 0.3 s, 3 times" in str(outcome)
    assert "HF_HUB_DOWNLOAD_TIMEOUT" in str(outcome)
    assert not list(hub_env.rglob("*.incomplete"))
    assert_nothing_opened(hub_env)


@pytest.mark.parametrize("value", ["soon", "-1", "0"])
def test_a_download_timeout_that_is_no_number_of_seconds_is_named(serve, monkeypatch: pytest.MonkeyPatch,
                                                                  value: str):
    serve({REPO: FILES})
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", value)
    with pytest.raises(CheckpointError, match=f"HF_HUB_DOWNLOAD_TIMEOUT is '{value}'; set it to a number of seconds"):
        download_model(REPO)


@pytest.mark.parametrize("endpoint", ["ftp://mirror.example", "huggingface.co", "http://"])
def test_an_endpoint_that_is_no_http_address_is_named(monkeypatch: pytest.MonkeyPatch, endpoint: str):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(CheckpointError, match=r"HF_ENDPOINT is .*, not an http:// or https:// address"):
        download_model(REPO)


def test_taking_a_download_back_never_removes_anything_through_a_link_out_of_the_cache(hub_env: Path,
                                                                                      victims: Path):
    """What a failed or cancelled download added is removed by name: never in a folder a link leads elsewhere."""
    from bertcore.models.hub_download import _CacheState

    storage = hub_env / "models--org--tiny"
    storage.mkdir(parents=True)
    (storage / "blobs").symlink_to(victims)
    (storage / "snapshots").mkdir()
    (storage / "snapshots" / HUB_COMMIT).symlink_to(victims)
    before = _CacheState.of(storage, storage / "snapshots" / HUB_COMMIT, hub_env)
    (victims / "written-since").write_text("another program's file")

    before.restore(remove_new_blobs=True)

    assert (victims / "written-since").read_text() == "another program's file"
    assert (victims / "notes.txt").exists()


# ---- 6. what huggingface_hub's transfer did, kept: busy answers asked again, proxies ------------------------------

@pytest.mark.parametrize("status", [429, 503, 408])
def test_a_busy_answer_is_asked_again_after_its_retry_after(serve, hub_env: Path, status: int):
    hub = serve({REPO: FILES}, status_for={"model.safetensors": status}, status_times={"model.safetensors": 2})
    resolved = download_model(REPO)
    assert (resolved.folder / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert len([path for method, path in hub.requests if path.endswith("/model.safetensors")]) == 4  # 2 busy


def test_a_server_busy_every_time_is_a_clear_error(serve, hub_env: Path):
    hub = serve({REPO: FILES}, status_for={"model.safetensors": 429})
    with pytest.raises(CheckpointError, match=r"answered 429 while downloading org/tiny; try again later"):
        download_model(REPO)
    assert len([path for method, path in hub.requests if path.endswith("/model.safetensors")]) == 4  # 1 + 3 retries
    assert_nothing_opened(hub_env)


def test_downloads_go_through_the_proxy_the_environment_names(serve, hub_env: Path, monkeypatch: pytest.MonkeyPatch):
    """httpx, under huggingface_hub, honoured http_proxy; the transfer that replaced it must too."""
    import http.client
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    hub = serve({REPO: FILES})
    forwarded: list[tuple[str, str | None]] = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self, method: str) -> None:
            target = urlsplit(self.path)  # a proxy is asked for the whole address
            forwarded.append((self.path, self.headers.get("Proxy-Authorization")))
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            headers = {name: value for name, value in self.headers.items() if name.lower() != "proxy-authorization"}
            upstream.request(method, target.path + (f"?{target.query}" if target.query else ""), headers=headers)
            answer = upstream.getresponse()
            body = answer.read()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(body)
            upstream.close()

        def do_GET(self):
            self.forward("GET")

        def do_HEAD(self):
            self.forward("HEAD")

        def log_message(self, *args):
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    proxy.daemon_threads = True
    threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        monkeypatch.setenv("http_proxy", f"http://user:p%40ss@127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        resolved = download_model(REPO)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert all((resolved.folder / name).read_bytes() == content for name, content in FILES.items())
    assert forwarded and all(path.startswith(hub.url + "/") for path, _ in forwarded)
    assert {authorization for _, authorization in forwarded} == {"Basic dXNlcjpwQHNz"}  # user:p@ss
