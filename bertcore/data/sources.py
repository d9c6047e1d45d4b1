"""The files of a corpus, read as a stream of document texts whatever their format, in bounded memory.

Formats (a folder may mix them; its files are read in sorted path order):

- `.txt`, `.txt.gz`: plain UTF-8 text, blank lines separate documents (as `bertcore.data.corpus.read_corpus`);
- `.jsonl`, `.jsonl.gz`: one JSON object per line, its `text_field` ("text") is one document;
- `.parquet`, `.arrow`: a table with a `text_field` column, one row per document (a dataset's Parquet shards, or
  the Arrow files of a `datasets.save_to_disk` folder); these need `pyarrow` (`pip install 'bert-explorer[data]'`).

    source = CorpusSource.open("corpora/wiki", text_field="text")
    for piece in source.pieces():          # TextPiece(text, ends_document, position)
        ...

A document longer than `piece_chars` comes in several pieces (cut at a line end), so no document is ever held
whole: `ends_document` is False on all but its last piece. `position` is how many bytes of the corpus files have
been read so far (compressed bytes for .gz), for progress against `total_bytes`.
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
    """Blank lines separate documents; a document longer than piece_chars is handed on in pieces cut at line ends."""
    carry = ""  # the text of the document read so far, not yet handed on
    any_text = False
    position = 0
    for text, position in _lines_of_bytes(file):
        blocks = _BLANK_LINE.split(carry + text)
        carry = blocks.pop()  # the last block may go on in the next read
        for block in blocks:
            if block.strip():
                any_text = True
                yield block, True, position
        if len(carry) > piece_chars:
            cut = carry.rfind("\n", 0, len(carry) - 1)  # keep the last line: a blank line may follow it
            if cut > 0:
                if carry[:cut].strip():
                    any_text = True
                    yield carry[:cut], False, position
                carry = carry[cut + 1 :]
    if carry.strip():
        any_text = True
        yield carry, True, position
    if not any_text:
        raise CorpusError(f"corpus file {file.path} is empty (no text); pick a file with some text in it")


def _jsonl_pieces(file: CorpusFile, text_field: str, piece_chars: int) -> Iterator[tuple[str, bool, int]]:
    """One document per line: the object's `text_field`."""
    carry, number, any_text = "", 0, False
    for text, position in _lines_of_bytes(file):
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
    if carry.strip():
        document = _jsonl_text(file, number + 1, carry, text_field)
        if document.strip():
            any_text = True
            yield document, True, file.size
    if not any_text:
        raise CorpusError(f"corpus file {file.path} holds no text in its {text_field!r} fields; pick a file with "
                          "some text in it")


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
                    yield text, True, position
    if not any_text:
        raise CorpusError(f"corpus file {file.path} holds no text in its {text_field!r} column; pick a file with "
                          "some text in it")
