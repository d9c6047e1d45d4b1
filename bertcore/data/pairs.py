"""BERT's next-sentence pairs (Devlin et al. 2019, appendix A.1): segment A is a run of consecutive sentences;
half of the time B is the text that really follows A in the same document (IsNext, label 0), half of the time a
run from another document (NotNext, label 1); `[CLS] A [SEP] B [SEP]` fits the sequence length (longest-first
truncation that keeps IsNext text contiguous: A loses tokens at its start, B at its end).

    sampler = PairSampler(train_docs, seq_len=128, source="tinyshakespeare.txt")
    examples = sampler.sample_batch(step_rng(0, 0, 1), 32)   # list of PairExample
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from bertcore.data.corpus import Document
from bertcore.data.prepared import SentenceStarts, TokenizedDocuments
from bertcore.errors import CorpusError


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
        # Every sentence can start a segment; sentence i >= 1 of a document can start an IsNext B.
        self.starts = SentenceStarts(documents)
        self.next_starts = SentenceStarts(documents, first=1)
        if not self.next_starts.total:
            raise CorpusError(
                f"{source} has no document with two or more sentences, so no IsNext pair exists; "
                f"sentences end with . ! or ? and documents are separated by blank lines"
            )

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
            doc_a, b_start = self.next_starts.draw(rng)
            tokens_a, before = self._run(doc_a, b_start - 1, a_budget, -1)
            a_range = (before + 1, b_start)
            doc_b = doc_a
            tokens_b, b_end = self._run(doc_a, b_start, max(1, target - len(tokens_a)), +1)
            b_range = (b_start, b_end)
        else:
            doc_a, a_start = self.starts.draw(rng)
            tokens_a, a_end = self._run(doc_a, a_start, a_budget, +1)
            a_range = (a_start, a_end)
            doc_b = doc_a
            while doc_b == doc_a:
                doc_b, b_start = self.starts.draw(rng)
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
