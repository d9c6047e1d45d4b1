"""The models a user already has: Hugging Face cache look-ups (the listing of cached encoders:
bertcore.models.hub_listing; downloads: bertcore.models.hub_download).

    resolved = resolve_model("google-bert/bert-base-uncased")   # a folder, or a repo id found in the local cache
    model, tokenizer = bertcore.load_pretrained(resolved.folder)
    for cached in hub_listing.list_cached_models():              # what the cache holds, read from file headers
        print(cached.repo_id, cached.describe())
    hub_download.download_model("prajjwal1/bert-tiny", progress=print, cancel=lambda: False)

The cache is the one `huggingface_hub` and `transformers` share: models--{org}--{name}/refs/<branch or tag> holds
the commit hash of snapshots/<hash>/, whose files are links into blobs/. A repo id and revision are resolved to
their snapshot by huggingface_hub itself (`snapshot_download(local_files_only=True)`: refs, tags, refs/pr/N, full
commit hashes, and a snapshot its cached file listing shows incomplete), imported only when a repo id is resolved:
in a fresh interpreter, importing this module and resolving one repo id takes ~200 ms (34 ms when we read refs
ourselves), once per process and before a model load that takes seconds; later look-ups take 0.2 ms.
What stays our own, measured on 50 BERT-base-sized repos (benchmarks/hub_cache_listing.py, 2 shared cores, load
~1.2-2): huggingface_hub 2.4's functions cost 90-200 ms to import (its top-level import is lazy; the first
`from huggingface_hub import snapshot_download` is ~175 ms), against 40-50 ms for this module, so
- the listing (hub_listing) is ours: `scan_cache_dir` takes 15 ms on the 50 repos against 21 ms for our whole
  listing with config.json and safetensors headers read (57 ms in a fresh interpreter, import included, against
  107 ms for importing and calling scan_cache_dir alone), gives nothing we need that a stat does not, and opens
  every refs file with a blocking open(), so a FIFO left in refs/ would hang the window's model list;
- every file we parse (refs, config.json, safetensors headers) is read by `open_without_touching`, which refuses
  a FIFO or device instead of waiting on it; before huggingface_hub reads the repo's refs and cached file
  listings (trees/), they are checked to be files (stat only);
- the cache folder is read from the environment at call time (HF_HUB_CACHE, else $HF_HOME/hub, else
  $XDG_CACHE_HOME/huggingface/hub, as huggingface_hub.constants computes it): huggingface_hub computes its
  constants once, when first imported, so a setting changed later (by the user, or per test) would not count;
- two look-ups huggingface_hub does not make offline: a short commit hash (a unique prefix of a snapshot's name)
  and "main" for a repo downloaded by commit hash only (no refs/main: its newest snapshot);
- every name that becomes a path is checked first, because huggingface_hub joins them as they come: a revision
  must be a ref name as git allows one (no '..', not absolute: `check_revision_name`), a ref must hold a commit
  hash (40 hex digits), and the snapshot it names must be a folder of that repo's own snapshots/ (a ref holding a
  path opened another repo's model under this repo's name). huggingface_hub is then asked for the commit, never
  the ref, so it reads nothing we did not check.
Nothing here touches the network or imports torch.

Every failure a user can meet is a CheckpointError (bertcore.errors) saying what to do.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bertcore.errors import CacheEntryError, CheckpointError
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE
from bertcore.files.reading import (
    _NON_BLOCKING_READ,
    check_regular_file,
    file_kind,
    parse_json,
)

SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_INDEX_FILE = "pytorch_model.bin.index.json"
# Whichever of these a repo has are downloaded with it: WordPiece (vocab.txt), BPE (vocab.json + merges.txt),
# SentencePiece (spiece.model for ALBERT, sentencepiece.bpe.model for XLM-R), and the fast-tokenizer files.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "spiece.model", "sentencepiece.bpe.model")
DEFAULT_ENDPOINT = "https://huggingface.co"
DOWNLOAD_HINT = "Model ▸ Download from the Hub…, or `hf download {repo_id}` in a terminal"

# huggingface_hub's own rule for a repo id: "name" or "namespace/name", word characters, '-' and '.', neither
# starting nor ending with '-' or '.', no '--' or '..' (the cache uses '--' as its separator).
_REPO_ID = re.compile(r"(?:[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?/)?[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?",
                      re.ASCII)
COMMIT_HASH = re.compile(r"[0-9a-f]{40}")
_SHORT_COMMIT = re.compile(r"[0-9a-f]{7,39}")  # as `git log --oneline` prints one, or longer
_REF_LIMIT = 4096  # refs/<name> holds one commit hash; more is not a ref huggingface_hub wrote
# What git refuses in a ref name (git check-ref-format): control characters, space, ~ ^ : ? * [ and backslash
_REF_NAME_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_REF_NAME_LIMIT = 255


def loader_supports(config: Mapping) -> bool:
    """Whether bertcore.load_pretrained can open a checkpoint with this config.json (as a mapping): its model_type
    and architecture are in the family registry (bertcore.models.families, torch-free), which the loader asks too."""
    from bertcore.models.families import supports

    return supports(config)


@dataclass(frozen=True)
class ResolvedModel:
    """A checkpoint folder found from what the user typed or picked."""

    folder: Path  # the folder to load: the given one, or the cached snapshot
    repo_id: str | None  # "org/name" when the folder is (or is inside) a Hugging Face cache snapshot
    revision: str | None  # the snapshot's commit hash, for a cached folder
    display_name: str  # what a title bar shows: the repo id, else the folder's name (never a commit hash)


def default_cache_dir() -> Path:
    """The hub cache folder as huggingface_hub computes it, from the environment as it is now."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(os.path.expanduser(explicit)))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def looks_like_repo_id(text: str) -> bool:
    """'org/name' or 'name' as the Hub spells repo ids (not './x', '/abs', 'a/b/c', 'x--y')."""
    return bool(_REPO_ID.fullmatch(text)) and "--" not in text and ".." not in text and not text.endswith(".git")


def repo_folder(repo_id: str, cache_dir: str | Path | None = None) -> Path:
    """Where the cache keeps `repo_id`: <cache>/models--org--name."""
    return Path(cache_dir or default_cache_dir()) / ("models--" + repo_id.replace("/", "--"))


def resolve_model(path_or_repo_id: str | Path, *, cache_dir: str | Path | None = None,
                  revision: str = "main") -> ResolvedModel:
    """The folder to load for what the user typed: an existing folder wins; else a repo id is looked up in the
    local cache only: `revision` is a branch, a tag, refs/pr/N or a commit hash (full, or a unique prefix of at
    least 7 characters), resolved to snapshots/<hash> by huggingface_hub. Never reaches the network."""
    try:
        return _resolve(path_or_repo_id, cache_dir, revision)
    except CheckpointError:
        raise
    except OSError as error:  # a folder on the way that cannot be read (permissions), a name too long, …
        raise CheckpointError(f"cannot read {error.filename or path_or_repo_id}: {error.strerror or error}; check "
                              "its permissions (and those of the folders above it), or open another copy of the "
                              "model") from None


def _resolve(path_or_repo_id: str | Path, cache_dir: str | Path | None, revision: str) -> ResolvedModel:
    text = str(path_or_repo_id)
    path = Path(text).expanduser()
    if path.is_dir():
        return _resolve_folder(path, revision)
    if path.exists():
        raise CheckpointError(f"{path} is a file; a checkpoint is a folder with {CONFIG_FILE} and weights — "
                              "open the folder that holds it")
    if isinstance(path_or_repo_id, Path) or not looks_like_repo_id(text):
        raise CheckpointError(f"{path} does not exist; choose an existing checkpoint folder, or give a Hugging Face "
                              "repo id such as google-bert/bert-base-uncased")
    storage = repo_folder(text, cache_dir)
    _check_cache_folder(storage.parent)
    if not storage.is_dir():
        raise CheckpointError(f"{text} is not in the Hugging Face cache ({storage.parent}) and there is no folder "
                              f"of that name; download it with {DOWNLOAD_HINT.format(repo_id=text)}")
    snapshot = _cached_snapshot(text, storage, revision)
    missing = [name for name in (CONFIG_FILE,) if not (snapshot / name).is_file()]
    if weights_file(snapshot) is None:
        missing.append(f"weights ({SAFETENSORS_FILE} or {PYTORCH_FILE})")
    if missing:
        raise CheckpointError(
            f"{text} is in the Hugging Face cache ({snapshot}) without {' or '.join(missing)}: only part of it was "
            f"downloaded (e.g. a tokenizer alone); download the model with {DOWNLOAD_HINT.format(repo_id=text)}")
    return ResolvedModel(folder=snapshot, repo_id=text, revision=snapshot.name, display_name=text)


def _resolve_folder(folder: Path, revision: str) -> ResolvedModel:
    # A folder picked in a file dialog may be the cache's repo folder (models--org--name) rather than a snapshot.
    repo_id = repo_id_of_storage(folder.name)
    if repo_id is not None and (folder / "snapshots").is_dir() and not (folder / CONFIG_FILE).exists():
        snapshot = _cached_snapshot(repo_id, folder, revision)
        return ResolvedModel(folder=snapshot, repo_id=repo_id, revision=snapshot.name, display_name=repo_id)
    for candidate in dict.fromkeys((folder.absolute(), folder.resolve())):
        parts = candidate.parts
        if len(parts) >= 3 and parts[-2] == "snapshots":
            repo_id = repo_id_of_storage(parts[-3])
            if repo_id is not None:
                return ResolvedModel(folder=folder, repo_id=repo_id, revision=parts[-1], display_name=repo_id)
    return ResolvedModel(folder=folder, repo_id=None, revision=None, display_name=folder.absolute().name)


def repo_id_of_storage(name: str) -> str | None:
    if not name.startswith("models--"):
        return None
    repo_id = name[len("models--"):].replace("--", "/")
    return repo_id if looks_like_repo_id(repo_id) else None


def _check_cache_folder(cache: Path) -> None:
    """CheckpointError when the cache folder is there but cannot be used: a file in its place, or unreadable."""
    try:
        status = os.stat(cache)
    except FileNotFoundError:
        return  # nothing downloaded yet: each caller says so in its own words
    except OSError as error:
        raise CheckpointError(f"the Hugging Face cache at {cache} cannot be read ({error.strerror}); check its "
                              "permissions, or set HF_HUB_CACHE (or HF_HOME) to a cache you can read") from None
    if not stat.S_ISDIR(status.st_mode):
        raise CheckpointError(f"the Hugging Face cache at {cache} is {file_kind(status.st_mode)}, not a folder; "
                              "set HF_HUB_CACHE (or HF_HOME) to the folder of your cache")


def unreadable_reason(error: OSError) -> str:
    """A few words for a list: 'unreadable: permission denied'."""
    return f"unreadable: {(error.strerror or type(error).__name__).lower()}"


def check_revision_name(revision: str) -> None:
    """CheckpointError unless `revision` can name a ref inside a repo's refs/ folder as git allows one: a branch
    (main), a tag (v1.0), refs/pr/N, or a commit hash. huggingface_hub joins it to the cache's path as it is, so
    '../x' or an absolute path would read, or write, a file anywhere."""
    def refuse(why: str) -> CheckpointError:
        return CheckpointError(f"{_shown(revision)} is not a revision: {why}; give a branch (main), a tag (v1.0), "
                               "refs/pr/N or a commit hash")

    if not isinstance(revision, str) or not revision:
        raise refuse("it is empty")
    if len(revision) > _REF_NAME_LIMIT:
        raise refuse(f"it is {len(revision)} characters long (a ref name has at most {_REF_NAME_LIMIT})")
    if revision.startswith("/") or revision.endswith("/") or "//" in revision:
        raise refuse("a revision is a name, not a path: it neither starts nor ends with '/'")
    if _REF_NAME_FORBIDDEN.search(revision):
        raise refuse("it holds a space, a control character or one of ~ ^ : ? * [ \\")
    if ".." in revision or "@{" in revision or revision == "@" or revision.endswith("."):
        raise refuse("it holds '..' or '@{', or ends with '.'")
    for part in revision.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            raise refuse(f"its part {part!r} starts with '.' or ends with '.lock'")


def read_ref(storage: Path, revision: str, repo_id: str) -> str | None:
    """The commit hash refs/<revision> holds in the repo cached at `storage`; None when there is no such ref.
    CacheEntryError naming the ref file when it holds anything but a commit hash (a path, binary bytes), or is not
    a file that can be read. `revision` must have passed check_revision_name."""
    ref = storage / "refs" / revision
    label = f"refs/{revision}"
    download = DOWNLOAD_HINT.format(repo_id=repo_id)

    def unreadable(error: OSError) -> CacheEntryError:
        return CacheEntryError(f"{repo_id}'s ref {ref} cannot be read ({error.strerror}); check its permissions, "
                               f"or download {repo_id} again with {download}", reason=unreadable_reason(error),
                               path=ref)

    try:
        os.lstat(ref)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:  # a folder on the way that cannot be searched: not the same as no ref
        raise unreadable(error) from None
    try:
        status = os.stat(ref)
    except FileNotFoundError:
        raise CacheEntryError(f"{repo_id}'s ref {ref} is a broken link; delete it, or download {repo_id} again with "
                              f"{download}", reason=f"{label} is a broken link", path=ref) from None
    except OSError as error:
        raise unreadable(error) from None
    if not stat.S_ISREG(status.st_mode):  # a FIFO would be waited on, a device read for ever: neither is opened
        raise CacheEntryError(f"{repo_id}'s ref {ref} is {file_kind(status.st_mode)}, not a file holding a commit "
                              f"hash; delete it, or download {repo_id} again with {download}",
                              reason=f"{label} is {file_kind(status.st_mode)}", path=ref)
    try:
        data = read_bytes(ref, limit=_REF_LIMIT)
    except FileNotFoundError:
        return None  # removed since: as if it had never been there
    except ValueError as error:  # larger than a ref, or swapped for a FIFO since the stat
        raise CacheEntryError(f"{repo_id}'s ref {error}; delete it, or download {repo_id} again with {download}",
                              reason=f"{label} holds no commit hash", path=ref) from None
    except OSError as error:
        raise unreadable(error) from None
    try:
        commit = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise CacheEntryError(f"{repo_id}'s ref {ref} is not text: it should hold a commit hash (40 hex digits); "
                              f"delete it, or download {repo_id} again with {download}",
                              reason=f"{label} is not text", path=ref) from None
    if not COMMIT_HASH.fullmatch(commit):
        raise CacheEntryError(f"{repo_id}'s ref {ref} holds {_shown(commit)} where a commit hash (40 hex digits) "
                              f"belongs, so it names no snapshot of {repo_id}; delete it, or download {repo_id} "
                              f"again with {download}", reason=f"{label} holds no commit hash", path=ref)
    return commit


def snapshot_folder(storage: Path, commit: str, repo_id: str, named_by: str) -> Path:
    """storage/snapshots/<commit>, checked to be a folder of this repo's own snapshots (a link into another repo's
    storage, or anywhere else, is refused); CacheEntryError saying what `named_by` ("refs/main") named otherwise."""
    snapshots = storage / "snapshots"
    snapshot = snapshots / commit
    download = DOWNLOAD_HINT.format(repo_id=repo_id)
    if not snapshot.is_dir():
        raise CacheEntryError(f"{repo_id}'s {named_by} names the commit {commit}, which has no snapshot in the "
                              f"Hugging Face cache ({snapshot}): the download was interrupted or the snapshot was "
                              f"deleted; download {repo_id} again with {download}",
                              reason=f"{named_by} names no snapshot", path=snapshot)
    if Path(os.path.realpath(snapshot)).parent != Path(os.path.realpath(snapshots)):
        raise CacheEntryError(f"{repo_id}'s snapshot {snapshot} is a link to {os.path.realpath(snapshot)}, outside "
                              f"{repo_id}'s own snapshots; it is not this model's: remove it and download {repo_id} "
                              f"again with {download}", reason="its snapshot links outside the repo", path=snapshot)
    return snapshot


def _cached_snapshot(repo_id: str, storage: Path, revision: str) -> Path:
    """The snapshot folder `revision` (a branch, a tag, refs/pr/N, or a commit hash, full or a unique prefix)
    names in the repo cached at `storage`, as huggingface_hub resolves it offline; CheckpointError otherwise."""
    download = DOWNLOAD_HINT.format(repo_id=repo_id)
    check_revision_name(revision)
    try:
        os.listdir(storage)  # a folder that cannot be read is said so, not taken for one without snapshots
    except OSError as error:
        raise CheckpointError(f"{repo_id}'s folder in the Hugging Face cache ({storage}) cannot be read "
                              f"({error.strerror}); check its permissions, or download it again with "
                              f"{download}") from None
    commit = read_ref(storage, revision, repo_id)
    named_by = f"refs/{revision}"
    if commit is None and COMMIT_HASH.fullmatch(revision):
        commit, named_by = revision, "revision"
    elif commit is None and _SHORT_COMMIT.fullmatch(revision):
        snapshots = _entries(storage / "snapshots", folders_only=True)
        matches = [entry.name for entry in snapshots if entry.name.startswith(revision)]
        if len(matches) > 1:
            raise CheckpointError(f"the commit '{revision}' of {repo_id} is ambiguous in the Hugging Face cache: "
                                  f"it starts {', '.join(sorted(matches))}; give more of its hash")
        if matches and COMMIT_HASH.fullmatch(matches[0]):
            commit, named_by = matches[0], "revision"
    if commit is None:
        # A repo downloaded by commit hash alone has no refs/main; "main" then means its newest snapshot
        newest = snapshot_for(storage, revision) if revision == "main" else None
        if newest is None:
            raise CheckpointError(f"{repo_id} is in the Hugging Face cache ({storage}) but has no usable snapshot "
                                  f"for '{revision}'; download it again with {download}")
        commit, named_by = newest.name, "newest snapshot"
    snapshot = snapshot_folder(storage, commit, repo_id, named_by)
    for listing in _entries(storage / "trees", folders_only=False):
        if not listing.is_file():  # huggingface_hub reads trees/<commit>.json with a blocking open() too
            raise CheckpointError(f"{listing.path} in the Hugging Face cache is not a file; remove it, or download "
                                  f"{repo_id} again with {download}")
    huggingface_hub_settings()
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError

    try:
        # Only config.json is asked for: a snapshot fetched with `hf download --include …` lacks files its cached
        # listing names (README, other weight formats), and is complete for us when it has config and weights.
        # Asked by the commit we checked, huggingface_hub reads no ref of its own.
        found = Path(snapshot_download(repo_id, revision=commit, cache_dir=storage.parent, local_files_only=True,
                                       allow_patterns=[CONFIG_FILE]))
    except IncompleteSnapshotError:
        raise CheckpointError(f"{repo_id} is in the Hugging Face cache ({storage}) but its snapshot for "
                              f"'{revision}' lacks the {CONFIG_FILE} the Hub listed for it: only part was downloaded; "
                              f"download it again with {download}") from None
    except LocalEntryNotFoundError:
        raise CheckpointError(f"{repo_id} is in the Hugging Face cache ({storage}) but has no usable snapshot "
                              f"for '{revision}'; download it again with {download}") from None
    except (OSError, ValueError) as error:  # a cached listing that cannot be read or parsed
        raise CheckpointError(f"{repo_id}'s cached file listing in {storage / 'trees'} cannot be read ({error}); "
                              f"remove that folder, or download {repo_id} again with {download}") from None
    if os.path.realpath(found) != os.path.realpath(snapshot):
        raise CheckpointError(f"{repo_id}'s snapshot for '{revision}' was found at {found}, not at {snapshot}; "
                              f"download {repo_id} again with {download}")
    return snapshot


def huggingface_hub_settings():
    """huggingface_hub.constants, imported; CheckpointError when importing it fails: it reads the HF_* environment
    variables once, when first imported, and one it cannot read (HF_HUB_DOWNLOAD_TIMEOUT=soon) is a ValueError."""
    try:
        from huggingface_hub import constants
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"huggingface_hub cannot start: {error}; an HF_* environment variable holds a value it "
                              "cannot read (HF_HUB_DOWNLOAD_TIMEOUT and HF_HUB_ETAG_TIMEOUT are whole seconds): fix "
                              "or unset it") from None
    return constants


def _shown(value: str, width: int = 80) -> str:
    """A value from a file or a server, quoted and cut, for a message: never a control character or a page."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 5] + "…'"


def _entries(folder: Path, *, folders_only: bool) -> list[os.DirEntry]:
    try:
        return [entry for entry in os.scandir(folder) if entry.is_dir() or not folders_only]
    except OSError:
        return []


def snapshot_for(storage: Path, revision: str) -> Path | None:
    """The snapshot a revision names (a ref's commit hash, or a commit hash itself); for "main" without its ref
    (a repo downloaded by commit hash), the most recently written snapshot. None when it names none; a ref that
    holds anything but a commit hash, or a snapshot that links out of the repo, is CacheEntryError (read_ref,
    snapshot_folder)."""
    repo_id = repo_id_of_storage(storage.name) or storage.name
    if COMMIT_HASH.fullmatch(revision):
        commit: str | None = revision
    else:
        check_revision_name(revision)
        commit = read_ref(storage, revision, repo_id)
    if commit is not None:
        snapshot = storage / "snapshots" / commit
        return snapshot_folder(storage, commit, repo_id, f"refs/{revision}") if snapshot.is_dir() else None
    if revision != "main" or os.path.lexists(storage / "refs" / revision):
        return None  # another branch or tag that was never downloaded: not whatever happens to be newest
    candidates = [entry for entry in _entries(storage / "snapshots", folders_only=True)
                  if COMMIT_HASH.fullmatch(entry.name)]
    if not candidates:
        return None
    newest = max(candidates, key=lambda entry: entry.stat().st_mtime)
    return snapshot_folder(storage, newest.name, repo_id, "its newest snapshot")


def weights_file(snapshot: Path) -> Path | None:
    for name in (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, PYTORCH_FILE, PYTORCH_INDEX_FILE):
        if (snapshot / name).is_file():
            return snapshot / name
    return None


def shard_files(index_file: Path) -> list[Path]:
    index = parse_json(read_bytes(index_file, limit=64 * 1024 * 1024), index_file)
    names = sorted(set(index["weight_map"].values()))
    if not names or any("/" in name or "\\" in name or name in ("", ".", "..") for name in names):
        raise ValueError(f"{index_file} names no usable shard files")
    return [index_file.parent / name for name in names]


def read_bytes(path: Path, limit: int) -> bytes:
    with open_without_touching(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data


def open_without_touching(path: Path):
    """Open a regular file for reading without updating its access time where the OS allows it (Linux, own
    files): "last used" is read from access times, and listing the cache must not make every model look just
    used. ValueError for a FIFO, device or folder in its place: it is never waited on (opening a FIFO blocks
    until a writer comes, and would hang the listing) nor read (a link to /dev/zero never ends)."""
    check_regular_file(path)
    flags = _NON_BLOCKING_READ | getattr(os, "O_NOATIME", 0)
    try:
        descriptor = os.open(path, flags)
    except PermissionError:
        descriptor = os.open(path, _NON_BLOCKING_READ)  # O_NOATIME is refused on files another user owns
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):  # swapped in since the check: what was opened counts
            raise ValueError(f"{path} is {file_kind(mode)}, not a file")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
