"""Reading fine-tuning data in the formats people already have, into plain example records.

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

This module holds the records and what every reader shares; the readers are bertcore.tasks.sequence_files,
token_files and qa_files. Nothing here knows the tokenizer or the model: every reader returns records that
remember where they came from (`where`: "FILE line N" / "FILE record ..."), so a later step can still name the
place of a bad value. Every problem raises `TaskDataError` naming the file, the line or record, and the fix.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path

from bertcore.data.corpus import read_text_file
from bertcore.errors import TaskDataError

SEQUENCE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
TOKEN_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".conll": "conll", ".txt": "conll", ".iob": "conll",
                 ".bio": "conll", ".tsv": "conll"}
DOCSTART = "-DOCSTART-"

Label = str | int | float  # as written in the file; `bertcore.tasks.finetune_data` decides what kind of task it makes


@dataclass(frozen=True)
class TextExample:
    """One row of a sequence / pair classification or regression file."""

    text: str
    text_b: str | None
    label: Label
    where: str  # "FILE line N", for messages


@dataclass(frozen=True)
class TaggedExample:
    """One sentence of a token-classification file: pre-split words and one tag per word."""

    words: list[str]
    tags: list[str]
    where: str


@dataclass(frozen=True)
class Answer:
    text: str
    answer_start: int  # character offset of `text` in the context


@dataclass(frozen=True)
class QAExample:
    """One SQuAD question with its context; `answers` is empty iff `is_impossible` (v2.0)."""

    id: str
    question: str
    context: str
    answers: list[Answer]
    is_impossible: bool
    where: str


# ---- reading a file ---------------------------------------------------------------------------------------


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
