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

Nothing here knows the tokenizer or the model: every reader returns records that remember where they came from
(`where`: "FILE line N" / "FILE record ..."), so a later step can still name the place of a bad value. Every
problem raises `TaskDataError` naming the file, the line or record, and the fix.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import math
import re
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


def _file_format(path: Path, formats: dict[str, str], given: str | None, kind: str) -> str:
    if path.is_dir():
        raise TaskDataError(_folder_message(path, formats))
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


def _folder_message(path: Path, formats: dict[str, str]) -> str:
    """Why a folder is not a task file, and which of its files to name instead."""
    files = sorted((p for p in path.iterdir() if p.is_file() and p.suffix.lower() in formats),
                   key=lambda p: (not p.stem.lower().startswith("train"), p.name))
    if not files:
        return (f"task file {path} is a folder, not a file, and holds no {', '.join(sorted(formats))} file; "
                "name the data file itself")
    shown = ", ".join(p.name for p in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return f"task file {path} is a folder, not a file; name the data file in it, e.g. {files[0]} (it holds {shown})"


def _jsonl_records(path: Path, text: str, fields: tuple[str, ...] = ()) -> list[tuple[int, dict]]:
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
            raise TaskDataError(_too_deep(f"{path} line {number}")) from None
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


def _too_deep(where: str) -> str:
    return (f"{where} holds JSON nested too deeply to read (arrays or objects inside each other thousands of "
            "levels down; task data needs a few levels)")


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
    columns = (text_column, text_b_column, label_column)
    names = {"text_column": text_column, "text_b_column": text_b_column, "label_column": label_column}
    for first, second in (("text_column", "label_column"), ("text_column", "text_b_column"),
                          ("text_b_column", "label_column")):
        if names[first] == names[second]:
            raise TaskDataError(f"{first} and {second} are both {names[first]!r}; one column cannot be both, "
                                "name two different columns")
    kind = _file_format(path, SEQUENCE_FORMATS, format, "sequence-classification")
    text = read_task_text(path)
    if kind == "jsonl":
        rows = _jsonl_records(path, text, columns)
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
    widths: dict[int, tuple[int, int, str]] = {}  # columns -> (lines with that many, first such line, its text)

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
        count, first, sample = widths.get(len(cells), (0, number, line))
        widths[len(cells)] = (count + 1, first, sample)
        if not words:
            start = number
        words.append(cells[0])
        tags.append(cells[-1])
    close()
    if len(widths) > 1:
        raise TaskDataError(_conll_width_message(path, widths))
    return examples


def _conll_width_message(path: Path, widths: dict[int, tuple[int, int, str]]) -> str:
    """A CoNLL file whose lines have different numbers of columns: the odd line, the usual count, the fix.

    An error, not a guess: the word is the first column and the tag the last, so a line with a column too many
    (`New York B-LOC`) would drop a word (`York`) and one too few would take a POS column for the tag."""
    usual = max(widths, key=lambda width: (widths[width][0], -widths[width][1]))
    odd = min((width for width in widths if width != usual), key=lambda width: widths[width][1])
    count, number, line = widths[odd]
    usual_count, usual_first, _ = widths[usual]
    if odd > usual:
        fix = (f"columns are split at spaces and tabs, so a word cannot contain a space: give each word its own "
               f"line (e.g. `{line.split()[0]} ...` then `{line.split()[1]} ...`), or remove the extra column")
    else:
        fix = "add the missing column(s): the word is read from the first column and the tag from the last"
    others = f" ({count - 1} more line{'s' if count > 2 else ''} like it)" if count > 1 else ""
    return (f"{path} line {number} has {odd} columns ({line.strip()!r}) but the file's other lines have {usual} "
            f"({usual_count} lines, from line {usual_first}){others}; {fix}")


def _jsonl_tagged(path: Path, text: str, tokens_field: str, tags_field: str) -> list[TaggedExample]:
    examples = []
    for number, record in _jsonl_records(path, text, (tokens_field, tags_field)):
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
    if path.is_dir():
        raise TaskDataError(_folder_message(path, {".json": "squad"}))
    text = read_task_text(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskDataError(
            f"{path} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
            "a SQuAD file is one JSON object with a 'data' list"
        ) from None
    except RecursionError:
        raise TaskDataError(_too_deep(str(path)) + "; a SQuAD file nests data > paragraphs > qas > answers") from None
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
