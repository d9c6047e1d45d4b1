"""Reading fine-tuning data in the formats people already have, into plain example records.

- Sequence / pair classification and regression: CSV or TSV with a header row, or JSONL (one object a line);
  columns `text`, optional `text_b`, `label` (other columns are ignored; `text_column=` etc. rename them).
  CSV cells may be quoted as RFC 4180 says (commas, doubled quotes and line breaks inside quotes); TSV is one
  row a line with no quoting at all, as GLUE's files are.
- Token classification: JSONL with `tokens` and `tags` (lists of equal length), or CoNLL: one `word ... tag`
  per line (whitespace-separated, the tag in the last column, so CoNLL-2003's four columns work as they are),
  a blank line between sentences, `-DOCSTART-` lines skipped.
- Extractive QA: SQuAD v1.1 / v2.0 JSON (`data[].paragraphs[].context`, `qas[].id/question/answers`,
  `is_impossible` in v2.0).

Nothing here knows the tokenizer or the model: every reader returns records that remember where they came from
(`where`: "FILE line N" / "FILE record ..."), so a later step can still name the place of a bad value. Every
problem raises `TaskDataError` naming the file, the line or record, and the fix.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from bertcore.data import read_text_file
from bertcore.errors import TaskDataError

SEQUENCE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
TOKEN_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".conll": "conll", ".txt": "conll", ".iob": "conll",
                 ".bio": "conll", ".tsv": "conll"}
DOCSTART = "-DOCSTART-"

Label = str | int | float  # as written in the file; `bertcore.finetune_data` decides what kind of task it makes


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


def _file_format(path: Path, formats: dict[str, str], given: str | None, kind: str) -> str:
    if given is not None:
        if given not in set(formats.values()):
            raise TaskDataError(f"format {given!r} is not one of {sorted(set(formats.values()))} for {kind} data")
        return given
    suffix = path.suffix.lower()
    if suffix not in formats:
        known = ", ".join(sorted(formats))
        raise TaskDataError(
            f"task file {path}: cannot tell the format of {kind} data from the extension {suffix or '(none)'!r}; "
            f"use one of {known} or pass the format explicitly"
        )
    return formats[suffix]


def _jsonl_records(path: Path, text: str) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line; TaskDataError for invalid JSON or a non-object."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TaskDataError(
                f"{path} line {number} is not valid JSON ({error.msg} at column {error.colno}); "
                "JSONL needs one complete JSON object per line"
            ) from None
        if not isinstance(record, dict):
            raise TaskDataError(
                f"{path} line {number} holds a JSON {type(record).__name__}, not an object; "
                'write one object per line, e.g. {"text": "...", "label": "..."}'
            )
        records.append((number, record))
    if not records:
        raise TaskDataError(f"task file {path} holds no records (only blank lines); add one JSON object per line")
    return records


# ---- sequence / pair classification ----------------------------------------------------------------------


def read_text_examples(
    path: str | Path, *, format: str | None = None, text_column: str = "text", text_b_column: str = "text_b",
    label_column: str = "label", require_label: bool = True,
) -> list[TextExample]:
    """Rows of a CSV/TSV (header row) or JSONL file; the format follows the extension unless given.

    `text_b` is optional as a column, but where the column exists every row needs it. Labels are kept as
    written: JSON strings/ints/floats; CSV cells are strings (`finetune_data` reads "1" and "0.5" as numbers).
    """
    path = Path(path)
    kind = _file_format(path, SEQUENCE_FORMATS, format, "sequence-classification")
    text = read_task_text(path)
    columns = (text_column, text_b_column, label_column)
    if kind == "jsonl":
        rows = _jsonl_records(path, text)
    else:
        rows = _csv_rows(path, text, "," if kind == "csv" else "\t", columns, require_label)
    examples = []
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
        examples.append(TextExample(text_a, text_b, label, where))
    if not examples:
        raise TaskDataError(f"task file {path} has a header but no rows; add one example per line")
    return examples


def _csv_rows(path: Path, text: str, delimiter: str, columns: tuple[str, str, str],
              require_label: bool) -> list[tuple[int, dict]]:
    name = "CSV" if delimiter == "," else "TSV"
    # CSV quotes as RFC 4180 (and Excel, pandas) do; TSV has no quoting (GLUE's files hold stray " in text)
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter, quoting=quoting)
    try:
        header = next(reader)
    except StopIteration:
        header = []
    header = [cell.strip() for cell in header]
    text_column, _, label_column = columns
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
        for cells in reader:
            number = reader.line_num
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


# ---- token classification ----------------------------------------------------------------------------------


def read_tagged_examples(
    path: str | Path, *, format: str | None = None, tokens_field: str = "tokens", tags_field: str = "tags",
) -> list[TaggedExample]:
    """Sentences of a JSONL (`tokens`, `tags`) or CoNLL (`word ... tag` lines) file."""
    path = Path(path)
    kind = _file_format(path, TOKEN_FORMATS, format, "token-classification")
    text = read_task_text(path)
    examples = _conll_examples(path, text) if kind == "conll" else _jsonl_tagged(path, text, tokens_field, tags_field)
    if not examples:
        raise TaskDataError(f"task file {path} holds no sentences (only {DOCSTART} or blank lines)")
    return examples


def _conll_examples(path: Path, text: str) -> list[TaggedExample]:
    examples: list[TaggedExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0

    def close() -> None:
        if words:
            examples.append(TaggedExample(list(words), list(tags), f"{path} line {start}"))
            words.clear()
            tags.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        cells = line.split()
        if not cells:
            close()
            continue
        if cells[0] == DOCSTART:
            close()
            continue
        if len(cells) < 2:
            raise TaskDataError(
                f"{path} line {number} has one column ({line.strip()!r}); CoNLL lines are `word tag` "
                "(or `word pos chunk tag`), separated by spaces or tabs, with a blank line between sentences"
            )
        if not words:
            start = number
        words.append(cells[0])
        tags.append(cells[-1])
    close()
    return examples


def _jsonl_tagged(path: Path, text: str, tokens_field: str, tags_field: str) -> list[TaggedExample]:
    examples = []
    for number, record in _jsonl_records(path, text):
        where = f"{path} line {number}"
        for field in (tokens_field, tags_field):
            if field not in record:
                raise TaskDataError(
                    f"{where} has no {field!r} field (found {', '.join(map(repr, record)) or 'none'}); "
                    f"each line needs {tokens_field!r} (the words) and {tags_field!r} (one tag per word)"
                )
        words, tags = record[tokens_field], record[tags_field]
        for field, values in ((tokens_field, words), (tags_field, tags)):
            if not isinstance(values, list) or not all(isinstance(v, str | int) and not isinstance(v, bool)
                                                       for v in values):
                raise TaskDataError(f"{where}: {field!r} must be a list of strings, not {values!r:.60}")
        if len(words) != len(tags):
            raise TaskDataError(
                f"{where}: {len(words)} {tokens_field} but {len(tags)} {tags_field}; give exactly one tag per word"
            )
        if not words:
            raise TaskDataError(f"{where}: {tokens_field!r} is empty; delete the line or add the sentence's words")
        for index, word in enumerate(words):
            if not str(word).strip():
                raise TaskDataError(f"{where}: word {index} is blank; words must be non-empty, with no spaces")
        examples.append(TaggedExample([str(w) for w in words], [str(t) for t in tags], where))
    return examples


# ---- SQuAD --------------------------------------------------------------------------------------------------


def read_squad(path: str | Path) -> list[QAExample]:
    """Every question of a SQuAD v1.1 / v2.0 file, checked: ids unique, answers where their offsets say."""
    path = Path(path)
    text = read_task_text(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskDataError(
            f"{path} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
            "a SQuAD file is one JSON object with a 'data' list"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise TaskDataError(
            f"{path} has no 'data' list at the top; a SQuAD file looks like "
            '{"version": "v2.0", "data": [{"title": ..., "paragraphs": [{"context": ..., "qas": [...]}]}]}'
        )
    examples: list[QAExample] = []
    seen: dict[str, str] = {}
    for article_index, article in enumerate(document["data"]):
        title = article.get("title", "") if isinstance(article, dict) else ""
        article_where = f"{path} article {article_index}" + (f" ({title!r:.40})" if title else "")
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise TaskDataError(f"{article_where} has no 'paragraphs' list; each article needs one")
        for paragraph_index, paragraph in enumerate(paragraphs):
            where_p = f"{article_where} paragraph {paragraph_index}"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                raise TaskDataError(f"{where_p} has no 'context' text; each paragraph needs the passage to read")
            qas = paragraph.get("qas")
            if not isinstance(qas, list):
                raise TaskDataError(f"{where_p} has no 'qas' list; give the paragraph's questions under 'qas'")
            for qa_index, qa in enumerate(qas):
                example = _squad_question(qa, context, f"{where_p} question {qa_index}")
                if example.id in seen:
                    raise TaskDataError(
                        f"{example.where}: the id {example.id!r} is used twice (also at {seen[example.id]}); "
                        "question ids must be unique, predictions are keyed by them"
                    )
                seen[example.id] = example.where
                examples.append(example)
    if not examples:
        raise TaskDataError(f"{path} holds no questions; add paragraphs with 'qas' under 'data'")
    return examples


def _squad_question(qa: object, context: str, where: str) -> QAExample:
    if not isinstance(qa, dict):
        raise TaskDataError(f"{where} is not an object; each entry of 'qas' needs 'id', 'question' and 'answers'")
    qid = qa.get("id")
    if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid) == "":
        raise TaskDataError(f"{where} has no 'id'; give every question a unique id")
    qid = str(qid)
    where = f"{where} (id {qid!r})"
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        raise TaskDataError(f"{where} has no 'question' text")
    is_impossible = bool(qa.get("is_impossible", False))
    raw_answers = qa.get("answers", [])
    if not isinstance(raw_answers, list):
        raise TaskDataError(f"{where}: 'answers' must be a list of {{'text', 'answer_start'}} objects")
    answers = []
    for answer_index, raw in enumerate(raw_answers):
        answer_where = f"{where} answer {answer_index}"
        if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
            raise TaskDataError(f"{answer_where} has no 'text'; an answer is {{'text': ..., 'answer_start': ...}}")
        start = raw.get("answer_start")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise TaskDataError(f"{answer_where}: 'answer_start' is {start!r}; it must be a character offset >= 0")
        answer_text = raw["text"]
        found = context[start : start + len(answer_text)]
        if found != answer_text:
            elsewhere = context.find(answer_text)
            hint = (f"the text occurs at offset {elsewhere}" if elsewhere >= 0
                    else "the text does not occur in the context at all")
            raise TaskDataError(
                f"{answer_where}: the context at answer_start {start} reads {found!r}, not the answer "
                f"{answer_text!r} ({hint}); answer_start must be the character offset of the answer "
                "in the context (Python string index, not bytes)"
            )
        answers.append(Answer(answer_text, start))
    if is_impossible:
        answers = []  # v2.0 keeps 'plausible_answers' apart; an unanswerable question has no gold span
    elif not answers:
        raise TaskDataError(
            f"{where} has no answers; give at least one, or mark it 'is_impossible': true (SQuAD v2.0)"
        )
    return QAExample(qid, question, context, answers, is_impossible, where)
