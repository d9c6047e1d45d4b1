"""A tokenized corpus as three flat arrays, in memory or memory-mapped from a prepared corpus folder.

    tokens            (num_tokens,)         uint16 (uint32 when the vocabulary exceeds 65,536 ids)
    sentence_offsets  (num_sentences + 1,)  int64: sentence s is tokens[sentence_offsets[s] : sentence_offsets[s+1]]
    document_offsets  (num_documents + 1,)  int64: document d is sentences document_offsets[d] .. [d+1] - 1

`TokenizedDocuments` reads them as documents of sentences: `documents[d]` is a document, `documents[d][i]` the
token ids of its sentence i (a list of ints), `len()` works on both, as on the nested lists they replace. A split
(train / held-out) is the same arrays with a list of document numbers, never a copy of the tokens. Memory is
O(documents) for the split's own index; tokens and offsets stay on disk until read.

A prepared corpus folder (bertcore.data.prepare writes it) holds tokens.bin, sentence_offsets.bin,
document_offsets.bin (raw little-endian arrays) and meta.json, written last: a folder is whole when meta.json
is there. meta.json records each file's size and CRC-32, which `PreparedCorpus.open` checks before any token is
read: a folder cut short, or changed after it was written (a token edited in tokens.bin), is a
PreparedCorpusDamaged naming the folder and the file, never a run trained on other tokens than its corpus's. The
check reads every byte once (zlib's CRC-32, ~1.4 GB/s on one core measured on a loaded two-core machine: about
0.3 s for the ~500 MB of a 1 GB text corpus, whose pages a run then finds in the page cache).

An open PreparedCorpus holds a shared lock (flock) on its meta.json for as long as it lives: the cache's
housekeeping (bertcore.data.prepare) removes an older preparation only when it can take that lock exclusively,
so never one that a run, in any process on the machine, is reading.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from bertcore.errors import CorpusError, PreparedCorpusDamaged
from bertcore.files.reading import open_regular_file, read_json

TOKENS_FILE = "tokens.bin"
SENTENCE_OFFSETS_FILE = "sentence_offsets.bin"
DOCUMENT_OFFSETS_FILE = "document_offsets.bin"
META_FILE = "meta.json"
# Bump when the files' layout or the way text becomes sentences changes (a new key: every corpus prepared again, and
# a resumed run warns that its corpus changed). The checksums came without a bump: a folder without them is one an
# earlier version made, prepared again in place under the same key.
FORMAT_VERSION = 1
DATA_FILES = (TOKENS_FILE, SENTENCE_OFFSETS_FILE, DOCUMENT_OFFSETS_FILE)
META_LIMIT = 1 << 20  # meta.json: a few KB (the corpus's file list: one entry per file)
CHECKSUM_BLOCK = 1 << 20  # bytes read at a time to check a file, into one buffer


def checksum(path: Path, block: int = CHECKSUM_BLOCK) -> str:
    """The CRC-32 of a regular file's bytes, as meta.json records it ("crc32:0a1b2c3d")."""
    value = 0
    buffer = bytearray(block)
    view = memoryview(buffer)
    with open_regular_file(path, error=OSError) as file:
        while count := file.readinto(buffer):
            value = zlib.crc32(view[:count], value)
    return f"crc32:{value:08x}"


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def index_dtype(size: int) -> np.dtype:
    """The narrowest signed integer holding 0..size (int32 below 2^31, else int64)."""
    return np.dtype(np.int32) if size < 1 << 31 else np.dtype(np.int64)


def running_counts(counts: np.ndarray) -> np.ndarray:
    """(n + 1,) 0 then the running totals of `counts`, in the narrowest dtype that holds the total: the index in
    which a draw k finds its document by binary search (np.searchsorted)."""
    total = int(counts.sum())
    running = np.zeros(len(counts) + 1, dtype=index_dtype(total))
    np.cumsum(counts, out=running[1:], dtype=running.dtype)
    return running


class SentenceStarts:
    """Uniform draws of a (document, sentence) among the sentences at or after `first` of every document, in
    O(documents) memory: cumulative counts per document (a numpy array, 4 bytes each where they fit), and a
    bisection per draw."""

    def __init__(self, documents: Sequence, first: int = 0):
        counts = getattr(documents, "sentence_counts", None)  # a prepared corpus keeps them as an array
        counts = np.fromiter((len(document) for document in documents), dtype=np.int64) if counts is None else counts
        self.first = first
        self.cumulative = running_counts(np.maximum(counts - first, 0))  # (documents + 1,), 0 first
        self.total = int(self.cumulative[-1])

    def draw(self, rng: random.Random) -> tuple[int, int]:
        index = rng.randrange(self.total)
        document = int(np.searchsorted(self.cumulative, index, side="right")) - 1
        return document, self.first + index - int(self.cumulative[document])


class Document(Sequence):
    """One document's sentences: `[i]` is sentence i's token ids (list of ints), `len()` the number of sentences."""

    __slots__ = ("_offsets", "_tokens")

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray):
        self._tokens = tokens
        self._offsets = offsets  # (num_sentences + 1,) into tokens

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"sentence {index} of a document of {len(self)}")
        return self._tokens[self._offsets[index] : self._offsets[index + 1]].tolist()

    def sentence_lengths(self) -> np.ndarray:
        return np.diff(self._offsets)

    def span(self, start: int, end: int) -> list[int]:
        """Token ids of sentences start..end-1, joined (one slice of the token array)."""
        return self._tokens[self._offsets[start] : self._offsets[end]].tolist()


class TokenizedDocuments(Sequence):
    """Documents (a split of them, when `document_ids` is given) of sentences of token ids over flat arrays."""

    def __init__(self, tokens: np.ndarray, sentence_offsets: np.ndarray, document_offsets: np.ndarray,
                 document_ids: np.ndarray | None = None):
        self.tokens = tokens
        self.sentence_offsets = sentence_offsets
        self.document_offsets = document_offsets
        # Document numbers and sentence counts are the index a run keeps in memory, O(documents): 4 bytes each
        # where they fit (a 1 GB corpus of short documents has 6.5 M of them).
        ids_dtype = index_dtype(len(document_offsets))
        self.document_ids = (np.arange(len(document_offsets) - 1, dtype=ids_dtype) if document_ids is None
                             else np.asarray(document_ids).astype(ids_dtype, copy=False))
        self._sentence_counts: np.ndarray | None = None

    @property
    def sentence_counts(self) -> np.ndarray:
        """(num_documents,) sentences per document of this split: the samplers' index, made when first asked."""
        if self._sentence_counts is None:
            counts = self.document_offsets[self.document_ids + 1] - self.document_offsets[self.document_ids]
            self._sentence_counts = counts.astype(index_dtype(int(self.document_offsets[-1]) + 1), copy=False)
        return self._sentence_counts

    @classmethod
    def from_lists(cls, documents: Sequence[Sequence[Sequence[int]]], vocab_size: int | None = None
                   ) -> TokenizedDocuments:
        """From nested lists (document -> sentence -> ids), in memory."""
        lengths = [len(sentence) for document in documents for sentence in document]
        largest = max((max(sentence) for document in documents for sentence in document if len(sentence)),
                      default=0)
        dtype = token_dtype(max(vocab_size or 0, largest + 1))
        tokens = np.fromiter((t for document in documents for sentence in document for t in sentence), dtype=dtype,
                             count=sum(lengths))
        sentence_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=sentence_offsets[1:])
        document_offsets = np.zeros(len(documents) + 1, dtype=np.int64)
        np.cumsum([len(document) for document in documents], out=document_offsets[1:])
        return cls(tokens, sentence_offsets, document_offsets)

    def subset(self, document_ids: np.ndarray) -> TokenizedDocuments:
        """The documents numbered `document_ids` (positions in this set), sharing the arrays."""
        return TokenizedDocuments(self.tokens, self.sentence_offsets, self.document_offsets,
                                  self.document_ids[np.asarray(document_ids)])

    def __len__(self) -> int:
        return len(self.document_ids)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        document = int(self.document_ids[index])
        first, last = int(self.document_offsets[document]), int(self.document_offsets[document + 1])
        return Document(self.tokens, self.sentence_offsets[first : last + 1])

    @property
    def num_sentences(self) -> int:
        return int(self.sentence_counts.sum())

    @property
    def num_tokens(self) -> int:
        """Tokens of this split's documents."""
        if len(self.document_ids) == len(self.document_offsets) - 1:
            return int(self.sentence_offsets[-1] - self.sentence_offsets[0])
        first = self.sentence_offsets[self.document_offsets[self.document_ids]]
        last = self.sentence_offsets[self.document_offsets[self.document_ids + 1]]
        return int((last - first).sum())

    def to_lists(self) -> list[list[list[int]]]:
        return [[list(sentence) for sentence in document] for document in self]


@dataclass(frozen=True)
class PreparedCorpus:
    """A prepared corpus folder, memory-mapped: its documents and what it was made from (meta.json)."""

    folder: Path
    meta: dict[str, Any]
    documents: TokenizedDocuments
    # What the cache did on the way (a damaged preparation replaced, older ones removed), for the run to say.
    notes: tuple[str, ...] = ()
    # meta.json, open and share-locked while this object lives: the folder is in use (see the module docstring).
    _lock: IO[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def source(self) -> str:
        return self.meta.get("source", str(self.folder))

    @property
    def key(self) -> str:
        return self.meta["key"]

    @property
    def num_tokens(self) -> int:
        return int(self.meta["num_tokens"])

    def record(self) -> dict[str, Any]:
        """What a run folder notes about the corpus it trained on (run_config.json "corpus")."""
        return {key: self.meta[key] for key in ("key", "source", "corpus", "tokenizer", "num_documents",
                                                "num_sentences", "num_tokens", "token_dtype")} | {
            "prepared": str(self.folder)}

    @classmethod
    def open(cls, folder: str | Path, *, verify: bool = True) -> PreparedCorpus:
        """The prepared corpus in `folder`, its files checked against meta.json (sizes, and with `verify` their
        checksums) before anything is mapped. PreparedCorpusDamaged naming the folder and what is wrong where it
        is not whole or not what was written (prepare_corpus then prepares it again); CorpusError where it cannot
        be read at all (permissions)."""
        folder = Path(folder)
        meta_path = folder / META_FILE

        def damaged(reason: str) -> PreparedCorpusDamaged:
            return PreparedCorpusDamaged(f"prepared corpus {folder} is damaged: {reason}; it is prepared again by "
                                         "the next run that needs it (or delete the folder)", folder, reason)

        if meta_path.exists() and not os.access(meta_path, os.R_OK):
            raise CorpusError(f"prepared corpus {folder} cannot be read (permission denied); give this user read "
                              "access, or point $BERT_EXPLORER_DATA_CACHE / --data-cache at another cache folder")
        try:
            meta = read_json(meta_path, limit=META_LIMIT, error=CorpusError, what="a meta.json")
        except FileNotFoundError:
            raise damaged(f"it has no {META_FILE} (a preparation writes it last)") from None
        except CorpusError as error:
            raise damaged(str(error)) from None
        if not isinstance(meta, dict):
            raise damaged(f"its {META_FILE} holds no object")
        if meta.get("format_version") != FORMAT_VERSION:
            raise damaged(f"it has format {meta.get('format_version')!r}, this version reads {FORMAT_VERSION}")
        if "checksums" not in meta:
            reason = "it was made by an earlier version, without checksums"
            raise PreparedCorpusDamaged(f"prepared corpus {folder}: {reason}; it is prepared again by the next run "
                                        "that needs it (or delete the folder)", folder, reason)
        try:
            counts = {TOKENS_FILE: int(meta["num_tokens"]), SENTENCE_OFFSETS_FILE: int(meta["num_sentences"]) + 1,
                      DOCUMENT_OFFSETS_FILE: int(meta["num_documents"]) + 1}
            dtypes = {TOKENS_FILE: np.dtype(meta["token_dtype"]), SENTENCE_OFFSETS_FILE: np.dtype(np.int64),
                      DOCUMENT_OFFSETS_FILE: np.dtype(np.int64)}
            checksums = dict(meta["checksums"])
        except (KeyError, TypeError, ValueError) as error:
            raise damaged(f"its {META_FILE} lacks or misstates {error}") from None
        if not isinstance(meta.get("key"), str):
            raise damaged(f"its {META_FILE} names no key")
        if dtypes[TOKENS_FILE] not in (np.dtype(np.uint16), np.dtype(np.uint32)) or min(counts.values()) < 0:
            raise damaged(f"its {META_FILE} misstates the token type or counts")
        lock = _shared_lock(meta_path)
        try:
            arrays = {}
            for name in DATA_FILES:
                path = folder / name
                expected = counts[name] * dtypes[name].itemsize
                size = path.stat().st_size if path.is_file() else None
                if size != expected:
                    raise damaged(f"{name} holds {size} bytes, {META_FILE} says {expected}")
                if verify:
                    try:
                        found = checksum(path)
                    except OSError as failure:
                        raise CorpusError(f"prepared corpus {folder}: {name} cannot be read ({failure}); give this "
                                          "user read access, or point $BERT_EXPLORER_DATA_CACHE / --data-cache at "
                                          "another cache folder") from None
                    if found != checksums.get(name):
                        raise damaged(f"{name} does not match the checksum its preparation recorded ({found}, "
                                      f"not {checksums.get(name)}): it was changed or damaged since")
                # A zero-length file cannot be memory-mapped; an empty array stands in for it.
                arrays[name] = (np.memmap(path, dtype=dtypes[name], mode="r", shape=(counts[name],))
                                if counts[name] else np.zeros(0, dtype=dtypes[name]))
        except BaseException:
            if lock is not None:
                lock.close()
            raise
        documents = TokenizedDocuments(arrays[TOKENS_FILE], arrays[SENTENCE_OFFSETS_FILE],
                                       arrays[DOCUMENT_OFFSETS_FILE])
        return cls(folder, meta, documents, _lock=lock)


def _shared_lock(meta_path: Path) -> IO[bytes] | None:
    """meta.json opened and share-locked (None where the file system has no locks: then nothing is removed)."""
    try:
        handle = open_regular_file(meta_path, error=OSError)  # held by the PreparedCorpus, closed with it
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
    except OSError:
        handle.close()
        return None
    return handle


def try_exclusive_lock(folder: Path) -> IO[bytes] | None:
    """meta.json of `folder` locked exclusively, where no PreparedCorpus holds it (None otherwise, and where it
    cannot be locked): the caller may remove the folder while it holds the returned handle."""
    try:
        handle = open_regular_file(folder / META_FILE, error=OSError)  # the caller closes it
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def close_quietly(handle: IO[bytes] | None) -> None:
    if handle is not None:
        with contextlib.suppress(OSError):
            handle.close()
