"""Sequence / pair classification and regression files: CSV or TSV with a header row, or JSONL (one object a
line), into `TextExample`s (bertcore.tasks.task_files says what each format may hold).
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

from bertcore.errors import TaskDataError
from bertcore.tasks.task_files import (
    SEQUENCE_FORMATS,
    Label,
    TextExample,
    file_format,
    jsonl_records,
    read_task_text,
)


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
