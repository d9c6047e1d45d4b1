"""The examples each pretraining objective trains on, cut from tokenized documents (anything where
`documents[d][i]` is sentence i's token ids and `len(documents[d])` its number of sentences).

- Next-sentence pairs (BERT, Devlin et al. 2019, appendix A.1): segment A is a run of consecutive sentences;
  half of the time B is the text that really follows A in the same document (IsNext, label 0), half of the time a
  run from another document (NotNext, label 1); `[CLS] A [SEP] B [SEP]` fits the sequence length (longest-first
  truncation that keeps IsNext text contiguous: A loses tokens at its start, B at its end).
- Sentence-order pairs (ALBERT, Lan et al. 2020): segment A and segment B are two runs of consecutive sentences of
  one document, B right after A; half of the time they are swapped, and the model says which (label 0 = in order,
  1 = swapped). Unlike NSP's random B, both halves share a topic, so only coherence tells them apart.
- Full sentences (RoBERTa, Liu et al. 2019, "FULL-SENTENCES"): one segment of whole consecutive sentences filling
  the sequence, running on into the next document when one ends, with an extra [SEP] between documents. No
  second segment, no sentence label. ELECTRA's replaced-token detection reads the same packed sequences.

BERT's pairs come from a `PairSampler` (batches are collated in bertcore.data.batches); each other recipe is an
`ExampleRecipe`: a sampler over tokenized documents, the length a batch is bucketed by, and the collate that masks a
list of examples into a `SegmentBatch`. Sampling is with replacement and stateless: the examples of a step are a
pure function of the step's random source (`bertcore.data.batches.step_rng`).

    sampler = PairSampler(train_docs, seq_len=128, source="tinyshakespeare.txt")
    examples = sampler.sample_batch(step_rng(0, 0, 1), 32)   # list of PairExample
    sampler = FULL_SENTENCES.sampler(train_documents, 128, short_seq_prob=0.1, source="the corpus",
                                     tokenizer=tokenizer)
    batch = FULL_SENTENCES.collate(sampler.sample_batch(step_rng(0, 0, 1), 32), tokenizer, generator, 0.15)

`bertcore.data.batches.PretrainingData(..., examples=FULL_SENTENCES)` draws its train and held-out batches so.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertcore.data.corpus import Document
from bertcore.data.prepared import SentenceStarts, TokenizedDocuments
from bertcore.errors import CorpusError

# ---- BERT's next-sentence pairs

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


# ---- the other recipes' segments: sentence order, full sentences

def _ids(sentence) -> list[int]:
    return sentence if isinstance(sentence, list) else list(sentence)


@dataclass(frozen=True)
class SegmentExample:
    """One example before masking: segment A, segment B ([] for a single segment) and its sentence-order label."""

    tokens_a: list[int]
    tokens_b: list[int]
    sentence_order_label: int | None  # 0 = in order, 1 = swapped; None without a second segment

    @property
    def num_tokens(self) -> int:
        """Text tokens, without [CLS] and [SEP]."""
        return len(self.tokens_a) + len(self.tokens_b)


def _run(document, start: int, budget: int, step: int) -> tuple[list[int], int]:
    """Consecutive sentences from `start` in direction `step` (+1 / -1) within `budget` tokens (>= 1 sentence)."""
    tokens: list[int] = []
    index = start
    while 0 <= index < len(document):
        sentence = _ids(document[index])
        if tokens and len(tokens) + len(sentence) > budget:
            break
        tokens = tokens + sentence if step > 0 else sentence + tokens
        index += step
    return tokens, index


def truncate_pair(tokens_a: list[int], tokens_b: list[int], target: int) -> tuple[list[int], list[int]]:
    """Longest-first truncation to `target` tokens in all: A loses its start and B its end, so the text where A
    meets B stays contiguous (as pairs.PairSampler truncates)."""
    excess = len(tokens_a) + len(tokens_b) - target
    if excess <= 0:
        return tokens_a, tokens_b
    keep_a, keep_b = len(tokens_a), len(tokens_b)
    if keep_a - excess >= keep_b:
        keep_a -= excess
    elif keep_b - excess >= keep_a:
        keep_b -= excess
    else:
        keep_a = target // 2
        keep_b = target - keep_a
    return tokens_a[len(tokens_a) - keep_a :], tokens_b[:keep_b]


class SentenceOrderSampler:
    """ALBERT's pairs: A and the B that follows it in one document, swapped half of the time; A+B within
    `seq_len - 3` ([CLS] A [SEP] B [SEP]), shorter targets with probability `short_seq_prob` as BERT's."""

    def __init__(self, documents: Sequence, seq_len: int, *, short_seq_prob: float = 0.1,
                 source: str = "the corpus"):
        if seq_len < 8:
            raise ValueError(f"seq_len is {seq_len}; it must be at least 8 ([CLS] A [SEP] B [SEP] plus text)")
        self.documents = documents
        self.max_pair_tokens = seq_len - 3
        self.short_seq_prob = short_seq_prob
        self.b_starts = SentenceStarts(documents, first=1)  # B starts at a sentence with one before it
        if self.b_starts.total == 0:
            raise CorpusError(f"{source} has no document with two or more sentences, so no sentence-order pair "
                              "exists; sentences end with . ! or ? and documents are separated by blank lines")

    def sample(self, rng: random.Random) -> SegmentExample:
        target = self.max_pair_tokens
        if rng.random() < self.short_seq_prob:
            target = rng.randint(2, self.max_pair_tokens)
        a_budget = rng.randint(1, target - 1)
        document_index, b_start = self.b_starts.draw(rng)
        document = self.documents[document_index]
        tokens_a, _ = _run(document, b_start - 1, a_budget, -1)
        tokens_b, _ = _run(document, b_start, max(1, target - len(tokens_a)), +1)
        tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, target)
        if rng.random() < 0.5:
            return SegmentExample(tokens_b, tokens_a, 1)
        return SegmentExample(tokens_a, tokens_b, 0)

    def sample_batch(self, rng: random.Random, batch_size: int) -> list[SegmentExample]:
        return [self.sample(rng) for _ in range(batch_size)]


class FullSentenceSampler:
    """RoBERTa's FULL-SENTENCES: from a random sentence on, whole sentences until the next would not fit in
    `seq_len - 2` ([CLS] text [SEP]); at a document's end the next document follows (the last wraps to the first)
    after a `separator_id`. A first sentence longer than the room is cut at its end."""

    def __init__(self, documents: Sequence, seq_len: int, *, separator_id: int, source: str = "the corpus"):
        if seq_len < 8:
            raise ValueError(f"seq_len is {seq_len}; it must be at least 8 ([CLS] text [SEP])")
        self.documents = documents
        self.room = seq_len - 2
        self.separator_id = separator_id
        self.starts = SentenceStarts(documents)
        if self.starts.total == 0:
            raise CorpusError(f"{source} has no sentences to sample from; use a corpus with some text")

    def sample(self, rng: random.Random) -> SegmentExample:
        document_index, sentence_index = self.starts.draw(rng)
        tokens: list[int] = []
        document = self.documents[document_index]
        visited = 0  # documents run into: a corpus smaller than one sequence ends after going round once
        while visited <= len(self.documents):
            if sentence_index == len(document):
                document_index = (document_index + 1) % len(self.documents)
                document, sentence_index, visited = self.documents[document_index], 0, visited + 1
                if tokens and len(tokens) + 1 >= self.room:
                    break
                tokens.append(self.separator_id)
                continue
            sentence = _ids(document[sentence_index])
            if len(tokens) + len(sentence) > self.room:
                if not tokens:
                    tokens = sentence[: self.room]
                break
            tokens += sentence
            sentence_index += 1
        while tokens and tokens[-1] == self.separator_id:  # [SEP] closes the sequence anyway
            tokens.pop()
        return SegmentExample(tokens, [], None)

    def sample_batch(self, rng: random.Random, batch_size: int) -> list[SegmentExample]:
        return [self.sample(rng) for _ in range(batch_size)]


@dataclass(frozen=True)
class SegmentBatch:
    """A masked, padded batch (B, T), T = its longest sequence; sentence_order_label only for sentence-order pairs."""

    input_ids: torch.Tensor  # (B, T) after masking
    token_type_ids: torch.Tensor  # (B, T) 0 = [CLS] A [SEP], 1 = B [SEP], 0 on padding
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = padding
    labels: torch.Tensor  # (B, T) original id at masked positions, -100 elsewhere
    sentence_order_label: torch.Tensor | None  # (B,) 0 = in order, 1 = swapped
    num_tokens: int  # real (non-pad) tokens, [CLS]/[SEP] included

    def to(self, device: torch.device | str, non_blocking: bool = False) -> SegmentBatch:
        def move(tensor):
            return None if tensor is None else tensor.to(device, non_blocking=non_blocking)

        return SegmentBatch(move(self.input_ids), move(self.token_type_ids), move(self.attention_mask),
                            move(self.labels), move(self.sentence_order_label), self.num_tokens)

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments of a masked LM's forward (and AlbertForPreTraining's, with the order labels)."""
        inputs = {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                  "attention_mask": self.attention_mask, "labels": self.labels}
        if self.sentence_order_label is not None:
            inputs["sentence_order_label"] = self.sentence_order_label
        return inputs


def collate_segments(examples: Sequence[SegmentExample], *, cls_token_id: int, sep_token_id: int,
                     pad_token_id: int) -> dict[str, torch.Tensor]:
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` rows padded to the longest: input_ids, token_type_ids,
    attention_mask and special_tokens_mask (True on [CLS], every [SEP] and padding)."""
    if not examples:
        raise ValueError("collate_segments needs at least one example")
    rows, types, special = [], [], []
    for example in examples:
        row = [cls_token_id, *example.tokens_a, sep_token_id]
        type_row = [0] * len(row)
        if example.sentence_order_label is not None:
            row += [*example.tokens_b, sep_token_id]
            type_row += [1] * (len(example.tokens_b) + 1)
        rows.append(row)
        types.append(type_row)
        special.append([token in (cls_token_id, sep_token_id) for token in row])
    longest = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), longest), pad_token_id, dtype=torch.long)  # (B, T)
    token_type_ids = torch.zeros((len(rows), longest), dtype=torch.long)
    attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)
    special_tokens_mask = torch.ones((len(rows), longest), dtype=torch.bool)
    for index, (row, type_row, special_row) in enumerate(zip(rows, types, special, strict=True)):
        input_ids[index, : len(row)] = torch.tensor(row)
        token_type_ids[index, : len(row)] = torch.tensor(type_row)
        attention_mask[index, : len(row)] = 1
        special_tokens_mask[index, : len(row)] = torch.tensor(special_row)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "special_tokens_mask": special_tokens_mask}


@dataclass(frozen=True)
class ExampleRecipe:
    """How an objective's examples are drawn and masked: its sampler, the length a batch is bucketed by, and the
    collate. `mask_fraction` / `random_fraction` of the picked tokens become [MASK] / a random token (BERT's 0.8
    and 0.1; ELECTRA masks 85% and keeps 15%, never a random token: its generator makes the replacements)."""

    name: str
    mask_fraction: float = 0.8
    random_fraction: float = 0.1

    def sampler(self, documents: Sequence, seq_len: int, *, short_seq_prob: float, source: str, tokenizer):
        if self.name == "sentence-order":
            return SentenceOrderSampler(documents, seq_len, short_seq_prob=short_seq_prob, source=source)
        return FullSentenceSampler(documents, seq_len, separator_id=tokenizer.sep_token_id, source=source)

    @staticmethod
    def length(example: SegmentExample) -> int:
        return example.num_tokens

    def collate(self, examples: Sequence[SegmentExample], tokenizer, generator: torch.Generator | None,
                mlm_probability: float, masking: str = "token") -> SegmentBatch:
        """Collate and mask (fresh masks from `generator`, with the `masking` recipe) a list of examples."""
        from bertcore.data.masking import continues_word, mask_tokens

        columns = collate_segments(examples, cls_token_id=tokenizer.cls_token_id,
                                   sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id)
        masked = mask_tokens(
            columns["input_ids"], columns["special_tokens_mask"], mask_token_id=tokenizer.mask_token_id,
            vocab_size=tokenizer.vocab_size, special_token_ids=tokenizer.special_token_ids, generator=generator,
            mlm_probability=mlm_probability, mask_fraction=self.mask_fraction, random_fraction=self.random_fraction,
            recipe=masking, word_continues=None if masking == "token" else continues_word(tokenizer),
        )
        order = None
        if self.name == "sentence-order":
            order = torch.tensor([example.sentence_order_label for example in examples], dtype=torch.long)
        return SegmentBatch(input_ids=masked.input_ids, token_type_ids=columns["token_type_ids"],
                            attention_mask=columns["attention_mask"], labels=masked.labels,
                            sentence_order_label=order, num_tokens=int(columns["attention_mask"].sum()))


SENTENCE_ORDER = ExampleRecipe("sentence-order")  # ALBERT's mlm+sop
FULL_SENTENCES = ExampleRecipe("full-sentences")  # RoBERTa's mlm
ELECTRA_FULL_SENTENCES = ExampleRecipe("full-sentences", mask_fraction=0.85, random_fraction=0.0)  # ELECTRA's rtd
