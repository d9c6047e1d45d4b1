"""Which heads track dependency syntax: each head scored as a parser (Clark et al. 2019, as Chen et al. 2024 use it).

Clark, Khandelwal, Levy & Manning 2019, "What Does BERT Look At?", section 4.2; Chen et al. (ICLR 2024) "Sudden
Drops in the Loss" track the same score, "unlabeled attachment score" (UAS) per head, through training. Step by
step, per sentence of a treebank (bertcore.analysis.treebank), per layer and head:

1. Word-level attention. A word's pieces are the tokenizer's pieces of that word alone (bertcore.analysis.
   word_inputs). Attention *to* a word is the sum over its pieces (the share of a row that lands on the word);
   attention *from* a word is the mean over its pieces (each piece's row weighs the same).
2. The family's special tokens ([CLS], [SEP], <s>, </s>) are dropped and the diagonal (a word attending to itself)
   is set to 0. Rows are not renormalised.
3. Direction 0 ("dependent attends to its head") predicts word i's head as argmax_j A[i, j]; direction 1 ("head
   attends to its dependent") as argmax_j A[j, i]. Ties go to the first word.
4. A head's UAS in a direction is the share of words whose prediction is their gold head, over the words whose
   gold head is not the root (the root word has no head word to find). `.uas` is the larger of the two directions.

Per relation (the DEPREL as written, subtypes apart: "nmod:poss" is not "nmod", as Clark et al. keep "poss",
"auxpass" and "nsubjpass" apart; `subtypes=False` groups by the universal relation alone) the same share over the
words of that relation, for every head and direction, and the best head. Beside them Clark's offset baselines:
"the head is the word `k` places away" for k = -3…-1, 1…3 ("the next word" is +1), overall and per relation; a
word `k` places away that does not exist is a wrong prediction. (Clark's special case for possessive 's, written
for Penn Treebank's tokens, is not carried over: UD attaches 's as `case` of its own.)

Sentences that do not fit the model are skipped and counted, never cut (`.skipped`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis.treebank import Sentence, universal_relation
from bertcore.analysis.word_inputs import (
    SkippedSentences,
    WordBatch,
    WordInput,
    encoded_batches,
    layout_words,
    measuring,
)
from bertcore.errors import AnalysisError

DIRECTIONS = ("dependent attends to its head", "head attends to its dependent")  # axis 0 of uas_by_direction
OFFSETS = (-3, -2, -1, 1, 2, 3)  # Clark's baselines: the head is the word this many places away
OFFSET_NAMES = {-3: "three words back", -2: "two words back", -1: "the previous word", 1: "the next word",
                2: "two words on", 3: "three words on"}


@dataclass(frozen=True)
class BestHead:
    """The head that finds one relation's heads best, beside the best offset baseline for it."""

    relation: str  # a relation (DEPREL), or "all" for every word whose head is not the root
    layer: int
    head: int
    direction: int  # 0: the dependent attends to its head; 1: the head attends to its dependent
    accuracy: float
    count: int  # words of the relation scored
    offset: int  # the best baseline's offset (+1: the next word)
    offset_accuracy: float


@dataclass(frozen=True)
class SyntacticAttention:
    """UAS per head and direction, per relation, and the offset baselines, over a treebank's sentences."""

    uas_by_direction: np.ndarray  # (2, L, H) float64; axis 0 is DIRECTIONS
    relations: tuple[str, ...]  # (R,) relations of the scored words (DEPREL, or universal), the most frequent first
    relation_counts: np.ndarray  # (R,) int64 words scored per relation
    relation_accuracy: np.ndarray  # (R, 2, L, H) float64 the share of a relation's words a head finds the head of
    offsets: tuple[int, ...]  # (K,) OFFSETS
    offset_accuracy: np.ndarray  # (K,) float64 each baseline's UAS over all scored words
    offset_relation_accuracy: np.ndarray  # (R, K) float64 each baseline's accuracy per relation
    num_sentences: int  # sentences scored
    num_words: int  # words scored: those whose gold head is not the root
    skipped: SkippedSentences  # sentences left out (too long for the model, or a word without pieces)

    @property
    def uas(self) -> np.ndarray:
        """(L, H) float64: each head's UAS in the better of its two directions."""
        return self.uas_by_direction.max(axis=0)

    @property
    def best_direction(self) -> np.ndarray:
        """(L, H) int: the direction `uas` comes from (0 on a tie)."""
        return self.uas_by_direction.argmax(axis=0)

    def best_head(self, relation: str | None = None) -> BestHead:
        """The best (layer, head, direction) for one relation, or over all scored words (None or "all");
        ties go to the lower layer, then head, then direction 0."""
        if relation is None or relation == "all":
            scores, count, name = self.uas_by_direction, self.num_words, "all"
            baselines = self.offset_accuracy
        else:
            if relation not in self.relations:
                raise AnalysisError(f"no word of relation {relation!r} was scored; the relations are "
                                    f"{', '.join(self.relations)}")
            row = self.relations.index(relation)
            scores, count, name = self.relation_accuracy[row], int(self.relation_counts[row]), relation
            baselines = self.offset_relation_accuracy[row]
        layer_head = scores.max(axis=0)  # (L, H)
        layer, head = np.unravel_index(int(layer_head.argmax()), layer_head.shape)
        direction = int(scores[:, layer, head].argmax())
        offset = int(baselines.argmax())
        return BestHead(relation=name, layer=int(layer), head=int(head), direction=direction,
                        accuracy=float(scores[direction, layer, head]), count=count, offset=self.offsets[offset],
                        offset_accuracy=float(baselines[offset]))

    def best_heads(self, min_count: int = 1) -> list[BestHead]:
        """`best_head` of every relation with at least `min_count` scored words (Clark et al. report those with
        100 or more), the most frequent first."""
        return [self.best_head(relation) for relation, count in zip(self.relations, self.relation_counts,
                                                                    strict=True) if count >= min_count]


def syntactic_attention(model: nn.Module, tokenizer, sentences: Sequence[Sentence], *,
                        subtypes: bool = True) -> SyntacticAttention:
    """Each head of `model` scored as a dependency parser on `sentences` (Sentence objects of read_conllu: words,
    heads, deprels), both directions, per relation (subtypes apart, or merged into their universal relation), with
    the offset baselines. Batched, in eval mode without gradients; the model's attention probabilities are asked
    for (its own opt-in return value)."""
    if not sentences:
        raise AnalysisError("no sentences were given; pass a treebank's sentences (bertcore.read_conllu)")
    inputs, skipped = layout_words(model, tokenizer, [sentence.words for sentence in sentences])
    scorer = SyntaxScorer(sentences, inputs, skipped, model.config, subtypes=subtypes)
    with measuring(model):
        for batch, output in encoded_batches(model, tokenizer, inputs, attentions=True):
            scorer.add(batch, output.attentions)
    return scorer.result()


class SyntaxScorer:
    """`syntactic_attention`'s counts, batch by batch, for a caller that runs the batches itself (the training record
    runs them once for the syntax, the probes and the health measures)."""

    def __init__(self, sentences: Sequence[Sentence], inputs: Sequence[WordInput], skipped: SkippedSentences, config,
                 *, subtypes: bool = True):
        if not inputs:
            raise AnalysisError(f"none of the {len(sentences)} sentences can be scored: {len(skipped.too_long)} are "
                                f"longer than the model takes and {len(skipped.no_pieces)} hold a word without pieces")
        self.used = [sentences[item.index] for item in inputs]
        self.skipped = skipped
        self.subtypes = subtypes
        self.relations = _relations_by_frequency(self.used, subtypes)
        self.gold = {item.index: _gold_heads(sentences[item.index]) for item in inputs}
        self.relation_ids = {item.index: _relation_ids(sentences[item.index], self.relations, subtypes)
                             for item in inputs}
        self.counts = _AttentionCounts.zeros(config.num_hidden_layers, config.num_attention_heads, len(self.relations))

    def add(self, batch: WordBatch, attentions: Sequence[torch.Tensor]) -> None:
        """One batch's attention probabilities (L of (B, H, T, T))."""
        self.counts.add(batch, attentions, self.gold, self.relation_ids)

    def result(self) -> SyntacticAttention:
        counts = self.counts
        offset_correct, offset_relation_correct = _offset_counts(self.used, self.relations, self.subtypes)
        relation_counts = counts.relation_words
        num_words = int(relation_counts.sum())
        return SyntacticAttention(
            uas_by_direction=counts.correct / max(num_words, 1),
            relations=self.relations,
            relation_counts=relation_counts,
            relation_accuracy=counts.relation_correct / np.maximum(relation_counts, 1)[:, None, None, None],
            offsets=OFFSETS,
            offset_accuracy=offset_correct / max(num_words, 1),
            offset_relation_accuracy=offset_relation_correct / np.maximum(relation_counts, 1)[:, None],
            num_sentences=len(self.used),
            num_words=num_words,
            skipped=self.skipped,
        )


def word_attention(attentions: torch.Tensor, membership: torch.Tensor) -> torch.Tensor:
    """Piece-level attention (B, K, T, T), rows = queries, to word level (B, K, W, W): attention to a word is the sum
    over its pieces' columns, attention from a word the mean over its pieces' rows. membership (B, W, T) is 1 where
    position t is a piece of word w (0 for special tokens and padding, which drop out)."""
    pieces = membership.sum(dim=-1, keepdim=True).clamp(min=1)  # (B, W, 1)
    to_words = attentions @ membership.transpose(1, 2)[:, None]  # (B, K, T, W)
    return (membership / pieces)[:, None] @ to_words  # (B, K, W, W)


# ---- internals -----------------------------------------------------------------------------------------------


def _gold_heads(sentence: Sentence) -> np.ndarray:
    """(W,) int64 each word's head as a 0-based word index; -1 for the root word, which is not scored."""
    return np.asarray(sentence.heads, np.int64) - 1


def _relation(deprel: str, subtypes: bool) -> str:
    return deprel if subtypes else universal_relation(deprel)


def _relations_by_frequency(sentences: Sequence[Sentence], subtypes: bool) -> tuple[str, ...]:
    counts = Counter(_relation(deprel, subtypes) for sentence in sentences
                     for head, deprel in zip(sentence.heads, sentence.deprels, strict=True) if head != 0)
    return tuple(name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _relation_ids(sentence: Sentence, relations: tuple[str, ...], subtypes: bool) -> np.ndarray:
    """(W,) int64 each word's index among `relations`; -1 for the root word."""
    index = {name: position for position, name in enumerate(relations)}
    return np.array([index[_relation(deprel, subtypes)] if head != 0 else -1
                     for head, deprel in zip(sentence.heads, sentence.deprels, strict=True)], np.int64)


def _padded(rows: Sequence[np.ndarray], width: int, device) -> torch.Tensor:
    table = np.full((len(rows), width), -1, np.int64)
    for index, row in enumerate(rows):
        table[index, : len(row)] = row
    return torch.from_numpy(table).to(device)


@dataclass
class _AttentionCounts:
    """Running counts of correct predictions: (2, L, H) overall, (R, 2, L, H) per relation, words per relation."""

    correct: np.ndarray
    relation_correct: np.ndarray
    relation_words: np.ndarray

    @classmethod
    def zeros(cls, num_layers: int, num_heads: int, num_relations: int) -> _AttentionCounts:
        return cls(np.zeros((2, num_layers, num_heads), np.int64),
                   np.zeros((num_relations, 2, num_layers, num_heads), np.int64),
                   np.zeros(num_relations, np.int64))

    def add(self, batch: WordBatch, attentions: Sequence[torch.Tensor], gold: dict[int, np.ndarray],
            relation_ids: dict[int, np.ndarray]) -> None:
        """One batch's attention probabilities (L of (B, H, T, T)), a layer at a time (the float64 copy of a base
        model's 144 heads at once would be several hundred MB)."""
        width = batch.max_words
        device = batch.input_ids.device
        membership = batch.membership(torch.float64)  # (B, W, T)
        real = batch.word_mask()  # (B, W)
        heads = _padded([gold[index] for index in batch.indices], width, device)  # (B, W), -1 = root or padding
        relation = _padded([relation_ids[index] for index in batch.indices], width, device)  # (B, W)
        scored = heads >= 0
        num_relations = self.relation_words.shape[0]
        one_hot = torch.zeros(len(batch.indices), width, num_relations, dtype=torch.float64, device=device)
        one_hot.scatter_(-1, relation.clamp(min=0)[..., None], scored[..., None].double())  # (B, W, R)
        for layer, probabilities in enumerate(attentions):
            # float64: random and young models spread attention nearly evenly, and float32 sums of nearly equal
            # shares tie words at the 7th digit, where the order of the sums then picks the "winner".
            words = word_attention(probabilities.double(), membership)  # (B, H, W, W)
            words.diagonal(dim1=-2, dim2=-1).zero_()
            # Padding words are never a prediction: below every real entry (all >= 0).
            to_real = torch.where(real[:, None, None, :], words, -1.0)  # columns of padding words out
            from_real = torch.where(real[:, None, :, None], words, -1.0)  # rows of padding words out
            predicted = torch.stack([to_real.argmax(dim=-1), from_real.argmax(dim=-2)])  # (2, B, H, W)
            hits = (predicted == heads[None, :, None, :]) & scored[None, :, None, :]  # (2, B, H, W)
            self.correct[:, layer] += hits.sum(dim=(1, 3)).cpu().numpy()
            per_relation = torch.einsum("dbhw,bwr->rdh", hits.double(), one_hot)  # (R, 2, H) whole numbers
            self.relation_correct[:, :, layer] += per_relation.round().long().cpu().numpy()
        self.relation_words += one_hot.sum(dim=(0, 1)).round().long().cpu().numpy()


def _offset_counts(sentences: Sequence[Sentence], relations: tuple[str, ...],
                   subtypes: bool) -> tuple[np.ndarray, np.ndarray]:
    """Correct predictions of each offset baseline: (K,) over all scored words and (R, K) per relation."""
    overall = np.zeros(len(OFFSETS), np.int64)
    per_relation = np.zeros((len(relations), len(OFFSETS)), np.int64)
    for sentence in sentences:
        heads = _gold_heads(sentence)
        relation = _relation_ids(sentence, relations, subtypes)
        positions = np.arange(len(heads))
        scored = heads >= 0
        for column, offset in enumerate(OFFSETS):
            hits = scored & (heads == positions + offset)  # a word `offset` away that does not exist is never a head
            overall[column] += int(hits.sum())
            np.add.at(per_relation[:, column], relation[hits], 1)
    return overall, per_relation
