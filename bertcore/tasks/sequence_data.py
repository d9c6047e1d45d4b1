"""Sequence (and pair) classification and regression data: the model's pair template (BERT's `[CLS] A [SEP] (B [SEP])`,
RoBERTa's `<s> A </s></s> B </s>`) truncated longest-first, a class id per example or a float score; the label
vocabulary and the problem type read off the training file."""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Sequence

import numpy as np
import torch

from bertcore.errors import TaskDataError
from bertcore.tasks.kinds import SEQUENCE_TASK
from bertcore.tasks.metrics import (
    classification_metrics,
    regression_metrics,
)
from bertcore.tasks.task_data import FinetuningData, SequenceFeature, TaskEvaluation, unknown_label_error
from bertcore.tasks.task_files import TextExample
from bertcore.tokenization.encoding import longest_first

PROBLEM_TYPES = ("single_label_classification", "regression")


_INTEGER = re.compile(r"[+-]?\d+")


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


_NOT_FINITE = re.compile(r"\s*[+-]?(inf|infinity|nan)\s*", re.IGNORECASE)


FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4e38


# The largest regression score trained on: its square (1e30) summed over even 10^8 rows of a batch stays far below
# float32's largest value, so mean squared error cannot overflow; beyond about 1.8e19 a single square does.
MAX_REGRESSION_SCORE = 1e15


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
            raise unknown_label_error(example.where, example.label, names, source)
        return label2id[key]

    def _encode(self, examples: Sequence[TextExample], targets: Sequence[int | float]) -> list[SequenceFeature]:
        """The model's pair template (`[CLS] A [SEP] (B [SEP])` for BERT): one batched tokenizer call, then the
        tokenizer's longest-first cut."""
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
            # the model's own template (RoBERTa: <s> A </s></s> B </s>, one segment); its special count sets the room
            num_specials = len(tokenizer.layout_ids([], [] if is_pair else None)[0])
            keep_a, keep_b = longest_first(len(tokens_a), len(tokens_b), self.seq_len - num_specials, is_pair)
            kept_b = tokens_b[:keep_b] if is_pair else None
            input_ids, token_type_ids, _ = tokenizer.layout_ids(tokens_a[:keep_a], kept_b)
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
