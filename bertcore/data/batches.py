"""Pretraining batches: collated `[CLS] A [SEP] B [SEP]` rows, freshly masked, from a seeded, stateless source.

Masking is dynamic: `bertcore.data.masking.mask_tokens` draws fresh masks every time an example is drawn. A batch
is padded only to its longest sequence; with `length_buckets > 1` batches are cut from a length-sorted pool of
that many batches (`LengthBuckets`, which fine-tuning's batches use too), so sequences of similar length share a
batch and little is padding.

Sampling is with replacement and stateless: the batch for training step `s` on rank `r` is a pure function
of `(seed, r, s)` (see `step_rng`), so "the data position" of a run is simply its step, and a resumed run
draws exactly the batches an uninterrupted run would have drawn.

    data = PretrainingData(read_corpus("assets/corpus/tinyshakespeare.txt"), tokenizer, seq_len=128)
    batch = data.train_batch(step=1, batch_size=32)                  # Batch
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import torch

from bertcore.data.corpus import Corpus, split_document_ids, tokenize_corpus
from bertcore.data.prepared import PreparedCorpus, TokenizedDocuments
from bertcore.data.segments import PairExample, PairSampler
from bertcore.errors import CorpusError


def step_rng(seed: int, rank: int, step: int, stream: str = "train") -> random.Random:
    """The random source for one step: a pure function of (seed, rank, step), so resume is exact."""
    return random.Random(f"{stream}-{seed}-{rank}-{step}")  # str seeds hash with SHA-512: stable across runs


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


# ---- length buckets: batches of similar length, so that padding to a batch's longest sequence wastes little.
# Steps come in groups of k (`length_buckets`): one pool of examples is drawn per group, sorted by length (stably:
# ties keep the pool's order) and cut into batches that are dealt out in a seeded random order. Every batch is a
# pure function of the group's seed, so a run resumed mid-group gets the very batches it would have had.
# Pretraining (below) and fine-tuning (bertcore.tasks.task_data) both batch this way.

Item = TypeVar("Item")


def length_sorted_batches(items: Sequence[Item], lengths: Sequence[int], batch_size: int,
                          rng: random.Random) -> list[list[Item]]:
    """`items` sorted by `lengths` (stable), cut into batches of `batch_size` (the last may be short), shuffled
    by `rng`."""
    if len(items) != len(lengths):
        raise ValueError(f"{len(items)} items but {len(lengths)} lengths; give one length per item")
    order = sorted(range(len(items)), key=lengths.__getitem__)
    batches = [[items[i] for i in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


class LengthBuckets(Generic[Item]):
    """The batches of the current group of `length_buckets` steps, drawn once and kept until another group (or
    another batch size, rank or world size: any change of `key`) is asked for."""

    def __init__(self, length_buckets: int):
        if length_buckets < 1:
            raise ValueError(f"length_buckets is {length_buckets}; it must be >= 1 (1 = no length bucketing)")
        self.length_buckets = length_buckets
        self._group: tuple[Hashable, list[list[Item]]] | None = None

    def locate(self, step: int) -> tuple[int, int]:
        """(group, slot) of training step `step` (1-based): its group of steps and its place in it."""
        return divmod(step - 1, self.length_buckets)

    def batches(self, key: Hashable, draw: Callable[[], tuple[Sequence[Item], Sequence[int], random.Random]],
                batch_size: int) -> list[list[Item]]:
        """The group's batches; `draw()` gives its pool, each item's length and the random source that deals the
        batches out, and is called only when `key` names another group than the one kept."""
        if self._group is None or self._group[0] != key:
            items, lengths, rng = draw()
            self._group = (key, length_sorted_batches(items, lengths, batch_size, rng))
        return self._group[1]


# ---- a pretraining run's data

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


