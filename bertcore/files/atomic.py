"""Write files and folders so that a crash, a kill or a full disk never leaves a half-written one in place.

Every file bertcore writes goes through here. A file is written to a hidden temporary file beside it (the
same folder, hence the same file system), flushed to disk, then renamed over the target (`os.replace`, atomic
on POSIX and Windows). A folder (a checkpoint) is filled in a hidden staging folder beside it and swapped into
place whole. A failure removes the temporary and re-raises: the previous file or folder is left as it was.

    write_text_atomic(path, text)      write_json_atomic(path, values)      write_bytes_atomic(path, data)
    with atomic_path(path) as temporary:   a library writes `temporary` itself (torch.save, safetensors)
    with staged_folder(folder) as staging: fill `staging`; it replaces `folder` on success
    fsync_tree(folder)                 flush every file under a folder (and the folder) to disk
    remove_atomically(path)            rename a file or folder away, then delete it: never half-deleted in place
    open_plain_file(path, flags)       os.open that never follows a link and opens only a regular file
    with library_write(path, "torch.save", RuntimeError):   a library's failed write becomes an OSError

A rename replaces a symbolic link at the target, never the file it points to, so the atomic writes above never
write through a link; a file opened in place (a lock, an appended log) is opened with `open_plain_file`, which
refuses a link, a folder, a FIFO or a device there (NotAFileError) instead of writing into what it leads to.

Written files get ordinary permissions, 0o666 & ~umask, whatever the writing library did. The umask is read
without changing it: `os.umask()` can only read it by setting it, process-wide, for a moment in which another
thread creating a file would get the wrong permissions.

A failed write in a run folder says which file, why, and what the user can do about it (`run_write_error`, at the
end): the atomic writes' own errors, in the run folder's words.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bertcore.errors import RunFolderError, RunFolderWriteError

# Suffixes of the hidden temporaries below; a folder's leftovers of a crash match `.*<suffix>`.
TEMPORARY_SUFFIXES = (".tmp", ".partial", ".old")
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 on Windows, where a link is looked for before opening
# A library that failed to write a file while less than this was free on its disk most likely found it full.
FULL_DISK_BYTES = 1 << 20


class NotAFileError(OSError):
    """A symbolic link, a folder, a FIFO, a socket or a device where a plain file belongs; `str(error)` and
    `error.strerror` say which ("… is a symbolic link (to /etc/passwd), not a file")."""


class LibraryWriteError(OSError):
    """A library's failed write of a file (torch.save's RuntimeError, safetensors' SafetensorError) as the
    OSError every caller that handles a failed write handles; `errno` is set when it is known or evident
    (errno.ENOSPC when the disk was all but full at the failure)."""


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


def describe_os_error(error: OSError) -> str:
    """"No space left on device (ENOSPC)": an OSError's reason and its errno's name, for messages."""
    name = errno.errorcode.get(error.errno) if isinstance(error.errno, int) else None
    reason = error.strerror or str(error)
    return f"{reason} ({name})" if name else reason


def describe_non_file(path: str | os.PathLike) -> str | None:
    """What is at `path` when it is not a plain file ("a symbolic link (to X)", "a folder", "a FIFO (named
    pipe)", "a socket", "a device"); None for a regular file or nothing (the link itself is looked at)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            return "a symbolic link"
        return f"a symbolic link (to {target})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def open_plain_file(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """`os.open(path, flags, mode)` that opens only a regular file (creating it when `flags` has O_CREAT):
    a symbolic link at `path` is never followed (O_NOFOLLOW), a FIFO is never waited on, and a link, a
    folder, a FIFO, a socket or a device there is a NotAFileError saying which. Returns the descriptor."""
    path = Path(path)
    if not NO_FOLLOW and path.is_symlink():  # no O_NOFOLLOW (Windows): look first
        raise NotAFileError(errno.ELOOP, f"{path} is {describe_non_file(path)}, not a file", str(path))
    nonblocking = getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags | NO_FOLLOW | nonblocking | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as error:
        what = describe_non_file(path)
        if what is not None:  # ELOOP (a link), EISDIR, ENXIO (a FIFO nobody reads), ...
            raise NotAFileError(error.errno, f"{path} is {what}, not a file", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            what = describe_non_file(path) or "not a regular file"
            raise NotAFileError(errno.EINVAL, f"{path} is {what}, not a file", str(path))
        if nonblocking:
            import fcntl

            fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) & ~nonblocking)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


@contextlib.contextmanager
def library_write(path: str | os.PathLike, library: str, *errors: type[Exception]) -> Iterator[None]:
    """Around one library call that writes `path`: the exception types `errors` it raises for a failed write
    (torch.save: RuntimeError; safetensors: SafetensorError) become a LibraryWriteError, an OSError, so that a
    full disk is handled the same whichever library met it. Anything else passes unchanged."""
    try:
        yield
    except OSError:
        raise
    except errors as error:
        text = " ".join(str(error).split())[:300] or type(error).__name__
        number = _errno_in(text, Path(path).parent)
        reason = os.strerror(number) if number is not None else f"{library} failed: {text}"
        raise LibraryWriteError(number, reason, str(path)) from error


def _errno_in(text: str, folder: Path) -> int | None:
    """The errno a library's message names ("... (os error 28)"), or ENOSPC when `folder`'s disk is all but
    full, else None."""
    named = re.search(r"os error (\d+)", text)
    if named:
        return int(named.group(1))
    try:
        if shutil.disk_usage(folder).free < FULL_DISK_BYTES:
            return errno.ENOSPC
    except OSError:
        pass
    return None


def remove_atomically(path: str | os.PathLike) -> None:
    """Delete a file, a link or a folder tree: it is first renamed to a hidden `.old` sibling (atomic), so that
    an interruption leaves crash debris for `remove_leftovers`, never a half-deleted folder under its name.
    A link is deleted, never what it leads to. Errors are ignored (what could not be deleted stays)."""
    path = Path(path)
    retired = _hidden_sibling(path, ".old")
    try:
        os.replace(path, retired)
    except OSError:
        return
    _delete(retired)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


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
    under a hidden `.old` name and none under `folder`, never a mixture of both.) A symbolic link at `folder`
    is replaced like a folder, and only the link is deleted, never what it leads to."""
    if not os.path.lexists(folder):
        os.replace(staging, folder)
        return
    retired = _hidden_sibling(folder, ".old")
    os.replace(folder, retired)  # renames a link itself, never its target
    try:
        os.replace(staging, folder)
    except BaseException:
        os.replace(retired, folder)  # put the previous folder back
        raise
    _delete(retired)


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


# ---- what a failed write in a run folder says: which file, why, and what the user can do about it

@contextlib.contextmanager
def run_write_error(path: Path, what: str):
    """Turn an OSError while writing one of a run's files into the run folder's errors: RunFolderError for a link,
    folder, FIFO or device in the file's place; RunFolderWriteError (its errno kept) with advice otherwise."""
    try:
        yield
    except NotAFileError as error:
        raise RunFolderError(
            f"cannot write {what} {path}: {error.strerror}. bertcore never writes through a link, nor into a folder, "
            "FIFO or device where one of a run's files belongs; delete it or move it away (what a link leads to is "
            "left alone), then try again") from None
    except OSError as error:
        raise RunFolderWriteError(f"could not write {what} {path}: {describe_os_error(error)}; {_advice(error)}", path,
                                  error.errno) from error


def _advice(error: OSError) -> str:
    if error.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY):
        return "something else is in its place: move it away"
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ("the run folder must be writable: fix its permissions (or remount it read-write), or copy it to a "
                "writable place")
    return "free disk space or fix the folder's permissions"
