"""Preparing a corpus once: its text streamed in chunks into memory-mapped token ids, cached for every later run.

    source = CorpusSource.open("corpora/wiki")                      # .txt, .txt.gz, .jsonl(.gz), Parquet, Arrow
    prepared = prepare_corpus(source, tokenizer, progress=print)    # PreparedCorpus (bertcore.data.prepared)
    prepared.documents[3][0]                                        # token ids of document 3's first sentence

How: documents -> sentences (`bertcore.data.corpus.split_sentences`, as `read_corpus` splits them) -> token ids,
one batched tokenizer call per chunk of about `chunk_chars` characters -> appended to tokens.bin and the two
offset files. Only one chunk is in memory at a time (its text, its ids), so peak memory grows neither with the
corpus nor with its longest line or record: a document comes in pieces (bertcore.data.sources), and a "sentence"
that runs on for more than a piece (4 M characters, or `chunk_chars` where smaller) without a . ! or ? is ended
there, as though it had one. Sentences that tokenize to nothing and documents left with no sentence are dropped, as
`tokenize_corpus` drops them, so a prepared corpus holds the same documents as the in-memory path.

The cache: `cache_dir` (default $BERT_EXPLORER_DATA_CACHE, else `$XDG_CACHE_HOME/bert-explorer/corpora`, i.e.
~/.cache/...; bert-train's --data-cache) holds one folder per (corpus files with their sizes and modification
times, text field, tokenizer). A changed file, another tokenizer or another text field is another key, so a stale
preparation is never read. A preparation is written into a hidden `.partial` folder and renamed into place when
whole (meta.json last, with every file's size and checksum), so a killed preparation leaves no folder that a later
run trusts; leftovers of dead processes are removed by the next preparation. A folder that is not whole after all
(meta.json deleted, a file cut or edited: bertcore.data.prepared.PreparedCorpus.open checks) is set aside and
prepared again, and the run says so. The cache keeps the newest KEEP_PER_SOURCE (2) preparations of each corpus
path: a new one removes the older ones, except any a run has open (a shared lock on its meta.json), so five edits
of a corpus leave two folders, not five. A read-only cache is a CorpusError naming it and how to choose another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore.data.corpus import split_sentences
from bertcore.data.prepared import (
    DOCUMENT_OFFSETS_FILE,
    FORMAT_VERSION,
    META_FILE,
    META_LIMIT,
    SENTENCE_OFFSETS_FILE,
    TOKENS_FILE,
    PreparedCorpus,
    close_quietly,
    token_dtype,
    try_exclusive_lock,
)
from bertcore.data.sources import PIECE_CHARS, CorpusSource
from bertcore.errors import CorpusError, PreparedCorpusDamaged
from bertcore.files.reading import read_json

CHUNK_CHARS = 4 << 20  # characters of text tokenized per batched call (~1M tokens: a few tens of MB of ids)
KEEP_PER_SOURCE = 2  # preparations of one corpus (path) the cache keeps: the newest, and the one before it
CACHE_VARIABLE = "BERT_EXPLORER_DATA_CACHE"  # where the cache is, where --data-cache is not given
DEFAULT_VOCAB_SAMPLE = 32_000_000  # characters of text a vocabulary is trained on, drawn evenly from the corpus
APP_CACHE = "bert-explorer"


class PreparationCancelled(Exception):
    """Raised by a progress callback to stop a preparation; nothing of it is left in the cache."""


@dataclass(frozen=True)
class PreparationProgress:
    """How far a pass over the corpus is: `phase` "vocabulary" (drawing the vocabulary's sample) or "tokenizing"."""

    phase: str
    done_bytes: int  # corpus bytes read so far (compressed bytes for .gz files)
    total_bytes: int
    elapsed_seconds: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes else 1.0

    @property
    def bytes_per_second(self) -> float:
        return self.done_bytes / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        speed = self.bytes_per_second
        return (self.total_bytes - self.done_bytes) / speed if speed > 0 else None

    def describe(self) -> str:
        eta = self.eta_seconds
        what = "drawing the vocabulary's sample" if self.phase == "vocabulary" else "preparing the corpus"
        return (f"{what}: {self.done_bytes / 1e6:,.0f} of {self.total_bytes / 1e6:,.0f} MB, "
                f"{self.bytes_per_second / 1e6:.1f} MB/s" + (f", {eta:.0f} s left" if eta is not None else ""))


ProgressCallback = Callable[[PreparationProgress], None]


def default_cache_dir() -> Path:
    """$BERT_EXPLORER_DATA_CACHE (e.g. a file system every DDP node sees; the test suite points it at a temporary
    folder), else $XDG_CACHE_HOME/bert-explorer/corpora, else ~/.cache/bert-explorer/corpora."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / APP_CACHE / "corpora"


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of everything that decides the token ids: the backend's full description (vocabulary, normaliser,
    pre-tokenizer) where the tokenizer has one, else its vocabulary and lower-casing."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        description = backend.to_str()
    else:
        description = json.dumps([type(tokenizer).__name__, list(tokenizer.vocab),
                                  getattr(tokenizer, "lowercase", None)])
    return hashlib.sha256(description.encode("utf-8")).hexdigest()


def corpus_key(source: CorpusSource, tokenizer) -> str:
    described = json.dumps({"format_version": FORMAT_VERSION, "corpus": source.fingerprint(),
                            "tokenizer": tokenizer_fingerprint(tokenizer)}, sort_keys=True)
    return hashlib.sha256(described.encode("utf-8")).hexdigest()[:32]


def cache_folder(source: CorpusSource, tokenizer, cache_dir: str | Path | None = None) -> Path:
    """Where the preparation of `source` with `tokenizer` lives: <cache>/<corpus name>-<key>."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(source.source).name or "corpus")[:40]
    return Path(cache_dir or default_cache_dir()) / f"{name}-{corpus_key(source, tokenizer)}"


def prepare_corpus(source: CorpusSource, tokenizer, *, cache_dir: str | Path | None = None,
                   progress: ProgressCallback | None = None, chunk_chars: int = CHUNK_CHARS,
                   create: bool = True) -> PreparedCorpus:
    """The prepared corpus of `source` tokenized by `tokenizer`: from the cache when it is there and whole, else
    prepared now (`create`; with create=False a missing or damaged preparation is a CorpusError, as another DDP
    rank wants it). A damaged one (PreparedCorpusDamaged: no meta.json, a file cut or changed) is set aside and
    prepared again; after a new preparation the older preparations of the same corpus beyond KEEP_PER_SOURCE are
    removed, unless a run has them open. The returned corpus's `notes` say what the cache did.

    `progress` is called after every chunk; it may raise PreparationCancelled (or anything) to stop."""
    folder = cache_folder(source, tokenizer, cache_dir)
    notes: list[str] = []
    if _exists(folder):
        try:
            return PreparedCorpus.open(folder)
        except PreparedCorpusDamaged as damage:
            if not create:
                raise
            _set_aside(folder)
            notes.append(f"the prepared corpus {folder} could not be used ({damage.reason}); it was prepared again")
    elif not create:
        raise CorpusError(f"the prepared corpus {folder} is not there; rank 0 prepares it, and every rank must see "
                          "the same cache folder (--data-cache on a shared file system) and the same corpus files")
    cache = folder.parent
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _remove_dead_partials(cache)
        staging = cache / f".{folder.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
        staging.mkdir()
    except OSError as failure:
        raise CorpusError(f"the corpus cache {cache} cannot be written ({failure.strerror or failure}); make it "
                          f"writable, or point ${CACHE_VARIABLE} or --data-cache at a folder that is") from None
    try:
        meta = _write_prepared(source, tokenizer, staging, progress, chunk_chars)
        meta["key"] = corpus_key(source, tokenizer)
        (staging / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        for name in (TOKENS_FILE, SENTENCE_OFFSETS_FILE, DOCUMENT_OFFSETS_FILE, META_FILE):
            with open(staging / name, "rb") as written:
                os.fsync(written.fileno())
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / META_FILE).is_file():  # not another process having finished the same work first
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as failure:
        shutil.rmtree(staging, ignore_errors=True)
        raise CorpusError(f"the prepared corpus cannot be written under {cache} ({failure.strerror or failure}); "
                          f"free some space, or point ${CACHE_VARIABLE} or --data-cache at another folder") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    prepared = PreparedCorpus.open(folder)
    notes += _remove_older_preparations(cache, folder, prepared.meta)
    return dataclasses.replace(prepared, notes=tuple(notes)) if notes else prepared


def _exists(path: Path) -> bool:
    """Anything at `path`, a dangling link included."""
    return os.path.lexists(path)


def _set_aside(folder: Path) -> None:
    """Move a damaged preparation out of the way (renamed, then removed): what is at its name is never followed
    (a link is unlinked, not its target)."""
    aside = folder.parent / f".{folder.name}.damaged-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return  # another process set it aside first
    except OSError as failure:
        raise CorpusError(f"the damaged prepared corpus {folder} cannot be replaced ({failure.strerror or failure}); "
                          f"delete it, or point ${CACHE_VARIABLE} or --data-cache at another cache folder") from None
    _remove(aside)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _folder_size(folder: Path) -> int:
    return sum(entry.stat().st_size for entry in folder.iterdir() if entry.is_file())


def _remove_older_preparations(cache: Path, current: Path, meta: dict) -> list[str]:
    """Delete the preparations of the same corpus (`source_path`) older than the newest KEEP_PER_SOURCE (the one
    just made counts), each only while it is locked exclusively: a run that has one open (its PreparedCorpus
    holds a shared lock) keeps it. A run that resumes after its preparation was removed prepares it again, the
    same tokens in the same order. Returns a note per removal."""
    older = []
    for folder in cache.iterdir():
        if folder == current or folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            other = read_json(folder / META_FILE, limit=META_LIMIT, error=CorpusError)
        except (FileNotFoundError, CorpusError):
            continue
        if isinstance(other, dict) and other.get("source_path") == meta.get("source_path"):
            created = other.get("created_ns")
            older.append((created if isinstance(created, int) else 0, folder))
    older.sort(reverse=True)
    notes = []
    for _, folder in older[KEEP_PER_SOURCE - 1:]:
        lock = try_exclusive_lock(folder)
        if lock is None:
            continue  # open in a run (or not lockable here): kept
        try:
            size = _folder_size(folder)
            aside = folder.parent / f".{folder.name}.removed-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(folder, aside)
        except OSError:
            continue  # a read-only cache: nothing is removed
        finally:
            close_quietly(lock)
        _remove(aside)
        notes.append(f"removed an older preparation of this corpus, {folder.name} ({size / 1e6:,.1f} MB); the cache "
                     f"keeps the newest {KEEP_PER_SOURCE} of each corpus")
    return notes


def corpus_change_note(recorded: dict | None, prepared: PreparedCorpus, source: CorpusSource) -> str | None:
    """What a resume says when its corpus is not the prepared corpus the run began on (`recorded`, from
    run_config.json), or None when it is the same (or the run recorded none)."""
    if not isinstance(recorded, dict) or recorded.get("key") in (None, prepared.key):
        return None
    changes = source.changes_since(recorded.get("corpus") or {})
    if recorded.get("tokenizer") != prepared.meta.get("tokenizer"):
        changes.append("the tokenizer differs")
    return (f"the corpus changed since this run began ({'; '.join(changes) or 'its preparation differs'}); the run "
            f"goes on with {prepared.source} as it is now, so its batches from here on are not those an "
            "uninterrupted run would have drawn")


def _remove_dead_partials(root: Path) -> None:
    """Delete `.partial` folders whose preparing process is gone (killed): never read, only in the way."""
    for partial in root.glob(".*.partial-*"):
        match = re.search(r"\.partial-(\d+)-", partial.name)
        if not match:
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(partial, ignore_errors=True)
        except (PermissionError, OverflowError, ValueError):
            pass  # alive under another user, or not a pid: leave it


def _write_prepared(source: CorpusSource, tokenizer, staging: Path, progress: ProgressCallback | None,
                    chunk_chars: int) -> dict:
    dtype = token_dtype(tokenizer.vocab_size)
    started = time.perf_counter()
    total_bytes = source.total_bytes
    num_sentences = num_documents = num_tokens = 0
    pending: list[str] = []  # sentences of this chunk
    document_ends: list[int] = []  # positions in `pending` after which a document ends
    pending_chars = 0
    position = 0
    with _ChecksummedFile(staging / TOKENS_FILE) as tokens_file, \
            _ChecksummedFile(staging / SENTENCE_OFFSETS_FILE) as sentences_file, \
            _ChecksummedFile(staging / DOCUMENT_OFFSETS_FILE) as documents_file:
        zero = np.zeros(1, dtype=np.int64).tobytes()
        sentences_file.write(zero)
        documents_file.write(zero)

        def flush() -> None:
            nonlocal num_sentences, num_documents, num_tokens, pending_chars
            ids = tokenizer.encode_ids(pending) if pending else []
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            kept = lengths[lengths > 0]
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
            del ids
            tokens_file.write(flat.tobytes())
            sentences_file.write((num_tokens + np.cumsum(kept)).astype(np.int64).tobytes())
            # a document ends after the sentences kept so far; one left with no sentence is dropped
            kept_before = np.concatenate([[0], np.cumsum(lengths > 0)])
            ends = num_sentences + kept_before[np.asarray(document_ends, dtype=np.int64)]
            previous = np.concatenate([[documents_written[-1]], ends[:-1]])
            ends = ends[ends > previous]
            documents_file.write(ends.astype(np.int64).tobytes())
            if len(ends):
                documents_written[-1] = int(ends[-1])
            num_tokens += int(flat.size)
            num_sentences += int(kept.size)
            num_documents += int(ends.size)
            pending.clear()
            document_ends.clear()
            pending_chars = 0
            if progress is not None:
                progress(PreparationProgress("tokenizing", position, total_bytes, time.perf_counter() - started))

        documents_written = [0]  # sentences before the end of the last document written
        carry = ""  # the unfinished last sentence of a document that goes on in the next piece
        piece_chars = min(chunk_chars, PIECE_CHARS)
        for piece in source.pieces(piece_chars=piece_chars):
            # carry + a line break + the piece joins as split_sentences joins a document's lines
            sentences = split_sentences(f"{carry}\n{piece.text}" if carry else piece.text)
            carry = "" if piece.ends_document or not sentences else sentences.pop()
            if len(carry) > piece_chars:  # no sentence end within a piece's length: the sentence ends here
                sentences.append(carry)
                carry = ""
            pending.extend(sentences)
            pending_chars += len(piece.text)
            position = piece.position
            if piece.ends_document:
                document_ends.append(len(pending))
            if pending_chars >= chunk_chars:
                flush()
        position = total_bytes
        flush()
        checksums = {file.path.name: file.checksum for file in (tokens_file, sentences_file, documents_file)}
    if num_documents == 0:
        raise CorpusError(f"corpus {source.source} has no tokens after tokenization; pick files with text")
    return {
        "format_version": FORMAT_VERSION, "source": source.source, "corpus": source.fingerprint(),
        "tokenizer": tokenizer_fingerprint(tokenizer), "vocab_size": tokenizer.vocab_size,
        "token_dtype": dtype.name, "num_documents": num_documents, "num_sentences": num_sentences,
        "num_tokens": num_tokens, "prepared_seconds": round(time.perf_counter() - started, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "created_ns": time.time_ns(),
        # the corpus as a path, whatever the folder it was named from: the cache keeps its newest preparations
        "source_path": str(Path(source.source).resolve()), "checksums": checksums,
    }


class _ChecksummedFile:
    """A file written once, front to back, that knows the CRC-32 of what was written (as prepared.checksum reads
    it back), so that checking a preparation later costs one read and writing it costs nothing more."""

    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "wb")
        self._crc = 0

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._crc = zlib.crc32(data, self._crc)

    @property
    def checksum(self) -> str:
        return f"crc32:{self._crc:08x}"

    def __enter__(self) -> _ChecksummedFile:
        return self

    def __exit__(self, *exc_info) -> None:
        self._file.close()


def vocabulary_sample(source: CorpusSource, sample_chars: int = DEFAULT_VOCAB_SAMPLE,
                      progress: ProgressCallback | None = None) -> Iterator[str]:
    """Document texts drawn evenly from the whole corpus, about `sample_chars` characters in all (at most that):
    every document whose share of the running quota (sample / corpus size) has come due. The whole corpus is
    read, not held; the texts are handed on one by one (a vocabulary trainer counts words as they come)."""
    total_bytes = source.total_bytes
    ratio = min(1.0, sample_chars / max(1, _text_size_estimate(source)))
    started = time.perf_counter()
    quota = 0.0
    taken = 0
    last_report = 0.0
    for piece in source.pieces():
        size = len(piece.text)
        quota += ratio * size
        if quota >= size and taken < sample_chars:
            quota -= size
            taken += size
            yield piece.text
        now = time.perf_counter()
        if progress is not None and now - last_report > 0.2:
            last_report = now
            progress(PreparationProgress("vocabulary", piece.position, total_bytes, now - started))
    if progress is not None:
        progress(PreparationProgress("vocabulary", total_bytes, total_bytes, time.perf_counter() - started))


def _text_size_estimate(source: CorpusSource) -> int:
    """Characters of text the corpus holds, about: a .gz file's own record of its uncompressed size, else the
    file's size."""
    total = 0
    for file in source.files:
        size = file.size
        if file.format.endswith(".gz") and size >= 18:
            with contextlib.suppress(OSError), open(file.path, "rb") as compressed:
                compressed.seek(-4, os.SEEK_END)
                size = max(size, int.from_bytes(compressed.read(4), "little"))  # ISIZE: modulo 4 GiB
        total += size
    return total
