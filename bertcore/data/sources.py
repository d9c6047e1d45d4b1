"""The files of a corpus, read as a stream of document texts whatever their format, in bounded memory.

Formats (a folder may mix them; its files are read in sorted path order):

- `.txt`, `.txt.gz`: plain UTF-8 text, blank lines separate documents (as `bertcore.data.corpus.read_corpus`);
- `.jsonl`, `.jsonl.gz`: one JSON object per line, its `text_field` ("text") is one document;
- `.parquet`, `.arrow`: a table with a `text_field` column, one row per document (a dataset's Parquet shards, or
  the Arrow files of a `datasets.save_to_disk` folder); these need `pyarrow` (`pip install 'bert-explorer[data]'`).

    source = CorpusSource.open("corpora/wiki", text_field="text")
    for piece in source.pieces():          # TextPiece(text, ends_document, position)
        ...

A document longer than `piece_chars` comes in several pieces, so no document is ever held whole, whatever its
format and however long its lines: `ends_document` is False on all but its last piece. A piece is cut at a line
end where the document has one within a piece's length, else at the last space before it, else (a run of
`piece_chars` characters without a space: 4 M zeros) at exactly `piece_chars`, which splits that run as a space
would. A .jsonl record longer than a piece is read as a stream too: its text field is decoded as it comes,
never held whole, and its other fields are skipped as they come (bertcore.data.sources._stream_record), so one
200 MB record costs what a 4 MB one does. A Parquet or Arrow value is read whole by pyarrow (the format gives no
smaller unit), then handed on in pieces. `position` is how many bytes of the corpus files have been read so far
(compressed bytes for .gz), for progress against `total_bytes`.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bertcore.errors import CorpusError
from bertcore.files.reading import open_regular_file, present

# Suffixes a corpus file may have, longest first so that ".txt.gz" is not taken for ".gz".
FORMATS = {".txt.gz": "txt.gz", ".jsonl.gz": "jsonl.gz", ".txt": "txt", ".jsonl": "jsonl", ".parquet": "parquet",
           ".arrow": "arrow"}
PIECE_CHARS = 4 << 20  # a document is handed on in pieces of about this many characters at most
READ_BYTES = 1 << 20  # bytes read from a file at a time
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")  # as bertcore.data.corpus: blank lines separate documents


def corpus_format(path: Path) -> str | None:
    name = path.name.lower()
    return next((kind for suffix, kind in FORMATS.items() if name.endswith(suffix)), None)


@dataclass(frozen=True)
class TextPiece:
    """Text of one document, or of a part of it (`ends_document` False: the document goes on in the next piece;
    the two join as two lines do)."""

    text: str
    ends_document: bool
    position: int  # corpus bytes read so far, all files together


@dataclass(frozen=True)
class CorpusFile:
    path: Path
    format: str
    size: int
    mtime_ns: int

    def fingerprint(self) -> list:
        return [str(self.path), self.size, self.mtime_ns]


@dataclass(frozen=True)
class CorpusSource:
    """The files of a corpus as they are now (path, size, modification time), and how to read their text."""

    files: tuple[CorpusFile, ...]
    source: str  # what the user named, for messages
    text_field: str = "text"

    @classmethod
    def open(cls, path: str | Path, *, text_field: str = "text") -> CorpusSource:
        path = Path(path)
        if path.is_dir():
            # Not only regular files: a FIFO or a link to a device among them is named when read, not skipped.
            paths = sorted(p for p in path.rglob("*") if corpus_format(p) and not p.is_dir())
            if not paths:
                raise CorpusError(f"corpus folder {path} holds no corpus files; put .txt, .txt.gz, .jsonl, "
                                  ".jsonl.gz, .parquet or .arrow files in it")
        elif present(path):  # a file of any other name is read as plain text, as a corpus file always was
            paths = [path]
        else:
            raise CorpusError(f"corpus {path} does not exist; pass an existing corpus file or a folder of them")
        files = []
        for file in paths:
            try:
                status = file.stat()
            except OSError:
                status = None  # a broken link: named when read
            files.append(CorpusFile(file.resolve() if status else file, corpus_format(file) or "txt",
                                    status.st_size if status else 0, status.st_mtime_ns if status else 0))
        return cls(tuple(files), str(path), text_field)

    @property
    def total_bytes(self) -> int:
        return sum(file.size for file in self.files)

    def fingerprint(self) -> dict:
        """What the prepared corpus depends on besides the tokenizer: every file's path, size and mtime."""
        return {"files": [file.fingerprint() for file in self.files], "text_field": self.text_field}

    def changes_since(self, fingerprint: dict) -> list[str]:
        """What differs from an earlier `fingerprint()`, in words (empty when nothing does)."""
        before = {entry[0]: entry for entry in fingerprint.get("files", [])}
        now = {entry[0]: entry for entry in self.fingerprint()["files"]}
        changes = [f"{path} is gone" for path in before if path not in now]
        changes += [f"{path} is new" for path in now if path not in before]
        changes += [f"{path} changed (size {before[path][1]} -> {now[path][1]} bytes, modified since)"
                    for path in now if path in before and before[path] != now[path]]
        if fingerprint.get("text_field", "text") != self.text_field:
            changes.append(f"the text field was {fingerprint.get('text_field')!r}, now {self.text_field!r}")
        return changes

    def pieces(self, piece_chars: int = PIECE_CHARS) -> Iterator[TextPiece]:
        """Every document's text, file by file, in pieces of at most about `piece_chars` characters."""
        done = 0
        for file in self.files:
            reader = {"txt": _text_pieces, "txt.gz": _text_pieces, "jsonl": _jsonl_pieces,
                      "jsonl.gz": _jsonl_pieces, "parquet": _table_pieces, "arrow": _table_pieces}[file.format]
            for text, ends_document, position in reader(file, self.text_field, piece_chars):
                yield TextPiece(text, ends_document, done + position)
            done += file.size
            _check_unchanged(file)

    def texts(self) -> Iterator[str]:
        """Every piece's text (for training a vocabulary on the whole corpus)."""
        return (piece.text for piece in self.pieces())


def _check_unchanged(file: CorpusFile) -> None:
    try:
        status = file.path.stat()
    except OSError:
        status = None
    if status is None or (status.st_size, status.st_mtime_ns) != (file.size, file.mtime_ns):
        raise CorpusError(f"corpus file {file.path} changed while it was being read; run again once it is "
                          "written completely")


def _open(file: CorpusFile) -> tuple[io.BufferedReader, object]:
    """(the raw file, the stream to read its content from): gzip-decoded for .gz files."""
    try:
        raw = open_regular_file(file.path, error=CorpusError, label="corpus file")
    except FileNotFoundError:
        raise CorpusError(f"corpus file {file.path} does not exist; check the path") from None
    except CorpusError as refused:
        raise CorpusError(f"{refused}; pass a plain file (save the text into one first)") from None
    return raw, (gzip.GzipFile(fileobj=raw, mode="rb") if file.format.endswith(".gz") else raw)


def _lines_of_bytes(file: CorpusFile) -> Iterator[tuple[str, int]]:
    """(decoded text ending at a line end, or at a character boundary in a line longer than READ_BYTES; raw bytes
    read so far). Strict UTF-8: the error names the byte offset and line of the first bad byte."""
    raw, stream = _open(file)
    with raw, stream:
        leftover, offset, line, first = b"", 0, 1, True
        while True:
            try:
                block = stream.read(READ_BYTES)
            except (OSError, EOFError, gzip.BadGzipFile) as failure:
                raise CorpusError(f"corpus file {file.path} cannot be read: {failure}; check the file "
                                  "(a .gz file must be complete gzip data)") from None
            data = leftover + block
            if not block:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # a line longer than a read: cut at a character boundary instead
                    cut = len(data)
                    while cut > 0 and (data[cut - 1] & 0xC0) == 0x80:
                        cut -= 1
                    if cut > 0 and data[cut - 1] >= 0xC0:
                        cut -= 1
            complete, leftover = data[:cut], data[cut:]
            try:
                text = complete.decode("utf-8-sig" if first else "utf-8")
            except UnicodeDecodeError as bad:
                start = bad.start + (3 if first and complete.startswith(b"\xef\xbb\xbf") else 0)
                at_line = line + complete[:start].count(b"\n")
                raise CorpusError(
                    f"corpus file {file.path} is not UTF-8 text: byte 0x{complete[start]:02x} at byte offset "
                    f"{offset + start} (line {at_line}) is invalid; re-save the file as UTF-8 "
                    "(e.g. `iconv -f latin1 -t utf-8`)") from None
            first = first and not complete
            offset += len(complete)
            line += complete.count(b"\n")
            if text:
                yield text, raw.tell()
            if not block:
                return


def _text_pieces(file: CorpusFile, text_field: str, piece_chars: int) -> Iterator[tuple[str, bool, int]]:
    """Blank lines separate documents; a document longer than piece_chars is handed on in pieces (_in_pieces)."""
    carry = ""  # the text of the document read so far, not yet handed on
    any_text = False
    position = 0
    for text, position in _lines_of_bytes(file):
        blocks = _BLANK_LINE.split(carry + text)
        carry = blocks.pop()  # the last block may go on in the next read
        for block in blocks:
            if block.strip():
                any_text = True
                for piece, ends_document in _in_pieces(block, piece_chars):
                    yield piece, ends_document, position
        # The unfinished block is handed on in pieces while it is longer than one, each cut before its last
        # non-blank character: a blank line that begins at its end and ends in the next read still separates
        while len(carry) > piece_chars:
            if not carry.strip():  # a run of blanks: all that matters of it is whether it holds a line end
                carry = "\n" if "\n" in carry else " "
                break
            cut = _cut_point(carry, min(piece_chars, len(carry.rstrip())))
            if carry[:cut].strip():
                any_text = True
                yield carry[:cut], False, position
            carry = carry[cut + 1:] if carry[cut:cut + 1].isspace() else carry[cut:]
    if carry.strip():
        any_text = True
        for piece, ends_document in _in_pieces(carry, piece_chars):
            yield piece, ends_document, position
    if not any_text:
        raise CorpusError(f"corpus file {file.path} is empty (no text); pick a file with some text in it")


def _cut_point(text: str, limit: int) -> int:
    """Where to end a piece of `text` that runs past `limit`: at its last line end before `limit`, else its last
    space (the piece boundary then stands for that line end or space), else at `limit` itself."""
    window = text[:limit]
    cut = window.rfind("\n")
    if cut <= 0:
        cut = max(window.rfind(" "), window.rfind("\t"), window.rfind("\r"))
    return cut if cut > 0 else limit


def _in_pieces(text: str, piece_chars: int) -> Iterator[tuple[str, bool]]:
    """A whole document's text as (piece, ends_document) pieces of at most `piece_chars` characters."""
    while len(text) > piece_chars:
        cut = _cut_point(text, piece_chars)
        if text[:cut].strip():
            yield text[:cut], False
        text = text[cut + 1:] if text[cut:cut + 1].isspace() else text[cut:]
    yield text, True


def _jsonl_pieces(file: CorpusFile, text_field: str, piece_chars: int) -> Iterator[tuple[str, bool, int]]:
    """One document per line: the object's `text_field`. A line longer than a piece is read as a stream
    (_stream_record), its text handed on in pieces."""
    carry, number, any_text = "", 0, False
    blocks = iter(_lines_of_bytes(file))
    for text, position in blocks:
        lines = (carry + text).split("\n")
        carry = lines.pop()
        for line in lines:
            number += 1
            if not line.strip():
                continue
            document = _jsonl_text(file, number, line, text_field)
            if document.strip():
                any_text = True
                yield document, True, position
        if len(carry) > piece_chars:  # a record longer than a piece, its line end not read yet
            number += 1
            reader = _LineReader(carry, blocks, position)
            for piece, ends_document in _stream_record(reader, file, number, text_field, piece_chars):
                any_text = True
                yield piece, ends_document, reader.position
            carry = reader.rest()
    if carry.strip():
        document = _jsonl_text(file, number + 1, carry, text_field)
        if document.strip():
            any_text = True
            yield document, True, file.size
    if not any_text:
        raise CorpusError(f"corpus file {file.path} holds no text in its {text_field!r} fields; pick a file with "
                          "some text in it")


class _LineReader:
    """The rest of one .jsonl line, read through as it comes from the decoded blocks of the file: never more than
    a block and a piece of it held. `rest()` is what followed the line's end, for the line after it."""

    def __init__(self, start: str, blocks: Iterator[tuple[str, int]], position: int):
        self.buffer, self.at, self.blocks, self.position = start, 0, blocks, position
        self.ended = False  # the line's end (or the file's) has been reached

    def more(self) -> bool:
        """Read the next block onto what is left; False at the file's end."""
        if self.ended:
            return False
        block = next(self.blocks, None)
        if block is None:
            self.ended = True
            return False
        self.buffer = self.buffer[self.at:] + block[0]
        self.at, self.position = 0, block[1]
        return True

    def peek(self) -> str:
        """The next character of the line ("" at its end), after any whitespace."""
        while True:
            while self.at < len(self.buffer) and self.buffer[self.at] in " \t\r":
                self.at += 1
            if self.at < len(self.buffer):
                return "" if self.buffer[self.at] == "\n" else self.buffer[self.at]
            if not self.more():
                return ""

    def take(self) -> str:
        character = self.peek()
        self.at += len(character)
        return character

    def until(self, pattern: re.Pattern) -> tuple[str, str]:
        """(the text up to the next match of `pattern` or the line's end, what stopped it: the match or ""),
        handed on a block at a time: call again while the stop is None."""
        while True:
            found = pattern.search(self.buffer, self.at)
            if found:
                text, self.at = self.buffer[self.at:found.start()], found.end()
                return text, found.group()
            text = self.buffer[self.at:]
            self.at = len(self.buffer)
            if self.more():
                if text:
                    return text, None
                continue
            return text, ""

    def rest(self) -> str:
        """What follows the line's end (the next lines' start), once the record has been read to it."""
        end = self.buffer.find("\n", self.at)
        return self.buffer[end + 1:] if end >= 0 else ""


# A JSON string's body: plain characters and escape pairs, up to its closing quote, a control character (a line
# end among them) or the end of what has been read
_STRING_BODY = re.compile(r'[^"\\\x00-\x1f]*(?:(?:\\u[0-9a-fA-F]{4}|\\[^u])[^"\\\x00-\x1f]*)*', re.DOTALL)
_NESTED_STOP = re.compile(r'["{}\[\]\n]')  # what changes the depth of a nested value (or ends the line)
_SCALAR_STOP = re.compile(r"[,}\]\s]")
MAX_KEY_CHARS = 1 << 16  # a field name longer than this in a long record is no field name: the line is damaged


def _stream_record(reader: _LineReader, file: CorpusFile, number: int, text_field: str,
                   piece_chars: int) -> Iterator[tuple[str, bool]]:
    """The `text_field` of the JSON object on a line too long to hold, in pieces of about `piece_chars` (cut at
    whitespace where there is some), its other fields skipped as they are read; CorpusError naming the file and
    line as _jsonl_text names them, for what json.loads would refuse."""
    where = f"corpus file {file.path}, line {number},"

    def damaged(why: str) -> CorpusError:
        return CorpusError(f"{where} is not JSON ({why}); a .jsonl file holds one JSON object per line")

    def string(keep: bool) -> Iterator[str]:
        """A JSON string's characters after its opening quote, decoded by json itself a block at a time (C speed),
        each block cut where no escape, and no surrogate pair, is split."""
        while True:
            buffer, at = reader.buffer, reader.at
            end = _STRING_BODY.match(buffer, at).end()
            stop = buffer[end:end + 1]
            if stop == "\\" and len(buffer) - end >= 6:  # not a cut escape: a damaged one
                raise damaged(f"an invalid escape {buffer[end:end + 6]!r} in a string")
            if end > at:
                try:
                    text = json.loads(f'"{buffer[at:end]}"')
                except ValueError as error:
                    raise damaged(f"an invalid escape in a string ({error.msg})") from None
                if stop in ("", "\\") and "\ud800" <= text[-1] <= "\udbff":  # half a pair: wait for its other half
                    end, text = end - 6, text[:-1]
                reader.at = end
                if keep and text:
                    yield text
            if stop == '"':
                reader.at = end + 1
                return
            if stop not in ("", "\\"):
                raise damaged("the line ends inside a string" if stop == "\n" else
                              f"a control character U+{ord(stop):04X} inside a string")
            if not reader.more():
                raise damaged("the line ends inside a string")

    def skip_value() -> None:
        first = reader.peek()
        if first == '"':
            reader.take()
            for _ in string(keep=False):
                pass
        elif first in ("{", "["):
            reader.take()
            depth = 1
            while depth:
                _, stop = reader.until(_NESTED_STOP)
                if stop == '"':
                    for _ in string(keep=False):
                        pass
                elif stop in ("{", "["):
                    depth += 1
                elif stop in ("}", "]"):
                    depth -= 1
                elif stop in ("", "\n"):
                    raise damaged("the line ends inside a nested value")
        else:
            text, stop = reader.until(_SCALAR_STOP)
            while stop is None:
                more, stop = reader.until(_SCALAR_STOP)
                text += more
                if len(text) > MAX_KEY_CHARS:
                    raise damaged("a value that is neither text, a number, true, false nor null")
            reader.at -= len(stop)  # the stop belongs to what follows
            try:
                json.loads(text)
            except ValueError:
                raise damaged(f"{text[:20]!r} where a value belongs") from None

    if reader.take() != "{":
        raise CorpusError(f"{where} has no {text_field!r} field (its fields: none: not an object); name the text "
                          "field with --text-field")
    fields: list[str] = []
    found = yielded = False
    if reader.peek() == "}":
        reader.take()
    else:
        while True:
            if reader.take() != '"':
                raise damaged("a field name where one belongs is missing")
            key = ""
            for part in string(keep=True):
                key += part
                if len(key) > MAX_KEY_CHARS:
                    raise damaged(f"a field name longer than {MAX_KEY_CHARS:,} characters")
            if reader.take() != ":":
                raise damaged(f"no ':' after the field name {key[:40]!r}")
            fields.append(key)
            if key == text_field and reader.peek() == '"':
                reader.take()
                found = True
                held: list[str] = []
                size = 0
                for part in string(keep=True):
                    held.append(part)
                    size += len(part)
                    if size >= piece_chars:
                        text = "".join(held)
                        cut = _cut_point(text, piece_chars)
                        if text[:cut].strip():
                            yielded = True
                            yield text[:cut], False
                        rest = text[cut + 1:] if text[cut:cut + 1].isspace() else text[cut:]
                        held, size = [rest], len(rest)
                last = "".join(held)
            elif key == text_field:
                first = reader.peek()
                kind = {"{": "dict", "[": "list", "t": "bool", "f": "bool", "n": "NoneType"}.get(first) or (
                    "float" if re.match(r"-?\d+[.eE]", reader.buffer[reader.at:reader.at + 400]) else "int")
                raise CorpusError(f"corpus file {file.path}, line {number}: field {text_field!r} holds a {kind}, not "
                                  "text; name the text field with --text-field")
            else:
                skip_value()
            separator = reader.take()
            if separator == "}":
                break
            if separator != ",":
                raise damaged(f"{separator!r} where ',' or '}}' belongs" if separator else "the line ends inside "
                              "the object")
    if reader.peek():
        raise damaged(f"{reader.peek()!r} after the object's end")
    if not found:
        shown = ", ".join(repr(key) for key in fields[:20]) or "none"
        raise CorpusError(f"{where} has no {text_field!r} field (its fields: {shown}); name the text field with "
                          "--text-field")
    if last.strip() or yielded:  # a document begun is ended, even by the blank rest of its text
        yield last, True


def _jsonl_text(file: CorpusFile, number: int, line: str, text_field: str) -> str:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as bad:
        raise CorpusError(f"corpus file {file.path}, line {number}, is not JSON ({bad}); a .jsonl file holds one "
                          "JSON object per line") from None
    if not isinstance(record, dict) or text_field not in record:
        fields = ", ".join(repr(key) for key in record) if isinstance(record, dict) else "none: not an object"
        raise CorpusError(f"corpus file {file.path}, line {number}, has no {text_field!r} field (its fields: "
                          f"{fields}); name the text field with --text-field")
    text = record[text_field]
    if not isinstance(text, str):
        raise CorpusError(f"corpus file {file.path}, line {number}: field {text_field!r} holds a "
                          f"{type(text).__name__}, not text; name the text field with --text-field")
    return text


def require_pyarrow(what: str):
    try:
        import pyarrow
    except ImportError:
        raise CorpusError(f"{what} needs pyarrow, which is not installed; install it with "
                          "`pip install 'bert-explorer[data]'` (or `pip install pyarrow`)") from None
    return pyarrow


def _record_batches(file: CorpusFile, text_field: str):
    """(record batches of the text column, how many there are) of a Parquet file or an Arrow (IPC) file."""
    pyarrow = require_pyarrow(f"corpus file {file.path}")
    raw, _ = _open(file)  # refuses FIFOs and devices before pyarrow opens the path
    raw.close()
    try:
        if file.format == "parquet":
            import pyarrow.parquet as parquet

            table = parquet.ParquetFile(str(file.path))
            names = table.schema_arrow.names
            _check_column(file, names, text_field)
            return (table.read_row_group(i, columns=[text_field]).to_batches()
                    for i in range(table.num_row_groups)), table.num_row_groups
        import pyarrow.ipc as ipc

        source = pyarrow.memory_map(str(file.path), "r")
        try:
            reader = ipc.open_file(source)
            batches = ([reader.get_batch(i)] for i in range(reader.num_record_batches))
            names, count = reader.schema.names, reader.num_record_batches
        except pyarrow.ArrowInvalid:  # datasets.save_to_disk writes the streaming format
            reader = ipc.open_stream(pyarrow.memory_map(str(file.path), "r"))
            batches, names, count = ([batch] for batch in reader), reader.schema.names, None
        _check_column(file, names, text_field)
        return batches, count
    except (pyarrow.ArrowException, OSError) as failure:
        raise CorpusError(f"corpus file {file.path} cannot be read as {file.format}: {failure}") from None


def _check_column(file: CorpusFile, names: list[str], text_field: str) -> None:
    if text_field not in names:
        raise CorpusError(f"corpus file {file.path} has no column {text_field!r} (its columns: "
                          f"{', '.join(map(repr, names))}); name the text column with --text-field")


def _table_pieces(file: CorpusFile, text_field: str, piece_chars: int) -> Iterator[tuple[str, bool, int]]:
    """One document per row: the row's `text_field`."""
    groups, count = _record_batches(file, text_field)
    any_text = False
    for number, group in enumerate(groups, 1):
        position = file.size * number // count if count else 0
        for batch in group:
            column = batch.column(batch.schema.get_field_index(text_field))
            for text in column.to_pylist():
                if isinstance(text, str) and text.strip():
                    any_text = True
                    for piece, ends_document in _in_pieces(text, piece_chars):  # a long value: in pieces
                        yield piece, ends_document, position
    if not any_text:
        raise CorpusError(f"corpus file {file.path} holds no text in its {text_field!r} column; pick a file with "
                          "some text in it")
