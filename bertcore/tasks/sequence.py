"""Sequence (and pair) classification and regression, whole: its files, its examples and its data.

Reading: CSV or TSV with a header row, or JSONL (one object a line), into `TextExample`s (what each format may hold
is said in bertcore.tasks.task_data, with what every reader shares). The data: the model's pair template (BERT's
`[CLS] A [SEP] (B [SEP])`, RoBERTa's `<s> A </s></s> B </s>`) truncated longest-first, a class id per example or a
float score; the label vocabulary and the problem type read off the training file.
"""

from __future__ import annotations

import collections
import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertcore.errors import TaskDataError
from bertcore.tasks.kinds import SEQUENCE_TASK
from bertcore.tasks.metrics import classification_metrics, regression_metrics
from bertcore.tasks.task_data import (
    FinetuningData,
    TaskEvaluation,
    file_format,
    jsonl_records,
    read_task_text,
    unknown_label_error,
)
from bertcore.tokenization.encoding import longest_first

# ---- the examples and their files

SEQUENCE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


Label = str | int | float  # as written in the file; `bertcore.tasks.finetune_data` decides what kind of task it makes


@dataclass(frozen=True)
class TextExample:
    """One row of a sequence / pair classification or regression file."""

    text: str
    text_b: str | None
    label: Label
    where: str  # "FILE line N", for messages


def read_text_examples(
    path: str | Path, *, format: str | None = None, text_column: str = "text", text_b_column: str = "text_b",
    label_column: str = "label", require_label: bool = True,
) -> list[TextExample]:
    """Rows of a CSV/TSV (header row) or JSONL file; the format follows the extension unless given.

    `text_b` is optional as a column, but where the column exists every row needs it. Labels are kept as
    written: JSON strings/ints/floats; CSV cells are strings (`finetune_data` reads "1" and "0.5" as numbers).
    """
    path = Path(path)
    columns = (text_column, text_b_column, label_column)
    names = {"text_column": text_column, "text_b_column": text_b_column, "label_column": label_column}
    for first, second in (("text_column", "label_column"), ("text_column", "text_b_column"),
                          ("text_b_column", "label_column")):
        if names[first] == names[second]:
            raise TaskDataError(f"{first} and {second} are both {names[first]!r}; one column cannot be both, "
                                "name two different columns")
    kind = file_format(path, SEQUENCE_FORMATS, format, "sequence-classification")
    text = read_task_text(path)
    if kind == "jsonl":
        rows = jsonl_records(path, text, columns)
    else:
        rows = _csv_rows(path, text, "," if kind == "csv" else "\t", columns, require_label)
    examples = []
    booleans: list[int] = []  # rows whose label is a JSON true/false
    has_b = None
    for number, row in rows:
        where = f"{path} line {number}"
        missing = [c for c in (text_column, label_column) if c not in row and (c != label_column or require_label)]
        if missing:
            found = ", ".join(repr(k) for k in row) or "none"
            raise TaskDataError(
                f"{where} has no {missing[0]!r} {'column' if kind != 'jsonl' else 'field'} (found {found}); "
                f"name the {'text' if missing[0] == text_column else 'label'} column {missing[0]!r}, "
                f"or say which column to use (text_column=/label_column=)"
            )
        if has_b is None:
            has_b = text_b_column in row
        elif (text_b_column in row) != has_b:
            raise TaskDataError(
                f"{where} {'has' if not has_b else 'lacks'} a {text_b_column!r} field but the first record "
                f"{'does not' if not has_b else 'does'}; pair tasks need {text_b_column!r} on every record"
            )
        text_a = _text_cell(row[text_column], where, text_column)
        text_b = _text_cell(row[text_b_column], where, text_b_column) if has_b else None
        label = _label_cell(row.get(label_column), where, label_column) if require_label else row.get(label_column)
        if require_label and isinstance(row.get(label_column), bool):
            booleans.append(len(examples))
        examples.append(TextExample(text_a, text_b, label, where))
    if not examples:
        raise TaskDataError(f"task file {path} has a header but no rows; add one example per line")
    if 0 < len(booleans) < len(examples):
        raise TaskDataError(_mixed_booleans(examples, booleans, label_column))
    return examples


def _mixed_booleans(examples: list[TextExample], booleans: list[int], column: str) -> str:
    """A JSON file whose labels are true/false on some rows and names or numbers on others: the odd row named.
    (A task of only true/false labels is fine: its classes are "false" and "true".)"""
    flagged = set(booleans)
    odd_is_boolean = len(booleans) <= len(examples) - len(booleans)
    odd = next(e for i, e in enumerate(examples) if (i in flagged) == odd_is_boolean)
    usual = next(e for i, e in enumerate(examples) if (i in flagged) != odd_is_boolean)
    shown_odd = f"{odd.label}, a JSON boolean," if odd_is_boolean else repr(odd.label)
    shown_usual = repr(usual.label) if odd_is_boolean else usual.label
    return (f"{odd.where}: {column!r} is {shown_odd} but "
            f"{'the other labels are not booleans' if odd_is_boolean else 'most labels are JSON booleans'} (e.g. "
            f"{shown_usual} at {usual.where}); write every label the same way (all names, numbers, or true/false)")


def _csv_rows(path: Path, text: str, delimiter: str, columns: tuple[str, str, str],
              require_label: bool) -> list[tuple[int, dict]]:
    name = "CSV" if delimiter == "," else "TSV"
    # CSV quotes as RFC 4180 (and Excel, pandas) do; TSV has no quoting (GLUE's files hold stray " in text).
    # Lines end at \n, \r\n or \r only (as csv wants: newline=""), not at the other breaks str.splitlines knows
    # (U+2028, \x0b, \x1c...), which are text inside a cell.
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    lines = io.StringIO(text, newline="").readlines()
    # a cell may be as long as the file (the csv module refuses cells over 131,072 characters by default)
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    try:
        header = next(reader)
    except StopIteration:
        header = []
    except csv.Error as error:
        raise TaskDataError(f"{path} line {reader.line_num}: {error}; check the quoting of the header") from None
    if quoting != csv.QUOTE_NONE and reader.line_num == len(lines):
        _check_quotes_closed(path, lines, 1)  # a header that swallowed the file
    header = [cell.strip() for cell in header]
    text_column, _, label_column = columns
    for column in dict.fromkeys(columns):
        if header.count(column) > 1:
            places = " and ".join(str(i + 1) for i, cell in enumerate(header) if cell == column)
            raise TaskDataError(
                f"{path} line 1: the header names the column {column!r} twice (columns {places}); only one can be "
                f"read as {column!r}: rename or delete the other"
            )
    needed = [text_column] + ([label_column] if require_label else [])
    absent = [c for c in needed if c not in header]
    if absent:
        other = "tab" if delimiter == "," else "comma"
        hint = (f" (the header is one cell: is the file {other}-separated? use the matching extension)"
                if len(header) == 1 and (("\t" in header[0]) or ("," in header[0])) else "")
        raise TaskDataError(
            f"{path} line 1: the header {header} has no {absent[0]!r} column{hint}; a {name} task file starts "
            f"with a header row naming the columns {text_column!r}, optionally 'text_b', and {label_column!r} "
            f"(or say which columns to use: text_column=/label_column=)"
        )
    rows = []
    try:
        row_start = reader.line_num + 1
        for cells in reader:
            number, first_line, row_start = reader.line_num, row_start, reader.line_num + 1
            if quoting != csv.QUOTE_NONE and number == len(lines):
                _check_quotes_closed(path, lines, first_line)  # the last row: did an unclosed quote make it?
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                fix = ("quote cells that contain the separator" if len(cells) > len(header)
                       else "fill in the missing cells")
                raise TaskDataError(
                    f"{path} line {number} has {len(cells)} cells but the header has {len(header)}; {fix}"
                )
            rows.append((number, dict(zip(header, cells, strict=True))))
    except csv.Error as error:
        raise TaskDataError(f"{path} line {reader.line_num}: {error}; check the quoting of that row") from None
    return rows


def _check_quotes_closed(path: Path, lines: list[str], first_line: int) -> None:
    """TaskDataError when the CSV row starting at `first_line` (1-based) opens a quoted cell that no quote closes:
    the csv module then reads the rest of the file into that cell without a word."""
    text = "".join(lines[first_line - 1 :])
    opener = re.compile(r'(?:^|(?<=[,\r\n]))"')  # a quote opens a cell only at the cell's start
    position = 0
    while (match := opener.search(text, position)) is not None:
        inside = match.end()
        while True:
            close = text.find('"', inside)
            if close < 0:
                line = first_line + text.count("\n", 0, match.start()) + _lone_returns(text, match.start())
                rest = (f"everything after it, to the end of the file at line {len(lines)}, would be read as one "
                        "cell" if len(lines) > line else "the file ends inside that cell")
                raise TaskDataError(
                    f"{path} line {line}: the quote opened on line {line} is never closed, so {rest}; add the "
                    'closing " (a quote inside a quoted cell is written "")'
                )
            if text.startswith('""', close):
                inside = close + 2  # an escaped quote inside the cell
                continue
            position = close + 1
            break


def _lone_returns(text: str, end: int) -> int:
    """Line ends before `end` that are a lone \r (old Mac), which \n counting misses."""
    return text.count("\r", 0, end) - text.count("\r\n", 0, end)


def _text_cell(value: object, where: str, column: str) -> str:
    if not isinstance(value, str):
        raise TaskDataError(f"{where}: {column!r} is {value!r}, not text; write the sentence as a string")
    if not value.strip():
        raise TaskDataError(f"{where}: {column!r} is empty; fill it in or delete the row")
    return value


def _label_cell(value: object, where: str, column: str) -> Label:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TaskDataError(f"{where}: {column!r} is {value}; a label must be a finite number or a name")
        return value
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, list):
        raise TaskDataError(f"{where}: {column!r} is a list; multi-label data is not supported, give one label")
    raise TaskDataError(f"{where}: {column!r} is {value!r}; every row needs a label (a name or a number)")


# ---- the data

@dataclass(frozen=True)
class SequenceFeature:
    input_ids: list[int]
    token_type_ids: list[int]
    label: int | float  # class id, or the score of a regression
    example_index: int
    truncated: bool


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
