"""A run's metrics.jsonl: written one record per line while it trains (`MetricsLog`), and read while it grows
(`MetricsTail`: the app watching `bert-train`).

`MetricsTail` parses only complete lines, keeps a partial last line until its newline arrives, and notices a file
that was truncated or replaced (a new run in the same folder, a resume dropping records), so the caller can clear
what it drew. The file is opened in place without following a link, and read through bertcore.files.reading (a
regular file only, never a read that waits): the app polls it on its GUI thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertcore.errors import RunFolderError
from bertcore.files.atomic import describe_os_error, open_plain_file, run_write_error, write_text_atomic
from bertcore.files.reading import open_regular_file


class MetricsLog:
    """Append-only writer of one metrics.jsonl: one JSON object per line, flushed per line; thread-safe.

    `truncate_after_step` (a resumed run) first drops the records of later steps, so the file holds one curve;
    the shortened file replaces the old one atomically (a reader sees a new file and starts again)."""

    def __init__(self, path: str | os.PathLike, truncate_after_step: int | None = None):
        self.path = Path(path)
        # Opened in place, so never through a link: a link (or a folder, FIFO, ...) named metrics.jsonl is a
        # RunFolderError, not an append to whatever it leads to.
        with run_write_error(self.path, "the metrics file"):
            if truncate_after_step is not None:
                text = _read_plain_file(self.path)
                if text is not None:
                    kept = [line for line in text.splitlines()
                            if line.strip() and _record_step(line) <= truncate_after_step]
                    write_text_atomic(self.path, "".join(line + "\n" for line in kept))
            descriptor = open_plain_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            self._file = os.fdopen(descriptor, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()  # a checkpoint written from another thread logs too

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        with self._lock, run_write_error(self.path, "the metrics file"):
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):  # a full disk may refuse the last flush; nothing to add
            self._file.close()


def _read_plain_file(path: Path) -> str | None:
    """The text of a regular file (a torn UTF-8 sequence replaced), None when there is none; NotAFileError for
    a link, folder, FIFO or device in its place."""
    try:
        descriptor = open_plain_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        return file.read().decode("utf-8", errors="replace")


def _record_step(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError, TypeError):
        return 1 << 62  # a torn last line from a crash: drop it


# ---- metrics.jsonl: reading while it grows ----------------------------------------------------------------
@dataclass(frozen=True)
class TailUpdate:
    """What one poll of a metrics file found."""

    records: list[dict] = field(default_factory=list)  # new complete records, in file order
    restarted: bool = False  # the file shrank or was replaced: records start from its beginning again
    bad_lines: int = 0  # complete lines in this poll that were not a JSON object (skipped)


class MetricsTail:
    """Incremental reader of one `metrics.jsonl`; each `poll()` returns only what was appended since."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._offset = 0  # bytes consumed, including a held-back partial line
        self._partial = b""  # bytes of an incomplete last line, waiting for its newline
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file we are reading
        self.records_read = 0
        self.bad_lines = 0

    def reset(self) -> None:
        """Forget the position; the next poll reads the whole file again."""
        self._offset = 0
        self._partial = b""
        self._identity = None
        self.records_read = 0
        self.bad_lines = 0

    def poll(self, max_bytes: int = 64 * 1024 * 1024) -> TailUpdate:
        """Read what was appended since the last poll (at most `max_bytes` of it; the rest next time). Nothing
        while the file does not exist yet; RunFolderError naming it when a FIFO, device, folder or broken link
        is in its place, or it cannot be read."""
        try:
            file = open_regular_file(self.path, error=RunFolderError, label="the metrics file")
        except FileNotFoundError:
            return TailUpdate()
        with file:
            # The size and identity of what was opened, not of what the name led to a moment earlier.
            stat = os.fstat(file.fileno())
            identity = (stat.st_dev, stat.st_ino)
            restarted = False
            if self._identity is not None and (identity != self._identity or stat.st_size < self._offset):
                # Replaced or truncated: whatever we held belongs to the old file.
                self.reset()
                restarted = True
            self._identity = identity
            if stat.st_size == self._offset:
                return TailUpdate(restarted=restarted)
            try:
                file.seek(self._offset)
                chunk = file.read(max_bytes)
            except OSError as error:
                raise RunFolderError(
                    f"the metrics file {self.path} cannot be read: {describe_os_error(error)}") from None
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended on a newline
        records, bad = [], 0
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, ValueError):
                bad += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                bad += 1
        self.records_read += len(records)
        self.bad_lines += bad
        return TailUpdate(records=records, restarted=restarted, bad_lines=bad)

    def read_new(self) -> list[dict]:
        """The records appended since the last call (restarts are not reported; use `poll` for that)."""
        return self.poll().records
