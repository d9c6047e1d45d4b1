"""From the user's task files to fine-tuning batches, and from the model's outputs on them to the task's metrics.

    tokenizer = BertTokenizer.from_vocab_file("assets/default-model")
    data = load_finetuning_data("sequence", "assets/tasks/mood/train.csv", "assets/tasks/mood/eval.csv",
                                tokenizer=tokenizer, seq_len=128)
    batch = data.train_batch(step, batch_size=32)              # TaskBatch; model(**batch.model_inputs())
    batches = data.eval_batches(64)                            # fixed: the same batches at every evaluation
    result = data.evaluate(batches, [model(**b.model_inputs()) for b in batches])
    evaluation = data.new_evaluation()                         # or batch by batch, holding no logits:
    for b in batches: evaluation.add(b, model(**b.model_inputs()))
    result = evaluation.result()
    result.metrics    # {"accuracy": 0.71, "macro_f1": 0.69}
    result.predictions  # per eval example: label names / tag lists; QA: {question id: answer} (predictions.json)

Three kinds of task, named as the model heads they feed:
- "sequence" (`SequenceClassificationData`): `[CLS] A [SEP] (B [SEP])`, truncated longest-first as the
  tokenizer does; a class id per example, or a float for regression (`problem_type`).
- "token" (`TokenClassificationData`): the words are given; each word is tokenized on its own (what HF does
  for `is_split_into_words=True`, so the word of every sub-token is known exactly), the word's tag goes to its
  first sub-token and every other position is labelled -100 (ignored by the loss). A word that normalises
  to nothing (e.g. a lone zero-width character) becomes one [UNK] so that every word has a position.
- "qa" (`QuestionAnsweringData`): SQuAD questions cut into windows (`bertcore.tasks.squad`); one feature per window,
  held compactly (`QAWindows`: int32 arrays, a window built only when a batch or a decoding reads it), so a
  SQuAD-sized file costs its tokens' bytes, not Python lists per window.

Labels: the label vocabulary comes from the training file (all of it, before any held-out split), sorted, with
integer labels in numeric order; labels that are numbers with a fraction (0.5, "3.8") make a regression task
unless `problem_type` says otherwise; the eval file must use only the training file's labels. Regression scores
must be finite and within ±MAX_REGRESSION_SCORE (1e15): the squared error of a larger one overflows float32.

Batches follow bertcore.data.corpus's habits: padded to the batch's longest sequence, and a pure function of
(seed, step, rank, world size) so a resumed run sees exactly the batches an uninterrupted one would. Training
goes through the examples in epochs (each epoch a seeded permutation, one continuous stream across epoch
ends), so every example is seen once per epoch; `length_buckets = k > 1` sorts each group of k steps' examples
by length before cutting it into batches (in a seeded random order), so little of a batch is padding. Without
an eval file, `heldout_fraction` of the training file (whole contexts for QA) is held out, seeded.
"""

from __future__ import annotations

import collections
import math
import operator
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertcore.data.buckets import LengthBuckets
from bertcore.data.corpus import step_rng
from bertcore.models.bert import IGNORE_INDEX
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TASK_KINDS, TOKEN_TASK
from bertcore.tasks.metrics import (
    classification_metrics,
    get_entities,
    is_entity_tagging,
    regression_metrics,
    squad_metrics,
    token_classification_metrics,
)
from bertcore.tasks.squad import (
    MAX_ANSWER_LENGTH,
    QAWindow,
    QAWindows,
    WindowAnswer,
    choose_answers,
    default_qa_lengths,
    make_qa_windows,
)
from bertcore.tasks.task_files import (
    QAExample,
    TaggedExample,
    TaskDataError,
    TextExample,
    read_squad,
    read_tagged_examples,
    read_text_examples,
)
from bertcore.tokenization.wordpiece import longest_first

PROBLEM_TYPES = ("single_label_classification", "regression")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NOT_FINITE = re.compile(r"\s*[+-]?(inf|infinity|nan)\s*", re.IGNORECASE)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4e38
# The largest regression score trained on: its square (1e30) summed over even 10^8 rows of a batch stays far below
# float32's largest value, so mean squared error cannot overflow; beyond about 1.8e19 a single square does.
MAX_REGRESSION_SCORE = 1e15


# ---- labels ----------------------------------------------------------------------------------------------


def label_key(value: str | int | float) -> str:
    """The name a label goes by: integers without sign/zero padding noise ("01" -> "1"), other text stripped."""
    if isinstance(value, int) or (isinstance(value, str) and _INTEGER.fullmatch(value.strip())):
        return str(int(value))
    return str(value).strip()


def _is_fractional_number(value: str | int | float) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, str) and bool(_NUMBER.fullmatch(value)) and not _INTEGER.fullmatch(value)


def infer_problem_type(examples: Sequence[TextExample]) -> str:
    """"regression" when any label is a number with a fraction (JSON float, "0.5"), else single-label."""
    return "regression" if any(_is_fractional_number(e.label) for e in examples) else "single_label_classification"


def label_vocabulary(labels: Sequence[str | int | float]) -> list[str]:
    """Label names in id order: integers in numeric order when every label is one, else sorted text."""
    keys = {label_key(label) for label in labels}
    if all(_INTEGER.fullmatch(key) for key in keys):
        return sorted(keys, key=int)
    return sorted(keys)


def _regression_target(example: TextExample, because: TextExample | None) -> float:
    value = example.label
    reason = (f"{because.where} has the fractional label {because.label!r}, which makes this a regression task"
              if because is not None else "the task is a regression")
    if isinstance(value, int | float) or (isinstance(value, str) and (_NUMBER.fullmatch(value)
                                                                      or _NOT_FINITE.fullmatch(value))):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        if _NOT_FINITE.fullmatch(str(value)):  # 'nan', 'inf', and float nan / inf
            raise TaskDataError(
                f"{example.where}: the label {shown} is not a finite number; {reason}, and every row needs a "
                f"finite score (within ±{MAX_REGRESSION_SCORE:g}): fill in the score or delete the row"
            )
        try:
            score = float(value)
        except OverflowError:  # an int beyond float64
            score = math.inf
        if not -MAX_REGRESSION_SCORE <= score <= MAX_REGRESSION_SCORE:
            raise TaskDataError(
                f"{example.where}: the label {shown} is too large for a regression score: scores must lie within "
                f"±{MAX_REGRESSION_SCORE:g}, because the model computes in float32 (largest {FLOAT32_MAX:.3g}) and "
                "the squared error of a larger score overflows it (the loss becomes inf); rescale the scores (e.g. "
                "to 0..1 or 0..5, as STS-B's are)"
            )
        return score
    raise TaskDataError(
        f"{example.where}: the label {value!r} is not a number, but {reason}; give every row a numeric score, "
        "or make it a classification task (problem_type='single_label_classification')"
    )


def _unknown_label(where: str, value, names: Sequence[str], source: str) -> TaskDataError:
    shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
    return TaskDataError(
        f"{where}: the label {value!r} does not occur in the training data {source} (its labels: {shown}); "
        "fix the label, or add training examples with it"
    )


# ---- features and batches --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SequenceFeature:
    input_ids: list[int]
    token_type_ids: list[int]
    label: int | float  # class id, or the score of a regression
    example_index: int
    truncated: bool


@dataclass(frozen=True)
class TokenFeature:
    input_ids: list[int]
    token_type_ids: list[int]
    labels: list[int]  # per position: the word's tag id at its first sub-token, -100 elsewhere
    word_starts: list[int]  # position of each kept word's first sub-token, in word order
    words_cut: int  # words of the sentence that truncation removed (they get no prediction: "O")
    example_index: int


Feature = SequenceFeature | TokenFeature | QAWindow


@dataclass(frozen=True)
class TaskBatch:
    """A padded fine-tuning batch (B, T), T = its longest sequence; targets as the task's head takes them."""

    input_ids: torch.Tensor  # (B, T)
    token_type_ids: torch.Tensor  # (B, T) 0 = [CLS] A [SEP], 1 = B [SEP], 0 on padding
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = padding
    labels: torch.Tensor | None  # (B,) class ids (long) or scores (float); (B, T) tag ids with -100; None for QA
    start_positions: torch.Tensor | None  # (B,) QA only; 0 ([CLS]) when the answer is not in the window
    end_positions: torch.Tensor | None  # (B,)
    feature_index: torch.Tensor  # (B,) index of each row's feature (in data.eval_features for eval batches)
    example_ids: tuple[str, ...]  # QA: the question id of each row; else where the example was read
    num_tokens: int  # real (non-pad) tokens, specials included

    def to(self, device: torch.device | str, non_blocking: bool = False) -> TaskBatch:
        def move(t):
            return None if t is None else t.to(device, non_blocking=non_blocking)
        return TaskBatch(move(self.input_ids), move(self.token_type_ids), move(self.attention_mask),
                         move(self.labels), move(self.start_positions), move(self.end_positions),
                         self.feature_index, self.example_ids, self.num_tokens)

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments for the task head's forward (HF names)."""
        inputs = {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                  "attention_mask": self.attention_mask}
        if self.labels is not None:
            inputs["labels"] = self.labels
        if self.start_positions is not None:
            inputs["start_positions"] = self.start_positions
            inputs["end_positions"] = self.end_positions
        return inputs


@dataclass(frozen=True)
class TaskEvaluation:
    metrics: dict[str, float]  # the task's metrics, names as the field uses them
    predictions: list | dict  # per eval example (label name, score, or tag list); QA: {question id: answer}


def _pad_rows(rows: Sequence[Sequence[int]], width: int, value: int) -> list[list[int]]:
    return [[*row, *([value] * (width - len(row)))] for row in rows]


def _output_arrays(output) -> tuple[np.ndarray, ...]:
    """(logits,) or (start_logits, end_logits) as float32 numpy, from a model output, tensor or tuple."""
    if hasattr(output, "start_logits"):
        parts = (output.start_logits, output.end_logits)
    elif hasattr(output, "logits"):
        parts = (output.logits,)
    elif isinstance(output, tuple | list):
        parts = tuple(output)
    else:
        parts = (output,)
    return tuple(p.detach().float().cpu().numpy() if isinstance(p, torch.Tensor) else np.asarray(p, np.float32)
                 for p in parts)


# ---- the data objects ---------------------------------------------------------------------------------------


class FinetuningData:
    """Train and eval features of one task with a stateless batch source; see the module docstring.

    Subclasses set `task`, `problem_type`, `id2label`, `main_metric`, the examples and features, and define
    how a list of features becomes targets (`_targets`) and how outputs become metrics (`_score`)."""

    task: str
    problem_type: str | None
    main_metric: str  # the metric to plot and to pick the best checkpoint by
    id2label: dict[int, str]
    train_examples: list
    eval_examples: list
    train_features: list
    eval_features: list

    def __init__(self, tokenizer, *, seq_len: int, seed: int, length_buckets: int, train_source: str,
                 eval_source: str):
        if seq_len < 5:
            raise ValueError(f"seq_len is {seq_len}; fine-tuning inputs need at least 5 positions "
                             "([CLS] A [SEP] B [SEP] with a token in each sentence)")
        self._buckets: LengthBuckets[int] = LengthBuckets(length_buckets)  # of feature indices
        self.tokenizer = tokenizer
        self.seq_len = seq_len
        self.seed = seed
        self.length_buckets = length_buckets
        self.train_source = train_source
        self.eval_source = eval_source
        self._epochs: dict[int, np.ndarray] = {}  # the last two epochs' orders (a step may straddle two)
        self._train_lengths: np.ndarray | None = None  # tokens of each training feature, for length buckets

    @property
    def num_labels(self) -> int:
        return len(self.id2label)

    @property
    def label2id(self) -> dict[str, int]:
        return {name: index for index, name in self.id2label.items()}

    def steps_per_epoch(self, batch_size: int, world_size: int = 1) -> int:
        return math.ceil(len(self.train_features) / (batch_size * world_size))

    # -- training batches: a pure function of (seed, step, rank, world_size) --

    def _epoch_order(self, epoch: int) -> np.ndarray:
        """The seeded order of the training features in epoch `epoch` (0-based)."""
        if epoch not in self._epochs:
            order = list(range(len(self.train_features)))
            step_rng(self.seed, 0, epoch, "epoch").shuffle(order)
            order = np.array(order, dtype=np.int64)  # 8 bytes a feature, not a Python int's 36
            self._epochs = {e: o for e, o in self._epochs.items() if e == epoch - 1} | {epoch: order}
        return self._epochs[epoch]

    def _stream(self, start: int, count: int) -> list[int]:
        """Feature indices at positions [start, start + count) of the endless stream of epochs."""
        size = len(self.train_features)
        indices: list[int] = []
        while len(indices) < count:
            epoch, offset = divmod(start + len(indices), size)
            indices.extend(self._epoch_order(epoch)[offset : offset + count - len(indices)].tolist())
        return indices

    def train_batch(self, step: int, batch_size: int, rank: int = 0, world_size: int = 1) -> TaskBatch:
        """The batch of training step `step` (1-based) on `rank` of `world_size`.

        Step s takes the next batch_size * world_size features of the epoch stream, rank r the r-th slice.
        With `length_buckets = k > 1` the k steps of a group share one pool of k * batch_size * world_size
        features, sorted by length and cut into batches that are dealt out in a seeded random order."""
        if step < 1:
            raise ValueError(f"step is {step}; training steps count from 1")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
        per_step = batch_size * world_size
        if self.length_buckets == 1:
            indices = self._stream((step - 1) * per_step + rank * batch_size, batch_size)
            return self._collate(indices, self.train_features, self.train_examples)
        group, slot = self._buckets.locate(step)

        def draw_pool() -> tuple[list[int], list[int], random.Random]:
            pool = self._stream(group * self.length_buckets * per_step, self.length_buckets * per_step)
            if self._train_lengths is None:
                self._train_lengths = feature_lengths(self.train_features)
            return pool, self._train_lengths[pool].tolist(), step_rng(self.seed, 0, group, "buckets")

        batches = self._buckets.batches((group, batch_size, world_size), draw_pool, batch_size)
        return self._collate(batches[slot * world_size + rank], self.train_features, self.train_examples)

    # -- evaluation --

    def eval_batches(self, batch_size: int) -> TaskBatches:
        """Every eval feature once, in batches of similar length (little padding); the same at every call.
        The batches are collated when read (`TaskBatches`), so holding them costs no tensors."""
        if batch_size < 1:
            raise ValueError(f"batch_size is {batch_size}; it must be >= 1")
        order = np.argsort(feature_lengths(self.eval_features), kind="stable")
        return TaskBatches(self, order, batch_size)

    def new_evaluation(self) -> Evaluation:
        """An evaluation to feed batch by batch (`add(batch, output)`, then `result()`): it keeps only what the
        metrics need of each output (QA: each window's best span), so its memory does not grow with logits."""
        return Evaluation(self)

    def evaluate(self, batches: Sequence[TaskBatch], outputs: Sequence) -> TaskEvaluation:
        """Metrics over the whole eval set from the model's output on each of `eval_batches(...)` (an output
        object with `.logits` or `.start_logits`/`.end_logits`, a logits tensor/array, or a (start, end) pair)."""
        if len(batches) != len(outputs):
            raise ValueError(f"{len(batches)} batches but {len(outputs)} outputs; give the output of each batch")
        evaluation = self.new_evaluation()
        for batch, output in zip(batches, outputs, strict=True):
            evaluation.add(batch, output)
        return evaluation.result()

    # -- collation --

    def _collate(self, indices: Sequence[int], features: Sequence[Feature], examples: Sequence) -> TaskBatch:
        chosen = [features[i] for i in indices]
        width = max(len(f.input_ids) for f in chosen)
        lengths = [len(f.input_ids) for f in chosen]
        labels, start_positions, end_positions = self._targets(chosen, width)
        return TaskBatch(
            input_ids=torch.tensor(_pad_rows([f.input_ids for f in chosen], width, self.tokenizer.pad_token_id)),
            token_type_ids=torch.tensor(_pad_rows([f.token_type_ids for f in chosen], width, 0)),
            attention_mask=torch.tensor([[1] * n + [0] * (width - n) for n in lengths]),
            labels=labels, start_positions=start_positions, end_positions=end_positions,
            feature_index=torch.tensor(list(indices), dtype=torch.long),
            example_ids=tuple(self._example_id(examples[f.example_index]) for f in chosen),
            num_tokens=sum(lengths),
        )

    def _example_id(self, example) -> str:
        return example.where

    def _targets(self, features: Sequence, width: int):
        raise NotImplementedError

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]):
        """What evaluation keeps of one eval feature's output rows (`arrays`: logits, or start and end logits)."""
        raise NotImplementedError

    def _score(self, reduced: list) -> TaskEvaluation:
        """The metrics and predictions from every eval feature's `_reduce`d output, in feature order."""
        raise NotImplementedError

    def summary(self) -> dict:
        """Plain numbers about the data (sizes, label balance, truncation), for logs and the UI."""
        raise NotImplementedError


def feature_lengths(features: Sequence[Feature]) -> np.ndarray:
    """Tokens of each feature, as an array (from a compact store's `lengths` when it has one)."""
    lengths = getattr(features, "lengths", None)
    if lengths is not None:
        return np.asarray(lengths)
    return np.fromiter((len(f.input_ids) for f in features), dtype=np.int64, count=len(features))


class TaskBatches(Sequence[TaskBatch]):
    """A fixed list of eval batches that collates each batch when it is read: the same batches every time,
    without holding every batch's tensors between evaluations."""

    def __init__(self, data: FinetuningData, order: np.ndarray, batch_size: int):
        self._data, self._order, self.batch_size = data, order, batch_size

    def __len__(self) -> int:
        return math.ceil(len(self._order) / self.batch_size)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"batch {index} is out of range: there are {len(self)} eval batches")
        index %= len(self)
        indices = self._order[index * self.batch_size : (index + 1) * self.batch_size].tolist()
        return self._data._collate(indices, self._data.eval_features, self._data.eval_examples)

    def __iter__(self) -> Iterator[TaskBatch]:
        for index in range(len(self)):
            yield self[index]


class Evaluation:
    """One evaluation of the eval set, fed the model's output batch by batch; see `FinetuningData.new_evaluation`."""

    def __init__(self, data: FinetuningData):
        self._data = data
        self._reduced: list = [None] * len(data.eval_features)

    def add(self, batch: TaskBatch, output) -> None:
        """The model's output on `batch` (an eval batch): logits (B, ...) or start/end logits, as `evaluate`."""
        arrays = _output_arrays(output)
        for row, feature_index in enumerate(batch.feature_index.tolist()):
            self._reduced[feature_index] = self._data._reduce(feature_index, tuple(array[row] for array in arrays))

    def result(self) -> TaskEvaluation:
        missing = sum(entry is None for entry in self._reduced)
        if missing:
            raise ValueError(f"{missing} of {len(self._reduced)} eval features have no output; evaluate the "
                             "outputs of every batch of eval_batches(...)")
        return self._data._score(self._reduced)


def split_heldout(num_items: int, fraction: float, seed: int, *, source: str, unit: str = "examples",
                  groups: Sequence | None = None) -> tuple[list[int], list[int]]:
    """Seeded (train, held-out) index lists; with `groups`, items of one group stay on one side."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"heldout_fraction is {fraction}; it must be in (0, 1) when no eval file is given")
    keys = list(dict.fromkeys(groups)) if groups is not None else list(range(num_items))
    if len(keys) < 2:
        raise TaskDataError(
            f"{source} has {len(keys)} {unit}; holding some out for evaluation needs at least 2 "
            "(add examples, or give an eval file)"
        )
    order = list(keys)
    random.Random(f"heldout-{seed}").shuffle(order)
    num_heldout = min(len(keys) - 1, max(1, round(fraction * len(keys))))
    heldout_keys = set(order[:num_heldout])
    item_keys = groups if groups is not None else range(num_items)
    train = [i for i, key in enumerate(item_keys) if key not in heldout_keys]
    heldout = [i for i, key in enumerate(item_keys) if key in heldout_keys]
    return train, heldout


class SequenceClassificationData(FinetuningData):
    """Single sentences or sentence pairs with one label (or one score) each."""

    task = SEQUENCE_TASK

    def __init__(
        self, train_examples: Sequence[TextExample], eval_examples: Sequence[TextExample], tokenizer, *,
        seq_len: int = 128, seed: int = 0, length_buckets: int = 1, problem_type: str | None = None,
        labels: Sequence[str] | None = None, train_source: str = "the training data",
        eval_source: str = "the eval data",
    ):
        super().__init__(tokenizer, seq_len=seq_len, seed=seed, length_buckets=length_buckets,
                         train_source=train_source, eval_source=eval_source)
        if problem_type is None:
            problem_type = infer_problem_type(train_examples)
        if problem_type not in PROBLEM_TYPES:
            raise ValueError(f"problem_type {problem_type!r} is not one of {PROBLEM_TYPES}")
        self.problem_type = problem_type
        self.train_examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        if problem_type == "regression":
            self.id2label = {0: "LABEL_0"}  # one output, as transformers names it
            self.main_metric = "pearson"
            because = next((e for e in train_examples if _is_fractional_number(e.label)), None)
            train_targets = [_regression_target(e, because) for e in self.train_examples]
            eval_targets = [_regression_target(e, because) for e in self.eval_examples]
        else:
            names = list(labels) if labels is not None else label_vocabulary([e.label for e in train_examples])
            if len(names) < 2:
                raise TaskDataError(
                    f"{train_source} has only the label {names[0]!r} (or none); a classifier needs examples of at "
                    "least two labels (for scores, give numbers with a fraction or problem_type='regression')"
                )
            self.id2label = dict(enumerate(names))
            self.main_metric = "accuracy"
            label2id = self.label2id
            train_targets = [self._class_id(e, label2id, names, train_source) for e in self.train_examples]
            eval_targets = [self._class_id(e, label2id, names, train_source) for e in self.eval_examples]
        self.train_features = self._encode(self.train_examples, train_targets)
        self.eval_features = self._encode(self.eval_examples, eval_targets)

    @staticmethod
    def _class_id(example: TextExample, label2id: dict[str, int], names: Sequence[str], source: str) -> int:
        key = label_key(example.label)
        if key not in label2id:
            raise _unknown_label(example.where, example.label, names, source)
        return label2id[key]

    def _encode(self, examples: Sequence[TextExample], targets: Sequence[int | float]) -> list[SequenceFeature]:
        """`[CLS] A [SEP] (B [SEP])`: one batched tokenizer call, then the tokenizer's longest-first cut."""
        tokenizer = self.tokenizer
        ids_a = tokenizer.encode_ids([e.text for e in examples])
        pairs = [e.text_b is not None for e in examples]
        ids_b_flat = iter(tokenizer.encode_ids([e.text_b for e in examples if e.text_b is not None]))
        features = []
        for index, (example, tokens_a, is_pair) in enumerate(zip(examples, ids_a, pairs, strict=True)):
            tokens_b = next(ids_b_flat) if is_pair else []
            empty = "text" if not tokens_a else "text_b" if is_pair and not tokens_b else None
            if empty:
                raise TaskDataError(f"{example.where}: {empty!r} has no tokens after BERT normalisation (only "
                                    "control or zero-width characters); write some words or delete the row")
            num_specials = 3 if is_pair else 2
            keep_a, keep_b = longest_first(len(tokens_a), len(tokens_b), self.seq_len - num_specials, is_pair)
            input_ids = [tokenizer.cls_token_id, *tokens_a[:keep_a], tokenizer.sep_token_id]
            if is_pair:
                input_ids += [*tokens_b[:keep_b], tokenizer.sep_token_id]
            token_type_ids = [0] * (keep_a + 2) + [1] * (len(input_ids) - keep_a - 2)
            truncated = keep_a < len(tokens_a) or keep_b < len(tokens_b)
            features.append(SequenceFeature(input_ids, token_type_ids, targets[index], index, truncated))
        return features

    def _targets(self, features: Sequence[SequenceFeature], width: int):
        dtype = torch.float32 if self.problem_type == "regression" else torch.long
        return torch.tensor([f.label for f in features], dtype=dtype), None, None

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.array(arrays[0], dtype=np.float32)  # (num_labels,), a copy: the batch's array can go

    def _score(self, reduced) -> TaskEvaluation:
        logits = np.stack(reduced)  # (N, num_labels)
        if self.problem_type == "regression":
            scores = [float(x) for x in logits.reshape(len(logits), -1)[:, 0]]
            return TaskEvaluation(regression_metrics(scores, [f.label for f in self.eval_features]), scores)
        predicted = [self.id2label[int(i)] for i in logits.argmax(axis=-1)]
        gold = [self.id2label[f.label] for f in self.eval_features]
        return TaskEvaluation(classification_metrics(predicted, gold), predicted)

    def summary(self) -> dict:
        def balance(features):
            if self.problem_type == "regression":
                values = np.array([f.label for f in features])
                return {"mean": float(values.mean()), "std": float(values.std()),
                        "min": float(values.min()), "max": float(values.max())}
            counts = collections.Counter(self.id2label[f.label] for f in features)
            return {name: counts.get(name, 0) for name in self.id2label.values()}
        return {
            "task": self.task, "problem_type": self.problem_type,
            "train_examples": len(self.train_features), "eval_examples": len(self.eval_features),
            "pairs": any(e.text_b is not None for e in self.train_examples),
            "train_labels": balance(self.train_features), "eval_labels": balance(self.eval_features),
            "truncated_train": sum(f.truncated for f in self.train_features),
            "truncated_eval": sum(f.truncated for f in self.eval_features),
        }


class TokenClassificationData(FinetuningData):
    """Sentences of pre-split words with one tag per word (NER, POS, ...)."""

    task = TOKEN_TASK
    problem_type = "single_label_classification"

    def __init__(
        self, train_examples: Sequence[TaggedExample], eval_examples: Sequence[TaggedExample], tokenizer, *,
        seq_len: int = 128, seed: int = 0, length_buckets: int = 1, labels: Sequence[str] | None = None,
        train_source: str = "the training data", eval_source: str = "the eval data",
    ):
        super().__init__(tokenizer, seq_len=seq_len, seed=seed, length_buckets=length_buckets,
                         train_source=train_source, eval_source=eval_source)
        self.train_examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        names = list(labels) if labels is not None else sorted({t for e in train_examples for t in e.tags})
        self.id2label = dict(enumerate(names))
        self.main_metric = "entity_f1" if _bio_like(names) else "accuracy"
        word_ids = self._word_pieces([*self.train_examples, *self.eval_examples])
        self.train_features = [self._encode(e, i, word_ids, train_source) for i, e in enumerate(self.train_examples)]
        self.eval_features = [self._encode(e, i, word_ids, train_source) for i, e in enumerate(self.eval_examples)]

    def _word_pieces(self, examples: Sequence[TaggedExample]) -> dict[str, list[int]]:
        """Token ids of every distinct word, tokenized on its own (one batched call)."""
        words = list(dict.fromkeys(w for e in examples for w in e.words))
        ids = self.tokenizer.encode_ids(words)
        return {word: pieces or [self.tokenizer.unk_token_id] for word, pieces in zip(words, ids, strict=True)}

    def _encode(self, example: TaggedExample, index: int, word_ids: dict[str, list[int]], source: str
                ) -> TokenFeature:
        label2id = self.label2id
        tokenizer = self.tokenizer
        budget = self.seq_len - 2
        input_ids = [tokenizer.cls_token_id]
        labels = [IGNORE_INDEX]
        word_starts = []
        for word, tag in zip(example.words, example.tags, strict=True):
            if tag not in label2id:
                raise _unknown_label(example.where, tag, list(self.id2label.values()), source)
            if len(input_ids) - 1 >= budget:
                continue  # cut: checked for unknown tags all the same
            pieces = word_ids[word][: budget - (len(input_ids) - 1)]
            word_starts.append(len(input_ids))
            input_ids.extend(pieces)
            labels.extend([label2id[tag]] + [IGNORE_INDEX] * (len(pieces) - 1))
        input_ids.append(tokenizer.sep_token_id)
        labels.append(IGNORE_INDEX)
        return TokenFeature(input_ids, [0] * len(input_ids), labels, word_starts,
                            len(example.words) - len(word_starts), index)

    def _targets(self, features: Sequence[TokenFeature], width: int):
        return torch.tensor(_pad_rows([f.labels for f in features], width, IGNORE_INDEX)), None, None

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]) -> list[int]:
        word_starts = self.eval_features[feature_index].word_starts
        return arrays[0][word_starts].argmax(axis=-1).tolist() if word_starts else []  # a tag id per kept word

    def _score(self, reduced) -> TaskEvaluation:
        fallback = "O" if "O" in self.label2id else self.id2label[0]
        predicted = []
        for feature, ids in zip(self.eval_features, reduced, strict=True):
            predicted.append([self.id2label[i] for i in ids] + [fallback] * feature.words_cut)
        gold = [e.tags for e in self.eval_examples]
        return TaskEvaluation(token_classification_metrics(predicted, gold), predicted)

    def summary(self) -> dict:
        def counts(examples):
            tags = collections.Counter(t for e in examples for t in e.tags)
            return {name: tags.get(name, 0) for name in self.id2label.values()}

        def entities(examples):
            return dict(sorted(collections.Counter(t for e in examples for t, _, _ in get_entities(e.tags)).items()))
        return {
            "task": self.task,
            "train_examples": len(self.train_features), "eval_examples": len(self.eval_features),
            "train_words": sum(len(e.words) for e in self.train_examples),
            "eval_words": sum(len(e.words) for e in self.eval_examples),
            "train_tags": counts(self.train_examples), "eval_tags": counts(self.eval_examples),
            "train_entities": entities(self.train_examples) if self.main_metric == "entity_f1" else {},
            "eval_entities": entities(self.eval_examples) if self.main_metric == "entity_f1" else {},
            "words_cut_train": sum(f.words_cut for f in self.train_features),
            "words_cut_eval": sum(f.words_cut for f in self.eval_features),
        }


def _bio_like(names: Sequence[str]) -> bool:
    return is_entity_tagging(names) and any(name != "O" for name in names)


class QuestionAnsweringData(FinetuningData):
    """SQuAD questions over contexts, as windows; evaluation writes {question id: answer text}."""

    task = QA_TASK
    problem_type = None
    main_metric = "f1"

    def __init__(
        self, train_examples: Sequence[QAExample], eval_examples: Sequence[QAExample], tokenizer, *,
        seq_len: int = 384, seed: int = 0, length_buckets: int = 1, max_query_length: int | None = None,
        doc_stride: int | None = None, max_answer_length: int = MAX_ANSWER_LENGTH,
        null_score_diff_threshold: float = 0.0, allow_no_answer: bool | None = None,
        train_source: str = "the training data", eval_source: str = "the eval data",
    ):
        super().__init__(tokenizer, seq_len=seq_len, seed=seed, length_buckets=length_buckets,
                         train_source=train_source, eval_source=eval_source)
        default_query, default_stride = default_qa_lengths(seq_len)
        self.max_query_length = default_query if max_query_length is None else max_query_length
        self.doc_stride = default_stride if doc_stride is None else doc_stride
        if max_answer_length < 1:
            raise ValueError(f"max_answer_length is {max_answer_length}; it must be at least 1 token")
        self.max_answer_length = max_answer_length
        self.null_score_diff_threshold = null_score_diff_threshold
        self.train_examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        if allow_no_answer is None:  # SQuAD v2.0: some question is unanswerable
            allow_no_answer = any(e.is_impossible for e in [*self.train_examples, *self.eval_examples])
        self.allow_no_answer = allow_no_answer
        self.id2label = {0: "start", 1: "end"}  # qa_outputs has two outputs per token
        settings = {"seq_len": seq_len, "max_query_length": self.max_query_length, "doc_stride": self.doc_stride}
        self.train_features = make_qa_windows(self.train_examples, tokenizer, **settings)
        self.eval_features = make_qa_windows(self.eval_examples, tokenizer, **settings)

    def _collate(self, indices: Sequence[int], features: QAWindows, examples: Sequence[QAExample]) -> TaskBatch:
        """The batch straight from the compact windows (no QAWindow is built)."""
        rows = np.asarray(indices, dtype=np.int64)
        input_ids, token_type_ids = features.padded(rows, self.tokenizer.pad_token_id)
        lengths = features.lengths[rows]
        attention_mask = (np.arange(input_ids.shape[1]) < lengths[:, None]).astype(np.int64)
        return TaskBatch(
            input_ids=torch.from_numpy(input_ids), token_type_ids=torch.from_numpy(token_type_ids),
            attention_mask=torch.from_numpy(attention_mask), labels=None,
            start_positions=torch.from_numpy(features.start_positions[rows].astype(np.int64)),
            end_positions=torch.from_numpy(features.end_positions[rows].astype(np.int64)),
            feature_index=torch.from_numpy(rows),
            example_ids=tuple(examples[i].id for i in features.example_index[rows].tolist()),
            num_tokens=int(lengths.sum()),
        )

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]) -> WindowAnswer:
        start_logits, end_logits = arrays
        return self.eval_features.window_answer(feature_index, start_logits, end_logits,
                                                max_answer_length=self.max_answer_length)

    def _score(self, reduced) -> TaskEvaluation:
        predictions = choose_answers(
            self.eval_examples, self.eval_features.example_index, reduced, allow_no_answer=self.allow_no_answer,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )
        references = {e.id: [a.text for a in e.answers] for e in self.eval_examples}
        return TaskEvaluation(squad_metrics(predictions, references), predictions)

    def summary(self) -> dict:
        def side(examples, windows: QAWindows):
            answerable = sum(not e.is_impossible for e in examples)
            found = int(np.count_nonzero(windows.start_positions > 0))
            return {"questions": len(examples), "answerable": answerable,
                    "unanswerable": len(examples) - answerable, "contexts": len({e.context for e in examples}),
                    "windows": len(windows), "windows_with_answer": found}
        return {"task": self.task, "allow_no_answer": self.allow_no_answer, "max_query_length": self.max_query_length,
                "doc_stride": self.doc_stride, "train": side(self.train_examples, self.train_features),
                "eval": side(self.eval_examples, self.eval_features)}


# ---- the front door -----------------------------------------------------------------------------------------


def load_finetuning_data(
    task: str, train: str | Path, eval: str | Path | None = None, *, tokenizer, seq_len: int = 128,
    heldout_fraction: float = 0.1, seed: int = 0, length_buckets: int = 1, format: str | None = None,
    problem_type: str | None = None, labels: Sequence[str] | None = None, **task_options,
) -> FinetuningData:
    """Read the task's files and build its data object. Without `eval`, a seeded `heldout_fraction` of the
    training file is held out (by whole context for QA). `labels` fixes the label order (e.g. a fine-tuned
    checkpoint's id2label); else it comes from the training file. `task_options`: for "sequence"
    text_column / text_b_column / label_column; for "token" tokens_field / tags_field; for "qa"
    max_query_length / doc_stride / max_answer_length / null_score_diff_threshold / allow_no_answer."""
    if task not in TASK_KINDS:
        raise ValueError(f"task {task!r} is not one of {TASK_KINDS}")
    train = Path(train)
    common = {"tokenizer": tokenizer, "seq_len": seq_len, "seed": seed, "length_buckets": length_buckets,
              "train_source": str(train)}
    if task == SEQUENCE_TASK:
        columns = {k: task_options.pop(k) for k in ("text_column", "text_b_column", "label_column")
                   if k in task_options}
        _no_more_options(task, task_options)
        examples = read_text_examples(train, format=format, **columns)
        if problem_type is None:
            problem_type = infer_problem_type(examples)  # from the whole file, before any split
        if labels is None and problem_type != "regression":
            labels = label_vocabulary([e.label for e in examples])
        train_examples, eval_examples, eval_source = _eval_side(
            examples, eval, heldout_fraction, seed, train, lambda p: read_text_examples(p, format=format, **columns))
        return SequenceClassificationData(train_examples, eval_examples, problem_type=problem_type, labels=labels,
                                          eval_source=eval_source, **common)
    if task == TOKEN_TASK:
        fields = {k: task_options.pop(k) for k in ("tokens_field", "tags_field") if k in task_options}
        _no_more_options(task, task_options)
        examples = read_tagged_examples(train, format=format, **fields)
        if labels is None:
            labels = sorted({t for e in examples for t in e.tags})
        train_examples, eval_examples, eval_source = _eval_side(
            examples, eval, heldout_fraction, seed, train, lambda p: read_tagged_examples(p, format=format, **fields))
        return TokenClassificationData(train_examples, eval_examples, labels=labels, eval_source=eval_source,
                                       **common)
    examples = read_squad(train)
    train_examples, eval_examples, eval_source = _eval_side(
        examples, eval, heldout_fraction, seed, train, read_squad, groups=[e.context for e in examples])
    return QuestionAnsweringData(train_examples, eval_examples, eval_source=eval_source, **common, **task_options)


def _no_more_options(task: str, options: dict) -> None:
    if options:
        raise TypeError(f"unknown option(s) for the {task!r} task: {', '.join(sorted(options))}")


def _eval_side(examples, eval_path, fraction, seed, train_path, read, groups=None):
    if eval_path is not None:
        return examples, read(Path(eval_path)), str(eval_path)
    unit = "contexts" if groups is not None else "examples"
    train_indices, heldout_indices = split_heldout(len(examples), fraction, seed, source=f"task file {train_path}",
                                                   unit=unit, groups=groups)
    source = f"held-out {fraction:.0%} of {train_path} ({len(heldout_indices)} examples, seed {seed})"
    return [examples[i] for i in train_indices], [examples[i] for i in heldout_indices], source
