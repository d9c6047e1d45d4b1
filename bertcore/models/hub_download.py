"""Downloading a model from the Hugging Face Hub into the local cache (`download_model`), for the cache look-ups
of bertcore.models.hub to find offline afterwards.

Downloads go through huggingface_hub, which owns the cache's write protocol (locks, temporary files renamed into
place, links); it is imported only here, when a download starts. HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are read
at call time. Every failure a user can meet is a CheckpointError saying what to do; a cancelled download is
DownloadCancelled, and leaves nothing of that download in the snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bertcore.errors import CheckpointError, DownloadCancelled
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE
from bertcore.models.hub import (
    COMMIT_HASH,
    DEFAULT_ENDPOINT,
    PYTORCH_INDEX_FILE,
    SAFETENSORS_INDEX_FILE,
    TOKENIZER_FILES,
    ResolvedModel,
    default_cache_dir,
    looks_like_repo_id,
    repo_folder,
    shard_files,
)

ProgressCallback = Callable[[int, int, str], None]  # (done_bytes, total_bytes, filename)


def download_model(repo_id: str, *, revision: str | None = None, cache_dir: str | Path | None = None,
                   token: str | None = None, progress: ProgressCallback | None = None,
                   cancel: Callable[[], bool] | None = None) -> ResolvedModel:
    """Download what opening `repo_id` needs into the Hugging Face cache and return its snapshot folder:
    config.json, the weights (model.safetensors or its shards; pytorch_model.bin only when the repo has no
    safetensors) and whichever TOKENIZER_FILES the repo has. Files already cached are not fetched again.

    HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are read at call time. progress(done_bytes, total_bytes, filename)
    is called as bytes arrive (total_bytes grows once for a sharded checkpoint, when its index names the shards).
    cancel() is polled between files and between the 10 MB chunks of a file; when it returns True the download
    stops with DownloadCancelled and what it had added is removed: no file of it stays in the snapshot, no ref
    points to it. Any other failure removes the snapshot's new links too (complete blobs stay, so trying again
    fetches only what is missing) and is a CheckpointError saying what to do.
    """
    if not looks_like_repo_id(repo_id):
        raise CheckpointError(f"{repo_id!r} is not a Hugging Face repo id; write it as on the model's Hub page, "
                              "e.g. google-bert/bert-base-uncased")
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        raise CheckpointError(f"cannot download {repo_id}: offline mode is on (HF_HUB_OFFLINE or "
                              f"TRANSFORMERS_OFFLINE is set); unset it and try again, or copy the model's folder "
                              "from a machine that has it and open the folder")
    token = token or os.environ.get("HF_TOKEN") or None
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    transfer = _Transfer(repo_id, progress, cancel)
    transfer.poll()

    from huggingface_hub import HfApi  # imported here: it is slow to import, and listing does not need it

    try:
        info = HfApi(endpoint=endpoint, token=token, library_name="bert-explorer").model_info(
            repo_id, revision=revision, files_metadata=True)
    except Exception as error:
        raise _hub_error(error, repo_id, endpoint, revision) from error
    commit = info.sha
    if not isinstance(commit, str) or not COMMIT_HASH.fullmatch(commit):
        raise CheckpointError(f"{endpoint} answered for {repo_id} without a commit hash ({commit!r}); is HF_ENDPOINT "
                              "a Hugging Face Hub (or a mirror of one)?")
    sizes = {sibling.rfilename: sibling.size for sibling in info.siblings or []}
    first, weights_index = _files_to_fetch(repo_id, sizes)

    storage = repo_folder(repo_id, cache)
    snapshot = storage / "snapshots" / commit
    before = _CacheState.of(storage, snapshot)
    try:
        transfer.expect(sum(sizes.get(name) or 0 for name in first))
        for name in first:
            _fetch(repo_id, name, commit, cache, endpoint, token, transfer, sizes)
        if weights_index is not None:
            shards = [shard.name for shard in shard_files(snapshot / weights_index)]
            unlisted = [shard for shard in shards if shard not in sizes]
            if unlisted:
                raise CheckpointError(f"{repo_id}'s {weights_index} names {', '.join(unlisted)}, which the repo "
                                      "does not have; the checkpoint on the Hub is incomplete")
            transfer.expect(sum(sizes.get(shard) or 0 for shard in shards))
            for shard in shards:
                _fetch(repo_id, shard, commit, cache, endpoint, token, transfer, sizes)
    except DownloadCancelled:
        before.restore(remove_new_blobs=True)
        raise
    except CheckpointError:
        before.restore(remove_new_blobs=False)
        raise
    except Exception as error:
        before.restore(remove_new_blobs=False)
        raise _hub_error(error, repo_id, endpoint, revision) from error
    if revision is None or not COMMIT_HASH.fullmatch(revision):
        _write_ref(storage / "refs" / (revision or "main"), commit)  # last: a ref only ever names a whole snapshot
    return ResolvedModel(folder=snapshot, repo_id=repo_id, revision=commit, display_name=repo_id)


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


def _fetch(repo_id: str, filename: str, commit: str, cache: Path, endpoint: str, token: str | None,
           transfer: _Transfer, sizes: Mapping[str, int | None]) -> None:
    from huggingface_hub import hf_hub_download

    transfer.poll()
    transfer.start(filename)
    # Releases before tqdm_class existed report nothing within a file: progress and cancel then act per file.
    per_chunk = {"tqdm_class": transfer.bar_class} if "tqdm_class" in _parameters(hf_hub_download) else {}
    path = hf_hub_download(repo_id, filename, revision=commit, cache_dir=str(cache), endpoint=endpoint, token=token,
                           library_name="bert-explorer", **per_chunk)
    transfer.finish(os.stat(path).st_size, expected=sizes.get(filename))
    transfer.poll()


def _parameters(function: Callable) -> set[str]:
    import inspect

    return set(inspect.signature(function).parameters)


class _Transfer:
    """Progress and cancellation across the files of one download. huggingface_hub reports a file's bytes to a
    progress-bar class it is given (tqdm's interface); the class made here forwards them, and raising
    DownloadCancelled from its update stops the file between chunks (huggingface_hub deletes its temporary file)."""

    def __init__(self, repo_id: str, progress: ProgressCallback | None, cancel: Callable[[], bool] | None):
        self.repo_id = repo_id
        self.progress = progress
        self.cancel = cancel
        self.done = 0
        self.total = 0
        self.filename = ""
        self.file_start = 0
        transfer = self

        class ProgressBar:
            def __init__(self, *args: object, initial: int = 0, **kwargs: object):
                self.n = initial

            def __enter__(self) -> ProgressBar:
                return self

            def __exit__(self, *exc_info: object) -> None:
                return None

            def close(self) -> None:
                return None

            def update(self, n: int = 1) -> None:  # n < 0 when a resumed download restarts from zero
                self.n += n
                transfer.advance(n)

            def update_transfer(self, n: int = 1) -> None:
                # Xet downloads report network bytes here and written bytes through update: count only those.
                transfer.poll()

        self.bar_class = ProgressBar

    def poll(self) -> None:
        if self.cancel is not None and self.cancel():
            raise DownloadCancelled(f"the download of {self.repo_id} was cancelled; nothing of it was kept",
                                    self.repo_id)

    def expect(self, size_bytes: int) -> None:
        self.total += size_bytes

    def start(self, filename: str) -> None:
        self.filename = filename
        self.file_start = self.done
        self._report()

    def advance(self, size_bytes: int) -> None:
        self.done += size_bytes
        self._report()
        self.poll()

    def finish(self, size_bytes: int, expected: int | None) -> None:
        if expected is None:
            self.total += size_bytes  # the listing gave no size for this file
        self.done = self.file_start + size_bytes  # also counts a file that was already cached
        self._report()

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done), self.filename)


@dataclass(frozen=True)
class _CacheState:
    """What a repo's cache folder held before a download, to take back what the download added."""

    storage: Path
    snapshot: Path
    storage_existed: bool
    snapshot_files: frozenset[str]
    blobs: frozenset[str]

    @classmethod
    def of(cls, storage: Path, snapshot: Path) -> _CacheState:
        return cls(storage, snapshot, storage.exists(), frozenset(_names_in(snapshot)),
                   frozenset(_names_in(storage / "blobs")))

    def restore(self, remove_new_blobs: bool) -> None:
        for name in _names_in(self.snapshot) - self.snapshot_files:
            _remove(self.snapshot / name)
        if remove_new_blobs:
            for name in _names_in(self.storage / "blobs") - self.blobs:
                _remove(self.storage / "blobs" / name)
        empty_if_new = [self.snapshot, self.snapshot.parent, self.storage / "blobs", self.storage / ".no_exist"]
        if not self.storage_existed:
            empty_if_new.append(self.storage)
        for folder in empty_if_new:
            try:
                folder.rmdir()  # only when empty: never a folder that holds something of another download
            except OSError:
                pass


def _names_in(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError:
        pass  # best effort: what cannot be removed is at worst an unreferenced file, never a link to half a file


def _write_ref(ref: Path, commit: str) -> None:
    ref.parent.mkdir(parents=True, exist_ok=True)
    temporary = ref.with_name(f"{ref.name}.{os.getpid()}.tmp")
    temporary.write_text(commit, encoding="ascii")
    os.replace(temporary, ref)  # readers see the old commit or the new one, never half a hash


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _hub_error(error: Exception, repo_id: str, endpoint: str, revision: str | None) -> Exception:
    """A CheckpointError saying what to do for what huggingface_hub raised; other exceptions are returned as
    they are (a bug, not a situation a user can fix)."""
    from huggingface_hub import utils as errors  # where every release since 0.24 exports its exceptions

    file_metadata_error = getattr(errors, "FileMetadataError", ())  # newer releases only
    connection_errors: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, errors.OfflineModeIsEnabled)
    for module, names in (("httpx2", ("TransportError",)), ("httpx", ("TransportError",)),
                          ("requests", ("ConnectionError", "Timeout"))):
        try:
            imported = __import__(module)
        except ImportError:
            continue
        connection_errors += tuple(getattr(imported, name) for name in names if hasattr(imported, name))
    causes = [error]
    while causes[-1].__cause__ is not None and len(causes) < 8:
        causes.append(causes[-1].__cause__)

    if any(isinstance(cause, errors.OfflineModeIsEnabled) for cause in causes):
        return CheckpointError(f"cannot download {repo_id}: huggingface_hub is in offline mode (HF_HUB_OFFLINE was "
                               "set when this program started); restart without it, or copy the model's folder "
                               "from a machine that has it and open the folder")
    if any(isinstance(cause, connection_errors) for cause in causes) or (
            isinstance(error, errors.LocalEntryNotFoundError)):
        return CheckpointError(f"cannot reach {endpoint} to download {repo_id} ({_first_line(causes[-1])}); check "
                               "the network connection (and HF_ENDPOINT if you use a mirror), or copy the model's "
                               "folder from a machine that has it and open the folder")
    if isinstance(error, errors.GatedRepoError):
        return CheckpointError(f"{repo_id} is gated: accept its terms on {endpoint}/{repo_id} with your account, then "
                               "set HF_TOKEN to a read token of that account and download it again")
    if isinstance(error, errors.RevisionNotFoundError):
        return CheckpointError(f"{repo_id} has no revision {revision!r} on {endpoint}; leave the revision empty for "
                               "its main branch, or give a branch, tag or commit hash it has")
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 401 and not _sent_token(error):
        return CheckpointError(f"{endpoint} did not let us read {repo_id} without a token (401): it is private or "
                               "gated, or its name is misspelt; check the name, and for a private model set HF_TOKEN "
                               "to a read token of an account that can see it")
    if status == 401:
        return CheckpointError(f"{endpoint} refused the token sent for {repo_id} (401): HF_TOKEN (or the saved "
                               "login) is invalid or expired, or the name is misspelt; check the name, or create a "
                               "new read token and set HF_TOKEN to it")
    if isinstance(error, errors.RepositoryNotFoundError) or status == 404:
        return CheckpointError(f"there is no model {repo_id} on {endpoint} (404); check the spelling (org/name, as "
                               "on the model's page)")
    if status == 403:
        return CheckpointError(f"{endpoint} forbids reading {repo_id} with this token (403): it needs a token with "
                               "read access (HF_TOKEN), and for a gated model your account must have accepted its "
                               "terms")
    if status is not None:
        return CheckpointError(f"{endpoint} answered {status} while downloading {repo_id}; try again later")
    if file_metadata_error and isinstance(error, file_metadata_error):
        return CheckpointError(f"{endpoint} does not answer like a Hugging Face Hub while downloading {repo_id} "
                               f"({_first_line(error)}); check HF_ENDPOINT, proxy and firewall settings")
    if isinstance(error, OSError) and error.errno is not None:
        return CheckpointError(f"cannot write {repo_id} into the cache ({error.strerror}: "
                               f"{error.filename or 'the cache folder'}); free space or choose another cache with "
                               "HF_HUB_CACHE")
    return error


def _sent_token(error: Exception) -> bool:
    request = getattr(getattr(error, "response", None), "request", None)
    return request is not None and "authorization" in {name.lower() for name in request.headers}


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
