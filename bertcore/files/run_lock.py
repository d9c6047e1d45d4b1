"""The lock that keeps two training runs out of one run folder (see `RunLock`).

Its file is `RunFolder(...).lock_path` (<run>/run.lock); `RunFolder.lock()` is the usual way to take it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import warnings
import weakref
from pathlib import Path

from bertcore.errors import RunFolderBusyError, RunFolderError, RunFolderWriteError
from bertcore.files.atomic import NotAFileError, describe_os_error, open_plain_file

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


class RunLock:
    """An exclusive lock on a run folder: one writer (one process, one open Trainer) at a time.

    `fcntl.flock` on <run>/run.lock, which holds the holder's pid for the message of whoever is refused. The
    kernel drops a flock when its holder closes the file, exits or dies (even by kill -9), so a lock file left
    by a dead process is no obstacle: its lock died with it. Two opens of the file conflict even within one
    process, so a second Trainer on the same folder in the same app is refused too. Where there is no fcntl
    (Windows), or the file system cannot lock, a RuntimeWarning says that two runs in one folder are not
    refused there, and training goes on.

    Use as a context manager, or `acquire()` / `release()`; a lock that is garbage-collected, or still held at
    interpreter exit, is released.

    The lock file is opened without following a link: a link, folder, FIFO or device named run.lock is a
    RunFolderError, never truncated or written through. A folder where the lock file cannot be written
    (read-only, permissions) is a RunFolderWriteError naming the folder and the fix.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)  # <run>/run.lock (bertcore.files.file_names names it)
        self.folder = self.path.parent
        self.held = False
        self._finalizer: weakref.finalize | None = None

    def acquire(self) -> RunLock:
        """Take the lock, or raise RunFolderBusyError naming the folder and the holder's pid. Idempotent."""
        if self.held:
            return self
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunFolderWriteError(
                f"cannot create the run folder {self.folder}: {error.strerror or error}; choose another folder "
                "(--out) or fix its permissions", self.folder, error.errno) from None
        descriptor = self._lock_file() if fcntl is not None else None
        if descriptor is None and fcntl is None:
            _warn_unlocked(self.folder, "this platform has no fcntl")
        if descriptor is not None:
            with contextlib.suppress(OSError):  # the pid is for messages only: a full disk may refuse it
                os.ftruncate(descriptor, 0)
                os.write(descriptor, f"{os.getpid()}\n".encode())
            self._finalizer = weakref.finalize(self, _unlock, descriptor, self.path, os.getpid())
        self.held = True
        return self

    def _lock_file(self) -> int | None:
        for _ in range(100):
            descriptor = self._open()
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                holder = _read_pid(descriptor)
                os.close(descriptor)
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise RunFolderBusyError(self._busy_message(holder), self.folder, holder) from None
                _warn_unlocked(self.folder, f"its file system cannot lock ({error.strerror})")
                return None
            if _same_file(descriptor, self.path):
                return descriptor
            os.close(descriptor)  # the holder deleted the file between our open and our lock: lock the new one
        raise RunFolderError(f"could not lock {self.path}: other processes keep replacing it")

    def _open(self) -> int:
        """The lock file, opened for reading and writing (created if missing). Never through a link: a link,
        folder, FIFO or device named run.lock is refused (RunFolderError), and a folder that cannot be written
        (read-only, permissions) is a RunFolderWriteError naming the folder and the fix."""
        try:
            return open_plain_file(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except NotAFileError as error:
            raise RunFolderError(
                f"{error.strerror}: the lock file of the run folder {self.folder} must be a plain file, and "
                "bertcore never writes through a link, nor into a folder, FIFO or device in its place. Delete "
                f"{self.path} (it only holds the pid of the run training in the folder; what a link leads to is "
                "left alone) and start again") from None
        except OSError as error:
            raise RunFolderWriteError(
                f"cannot train in the run folder {self.folder}: its lock file {self.path} cannot be written "
                f"({describe_os_error(error)}). A run writes its checkpoints and metrics into its folder, so the "
                "folder must be writable: make it so (remount it read-write, or fix its permissions), or copy it "
                "to a writable place and resume the copy there (--out COPY --resume)",
                self.path, error.errno) from None

    def _busy_message(self, holder: int | None) -> str:
        if holder == os.getpid():
            return (f"{self.folder} is already in use by another Trainer in this process (pid {holder}); close() "
                    "that trainer, or let its run end, before training in the same folder again")
        who = f"process {holder}" if holder is not None else "another process"
        return (f"{self.folder} is in use by another training run: {who} holds {self.path}. Wait for it to finish "
                "(or stop it), or train in another folder (--out)")

    def release(self) -> None:
        """Let go of the lock (and delete the lock file). Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def _unlock(descriptor: int, path: Path, owner_pid: int) -> None:
    # Delete before closing: whoever opened the old file and locks it after our close sees that it is no longer
    # the one under the name, and retries on the new one. A forked child leaves the parent's file alone.
    if os.getpid() == owner_pid:
        with contextlib.suppress(OSError):
            if _same_file(descriptor, path):
                path.unlink()
    with contextlib.suppress(OSError):
        os.close(descriptor)  # releases the flock


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        named = os.lstat(path)  # the entry itself: a link put in its place is another file
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _read_pid(descriptor: int) -> int | None:
    try:
        return int(os.pread(descriptor, 64, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _warn_unlocked(folder: Path, reason: str) -> None:
    warnings.warn(f"the run folder {folder} is not locked: {reason}, so a second run in the same folder would not "
                  "be refused", RuntimeWarning, stacklevel=4)
