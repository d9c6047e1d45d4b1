"""Token-classification files: JSONL with `tokens` and `tags`, or CoNLL (`word ... tag` lines, a blank line
between sentences, `-DOCSTART-` skipped), into `TaggedExample`s.
"""

from __future__ import annotations

from pathlib import Path

from bertcore.errors import TaskDataError
from bertcore.tasks.task_files import (
    DOCSTART,
    TOKEN_FORMATS,
    TaggedExample,
    file_format,
    jsonl_records,
    read_task_text,
)


def read_tagged_examples(
    path: str | Path, *, format: str | None = None, tokens_field: str = "tokens", tags_field: str = "tags",
) -> list[TaggedExample]:
    """Sentences of a JSONL (`tokens`, `tags`) or CoNLL (`word ... tag` lines) file."""
    path = Path(path)
    kind = file_format(path, TOKEN_FORMATS, format, "token-classification")
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
    for number, record in jsonl_records(path, text, (tokens_field, tags_field)):
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
