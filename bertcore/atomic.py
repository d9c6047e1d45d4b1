"""Write files and folders so that a crash, a kill or a full disk never leaves a half-written one in place.

Every file bertcore writes goes through here. A file is written to a hidden temporary file beside it (the
same folder, hence the same file system), flushed to disk, then renamed over the target (`os.replace`, atomic
on POSIX and Windows). A folder (a checkpoint) is filled in a hidden staging folder beside it and swapped into
place whole. A failure removes the temporary and re-raises: the previous file or folder is left as it was.

    write_text_atomic(path, text)      write_json_atomic(path, values)      write_bytes_atomic(path, data)
    with atomic_path(path) as temporary:   a library writes `temporary` itself (torch.save, safetensors)
    with staged_folder(folder) as staging: fill `staging`; it replaces `folder` on success
    fsync_tree(folder)                 flush every file under a folder (and the folder) to disk

Written files get ordinary permissions, 0o666 & ~umask, whatever the writing library did. The umask is read
without changing it: `os.umask()` can only read it by setting it, process-wide, for a moment in which another
thread creating a file would get the wrong permissions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Suffixes of the hidden temporaries below; a folder's leftovers of a crash match `.*<suffix>`.
TEMPORARY_SUFFIXES = (".tmp", ".partial", ".old")


def current_umask() -> int:
    """The process umask, read without setting it (Linux: /proc/self/status; elsewhere a probe file's mode)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    probe = Path(tempfile.gettempdir()) / f".bertcore-umask-{uuid.uuid4().hex}"
    descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777)
    try:
        return 0o777 & ~stat.S_IMODE(os.fstat(descriptor).st_mode)
    finally:
        os.close(descriptor)
        probe.unlink()


def plain_file_mode() -> int:
    """The permissions of a plainly created file: 0o666 & ~umask."""
    return 0o666 & ~current_umask()


def _hidden_sibling(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{suffix}")


def fsync_directory(folder: Path) -> None:
    """Make the renames in `folder` durable (POSIX; Windows cannot open a folder, and needs no such step)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems refuse to fsync a folder; the rename is still atomic
    finally:
        os.close(descriptor)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path` for a writer to create; on success it is flushed, given ordinary
    permissions and renamed to `path`; on failure it is removed and `path` keeps its old content."""
    path = Path(path)
    temporary = _hidden_sibling(path, ".tmp")
    try:
        yield temporary
        _fsync_file(temporary)
        os.chmod(temporary, plain_file_mode())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    fsync_directory(path.parent)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Replace `path` with `data` atomically; returns the path."""
    path = Path(path)
    with atomic_path(path) as temporary:
        with open(temporary, "xb") as handle:
            handle.write(data)
    return path


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Replace `path` with `text` atomically (newlines written as given, never translated)."""
    return write_bytes_atomic(path, text.encode(encoding))


def write_json_atomic(path: str | os.PathLike, values: Any, indent: int | None = 2) -> Path:
    """Replace `path` with `values` as JSON (one trailing newline) atomically."""
    return write_text_atomic(path, json.dumps(values, indent=indent) + "\n")


def fsync_tree(folder: str | os.PathLike) -> None:
    """Flush every file under `folder` to disk, give it ordinary permissions, then flush the folders."""
    mode = plain_file_mode()
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            _fsync_file(path)
            os.chmod(path, mode)
        fsync_directory(Path(root))


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """A hidden staging folder beside `folder` to fill. On success it is flushed and swapped into place whole
    (a previous `folder` is replaced); on failure it is removed and a previous `folder` is left as it was."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} exists and is not a folder; choose another place to save")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = _hidden_sibling(folder, ".partial")
    staging.mkdir()  # not mkdtemp: its 0700 would make the saved folder private
    try:
        yield staging
        fsync_tree(staging)
        _swap_into_place(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(folder.parent)


def _swap_into_place(staging: Path, folder: Path) -> None:
    """Rename `staging` to `folder`; an existing `folder` is renamed away first and then deleted.

    (No portable call exchanges two folders atomically. A crash between the two renames leaves the old folder
    under a hidden `.old` name and none under `folder`, never a mixture of both.)"""
    if not folder.exists():
        os.replace(staging, folder)
        return
    retired = _hidden_sibling(folder, ".old")
    os.replace(folder, retired)
    try:
        os.replace(staging, folder)
    except BaseException:
        os.replace(retired, folder)  # put the previous folder back
        raise
    shutil.rmtree(retired, ignore_errors=True)


def remove_leftovers(folder: str | os.PathLike) -> list[Path]:
    """Delete the hidden temporaries a crashed writer left in `folder` (not recursive); returns them.

    Only for a folder no one else is writing into at the same time (a run folder under its lock)."""
    removed = []
    for entry in Path(folder).glob(".*"):
        if entry.name.endswith(TEMPORARY_SUFFIXES) or entry.name.startswith(".tmp-"):  # .tmp-: an older layout
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
            removed.append(entry)
    return removed
