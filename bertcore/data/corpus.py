"""From a text corpus to BERT pretraining batches: documents, sentences, sentence pairs, masked batches.

The recipe is the paper's (Devlin et al. 2019, appendix A.1):

- a corpus is a plain-text file or a folder of `.txt` files; blank lines separate documents (a file
  boundary is a document boundary too); each document is split into sentences;
- segment A is a run of consecutive sentences; half of the time B is the text that really follows A in the
  same document (IsNext, label 0), half of the time a run from another document (NotNext, label 1);
  `[CLS] A [SEP] B [SEP]` fits the sequence length (longest-first truncation that keeps IsNext text
  contiguous: A loses tokens at its start, B at its end);
- masking is dynamic: `bertcore.data.masking.mask_tokens` draws fresh masks every time an example is drawn;
- a batch is padded only to its longest sequence; with `length_buckets > 1` batches are cut from a
  length-sorted pool of that many batches, so sequences of similar length share a batch and little is padding.

Sampling is with replacement and stateless: the batch for training step `s` on rank `r` is a pure function
of `(seed, r, s)` (see `step_rng`), so "the data position" of a run is simply its step, and a resumed run
draws exactly the batches an uninterrupted run would have drawn.

    corpus = read_corpus("assets/corpus/tinyshakespeare.txt")        # Corpus of documents of sentences
    tokenizer = BertTokenizer.from_vocab_file("assets/vocab.txt")
    train_docs, heldout_docs = split_documents(tokenize_corpus(corpus, tokenizer), 0.02, seed=0)
    sampler = PairSampler(train_docs, seq_len=128, source="tinyshakespeare.txt")
    batch = make_batch(sampler.sample_batch(step_rng(0, 0, 1), 32), tokenizer, generator)  # Batch
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertcore.data.buckets import LengthBuckets
from bertcore.data.prepared import PreparedCorpus, TokenizedDocuments
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
    order = list(range(num_documents))
    random.Random(f"heldout-{seed}").shuffle(order)
    is_heldout = np.zeros(num_documents, dtype=bool)
    is_heldout[np.asarray(order[:num_heldout], dtype=np.int64)] = True
    return np.flatnonzero(~is_heldout), np.flatnonzero(is_heldout)


def split_documents(
    documents: Sequence[Document], heldout_fraction: float, seed: int, *, source: str = "the corpus"
) -> tuple[list[Document], list[Document]]:
    """A seeded split by whole documents into (train, held-out); each side keeps at least 2 documents."""
    train, heldout = split_document_ids(len(documents), heldout_fraction, seed, source=source)
    return [documents[i] for i in train], [documents[i] for i in heldout]


def step_rng(seed: int, rank: int, step: int, stream: str = "train") -> random.Random:
    """The random source for one step: a pure function of (seed, rank, step), so resume is exact."""
    return random.Random(f"{stream}-{seed}-{rank}-{step}")  # str seeds hash with SHA-512: stable across runs


@dataclass(frozen=True)
class PairExample:
    """One NSP example (no special tokens) and where its segments came from (document, sentence range)."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_next: bool
    document_a: int
    sentences_a: tuple[int, int]  # [start, end) sentence indices in document_a
    document_b: int
    sentences_b: tuple[int, int]

    @property
    def next_sentence_label(self) -> int:
        return 0 if self.is_next else 1  # HF / paper convention: 0 = IsNext, 1 = NotNext


class PairSampler:
    """Draws `PairExample`s from tokenized documents: 50% IsNext, 50% NotNext, A+B within `seq_len - 3`.

    `documents` are nested lists (document -> sentence -> ids) or a `TokenizedDocuments` (a prepared corpus, or a
    split of one): either way they are read through flat arrays, and the index of where a segment may start is
    O(documents), not O(sentences), so a corpus of 10^7 sentences samples in the memory of its document count.
    The draws are those of the list-of-(document, sentence) index this replaces: the same batches for a seed."""

    def __init__(
        self, documents: Sequence[Document] | TokenizedDocuments, seq_len: int, *, short_seq_prob: float = 0.1,
        source: str = "the corpus",
    ):
        if seq_len < 8:
            raise ValueError(f"seq_len is {seq_len}; it must be at least 8 ([CLS] A [SEP] B [SEP] plus text)")
        if not isinstance(documents, TokenizedDocuments):
            documents = TokenizedDocuments.from_lists(documents)
        self.documents = documents
        self.seq_len = seq_len
        self.max_pair_tokens = seq_len - 3  # room left by [CLS] A [SEP] B [SEP]
        self.short_seq_prob = short_seq_prob
        num_tokens = documents.num_tokens
        if len(self.documents) < 2:
            raise CorpusError(
                f"{source} has {len(self.documents)} document(s) to sample from; NotNext pairs need at least 2 "
                f"(separate documents with a blank line, or use a larger corpus)"
            )
        if num_tokens < seq_len:
            raise CorpusError(
                f"{source} has only {num_tokens} tokens to sample from, fewer than one sequence of {seq_len}; "
                f"use a larger corpus or a sequence length of at most {max(8, num_tokens // 2)}"
            )
        # Every sentence can start a segment; sentence i >= 1 of a document can start an IsNext B. Draw k of
        # them is found by a binary search in the running counts: (documents + 1,) each.
        counts = documents.sentence_counts
        self._sentence_starts = np.concatenate([[0], np.cumsum(counts)])
        self._next_starts = np.concatenate([[0], np.cumsum(np.maximum(counts - 1, 0))])
        self.num_sentence_starts = int(self._sentence_starts[-1])
        self.num_next_starts = int(self._next_starts[-1])
        if not self.num_next_starts:
            raise CorpusError(
                f"{source} has no document with two or more sentences, so no IsNext pair exists; "
                f"sentences end with . ! or ? and documents are separated by blank lines"
            )

    def sentence_start(self, k: int) -> tuple[int, int]:
        """(document, sentence) of the k-th sentence in reading order."""
        document = int(np.searchsorted(self._sentence_starts, k, side="right")) - 1
        return document, k - int(self._sentence_starts[document])

    def next_start(self, k: int) -> tuple[int, int]:
        """(document, sentence >= 1) of the k-th sentence that follows another in its document."""
        document = int(np.searchsorted(self._next_starts, k, side="right")) - 1
        return document, k - int(self._next_starts[document]) + 1

    def _run(self, document: int, start: int, budget: int, step: int) -> tuple[list[int], int]:
        """Consecutive sentences from `start` in direction `step` (+1 / -1) within `budget` tokens (>= 1 sentence):
        (their token ids, the first sentence index not taken)."""
        doc = self.documents[document]
        lengths = doc.sentence_lengths()
        # each sentence has >= 1 token, so at most budget + 1 of them are looked at
        if step > 0:
            window = lengths[start : start + budget + 1].tolist()
        else:
            low = max(0, start - budget)
            window = lengths[low : start + 1].tolist()[::-1]
        total = taken = 0
        for length in window:
            if taken and total + length > budget:
                break
            total += length
            taken += 1
        if step > 0:
            return doc.span(start, start + taken), start + taken
        return doc.span(start - taken + 1, start + 1), start - taken

    def sample(self, rng: random.Random) -> PairExample:
        target = self.max_pair_tokens
        if rng.random() < self.short_seq_prob:
            target = rng.randint(2, self.max_pair_tokens)  # some short sequences, as in the paper
        a_budget = rng.randint(1, target - 1)
        is_next = rng.random() < 0.5
        if is_next:
            doc_a, b_start = self.next_start(rng.randrange(self.num_next_starts))
            tokens_a, before = self._run(doc_a, b_start - 1, a_budget, -1)
            a_range = (before + 1, b_start)
            doc_b = doc_a
            tokens_b, b_end = self._run(doc_a, b_start, max(1, target - len(tokens_a)), +1)
            b_range = (b_start, b_end)
        else:
            doc_a, a_start = self.sentence_start(rng.randrange(self.num_sentence_starts))
            tokens_a, a_end = self._run(doc_a, a_start, a_budget, +1)
            a_range = (a_start, a_end)
            doc_b = doc_a
            while doc_b == doc_a:
                doc_b, b_start = self.sentence_start(rng.randrange(self.num_sentence_starts))
            tokens_b, b_end = self._run(doc_b, b_start, max(1, target - len(tokens_a)), +1)
            b_range = (b_start, b_end)
        # Longest-first truncation: A loses its start, B its end, so IsNext text stays contiguous.
        excess = len(tokens_a) + len(tokens_b) - target
        if excess > 0:
            keep_a, keep_b = len(tokens_a), len(tokens_b)
            if keep_a - excess >= keep_b:
                keep_a -= excess
            elif keep_b - excess >= keep_a:
                keep_b -= excess
            else:  # both end up around half of the target
                keep_a = target // 2
                keep_b = target - keep_a
            tokens_a = tokens_a[len(tokens_a) - keep_a :]
            tokens_b = tokens_b[:keep_b]
        return PairExample(tokens_a, tokens_b, is_next, doc_a, a_range, doc_b, b_range)

    def sample_batch(self, rng: random.Random, batch_size: int) -> list[PairExample]:
        return [self.sample(rng) for _ in range(batch_size)]


@dataclass(frozen=True)
class Batch:
    """A masked, padded batch (B, T) with T = the longest sequence in the batch."""

    input_ids: torch.Tensor  # (B, T) after masking
    token_type_ids: torch.Tensor  # (B, T) 0 = [CLS] A [SEP], 1 = B [SEP], 0 on padding
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = padding
    labels: torch.Tensor  # (B, T) original id at masked positions, -100 elsewhere
    next_sentence_label: torch.Tensor  # (B,) 0 = IsNext, 1 = NotNext
    num_tokens: int  # real (non-pad) tokens, [CLS]/[SEP] included

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        move = lambda t: t.to(device, non_blocking=non_blocking)  # noqa: E731
        return Batch(move(self.input_ids), move(self.token_type_ids), move(self.attention_mask),
                     move(self.labels), move(self.next_sentence_label), self.num_tokens)

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments for `BertForPreTraining.forward`."""
        return {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                "attention_mask": self.attention_mask, "labels": self.labels,
                "next_sentence_label": self.next_sentence_label}


def collate_pairs(
    examples: Sequence[PairExample], *, cls_token_id: int, sep_token_id: int, pad_token_id: int
) -> dict[str, torch.Tensor]:
    """`[CLS] A [SEP] B [SEP]` rows padded to the longest: input_ids, token_type_ids, attention_mask,
    special_tokens_mask (True on [CLS]/[SEP]/padding) and next_sentence_label."""
    if not examples:
        raise ValueError("collate_pairs needs at least one example")
    longest = max(len(e.tokens_a) + len(e.tokens_b) + 3 for e in examples)
    input_ids, token_type_ids, attention_mask, special = [], [], [], []
    for e in examples:
        row = [cls_token_id, *e.tokens_a, sep_token_id, *e.tokens_b, sep_token_id]
        num_a, pad = len(e.tokens_a) + 2, longest - len(row)
        input_ids.append(row + [pad_token_id] * pad)
        token_type_ids.append([0] * num_a + [1] * (len(row) - num_a) + [0] * pad)
        attention_mask.append([1] * len(row) + [0] * pad)
        special.append([1] + [0] * len(e.tokens_a) + [1] + [0] * len(e.tokens_b) + [1] + [1] * pad)
    return {
        "input_ids": torch.tensor(input_ids, dtype=torch.long),  # (B, T)
        "token_type_ids": torch.tensor(token_type_ids, dtype=torch.long),
        "attention_mask": torch.tensor(attention_mask, dtype=torch.long),
        "special_tokens_mask": torch.tensor(special, dtype=torch.bool),
        "next_sentence_label": torch.tensor([e.next_sentence_label for e in examples], dtype=torch.long),
    }


def make_batch(
    examples: Sequence[PairExample], tokenizer, generator: torch.Generator | None = None,
    mlm_probability: float = 0.15, masking: str = "token",
) -> Batch:
    """Collate and mask (fresh masks from `generator`, with the `masking` recipe of bertcore.data.masking) a list
    of examples into a `Batch`."""
    from bertcore.data.masking import continues_word, mask_tokens

    columns = collate_pairs(examples, cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                            pad_token_id=tokenizer.pad_token_id)
    masked = mask_tokens(
        columns["input_ids"], columns["special_tokens_mask"], mask_token_id=tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size, special_token_ids=tokenizer.special_token_ids, generator=generator,
        mlm_probability=mlm_probability, recipe=masking,
        word_continues=None if masking == "token" else continues_word(tokenizer),
    )
    return Batch(
        input_ids=masked.input_ids, token_type_ids=columns["token_type_ids"],
        attention_mask=columns["attention_mask"], labels=masked.labels,
        next_sentence_label=columns["next_sentence_label"],
        num_tokens=int(columns["attention_mask"].sum()),
    )


class PretrainingData:
    """Train and held-out pair samplers over one tokenized corpus, with a seeded, stateless batch source."""

    def __init__(
        self, corpus: Corpus | PreparedCorpus, tokenizer, *, seq_len: int, heldout_fraction: float = 0.02,
        seed: int = 0, short_seq_prob: float = 0.1, mlm_probability: float = 0.15, length_buckets: int = 1,
        masking: str = "token", examples=None,
    ):
        """`examples`: another objective's `bertcore.data.segments.ExampleRecipe` (sentence-order pairs, full
        sentences) in place of BERT's next-sentence pairs; its sampler and collate take the pairs' arguments."""
        self._buckets: LengthBuckets[PairExample] = LengthBuckets(length_buckets)
        self.masking = masking
        self.examples = examples
        self._collate = make_batch if examples is None else examples.collate
        sampler = PairSampler if examples is None else functools.partial(examples.sampler, tokenizer=tokenizer)
        if isinstance(corpus, PreparedCorpus):  # memory-mapped: nothing is read until sampled
            documents = corpus.documents
        else:
            documents = TokenizedDocuments.from_lists(tokenize_corpus(corpus, tokenizer), tokenizer.vocab_size)
        if not len(documents):
            raise CorpusError(f"corpus {corpus.source} has no tokens after tokenization; pick a file with text")
        train, heldout = split_document_ids(len(documents), heldout_fraction, seed, source=f"corpus {corpus.source}")
        self.corpus = corpus
        self.tokenizer = tokenizer
        self.seq_len = seq_len
        self.seed = seed
        self.mlm_probability = mlm_probability
        self.length_buckets = length_buckets
        self.num_tokens = documents.num_tokens
        self.train_documents = documents.subset(train)
        self.heldout_documents = documents.subset(heldout)
        self.train = sampler(self.train_documents, seq_len, short_seq_prob=short_seq_prob,
                             source=f"the training split of corpus {corpus.source}")
        self.heldout = (sampler(self.heldout_documents, seq_len, short_seq_prob=short_seq_prob,
                                source=f"the held-out split of corpus {corpus.source}") if len(heldout) else None)

    def _batch(self, sampler: PairSampler, rng: random.Random, batch_size: int) -> Batch:
        examples = sampler.sample_batch(rng, batch_size)
        generator = torch.Generator().manual_seed(rng.getrandbits(63))
        return self._collate(examples, self.tokenizer, generator, self.mlm_probability, self.masking)

    def train_batch(self, step: int, batch_size: int, rank: int = 0) -> Batch:
        """The batch of training step `step` (1-based) on `rank`: a pure function of (seed, rank, step).

        With `length_buckets = k > 1`, steps come in groups of k: one pool of k·batch_size examples is drawn
        per group, sorted by length and cut into k batches taken in a random order, so each batch holds
        sequences of similar length and padding to its longest wastes little. Masks are drawn per step."""
        if self.length_buckets == 1:
            return self._batch(self.train, step_rng(self.seed, rank, step), batch_size)
        group, slot = self._buckets.locate(step)

        def draw_pool() -> tuple[list[PairExample], list[int], random.Random]:
            rng = step_rng(self.seed, rank, group, "pool")  # draws the pool, then deals its batches out
            examples = self.train.sample_batch(rng, self.length_buckets * batch_size)
            return examples, [len(e.tokens_a) + len(e.tokens_b) for e in examples], rng

        examples = self._buckets.batches((rank, group, batch_size), draw_pool, batch_size)[slot]
        generator = torch.Generator().manual_seed(step_rng(self.seed, rank, step, "mask").getrandbits(63))
        return self._collate(examples, self.tokenizer, generator, self.mlm_probability, self.masking)

    def heldout_batches(self, num_batches: int, batch_size: int, rank: int = 0) -> list[Batch]:
        """A fixed held-out set (same examples and masks at every evaluation, so curves are comparable)."""
        if self.heldout is None:
            return []
        return [self._batch(self.heldout, step_rng(self.seed, rank, i, "heldout"), batch_size)
                for i in range(num_batches)]
