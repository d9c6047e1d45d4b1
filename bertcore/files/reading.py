"""Reading the files of a checkpoint or run folder safely: only regular files, of a bounded size, and JSON that
cannot blow the stack. Torch-free and light (os, stat, json): the app's GUI thread and `bert-train --help` may
import it.

A path that names a FIFO, a device (a link to /dev/zero), a socket or a folder is refused with an error that
says so ("…/config.json is a FIFO (named pipe), not a file") without ever opening it in blocking mode: opening a
FIFO for reading waits for a writer forever, and /dev/zero reads until memory runs out. The check is made
twice: `os.stat` (links followed) names what is there, then the file is opened with O_NONBLOCK and `fstat`
confirms that what was opened is still a regular file (a FIFO swapped in between is caught, not waited on).

    read_bytes(path, limit=…, error=CheckpointError)     the whole file, at most `limit` bytes
    read_json(path, limit=…, error=…)                    parsed JSON (UTF-8); a damaged file is `error`
    open_regular_file(path, error=…)                     a binary file object (torch.load reads it)
    check_regular_file(path, error=…)                    the stat of a regular file (for readers that take paths)

Every one raises a plain FileNotFoundError when nothing is at `path` (each caller words "missing" its own way,
naming what the folder needs) and `error(message)` for everything else: not a file, a broken link, too big,
permission denied, not UTF-8, not JSON, nested too deeply.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import IO, Any

MIB = 1 << 20
# The most each kind of file may hold. A real one is far below its bound; the bound only keeps a wrong or
# damaged file from taking all memory.
CONFIG_JSON_LIMIT = 64 * MIB  # config.json: a few KB, but id2label/label2id of up to 1,000,000 labels (MAX_LABELS)
TOKENIZER_CONFIG_LIMIT = 16 * MIB  # tokenizer_config.json: KB (added_tokens_decoder may list many added tokens)
TOKENIZER_JSON_LIMIT = 64 * MIB  # tokenizer.json: ~0.7 MB for bert-base, ~2 MB for multilingual BERT
VOCAB_LIMIT = 64 * MIB  # vocab.txt: ~0.2 MB for bert-base, ~1 MB for multilingual BERT (120k tokens)
RUN_JSON_LIMIT = 64 * MIB  # run_config.json / summary.json of a run folder

_NON_BLOCKING_READ = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                      | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def file_kind(mode: int) -> str:
    """What a stat mode is, in words: 'a regular file', 'a folder', 'a FIFO (named pipe)', 'a character device'…"""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def present(path: str | os.PathLike) -> bool:
    """Something is at `path`: a file, a folder, a FIFO, a device, or a link (even a broken one)."""
    return os.path.lexists(path)


def check_regular_file(path: str | os.PathLike, *, error: type[Exception] = ValueError,
                       label: str = "") -> os.stat_result:
    """The stat (links followed) of the regular file at `path`, opening nothing; FileNotFoundError when nothing
    is there, `error` naming what is there otherwise. `label` ("the vocabulary file") starts the messages."""
    path = Path(path)
    try:
        status = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise error(f"{_name(path, label)} is a broken symbolic link (to {_link_target(path)}), not a file; "
                        "point it at the file or replace it with the file") from None
        raise
    except OSError as failure:  # a link loop, a name too long, a folder on the way that cannot be searched
        raise error(f"{_name(path, label)} cannot be read: {_reason(failure)}") from None
    if not stat.S_ISREG(status.st_mode):
        raise error(_not_a_file(path, status.st_mode, label))
    return status


def open_regular_file(path: str | os.PathLike, *, error: type[Exception] = ValueError, label: str = "") -> IO[bytes]:
    """The regular file at `path` opened for binary reading, never blocking on a FIFO or reading a device.

    FileNotFoundError when nothing is there; `error` naming what is there when it is not a regular file, or why
    it cannot be opened."""
    path = Path(path)
    check_regular_file(path, error=error, label=label)  # names a FIFO, a device or a folder before opening
    try:
        descriptor = os.open(path, _NON_BLOCKING_READ)  # a FIFO swapped in since the stat cannot block here
    except FileNotFoundError:
        raise  # removed since the stat: missing after all
    except OSError as failure:
        raise error(f"{_name(path, label)} cannot be read: {_reason(failure)}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):  # what was opened, not what the name led to a moment ago
            raise error(_not_a_file(path, status.st_mode, label))
        with contextlib.suppress(AttributeError, OSError):
            os.set_blocking(descriptor, True)  # a regular file reads the same either way; clear it for callers
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes(path: str | os.PathLike, *, limit: int, error: type[Exception] = ValueError, label: str = "",
               what: str | None = None) -> bytes:
    """The whole regular file at `path`, refused (`error`) when it holds more than `limit` bytes: checked before
    reading, and while reading (a file that grows). `what` ("a config.json") names the kind in that message."""
    path = Path(path)
    with open_regular_file(path, error=error, label=label) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise error(_too_big(path, size, limit, label, what))
        try:
            data = file.read(limit + 1)
        except OSError as failure:
            raise error(f"{_name(path, label)} cannot be read: {_reason(failure)}") from None
    if len(data) > limit:
        raise error(_too_big(path, len(data), limit, label, what))
    return data


def read_json(path: str | os.PathLike, *, limit: int, error: type[Exception] = ValueError, label: str = "",
              what: str | None = None) -> Any:
    """The JSON value of the regular UTF-8 file at `path` (at most `limit` bytes). Like `json.load`, a UTF-8
    byte order mark is not skipped (transformers reads these files the same way); the message names it. JSON
    nested too deeply for the parser (`[[[[…]]]]`) is `error`, not a RecursionError."""
    path = Path(path)
    data = read_bytes(path, limit=limit, error=error, label=label, what=what)
    return parse_json(data, path, error=error, label=label)


def parse_json(data: bytes, path: str | os.PathLike, *, error: type[Exception] = ValueError, label: str = "") -> Any:
    """`data` (the bytes of the file at `path`) as JSON; `error` naming the file for any way it is not JSON."""
    path = Path(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as failure:
        line = data.count(b"\n", 0, failure.start) + 1
        raise error(f"{_name(path, label)} is not valid JSON: it is not UTF-8 text (byte {failure.start}, line "
                    f"{line}, is {data[failure.start:failure.start + 1]!r})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as failure:
        raise error(f"{_name(path, label)} is not valid JSON ({failure})") from None
    except RecursionError:
        raise error(f"{_name(path, label)} is not usable JSON: its lists or objects are nested too deeply to "
                    "read; the file is damaged or is not what its name says") from None


def _name(path: Path, label: str) -> str:
    return f"{label} {path}" if label else str(path)


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _not_a_file(path: Path, mode: int, label: str) -> str:
    link = f" (a symbolic link to {_link_target(path)})" if os.path.islink(path) else ""
    return f"{_name(path, label)}{link} is {file_kind(mode)}, not a file"


def _too_big(path: Path, size: int, limit: int, label: str, what: str | None) -> str:
    kind = f"{what} holds" if what else "this file may hold"
    return (f"{_name(path, label)} is {size / MIB:,.1f} MiB, but {kind} at most {limit / MIB:,.0f} MiB; it is not "
            "what its name says (or is damaged)")


def _reason(failure: OSError) -> str:
    return failure.strerror or str(failure)
