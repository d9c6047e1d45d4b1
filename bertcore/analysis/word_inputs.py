"""Sentences given as words (a treebank's), laid out for a model of any family, and run through it in batches.

The syntax, probe and health measurements score words, but a model reads pieces. Here each word's pieces are the
tokenizer's pieces of that word alone, as the family tokenizes it inside the sentence: byte-level BPE (RoBERTa,
ModernBERT) marks a word that follows a space with "Ġ", so every word but the first is encoded with the space
before it (" cat" -> "Ġcat"); WordPiece and SentencePiece ("▁cat") split at spaces on their own and take the
word as it is. The pieces of all the words, in order, are then exactly the pieces of the words joined by single
spaces (the tests check this for every family's tokenizer on the shipped treebank), laid out with the family's
special tokens ([CLS] … [SEP], <s> … </s>).

A sentence that does not fit the model (more positions than it takes) or holds a word without any piece (only
characters the tokenizer drops, such as a zero-width space) is skipped and counted, never cut: a cut sentence
would lose words that its gold tree still points to.

Batches are sentences of similar length (sorted), so little of each batch is padding; the model runs in eval mode
without gradients (`measuring`), returning attention probabilities and hidden states only when asked.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.inspection import max_input_length
from bertcore.models.families import base_model_name

MAX_BATCH_TOKENS = 4096  # padded positions a batch holds: large enough to keep 2 cores busy, small enough for RAM
MAX_PADDING = 0.1  # the share of a batch's positions that may be padding (the record's 64 sentences on mini: 10% and
# 20% took the same time, 35% a third more, batches cut by size alone 2.5 times as long)
MAX_ATTENTION_VALUES = 48 * 2**20  # attention probabilities a batch may return, all layers (~200 MB of float32)


@dataclass(frozen=True)
class WordInput:
    """One sentence laid out for the model; the tuples have one entry per position."""

    index: int  # the sentence's index among those given
    input_ids: tuple[int, ...]
    segment_ids: tuple[int, ...]
    word_index: tuple[int, ...]  # which word each position is a piece of; -1 for the layout's special tokens
    num_words: int

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True)
class SkippedSentences:
    """Sentences left out, by index among those given, and why."""

    too_long: tuple[int, ...] = ()  # more positions than the model takes
    no_pieces: tuple[int, ...] = ()  # a word the tokenizer makes no piece of

    def __len__(self) -> int:
        return len(self.too_long) + len(self.no_pieces)

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(sorted(self.too_long + self.no_pieces))


def space_before_words(tokenizer) -> bool:
    """Whether a word after the first is encoded with the space before it: byte-level BPE's pieces carry the
    space ("Ġcat"), so " cat" alone is tokenized as the word is inside a sentence."""
    return getattr(tokenizer, "piece_style", "wordpiece") == "byte_level"


def word_pieces(tokenizer, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Per sentence, per word, the ids of the word's pieces (no special tokens), all words in one batch call."""
    space = " " if space_before_words(tokenizer) else ""
    texts = [word if position == 0 else space + word for words in sentences for position, word in enumerate(words)]
    ids = tokenizer.encode_ids(texts)
    pieces: list[list[list[int]]] = []
    start = 0
    for words in sentences:
        pieces.append(ids[start : start + len(words)])
        start += len(words)
    return pieces


def layout_words(model: nn.Module, tokenizer, sentences: Sequence[Sequence[str]]) -> tuple[list[WordInput],
                                                                                          SkippedSentences]:
    """Each sentence (a sequence of words) laid out as the model reads it alone, and those that had to be skipped.
    A training run lays out the same sentences for every record: the last few layouts of each tokenizer are kept."""
    limit = max_input_length(model.config)
    key = (limit, tuple(tuple(words) for words in sentences))
    with _layouts_lock:
        try:
            kept = _layouts.setdefault(tokenizer, {})
        except TypeError:  # a tokenizer that cannot be weakly referenced: laid out every time
            kept = {}
        if key in kept:
            inputs, skipped = kept[key]
            return list(inputs), skipped
    inputs, skipped = _layout(tokenizer, sentences, limit)
    with _layouts_lock:
        kept[key] = (tuple(inputs), skipped)
        while len(kept) > KEPT_LAYOUTS:
            del kept[next(iter(kept))]
    return inputs, skipped


KEPT_LAYOUTS = 4  # sentence lists laid out per tokenizer and kept: a run's treebank and test sentences, and spare
# tokenizer -> {(limit, words): (inputs, skipped)}: weak keys, so that a tokenizer the app drops takes its layouts with
# it; the lock because a training run's records and the app's views may lay out sentences from two threads.
_layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_layouts_lock = threading.Lock()


def _layout(tokenizer, sentences: Sequence[Sequence[str]], limit: int) -> tuple[list[WordInput], SkippedSentences]:
    inputs: list[WordInput] = []
    too_long: list[int] = []
    no_pieces: list[int] = []
    for index, pieces in enumerate(word_pieces(tokenizer, sentences)):
        if any(not word for word in pieces):
            no_pieces.append(index)
            continue
        flat = [piece for word in pieces for piece in word]
        input_ids, segment_ids, special = tokenizer.layout_ids(flat)
        if len(input_ids) > limit:
            too_long.append(index)
            continue
        owners = iter(word for word, word_ids in enumerate(pieces) for _ in word_ids)
        word_index = tuple(-1 if is_special else next(owners) for is_special in special)
        inputs.append(WordInput(index, tuple(input_ids), tuple(segment_ids), word_index, len(pieces)))
    return inputs, SkippedSentences(tuple(too_long), tuple(no_pieces))


@dataclass(frozen=True)
class WordBatch:
    """Sentences of similar length, padded to the longest: (B, T) tensors on the model's device."""

    indices: tuple[int, ...]  # (B,) the sentences' indices among those given
    input_ids: torch.Tensor  # (B, T) long
    segment_ids: torch.Tensor  # (B, T) long
    attention_mask: torch.Tensor  # (B, T) long, 1 = a real position ([CLS] and [SEP] included), 0 = padding
    word_index: torch.Tensor  # (B, T) long, the word of each position; -1 for specials and padding
    num_words: torch.Tensor  # (B,) long

    @property
    def max_words(self) -> int:
        return int(self.num_words.max())

    def membership(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(B, W, T): 1 where position t is a piece of word w. Summing over t gives each word's piece count."""
        words = torch.arange(self.max_words, device=self.word_index.device)  # (W,)
        return (self.word_index[:, None, :] == words[None, :, None]).to(dtype)  # (B, W, T)

    def word_mask(self) -> torch.Tensor:
        """(B, W) bool: True for a sentence's real words, False for the padding words of shorter sentences."""
        words = torch.arange(self.max_words, device=self.num_words.device)
        return words[None, :] < self.num_words[:, None]


def batches(inputs: Sequence[WordInput], tokenizer, device: torch.device | str, *, attention_values: int | None = None,
            max_tokens: int = MAX_BATCH_TOKENS) -> Iterator[WordBatch]:
    """The inputs in batches of similar length, longest first: a batch takes the next (shorter) sentence while its
    padded size stays within max_tokens and its padding within MAX_PADDING of it, so that the model's work is on
    real tokens (EWT's lengths, sorted, in batches cut by size alone were 43% padding).

    attention_values: the attention probabilities one position of one sentence brings, per key (layers × heads),
    when they are asked for; a batch then also keeps B × T² × that under MAX_ATTENTION_VALUES."""
    order = sorted(range(len(inputs)), key=lambda i: (-len(inputs[i]), inputs[i].index))
    start = 0
    while start < len(order):
        length = len(inputs[order[start]])
        size = max(1, max_tokens // length)
        if attention_values:
            size = min(size, max(1, MAX_ATTENTION_VALUES // (attention_values * length * length)))
        end, real = start + 1, length
        while end < len(order) and end - start < size:
            padded = (end - start + 1) * length
            if padded - (real + len(inputs[order[end]])) > MAX_PADDING * padded:
                break
            real += len(inputs[order[end]])
            end += 1
        yield _collate([inputs[i] for i in order[start:end]], tokenizer.pad_token_id, device)
        start = end


def _collate(chosen: Sequence[WordInput], pad_token_id: int, device) -> WordBatch:
    length = max(len(item) for item in chosen)
    input_ids = np.full((len(chosen), length), pad_token_id, np.int64)
    segment_ids = np.zeros((len(chosen), length), np.int64)
    attention_mask = np.zeros((len(chosen), length), np.int64)
    word_index = np.full((len(chosen), length), -1, np.int64)
    for row, item in enumerate(chosen):
        size = len(item)
        input_ids[row, :size] = item.input_ids
        segment_ids[row, :size] = item.segment_ids
        attention_mask[row, :size] = 1
        word_index[row, :size] = item.word_index

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values).to(device)

    return WordBatch(
        indices=tuple(item.index for item in chosen),
        input_ids=tensor(input_ids),
        segment_ids=tensor(segment_ids),
        attention_mask=tensor(attention_mask),
        word_index=tensor(word_index),
        num_words=tensor(np.array([item.num_words for item in chosen], np.int64)),
    )


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def run_encoder(model: nn.Module, batch: WordBatch, *, attentions: bool = False, hidden_states: bool = False):
    """The model's encoder (model.bert, model.roberta, model.model, …) on one batch: its output, with `.attentions`
    (L of (B, H, T, T)) and `.hidden_states` (L + 1 of (B, T, D)) as asked."""
    encoder = getattr(model, base_model_name(model))
    return encoder(input_ids=batch.input_ids, token_type_ids=batch.segment_ids, attention_mask=batch.attention_mask,
                   output_attentions=attentions, output_hidden_states=hidden_states)


def encoded_batches(model: nn.Module, tokenizer, inputs: Sequence[WordInput], *, attentions: bool = False,
                    hidden_states: bool = False, max_tokens: int = MAX_BATCH_TOKENS):
    """(batch, encoder output) for every batch of the inputs. The caller holds `eval_mode(model)` and
    `torch.inference_mode()` around the whole loop (`measuring(model)`): a generator that entered them itself would
    leave them on in its consumer's thread between two batches."""
    config = model.config
    per_key = config.num_hidden_layers * config.num_attention_heads if attentions else None
    for batch in batches(inputs, tokenizer, model_device(model), attention_values=per_key, max_tokens=max_tokens):
        yield batch, run_encoder(model, batch, attentions=attentions, hidden_states=hidden_states)


@contextlib.contextmanager
def measuring(model: nn.Module) -> Iterator[nn.Module]:
    """The model in eval mode (dropout off) without gradients for the block, then as it was."""
    with eval_mode(model), torch.inference_mode():
        yield model
