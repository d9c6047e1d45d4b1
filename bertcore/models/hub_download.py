"""Downloading a model from the Hugging Face Hub into the local cache (`download_model`), for the cache look-ups
of bertcore.models.hub to find offline afterwards.

    resolved = download_model("prajjwal1/bert-tiny", progress=print, cancel=stop_event.is_set)

What is fetched: config.json, the weights (model.safetensors or its shards; pytorch_model.bin only when the repo has
no safetensors) and whichever tokenizer files the repo has, into the cache huggingface_hub and transformers share,
laid out as they lay it out: blobs/<etag> (the file, named by its content's hash), snapshots/<commit>/<file> (a
relative link to its blob), refs/<revision> (the commit, written last: a ref only ever names a whole snapshot), and
huggingface_hub's lock per blob (.locks/models--org--name/<etag>.lock), so an `hf download` of the same file at the
same time waits for us and we for it.

Why the transfer is ours and not hf_hub_download's (issue 34):
- huggingface_hub names the blob after the server's ETag, the snapshot after its X-Repo-Commit header and the ref
  after the revision, joined to the cache's path as they come. Whoever answers at HF_ENDPOINT (a mirror, or a
  plain-http man in the middle) could write anywhere: `ETag: "<venv>/site-packages/x.pth"` answered for vocab.txt
  planted a line the next Python start ran, and revision="/home/u/notes.txt" overwrote that file with a commit
  hash. Here every name is checked before it becomes a path: the revision as a ref name (hub.check_revision_name),
  the commit as 40 hex digits, the ETag as a content hash (40 or 64 hex digits), the repo's listing as relative
  names without '..', shard names as plain file names. Every folder written in is checked to be inside the cache
  (links resolved), and files are created with O_EXCL | O_NOFOLLOW, never through a link left in their place.
- What arrives is checked against what was announced: its size, and its hash (a Hub's ETag is the file's SHA-256
  for large files, its git blob SHA-1 for small ones), so a cut, padded or substituted body is never kept.
- A read blocked on a stalled or trickling server could not be interrupted: cancel waited for the timeout (67 s).
  Here the transfer runs in a thread of its own while the caller's thread polls cancel() every 50 ms; a cancel
  forbids the transfer every further write (each write checks, under a lock, that the download still counts),
  shuts its sockets down, takes back what it added and returns at once, whatever the server does.
huggingface_hub still builds the request headers (the token: HF_TOKEN or the saved login; the user agent). The HTTP
client is the standard library's (http.client, through the environment's proxy, with its certificates), whose
sockets a cancel can reach, and which follows no redirect we did not look at.

HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_DOWNLOAD_TIMEOUT are read at call time. Every failure a user can
meet is a CheckpointError saying what to do (HubAnswerError when the endpoint answered what a Hub never sends); a
cancelled download is DownloadCancelled, and leaves nothing of that download in the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import queue
import re
import shutil
import socket
import ssl
import stat
import threading
import time
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlsplit

from bertcore.errors import CheckpointError, DownloadCancelled, HubAnswerError
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE
from bertcore.models.hub import (
    COMMIT_HASH,
    DEFAULT_ENDPOINT,
    PYTORCH_INDEX_FILE,
    SAFETENSORS_INDEX_FILE,
    TOKENIZER_FILES,
    ResolvedModel,
    check_revision_name,
    default_cache_dir,
    huggingface_hub_settings,
    looks_like_repo_id,
    repo_folder,
    shard_files,
)

ProgressCallback = Callable[[int, int, str], None]  # (done_bytes, total_bytes, filename)

BLOB_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # what a Hub's ETag is: a git blob SHA-1, or a SHA-256
_READ_BYTES = 256 * 1024  # the most one read asks of the socket
_PROGRESS_BYTES = 1 << 20  # progress is reported every MiB received …
_PROGRESS_SECONDS = 0.2  # … or every 0.2 s when fewer arrive
_POLL_SECONDS = 0.05  # how often the caller's thread asks cancel()
_STOP_JOIN_SECONDS = 0.25  # how long a cancel waits for the transfer's thread to end before returning anyway
_DEFAULT_TIMEOUT_SECONDS = 10.0  # no byte for this long is a stall (HF_HUB_DOWNLOAD_TIMEOUT, as huggingface_hub)
_ATTEMPTS = 3  # tries in a row without a byte gained, per file, when the connection drops or stalls
_MOST_ATTEMPTS = 20  # tries per file in all (a server that sends a byte and hangs up, again and again)
_RETRY_WAIT_SECONDS = 1.0
_MAX_REDIRECTS = 10
_BUSY = (408, 429, 503)  # "too many requests" and the like: asked again, as huggingface_hub asks again
_BUSY_RETRIES = 3
_BUSY_WAIT_LIMIT_SECONDS = 30.0  # the most a Retry-After is honoured
_LISTING_LIMIT = 64 * 1024 * 1024  # the repo listing is kilobytes for a model repo; more is not a listing
_DISCARDED_BODY_LIMIT = 64 * 1024  # what is read of a redirect's or an error's body, to keep the connection
_REDIRECTS = (301, 302, 303, 307, 308)


def download_model(repo_id: str, *, revision: str | None = None, cache_dir: str | Path | None = None,
                   token: str | None = None, progress: ProgressCallback | None = None,
                   cancel: Callable[[], bool] | None = None) -> ResolvedModel:
    """Download what opening `repo_id` needs into the Hugging Face cache and return its snapshot folder:
    config.json, the weights (model.safetensors or its shards; pytorch_model.bin only when the repo has no
    safetensors) and whichever TOKENIZER_FILES the repo has. Files already cached are not fetched again.

    HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_DOWNLOAD_TIMEOUT (seconds without a byte before a read counts
    as stalled; 10) are read at call time. progress(done_bytes, total_bytes, filename) and cancel() are called in
    the calling thread: progress as bytes arrive (total_bytes grows once for a sharded checkpoint, when its index
    names the shards), cancel every 50 ms and at each report. When cancel() returns True the download stops within
    a second whatever the server does, with DownloadCancelled, and what it had added is removed: no file of it
    stays in the cache, no ref points to it. Any other failure removes the snapshot's new links too (complete blobs
    stay, so trying again fetches only what is missing) and is a CheckpointError saying what to do.
    """
    if not looks_like_repo_id(repo_id):
        raise CheckpointError(f"{repo_id!r} is not a Hugging Face repo id; write it as on the model's Hub page, "
                              "e.g. google-bert/bert-base-uncased")
    if revision is not None:
        check_revision_name(revision)
    endpoint = _endpoint()
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        raise CheckpointError(f"cannot download {repo_id}: offline mode is on (HF_HUB_OFFLINE or "
                              f"TRANSFORMERS_OFFLINE is set); unset it and try again, or copy the model's folder "
                              "from a machine that has it and open the folder")
    token = token or os.environ.get("HF_TOKEN") or None
    if token is not None and not token.strip().isprintable():
        raise CheckpointError("the Hugging Face token (HF_TOKEN) holds a line break or another control character; "
                              "set it to the token alone")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    transfer = _Transfer(repo_id, progress, cancel)
    transfer.poll()
    timeout = _timeout_seconds()
    download = _Download(repo_id, revision, cache, endpoint, _request_headers(token), timeout)
    commit = _run(download, transfer)
    return ResolvedModel(folder=download.snapshot, repo_id=repo_id, revision=commit, display_name=repo_id)


def _run(download: _Download, transfer: _Transfer) -> str:
    """Run `download` in a thread of its own; report its progress and poll cancel here, in the caller's thread,
    which never waits on the network and so can always stop it."""
    worker = threading.Thread(target=download.run, name=f"hub download {download.repo_id}", daemon=True)
    worker.start()
    try:
        while True:
            transfer.poll()
            try:
                event = download.events.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue
            if event[0] == "done":
                break
            if event[0] == "failed":
                raise event[1]
            transfer.apply(event)
        transfer.poll()  # a cancel that came with the last report still counts: nothing is kept
        download.write_ref()
        return download.commit
    except DownloadCancelled:
        download.stop()
        download.take_back(remove_new_blobs=True)
        worker.join(_STOP_JOIN_SECONDS)
        raise
    except BaseException:  # a failure, a progress callback that raised, Ctrl-C
        download.stop()
        download.take_back(remove_new_blobs=False)
        worker.join(_STOP_JOIN_SECONDS)
        raise


def _files_to_fetch(repo_id: str, sizes: Mapping[str, int | None]) -> tuple[list[str], str | None]:
    """The files to fetch before any shard (config, weights or their index, tokenizer files), and the weights
    index whose shards follow (None when the weights are one file)."""
    if CONFIG_FILE not in sizes:
        raise CheckpointError(f"{repo_id} has no {CONFIG_FILE}, so it is not a transformers checkpoint; choose "
                              "another repo (its files: " + (", ".join(sorted(sizes)[:8]) or "none") + ")")
    for weights in (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, PYTORCH_FILE, PYTORCH_INDEX_FILE):
        if weights in sizes:
            break
    else:
        raise CheckpointError(f"{repo_id} has no weights in PyTorch form ({SAFETENSORS_FILE}, "
                              f"{SAFETENSORS_INDEX_FILE} or {PYTORCH_FILE}); it may hold TensorFlow, Flax or ONNX "
                              "weights only, which this program does not read")
    index = weights if weights in (SAFETENSORS_INDEX_FILE, PYTORCH_INDEX_FILE) else None
    return [CONFIG_FILE, weights, *(name for name in TOKENIZER_FILES if name in sizes)], index


# ---- the transfer, in its own thread ------------------------------------------------------------------------------

class _Stopped(Exception):
    """Raised in the transfer's thread once the caller has stopped it: it ends without touching the cache again."""


class _Unreachable(Exception):
    """A request that got no answer: refused, unresolvable, a TLS failure, or no headers within the timeout."""

    def __init__(self, reason: str, *, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class _BodyBroken(Exception):
    """A body that stopped coming: no byte within the timeout, or the connection dropped."""

    def __init__(self, reason: str, *, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class _Status(Exception):
    """A request answered with an error status; the Hub says more in X-Error-Code / X-Error-Message."""

    def __init__(self, status: int, error_code: str | None, error_message: str | None, url: str):
        super().__init__(f"{status} for {url}")
        self.status = status
        self.error_code = error_code
        self.error_message = error_message
        self.url = url


@dataclass(frozen=True)
class _FileAnswer:
    """What the Hub says of one file before it is fetched (checked: nothing here can lead out of the cache)."""

    etag: str  # the blob's name: the content's hash
    size: int
    location: str  # where its bytes come from (the resolve URL, or the storage it redirects to)


class _Download:
    """One download, run in its own thread by `run`. Every write it makes goes through `_writing()`, which
    refuses once the caller has stopped it (`stop`, under the same lock), so nothing it does after a cancel or a
    failure reaches the cache, however long the network keeps it blocked."""

    def __init__(self, repo_id: str, revision: str | None, cache: Path, endpoint: str, headers: dict[str, str],
                 timeout: float):
        self.repo_id = repo_id
        self.revision = revision
        self.cache = cache
        self.endpoint = endpoint
        self.timeout = timeout
        self.events: queue.Queue = queue.Queue(maxsize=8)  # progress, then "done" or "failed": read by the caller
        self.storage = repo_folder(repo_id, cache)
        self.commit = ""
        self.snapshot = self.storage / "snapshots"  # the commit's folder once the listing named it
        self._before: _CacheState | None = None
        self._temporaries: set[Path] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._http = _Http(endpoint, headers, timeout, self._check_stopped, self._pause)

    # ---- the caller's side ----
    def stop(self) -> None:
        """No write after this returns; blocked reads return at once (their sockets are shut down)."""
        with self._lock:
            self._stopped.set()
        self._http.abort()

    def take_back(self, remove_new_blobs: bool) -> None:
        """Remove what the download added (after `stop`): its partial files, and its links in the snapshot; with
        `remove_new_blobs`, the complete blobs it added too (a cancel keeps nothing)."""
        for temporary in list(self._temporaries):
            _remove(temporary)
        if self._before is not None:
            self._before.restore(remove_new_blobs=remove_new_blobs)

    def write_ref(self) -> None:
        """refs/<revision> (refs/main without one) names the commit: written last, once the snapshot is whole.
        A commit hash asked for by name needs no ref."""
        if self.revision is not None and COMMIT_HASH.fullmatch(self.revision):
            return
        ref = self.storage / "refs" / (self.revision or "main")
        try:
            self._make_folder(ref.parent)
            with self._writing():
                _write_new_file(ref, self.commit.encode("ascii"))
        except OSError as error:
            raise self._cache_error(error) from None

    # ---- the transfer's thread ----
    def run(self) -> None:
        try:
            self._fetch_all()
        except _Stopped:
            return  # the caller has gone on: nothing more to say
        except BaseException as error:  # handed to the caller's thread, which raises it
            with contextlib.suppress(_Stopped):
                self._post(("failed", self._as_checkpoint_error(error)))
        else:
            with contextlib.suppress(_Stopped):
                self._post(("done",))
        finally:
            self._http.close()

    def _fetch_all(self) -> None:
        listing = self._http.get_bytes(self._listing_url(), limit=_LISTING_LIMIT, what="listing")
        self.commit, sizes = _parse_listing(listing, self.endpoint, self.repo_id, self.revision)
        self.snapshot = self.storage / "snapshots" / self.commit
        first, weights_index = _files_to_fetch(self.repo_id, sizes)
        with self._writing():
            self._before = _CacheState.of(self.storage, self.snapshot, self.cache)  # before anything is written
        self._post(("expect", sum(sizes.get(name) or 0 for name in first)))
        for name in first:
            self._fetch(name, sizes.get(name))
        if weights_index is not None:
            shards = self._shards(weights_index, sizes)
            self._post(("expect", sum(sizes.get(shard) or 0 for shard in shards)))
            for shard in shards:
                self._fetch(shard, sizes.get(shard))

    def _listing_url(self) -> str:
        revision = "" if self.revision is None else f"/revision/{quote(self.revision, safe='')}"
        return f"{self.endpoint}/api/models/{self.repo_id}{revision}?blobs=true"

    def _shards(self, weights_index: str, sizes: Mapping[str, int | None]) -> list[str]:
        index = self.snapshot / weights_index
        try:
            shards = [shard.name for shard in shard_files(index)]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CheckpointError(f"{self.repo_id}'s {weights_index} cannot be used ({error}); the checkpoint on "
                                  "the Hub is damaged, or HF_ENDPOINT is not a faithful mirror") from None
        unusable = [shard for shard in shards if not _plain_file_name(shard)]
        if unusable:
            raise HubAnswerError(f"{self.repo_id}'s {weights_index} names {_shown(unusable[0])} as a shard, which is "
                                 "not a file name; nothing of it was fetched")
        unlisted = [shard for shard in shards if shard not in sizes]
        if unlisted:
            raise CheckpointError(f"{self.repo_id}'s {weights_index} names {', '.join(unlisted)}, which the repo "
                                  "does not have; the checkpoint on the Hub is incomplete")
        return shards

    def _fetch(self, name: str, listed_size: int | None) -> None:
        self._post(("start", name))
        pointer = self.snapshot / name
        cached = self._cached_size(pointer)
        if cached is not None:
            self._post(("finish", cached, listed_size))
            return
        answer = self._ask(name, listed_size)
        blob = self.storage / "blobs" / answer.etag
        self._make_folder(blob.parent)
        with self._blob_lock(answer.etag):
            if not _is_complete_blob(blob, answer.size):
                self._receive(name, answer, blob)
            self._link(pointer, blob)
        self._post(("finish", answer.size, listed_size))

    def _cached_size(self, pointer: Path) -> int | None:
        """The size of the file the snapshot already holds at `pointer` (a link into this repo's blobs, or a copy
        where links are not allowed); None when it must be fetched."""
        try:
            if os.path.islink(pointer):
                blob = Path(os.path.realpath(pointer))
                if blob.parent != Path(os.path.realpath(self.storage / "blobs")):
                    return None  # not a link huggingface_hub makes: replaced
            status = os.stat(pointer)
        except OSError:
            return None
        return status.st_size if _is_regular(status) else None

    def _ask(self, name: str, listed_size: int | None) -> _FileAnswer:
        """HEAD the file: its blob name (ETag), size and location, each checked before it is used."""
        url = f"{self.endpoint}/{self.repo_id}/resolve/{self.commit}/{quote(name)}"
        headers, location = self._http.head(url)
        what = f"{name} of {self.repo_id}"
        commit = headers.get("x-repo-commit")
        if commit is not None and commit.strip() != self.commit:
            raise HubAnswerError(f"{self.endpoint} answered for {what} at commit {_shown(commit)}, but its listing "
                                 f"named commit {self.commit}; nothing of it was kept. Is HF_ENDPOINT a Hugging Face "
                                 "Hub, or a faithful mirror of one? Try again later")
        raw_etag = headers.get("x-linked-etag") or headers.get("etag")
        if raw_etag is None:
            raise HubAnswerError(f"{self.endpoint} answered for {what} without an ETag, which a Hugging Face Hub "
                                 "always sends (the file's hash); check HF_ENDPOINT, proxy and firewall settings")
        etag = raw_etag.strip().removeprefix("W/").strip('"').lower()
        if not BLOB_NAME.fullmatch(etag):
            raise HubAnswerError(f"{self.endpoint} named {what} {_shown(raw_etag)} (its ETag), where a Hugging Face "
                                 "Hub names a file by its content's hash (40 or 64 hex digits); it was not "
                                 "downloaded, and nothing was written under that name. Is HF_ENDPOINT a Hub, or a "
                                 "faithful mirror of one?")
        size = _size_header(headers.get("x-linked-size") or headers.get("content-length"))
        if size is None:
            raise HubAnswerError(f"{self.endpoint} answered for {what} without a usable size ("
                                 f"{_shown(headers.get('x-linked-size') or headers.get('content-length') or '')}); "
                                 "check HF_ENDPOINT, proxy and firewall settings")
        if listed_size is not None and size != listed_size:
            raise HubAnswerError(f"{self.endpoint} lists {what} as {listed_size:,} bytes but answers {size:,} bytes "
                                 "for it; nothing of it was kept: the repo may be changing, try again later")
        return _FileAnswer(etag, size, location)

    def _receive(self, name: str, answer: _FileAnswer, blob: Path) -> None:
        """Fetch the file's bytes into blobs/<etag>.incomplete, resuming where a dropped connection stopped,
        check their size and hash, then rename it into place."""
        try:
            free = shutil.disk_usage(blob.parent).free
        except OSError:
            free = None
        if free is not None and answer.size > free:
            raise CheckpointError(f"{name} of {self.repo_id} is {answer.size / 1e6:,.1f} MB but the disk of the "
                                  f"Hugging Face cache ({self.cache}) has {free / 1e6:,.1f} MB free; free space, or "
                                  "choose another cache with HF_HUB_CACHE")
        temporary = blob.with_name(blob.name + ".incomplete")
        with self._writing():
            _remove(temporary)  # a link left in its place is removed, never followed
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _CLOSE_ON_EXEC,
                                 0o666)
            self._temporaries.add(temporary)
        try:
            digest = self._stream(name, answer, descriptor)
        finally:
            os.close(descriptor)
        if digest != answer.etag:
            raise HubAnswerError(f"the {answer.size:,} bytes {self.endpoint} sent for {name} of {self.repo_id} do not "
                                 f"have the hash it announced ({answer.etag}); they were damaged on the way, or "
                                 "HF_ENDPOINT is not a faithful mirror. Nothing of them was kept; try again")
        with self._writing():
            os.replace(temporary, blob)
            self._temporaries.discard(temporary)

    def _stream(self, name: str, answer: _FileAnswer, descriptor: int) -> str:
        """Write the file's bytes to `descriptor`; the hash of what was written. A dropped or stalled connection is
        tried again from where it stopped (HTTP Range), _ATTEMPTS times in a row without a byte gained."""
        received, hasher = 0, _content_hasher(answer)
        progress = _Coalesced(self._post)
        attempts = failures_in_a_row = 0
        while True:
            gained_from = received
            attempts += 1
            try:
                with self._http.get(answer.location, start=received) as (response, restarted):
                    if restarted and received:
                        with self._writing():
                            os.ftruncate(descriptor, 0)
                            os.lseek(descriptor, 0, os.SEEK_SET)
                        progress.add(-received)
                        received, hasher = 0, _content_hasher(answer)
                    announced = response.length
                    if announced is not None and received + announced != answer.size:
                        raise HubAnswerError(f"{self.endpoint} sends {name} of {self.repo_id} as "
                                             f"{received + announced:,} bytes but announced {answer.size:,}; "
                                             "nothing of it was kept: try again later")
                    for piece in self._http.pieces(response):
                        if received + len(piece) > answer.size:
                            raise HubAnswerError(f"{self.endpoint} sent more than the {answer.size:,} bytes it "
                                                 f"announced for {name} of {self.repo_id}; nothing of it was kept")
                        with self._writing():
                            _write_all(descriptor, piece)
                        hasher.update(piece)
                        received += len(piece)
                        progress.add(len(piece))
                if received == answer.size:
                    progress.flush()
                    return hasher.hexdigest()
                failure = _BodyBroken("the connection closed before the whole file had come")
            except (_BodyBroken, _Unreachable) as broken:
                failure = broken
            progress.flush()
            failures_in_a_row = 1 if received > gained_from else failures_in_a_row + 1
            if failures_in_a_row >= _ATTEMPTS or attempts >= _MOST_ATTEMPTS:
                raise self._stalled(name, failure, attempts) from None
            self._pause(_RETRY_WAIT_SECONDS)

    def _stalled(self, name: str, failure: _BodyBroken | _Unreachable, attempts: int) -> CheckpointError:
        if failure.timed_out:
            return CheckpointError(f"{self.endpoint} stopped sending {name} of {self.repo_id}: no data for "
                                   f"{self.timeout:g} s, {attempts} times; check the network connection and try again "
                                   "(HF_HUB_DOWNLOAD_TIMEOUT sets how many seconds to wait)")
        return CheckpointError(f"the download of {name} of {self.repo_id} from {self.endpoint} broke off "
                               f"{attempts} times ({failure.reason}); check the network connection and try again")

    def _link(self, pointer: Path, blob: Path) -> None:
        """snapshots/<commit>/<name> -> ../../blobs/<etag>, as huggingface_hub links it (a copy where the file
        system has no links)."""
        self._make_folder(pointer.parent)
        with self._writing():
            if os.path.lexists(pointer):
                if os.path.realpath(pointer) == os.path.realpath(blob):
                    return
                _remove(pointer)
            try:
                os.symlink(os.path.relpath(blob, pointer.parent), pointer)
                return
            except OSError:
                pass  # a file system without symbolic links (FAT, some network shares): a copy, as huggingface_hub
        with open(blob, "rb") as source:
            copy = pointer.with_name(f".{pointer.name}.{os.getpid()}.copy")
            with self._writing():
                _remove(copy)
                descriptor = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _CLOSE_ON_EXEC, 0o666)
                self._temporaries.add(copy)
            try:
                while piece := source.read(_READ_BYTES):
                    with self._writing():
                        _write_all(descriptor, piece)
            finally:
                os.close(descriptor)
            with self._writing():
                os.replace(copy, pointer)
                self._temporaries.discard(copy)

    @contextlib.contextmanager
    def _blob_lock(self, etag: str) -> Iterator[None]:
        """huggingface_hub's lock on the blob (.locks/models--org--name/<etag>.lock), waited for in short steps so
        that a cancel is seen while another process holds it."""
        from filelock import FileLock, Timeout

        folder = self.cache / ".locks" / self.storage.name
        self._make_folder(folder)
        path = folder / f"{etag}.lock"
        if os.path.islink(path):
            raise CheckpointError(f"{path} is a link, where a download's lock file belongs; remove it and try again")
        try:
            lock = FileLock(str(path), mode=0o664)  # group-writable, as huggingface_hub makes it (a shared cache)
        except TypeError:  # filelock before 3.10
            lock = FileLock(str(path))
        while True:
            self._check_stopped()
            try:
                lock.acquire(timeout=4 * _POLL_SECONDS)
                break
            except Timeout:
                continue
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                lock.release()

    def _make_folder(self, folder: Path) -> None:
        """Create `folder` (inside the cache) and the folders above it, checking at each step that it is a folder
        inside the cache, links resolved: never a folder somewhere else reached through a link."""
        with self._writing():
            if os.path.lexists(self.cache) and not os.path.isdir(self.cache):
                raise CheckpointError(f"the Hugging Face cache at {self.cache} is not a folder; set HF_HUB_CACHE (or "
                                      "HF_HOME) to the folder of your cache")
            self.cache.mkdir(parents=True, exist_ok=True)
            root = Path(os.path.realpath(self.cache))
            current = self.cache
            for part in folder.relative_to(self.cache).parts:
                current = current / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(current)
                real = Path(os.path.realpath(current))
                if not (real == root or root in real.parents) or not real.is_dir():
                    where = f"leads to {real}, outside the cache" if real.is_dir() else "is not a folder"
                    raise CheckpointError(f"{current} in the Hugging Face cache {where}; nothing was written there: "
                                          "remove it, or choose another cache with HF_HUB_CACHE")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        with self._lock:
            self._check_stopped()
            yield

    def _check_stopped(self) -> None:
        if self._stopped.is_set():
            raise _Stopped

    def _pause(self, seconds: float) -> None:
        if self._stopped.wait(seconds):
            raise _Stopped

    def _post(self, event: tuple) -> None:
        while True:
            self._check_stopped()
            try:
                self.events.put(event, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue

    # ---- what a failure says ----
    def _as_checkpoint_error(self, error: BaseException) -> BaseException:
        """A CheckpointError saying what to do; any other exception is returned as it is (a bug, not a situation
        a user can fix)."""
        if isinstance(error, CheckpointError):
            return error
        if isinstance(error, _Status):
            return self._status_error(error)
        if isinstance(error, (_Unreachable, _BodyBroken)):
            return CheckpointError(f"cannot reach {self.endpoint} to download {self.repo_id} ({error.reason}); check "
                                   "the network connection (and HF_ENDPOINT if you use a mirror), or copy the model's "
                                   "folder from a machine that has it and open the folder")
        if isinstance(error, OSError):
            return self._cache_error(error)
        return error

    def _cache_error(self, error: OSError) -> CheckpointError:
        return CheckpointError(f"cannot write {self.repo_id} into the Hugging Face cache ({error.strerror or error}: "
                               f"{error.filename or self.cache}); free space, check the cache's permissions, or "
                               "choose another cache with HF_HUB_CACHE")

    def _status_error(self, error: _Status) -> CheckpointError:
        endpoint, repo_id, status = self.endpoint, self.repo_id, error.status
        if error.error_code == "GatedRepo":
            return CheckpointError(f"{repo_id} is gated: accept its terms on {endpoint}/{repo_id} with your account, "
                                   "then set HF_TOKEN to a read token of that account and download it again")
        if error.error_code == "RevisionNotFound":
            return CheckpointError(f"{repo_id} has no revision {self.revision!r} on {endpoint}; leave the revision "
                                   "empty for its main branch, or give a branch, tag or commit hash it has")
        if status == 401 and not self._http.sends_token:
            return CheckpointError(f"{endpoint} did not let us read {repo_id} without a token (401): it is private "
                                   "or gated, or its name is misspelt; check the name, and for a private model set "
                                   "HF_TOKEN to a read token of an account that can see it")
        if status == 401:
            return CheckpointError(f"{endpoint} refused the token sent for {repo_id} (401): HF_TOKEN (or the saved "
                                   "login) is invalid or expired, or the name is misspelt; check the name, or create "
                                   "a new read token and set HF_TOKEN to it")
        if status == 403:
            return CheckpointError(f"{endpoint} forbids reading {repo_id} with this token (403): it needs a token "
                                   "with read access (HF_TOKEN), and for a gated model your account must have "
                                   "accepted its terms")
        if status == 404 and "/resolve/" in error.url:
            name = unquote(error.url.rsplit("/resolve/", 1)[1].split("/", 1)[-1])
            return CheckpointError(f"{endpoint} lists {name} in {repo_id} but answers 404 for it: the repo is "
                                   "changing, or HF_ENDPOINT is not a faithful mirror; try again later")
        if error.error_code == "RepoNotFound" or status == 404:
            return CheckpointError(f"there is no model {repo_id} on {endpoint} (404); check the spelling (org/name, "
                                   "as on the model's page)")
        return CheckpointError(f"{endpoint} answered {status} while downloading {repo_id}; try again later")


def _parse_listing(data: bytes, endpoint: str, repo_id: str,
                   revision: str | None) -> tuple[str, dict[str, int | None]]:
    """The commit and {file name: size or None} of the Hub's model info, each checked: HubAnswerError otherwise."""
    hint = "is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?"
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        kind = "an HTML page" if data.lstrip()[:1] == b"<" else f"{_shown(data[:60])}"
        raise HubAnswerError(f"{endpoint} answered the listing of {repo_id} with {kind}, not the JSON a Hugging Face "
                             f"Hub sends; {hint}") from None
    if not isinstance(info, dict):
        raise HubAnswerError(f"{endpoint} answered the listing of {repo_id} with JSON that is no model info; {hint}")
    commit = info.get("sha")
    if not isinstance(commit, str) or not COMMIT_HASH.fullmatch(commit):
        raise HubAnswerError(f"{endpoint} answered for {repo_id} without a commit hash ({_shown(commit)}); {hint}")
    if revision is not None and COMMIT_HASH.fullmatch(revision) and commit != revision:
        raise HubAnswerError(f"{endpoint} answered for commit {revision} of {repo_id} with commit {commit}; {hint}")
    siblings = info.get("siblings", [])
    if not isinstance(siblings, list):
        raise HubAnswerError(f"{endpoint} listed the files of {repo_id} as {_shown(siblings)}, not a list; {hint}")
    sizes: dict[str, int | None] = {}
    for sibling in siblings:
        name = sibling.get("rfilename") if isinstance(sibling, dict) else None
        if not isinstance(name, str) or not _relative_file_name(name):
            raise HubAnswerError(f"{endpoint} listed a file of {repo_id} as {_shown(name)}, which is not a file name "
                                 f"a repo can hold (empty, absolute, or with '..'); nothing was downloaded; {hint}")
        size = sibling.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise HubAnswerError(f"{endpoint} listed {name} of {repo_id} with the size {_shown(size)}; {hint}")
        sizes[name] = size
    return commit, sizes


def _relative_file_name(name: str) -> bool:
    """A path inside a repo as a Hub lists it: relative, '/'-separated, no empty, '.' or '..' part, no backslash
    (a separator on Windows) and no NUL."""
    return bool(name) and "\\" not in name and "\x00" not in name and not name.startswith("/") and all(
        part not in ("", ".", "..") for part in name.split("/"))


def _plain_file_name(name: str) -> bool:
    return _relative_file_name(name) and "/" not in name


def _size_header(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit() or len(text.strip()) > 18:
        return None
    return int(text.strip())


class _GitBlobHash:
    """The git blob SHA-1 of a file (what a Hub's ETag is for a file kept in git rather than LFS)."""

    def __init__(self, size: int):
        self._hash = hashlib.sha1(b"blob %d\x00" % size, usedforsecurity=False)

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _content_hasher(answer: _FileAnswer):
    return hashlib.sha256() if len(answer.etag) == 64 else _GitBlobHash(answer.size)


class _Coalesced:
    """Progress posted every _PROGRESS_BYTES or _PROGRESS_SECONDS, not for every read."""

    def __init__(self, post: Callable[[tuple], None]):
        self._post = post
        self._pending = 0
        self._last = time.monotonic()

    def add(self, size_bytes: int) -> None:
        self._pending += size_bytes
        if abs(self._pending) >= _PROGRESS_BYTES or time.monotonic() - self._last >= _PROGRESS_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._post(("advance", self._pending))
            self._pending = 0
        self._last = time.monotonic()


# ---- HTTP ------------------------------------------------------------------------------------------------------

class _Http:
    """The download's requests, with http.client: one kept-alive connection per origin, through the proxy the
    environment names (http_proxy, https_proxy, no_proxy), with the system's certificates (and SSL_CERT_FILE,
    REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, certifi's where set or installed). Redirects are followed here, at most
    _MAX_REDIRECTS, and the token is only ever sent to the endpoint's own origin; a busy answer (408, 429, 503) is
    asked again after its Retry-After (at most _BUSY_RETRIES times). `abort()`, from another thread, shuts every
    socket down, so a read blocked on a stalled server returns at once."""

    def __init__(self, endpoint: str, headers: dict[str, str], timeout: float, check_stopped: Callable[[], None],
                 pause: Callable[[float], None]):
        self.endpoint_origin = _origin(endpoint)
        self.headers = headers
        self.sends_token = any(name.lower() == "authorization" for name in headers)
        self.timeout = timeout
        self.check_stopped = check_stopped
        self.pause = pause  # waits, unless the download is stopped
        self._connections: dict[tuple[str, str, int], http.client.HTTPConnection] = {}
        self._proxy_headers: dict[tuple[str, str, int], dict[str, str]] = {}
        self._absolute_targets: set[tuple[str, str, int]] = set()  # origins reached through a plain http proxy
        self._lock = threading.Lock()
        self._aborted = False
        self._tls: ssl.SSLContext | None = None

    def get_bytes(self, url: str, *, limit: int, what: str) -> bytes:
        """The body of a GET (after redirects), at most `limit` bytes; _Status for an error status."""
        response, origin, _ = self._request("GET", url, follow_all=True)
        body = bytearray()
        for piece in self.pieces(response, origin):
            body += piece
            if len(body) > limit:
                self._drop(origin)
                raise HubAnswerError(f"{url} sent a {what} of more than {limit // (1024 * 1024)} MiB, which no Hub "
                                     "sends; check HF_ENDPOINT")
        return bytes(body)

    def head(self, url: str) -> tuple[dict[str, str], str]:
        """The headers of a HEAD (redirects followed while they stay on the same origin) and where the file's
        bytes are: that URL, or the other origin (a CDN, a storage bucket) a redirect names."""
        response, origin, location = self._request("HEAD", url, follow_all=False)
        headers = {name.lower(): value for name, value in response.getheaders()}
        self._finish(response, origin)
        return headers, location

    @contextlib.contextmanager
    def get(self, url: str, *, start: int = 0) -> Iterator[tuple[http.client.HTTPResponse, bool]]:
        """A GET of a file's bytes from `start` on (a Range request when start > 0): (the response, whether it
        starts from byte 0 again: the server ignored the range). The connection is closed unless the body was read
        to its end."""
        headers = {"Range": f"bytes={start}-"} if start else {}
        response, origin, _ = self._request("GET", url, follow_all=True, headers=headers)
        try:
            restarted = response.status == 200
            if start and response.status == 206 and _range_start(response.getheader("Content-Range")) != start:
                raise HubAnswerError(f"{url} answered a request for its bytes from {start:,} with "
                                     f"{_shown(response.getheader('Content-Range') or '')}; check HF_ENDPOINT")
            if response.status not in (200, 206):
                raise HubAnswerError(f"{url} answered {response.status} to a download; check HF_ENDPOINT")
            yield response, restarted
        finally:
            if not response.isclosed():
                self._drop(origin)

    def pieces(self, response: http.client.HTTPResponse,
               origin: tuple[str, str, int] | None = None) -> Iterator[bytes]:
        """The body as it arrives; _BodyBroken when no byte comes within the timeout or the connection drops."""
        while True:
            self.check_stopped()
            try:
                piece = response.read1(_READ_BYTES)
            except (OSError, http.client.HTTPException, ValueError) as error:
                self.check_stopped()  # a socket shut down by a cancel: not a network failure
                if origin is not None:
                    self._drop(origin)
                raise _BodyBroken(_network_reason(error), timed_out=isinstance(error, TimeoutError)) from None
            self.check_stopped()
            if not piece:
                return
            yield piece

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            connections = list(self._connections.values())
        for connection in connections:
            _shut(connection)

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            with contextlib.suppress(Exception):
                connection.close()

    # ---- the requests ----
    def _request(self, method: str, url: str, *, follow_all: bool,
                 headers: Mapping[str, str] | None = None
                 ) -> tuple[http.client.HTTPResponse, tuple[str, str, int], str]:
        """(the response, its origin, where the bytes are) after redirects: every one when `follow_all`, else
        those that stay on the same origin. _Status for an error status."""
        redirects = busy = 0
        while True:
            origin = _origin(url)
            sent = {"Accept-Encoding": "identity", **headers} if headers else {"Accept-Encoding": "identity"}
            for name, value in self.headers.items():
                if origin == self.endpoint_origin or name.lower() != "authorization":
                    sent[name] = value
            response = self._send(method, url, origin, sent)
            location = response.getheader("Location") if response.status in _REDIRECTS else None
            if location is not None:
                target = urljoin(url, location.strip())
                if urlsplit(target).scheme not in ("http", "https") or not urlsplit(target).hostname:
                    self._finish(response, origin)
                    raise HubAnswerError(f"{url} redirects to {_shown(target)}, which is no http(s) address; check "
                                         "HF_ENDPOINT")
                if not follow_all and _origin(target) != origin:
                    return response, origin, target
                self._finish(response, origin)
                redirects += 1
                if redirects > _MAX_REDIRECTS:
                    raise HubAnswerError(f"{url} redirected more than {_MAX_REDIRECTS} times (a redirect loop); check "
                                         "HF_ENDPOINT, proxy and firewall settings, and try again later")
                url = target
                continue
            if response.status in _BUSY and busy < _BUSY_RETRIES:
                wait = _retry_after(response.getheader("Retry-After"), busy)
                self._finish(response, origin)
                busy += 1
                self.pause(wait)
                continue
            if response.status >= 400:
                error = _Status(response.status, response.getheader("X-Error-Code"),
                                response.getheader("X-Error-Message"), url)
                self._finish(response, origin)
                raise error
            if response.status >= 300:
                self._finish(response, origin)
                raise HubAnswerError(f"{url} answered {response.status} without saying where to go; check "
                                     "HF_ENDPOINT")
            return response, origin, url

    def _send(self, method: str, url: str, origin: tuple[str, str, int],
              headers: dict[str, str]) -> http.client.HTTPResponse:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in range(2):
            connection, fresh = self._connection(origin)
            try:
                if connection.sock is None:
                    connection.connect()
                    self._check_aborted(connection)
                connection.request(method, url if origin in self._absolute_targets else target,
                                   headers={**headers, **self._proxy_headers.get(origin, {})})
                return connection.getresponse()
            except (OSError, http.client.HTTPException, ValueError) as error:
                self.check_stopped()  # a socket shut down by a cancel: not a network failure
                self._drop(origin)
                if isinstance(error, ssl.SSLCertVerificationError):
                    raise _Unreachable(f"the certificate of {origin[1]} could not be verified: {error.verify_message}"
                                       "; behind a proxy that inspects TLS, set SSL_CERT_FILE or REQUESTS_CA_BUNDLE "
                                       "to its certificate bundle") from None
                timed_out = isinstance(error, TimeoutError)
                if fresh or attempt or timed_out:  # a kept-alive connection the server had closed: once anew
                    raise _Unreachable(_network_reason(error), timed_out=timed_out) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self, origin: tuple[str, str, int]) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._aborted:
                raise _Stopped
            existing = self._connections.get(origin)
            if existing is not None:
                return existing, False
            connection = self._new_connection(origin)
            self._connections[origin] = connection
            return connection, True

    def _new_connection(self, origin: tuple[str, str, int]) -> http.client.HTTPConnection:
        scheme, host, port = origin
        proxy = _proxy_for(scheme, host, port)
        proxy_auth = {}
        if proxy is not None and proxy.username is not None:
            credentials = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
            proxy_auth = {"Proxy-Authorization": "Basic " + b64encode(credentials).decode("ascii")}
        if scheme == "https":
            if self._tls is None:
                self._tls = _tls_context()
            if proxy is None:
                return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=self._tls)
            connection = http.client.HTTPSConnection(proxy.hostname, proxy.port or 80, timeout=self.timeout,
                                                     context=self._tls)
            connection.set_tunnel(host, port, headers=proxy_auth)
            return connection
        if proxy is None:
            return http.client.HTTPConnection(host, port, timeout=self.timeout)
        self._absolute_targets.add(origin)
        self._proxy_headers[origin] = proxy_auth
        return http.client.HTTPConnection(proxy.hostname, proxy.port or 80, timeout=self.timeout)

    def _check_aborted(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            aborted = self._aborted
        if aborted:  # connected just after a cancel shut the others down
            _shut(connection)
            raise _Stopped

    def _finish(self, response: http.client.HTTPResponse, origin: tuple[str, str, int]) -> None:
        """Read what is left of a small body so the connection can be used again; drop it otherwise."""
        try:
            left = response.read(_DISCARDED_BODY_LIMIT + 1)
        except (OSError, http.client.HTTPException, ValueError):
            self.check_stopped()
            left = b"x" * (_DISCARDED_BODY_LIMIT + 1)
        if len(left) > _DISCARDED_BODY_LIMIT or not response.isclosed():
            self._drop(origin)

    def _drop(self, origin: tuple[str, str, int]) -> None:
        with self._lock:
            connection = self._connections.pop(origin, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def _retry_after(header: str | None, tries: int) -> float:
    """Seconds to wait before asking again: the server's Retry-After (in seconds), else 1, 2, 4 s."""
    text = (header or "").strip()
    seconds = float(text) if text.isdigit() else float(2 ** tries)
    return min(seconds, _BUSY_WAIT_LIMIT_SECONDS)


def _range_start(content_range: str | None) -> int | None:
    match = re.fullmatch(r"\s*bytes\s+(\d+)-\d+/(?:\d+|\*)\s*", content_range or "")
    return int(match.group(1)) if match else None


def _shut(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: a TLS socket's would unwrap it


def _network_reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, socket.gaierror):
        return f"the name cannot be resolved: {error.strerror}"
    if isinstance(error, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__


def _proxy_for(scheme: str, host: str, port: int):
    """The http proxy the environment names for `scheme` (http_proxy, https_proxy; no_proxy honoured), or None."""
    proxies = urllib.request.getproxies()
    address = proxies.get(scheme)
    if not address and proxies.get("all", "").startswith("http://"):
        address = proxies["all"]  # all_proxy is often a SOCKS proxy for other programs: only an http one is used
    if not address or urllib.request.proxy_bypass(f"{host}:{port}"):
        return None
    parsed = urlsplit(address if "://" in address else f"http://{address}")
    if parsed.scheme != "http" or not parsed.hostname:
        raise CheckpointError(f"the proxy for {scheme} addresses is {_shown(address)}; downloads go through http:// "
                              "proxies only: set https_proxy (or http_proxy) to an http:// proxy address, or unset it")
    return parsed


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()  # the system's certificates (and SSL_CERT_FILE / SSL_CERT_DIR)
    for variable in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        bundle = os.environ.get(variable)
        if bundle:
            with contextlib.suppress(OSError, ssl.SSLError):
                context.load_verify_locations(cafile=bundle) if os.path.isfile(bundle) else (
                    context.load_verify_locations(capath=bundle))
    with contextlib.suppress(ImportError, OSError, ssl.SSLError):
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    return context


def _request_headers(token: str | None) -> dict[str, str]:
    huggingface_hub_settings()
    from huggingface_hub.utils import build_hf_headers  # the token (HF_TOKEN or the saved login), the user agent

    return {str(name): str(value) for name, value in
            build_hf_headers(token=token.strip() if token else None, library_name="bert-explorer").items()}


def _endpoint() -> str:
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or not endpoint.isprintable():
        raise CheckpointError(f"HF_ENDPOINT is {_shown(endpoint)}, not an http:// or https:// address; unset it to "
                              f"download from {DEFAULT_ENDPOINT}, or set it to your mirror's address")
    return endpoint


def _timeout_seconds() -> float:
    text = os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "").strip()
    if not text:
        return _DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e6:
        raise CheckpointError(f"HF_HUB_DOWNLOAD_TIMEOUT is {_shown(text)}; set it to a number of seconds (e.g. 10), or "
                              "unset it")
    return seconds


def _shown(value: object, width: int = 80) -> str:
    """A value a server or a file supplied, quoted and cut for a message: never a control character or a page."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 5] + "…'"


# ---- the cache on disk -----------------------------------------------------------------------------------------

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOSE_ON_EXEC = getattr(os, "O_CLOEXEC", 0)


def _is_regular(status: os.stat_result) -> bool:
    return stat.S_ISREG(status.st_mode)


def _is_complete_blob(blob: Path, size: int) -> bool:
    """A blob already there (another download, an `hf download`) of the announced size: not fetched again."""
    try:
        status = os.lstat(blob)
    except OSError:
        return False
    return _is_regular(status) and status.st_size == size


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def _write_new_file(path: Path, data: bytes) -> None:
    """`path` holding `data`, replaced at once (readers see the old content or the new, never half), written
    through a temporary file created with O_EXCL | O_NOFOLLOW: never through a link left in its place."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    _remove(temporary)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _CLOSE_ON_EXEC, 0o666)
    try:
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)
    try:
        os.replace(temporary, path)
    except OSError:
        _remove(temporary)
        raise


class _Transfer:
    """Progress and cancellation across the files of one download, in the caller's thread."""

    def __init__(self, repo_id: str, progress: ProgressCallback | None, cancel: Callable[[], bool] | None):
        self.repo_id = repo_id
        self.progress = progress
        self.cancel = cancel
        self.done = 0
        self.total = 0
        self.filename = ""
        self.file_start = 0

    def poll(self) -> None:
        if self.cancel is not None and self.cancel():
            raise DownloadCancelled(f"the download of {self.repo_id} was cancelled; nothing of it was kept",
                                    self.repo_id)

    def apply(self, event: tuple) -> None:
        """An event the transfer's thread posted: ("expect", bytes), ("start", name), ("advance", bytes) or
        ("finish", size, listed size)."""
        kind = event[0]
        if kind == "expect":
            self.total += event[1]
        elif kind == "start":
            self.filename = event[1]
            self.file_start = self.done
            self._report()
        elif kind == "advance":  # negative when a server ignored a resumed request and the file starts again
            self.done += event[1]
            self._report()
        elif kind == "finish":
            size_bytes, expected = event[1], event[2]
            if expected is None:
                self.total += size_bytes  # the listing gave no size for this file
            self.done = self.file_start + size_bytes  # also counts a file that was already cached
            self._report()
        self.poll()

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done), self.filename)


@dataclass(frozen=True)
class _CacheState:
    """What a repo's cache folder held before a download, to take back what the download added: only ever inside
    the cache (a folder of it that leads elsewhere through a link is left alone)."""

    storage: Path
    snapshot: Path
    cache: Path
    storage_existed: bool
    snapshot_files: frozenset[str]
    blobs: frozenset[str]

    @classmethod
    def of(cls, storage: Path, snapshot: Path, cache: Path) -> _CacheState:
        return cls(storage, snapshot, cache, os.path.lexists(storage), frozenset(_names_in(snapshot)),
                   frozenset(_names_in(storage / "blobs")))

    def restore(self, remove_new_blobs: bool) -> None:
        if self._inside(self.snapshot):
            for name in _names_in(self.snapshot) - self.snapshot_files:
                _remove(self.snapshot / name)
        if self._inside(self.storage / "blobs"):
            for name in _names_in(self.storage / "blobs") - self.blobs:
                if remove_new_blobs or name.endswith(".incomplete"):
                    _remove(self.storage / "blobs" / name)
        empty_if_new = [self.snapshot, self.snapshot.parent, self.storage / "blobs", self.storage / ".no_exist"]
        if not self.storage_existed:
            empty_if_new.append(self.storage)
        for folder in empty_if_new:
            try:
                folder.rmdir()  # only when empty: never a folder that holds something of another download
            except OSError:
                pass

    def _inside(self, folder: Path) -> bool:
        real, root = Path(os.path.realpath(folder)), Path(os.path.realpath(self.cache))
        return root in real.parents and not os.path.islink(folder)


def _names_in(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _remove(path: Path) -> None:
    """Remove what is at `path` (a link itself, never what it leads to); best effort."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    except OSError:
        pass  # at worst an unreferenced file is left, never a link to half a file


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
