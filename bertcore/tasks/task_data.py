"""What every fine-tuning task shares: reading its file, and its data's features, batches and evaluation. Each kind
of task (bertcore.tasks.sequence, token, qa) holds its own examples, reader and data beside one another;
bertcore.tasks.finetune_data loads any of them from the user's files.

The formats people already have, which the kinds' readers take:
- Sequence / pair classification and regression: CSV or TSV with a header row, or JSONL (one object a line);
  columns `text`, optional `text_b`, `label` (other columns are ignored; `text_column=` etc. rename them; a
  column or JSON field that is read may be named only once).
  CSV cells may be quoted as RFC 4180 says (commas, doubled quotes and line breaks inside quotes); TSV is one
  row a line with no quoting at all, as GLUE's files are.
- Token classification: JSONL with `tokens` and `tags` (lists of equal length), or CoNLL: one `word ... tag`
  per line (whitespace-separated, the tag in the last column, so CoNLL-2003's four columns work as they are;
  every line of a file has the same number of columns), a blank line between sentences, `-DOCSTART-` skipped.
- Extractive QA: SQuAD v1.1 / v2.0 JSON (`data[].paragraphs[].context`, `qas[].id/question/answers`,
  `is_impossible` in v2.0).

Reading (what every reader shares comes first below): no reader knows the tokenizer or the model; each returns
records that remember where they came from (`where`: "FILE line N" / "FILE record ..."), so a later step can still
name the place of a bad value. Every problem raises `TaskDataError` naming the file, the line or record, and the
fix.

The data: features, batches padded to their longest row, the epoch stream with length buckets (a pure function of
seed, step and rank), fixed eval batches, and an evaluation that reduces each batch's logits as they arrive.
"""

from __future__ import annotations

import collections
import json
import math
import operator
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from bertcore.data.batches import LengthBuckets, step_rng
from bertcore.data.corpus import read_text_file
from bertcore.errors import TaskDataError

# ---- reading a task file

def read_task_text(path: str | Path) -> str:
    """The file's text (UTF-8, BOM allowed); TaskDataError for a missing, non-UTF-8 or empty file."""
    return read_text_file(path, kind="task file", error=TaskDataError)


def file_format(path: Path, formats: dict[str, str], given: str | None, kind: str) -> str:
    """The format of a task file, from `given` or its extension; TaskDataError for a missing file (before its
    extension is judged: a missing file is the fault to name), a folder, or an extension that says nothing."""
    if not path.exists():
        raise TaskDataError(f"task file {path} does not exist")
    if path.is_dir():
        raise TaskDataError(folder_message(path, formats))
    if given is not None:
        if given not in set(formats.values()):
            raise TaskDataError(f"format {given!r} is not one of {sorted(set(formats.values()))} for {kind} data")
        return given
    suffix = path.suffix.lower()
    if suffix not in formats:
        known = ", ".join(sorted(formats))
        raise TaskDataError(
            f"task file {path}: cannot tell the format of {kind} data from the extension {suffix or '(none)'!r}; "
            f"give the file one of the extensions {known}, or name its format (bert-finetune --format)"
        )
    return formats[suffix]


def folder_message(path: Path, formats: dict[str, str]) -> str:
    """Why a folder is not a task file, and which of its files to name instead."""
    files = sorted((p for p in path.iterdir() if p.is_file() and p.suffix.lower() in formats),
                   key=lambda p: (not p.stem.lower().startswith("train"), p.name))
    if not files:
        return (f"task file {path} is a folder, not a file, and holds no {', '.join(sorted(formats))} file; "
                "name the data file itself")
    shown = ", ".join(p.name for p in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return f"task file {path} is a folder, not a file; name the data file in it, e.g. {files[0]} (it holds {shown})"


def jsonl_records(path: Path, text: str, fields: tuple[str, ...] = ()) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line; TaskDataError for invalid JSON, a non-object, or one of
    `fields` given twice in an object (JSON keeps the last silently)."""
    records = []
    twice: list[tuple[dict, str]] = []  # (object, one of `fields` it gives twice): JSON itself keeps the last

    def build(pairs: list[tuple[str, object]]) -> dict:
        record = dict(pairs)
        if len(record) < len(pairs):
            counts = collections.Counter(key for key, _ in pairs)
            twice.extend((record, field) for field in fields if counts[field] > 1)
        return record

    decoder = json.JSONDecoder(object_pairs_hook=build)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        twice.clear()
        try:
            record = decoder.decode(line)
        except json.JSONDecodeError as error:
            raise TaskDataError(
                f"{path} line {number} is not valid JSON ({error.msg} at column {error.colno}); "
                "JSONL needs one complete JSON object per line"
            ) from None
        except RecursionError:
            raise TaskDataError(too_deep(f"{path} line {number}")) from None
        duplicate = next((key for owner, key in twice if owner is record), None)  # at the top level only
        if duplicate is not None:
            raise TaskDataError(
                f"{path} line {number} gives the field {duplicate!r} twice; JSON would keep only the last one: "
                "delete or rename the other"
            )
        if not isinstance(record, dict):
            raise TaskDataError(
                f"{path} line {number} holds a JSON {type(record).__name__}, not an object; "
                'write one object per line, e.g. {"text": "...", "label": "..."}'
            )
        records.append((number, record))
    if not records:
        raise TaskDataError(f"task file {path} holds no records (only blank lines); add one JSON object per line")
    return records


def too_deep(where: str) -> str:
    return (f"{where} holds JSON nested too deeply to read (arrays or objects inside each other thousands of "
            "levels down; task data needs a few levels)")


# ---- the data

def unknown_label_error(where: str, value, names: Sequence[str], source: str) -> TaskDataError:
    shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
    return TaskDataError(
        f"{where}: the label {value!r} does not occur in the training data {source} (its labels: {shown}); "
        "fix the label, or add training examples with it"
    )


class Feature(Protocol):
    """One model input of a task (a sequence's or a token task's feature, a QA window), as its batch reads it."""

    input_ids: Sequence[int]
    token_type_ids: Sequence[int]
    example_index: int  # into the examples it was made from


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


def pad_rows(rows: Sequence[Sequence[int]], width: int, value: int) -> list[list[int]]:
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
            input_ids=torch.tensor(pad_rows([f.input_ids for f in chosen], width, self.tokenizer.pad_token_id)),
            token_type_ids=torch.tensor(pad_rows([f.token_type_ids for f in chosen], width, 0)),
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
