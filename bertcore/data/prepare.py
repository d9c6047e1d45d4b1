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

The cache: `cache_dir` (default `$XDG_CACHE_HOME/bert-explorer/corpora`, i.e. ~/.cache/...) holds one folder per
(corpus files with their sizes and modification times, text field, tokenizer). A changed file, another
tokenizer or another text field is another key, so a stale preparation is never read. A preparation is written
into a hidden `.partial` folder and renamed into place when whole (meta.json last), so a killed preparation
leaves no folder that a later run trusts; leftovers of dead processes are removed by the next preparation.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore.data.corpus import split_sentences
from bertcore.data.prepared import (
    DOCUMENT_OFFSETS_FILE,
    FORMAT_VERSION,
    META_FILE,
    SENTENCE_OFFSETS_FILE,
    TOKENS_FILE,
    PreparedCorpus,
    token_dtype,
)
from bertcore.data.sources import PIECE_CHARS, CorpusSource
from bertcore.errors import CorpusError

CHUNK_CHARS = 4 << 20  # characters of text tokenized per batched call (~1M tokens: a few tens of MB of ids)
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
    if os.environ.get("BERT_EXPLORER_DATA_CACHE"):
        return Path(os.environ["BERT_EXPLORER_DATA_CACHE"])
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
    """The prepared corpus of `source` tokenized by `tokenizer`: from the cache when it is there, else prepared
    now (`create`; with create=False a missing preparation is a CorpusError, as another DDP rank wants it).

    `progress` is called after every chunk; it may raise PreparationCancelled (or anything) to stop."""
    folder = cache_folder(source, tokenizer, cache_dir)
    if (folder / META_FILE).is_file():
        return PreparedCorpus.open(folder)
    if not create:
        raise CorpusError(f"the prepared corpus {folder} is not there; rank 0 prepares it, and every rank must see "
                          "the same cache folder (--data-cache on a shared file system) and the same corpus files")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as failure:
        raise CorpusError(f"the corpus cache {folder.parent} cannot be created ({failure.strerror or failure}); "
                          "choose another with --data-cache") from None
    _remove_dead_partials(folder.parent)
    staging = folder.parent / f".{folder.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
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
        raise CorpusError(f"the prepared corpus cannot be written under {folder.parent} "
                          f"({failure.strerror or failure}); free some space or choose another --data-cache"
                          ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PreparedCorpus.open(folder)


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
    with open(staging / TOKENS_FILE, "wb") as tokens_file, \
            open(staging / SENTENCE_OFFSETS_FILE, "wb") as sentences_file, \
            open(staging / DOCUMENT_OFFSETS_FILE, "wb") as documents_file:
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
    if num_documents == 0:
        raise CorpusError(f"corpus {source.source} has no tokens after tokenization; pick files with text")
    return {
        "format_version": FORMAT_VERSION, "source": source.source, "corpus": source.fingerprint(),
        "tokenizer": tokenizer_fingerprint(tokenizer), "vocab_size": tokenizer.vocab_size,
        "token_dtype": dtype.name, "num_documents": num_documents, "num_sentences": num_sentences,
        "num_tokens": num_tokens, "prepared_seconds": round(time.perf_counter() - started, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


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
