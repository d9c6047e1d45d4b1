"""Reading a text corpus: documents of sentences, their token ids, and a seeded split into train and held-out.

A corpus is a plain-text file or a folder of `.txt` files; blank lines separate documents (a file boundary is a
document boundary too); each document is split into sentences (Devlin et al. 2019, appendix A.1). Sentence pairs
are drawn in bertcore.data.segments, batches in bertcore.data.batches.

    corpus = read_corpus("assets/corpus/tinyshakespeare.txt")        # Corpus of documents of sentences
    tokenizer = BertTokenizer.from_vocab_file("assets/vocab.txt")
    train_docs, heldout_docs = split_documents(tokenize_corpus(corpus, tokenizer), 0.02, seed=0)
"""

from __future__ import annotations

import array
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore.errors import CorpusError
from bertcore.files.reading import open_regular_file, present

# Token ids of one sentence, of one document (list of sentences), of a corpus (list of documents).
Sentence = list[int]
Document = list[Sentence]

# A sentence ends at . ! or ? (possibly followed by closing quotes/brackets) and whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class Corpus:
    """Documents of sentences read from one file or a folder of `.txt` files."""

    documents: list[list[str]]  # document -> sentences (plain text)
    files: list[Path]  # the files read, in reading order
    source: str  # what the user named (file or folder), for messages

    @property
    def num_sentences(self) -> int:
        return sum(len(document) for document in self.documents)


def split_sentences(text: str) -> list[str]:
    """Split one document into sentences: lines are joined, then split after . ! ? and whitespace."""
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return [sentence.strip() for sentence in _SENTENCE_END.split(joined) if sentence.strip()]


def split_documents_text(text: str) -> list[str]:
    """Blank lines separate documents."""
    return [block for block in _BLANK_LINE.split(text) if block.strip()]


def read_text_file(path: str | Path, *, kind: str = "corpus file", error: type[ValueError] = CorpusError) -> str:
    """The file's text; `error` (CorpusError) naming the `kind` of file for a missing file, non-UTF-8 bytes or no
    text, and naming what is there when it is not a regular file (a FIFO, a device such as /dev/zero, a folder, a
    broken link): only a regular file is opened, so a read never waits on a writer nor reads without end. Its
    size is not bounded (a corpus may be large)."""
    path = Path(path)
    try:
        file = open_regular_file(path, error=error, label=kind)
    except FileNotFoundError:
        raise error(f"{kind} {path} does not exist; check the path") from None
    except error as refused:
        raise error(f"{refused}; pass a plain text file (save the text into one first)") from None
    with file:
        try:
            raw = file.read()
        except OSError as failure:
            raise error(f"{kind} {path} cannot be read: {failure.strerror or failure}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as bad:
        line = raw[: bad.start].count(b"\n") + 1
        raise error(
            f"{kind} {path} is not UTF-8 text: byte 0x{raw[bad.start]:02x} at byte offset {bad.start} "
            f"(line {line}) is invalid; re-save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        ) from None
    if not text.strip():
        raise error(f"{kind} {path} is empty (no text); pick a file with some text in it")
    return text


def read_corpus(path: str | Path) -> Corpus:
    """Read a `.txt` file, or every `.txt` file under a folder (sorted), into documents of sentences."""
    path = Path(path)
    if path.is_dir():
        # Not only regular files: a FIFO or a link to a device among them is named (read_text_file), not skipped.
        files = sorted(p for p in path.rglob("*.txt") if not p.is_dir())
        if not files:
            raise CorpusError(f"corpus folder {path} holds no .txt files; put plain-text .txt files in it")
    elif present(path):  # a FIFO, a device or a broken link too: read_text_file names what it is
        files = [path]
    else:
        raise CorpusError(f"corpus {path} does not exist; pass an existing .txt file or a folder of them")
    documents: list[list[str]] = []
    for file in files:
        for block in split_documents_text(read_text_file(file)):
            sentences = split_sentences(block)
            if sentences:
                documents.append(sentences)
    return Corpus(documents=documents, files=files, source=str(path))


def tokenize_corpus(corpus: Corpus, tokenizer) -> list[Document]:
    """Token ids of every sentence (no special tokens), one batched tokenizer call; empty sentences dropped."""
    flat = [sentence for document in corpus.documents for sentence in document]
    ids = tokenizer.encode_ids(flat)
    documents: list[Document] = []
    cursor = 0
    for document in corpus.documents:
        sentences = [sentence for sentence in ids[cursor : cursor + len(document)] if sentence]
        cursor += len(document)
        if sentences:
            documents.append(sentences)
    return documents


def split_document_ids(
    num_documents: int, heldout_fraction: float, seed: int, *, source: str = "the corpus"
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded split of document numbers 0..num_documents-1 into (train, held-out), each in reading order, each
    side with at least 2 documents. The draw is the one `split_documents` has always made."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction is {heldout_fraction}; it must be in [0, 1)")
    if heldout_fraction == 0.0:
        return np.arange(num_documents, dtype=np.int64), np.zeros(0, dtype=np.int64)
    num_heldout = max(2, round(heldout_fraction * num_documents))
    if num_documents - num_heldout < 2:
        raise CorpusError(
            f"{source} has {num_documents} documents; a held-out split of {heldout_fraction:.0%} needs at least "
            f"{num_heldout + 2} (separate documents with blank lines, or use a larger corpus)"
        )
    # The same draws as shuffling list(range(n)), on 8-byte slots instead of one Python int per document:
    # 6.5 M documents (a 1 GB corpus) held 316 MB as a list, 52 MB as an array.
    order = array.array("q", range(num_documents))
    random.Random(f"heldout-{seed}").shuffle(order)
    is_heldout = np.zeros(num_documents, dtype=bool)
    is_heldout[np.frombuffer(order, dtype=np.int64)[:num_heldout]] = True
    return np.flatnonzero(~is_heldout), np.flatnonzero(is_heldout)


def split_documents(
    documents: Sequence[Document], heldout_fraction: float, seed: int, *, source: str = "the corpus"
) -> tuple[list[Document], list[Document]]:
    """A seeded split by whole documents into (train, held-out); each side keeps at least 2 documents."""
    train, heldout = split_document_ids(len(documents), heldout_fraction, seed, source=source)
    return [documents[i] for i in train], [documents[i] for i in heldout]
