"""What a failed write in a run folder says: which file, why, and what the user can do about it."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from bertcore.errors import RunFolderError, RunFolderWriteError
from bertcore.files.atomic import NotAFileError, describe_os_error


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


def link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError as error:
        return f"? ({describe_os_error(error)})"


def _advice(error: OSError) -> str:
    if error.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY):
        return "something else is in its place: move it away"
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ("the run folder must be writable: fix its permissions (or remount it read-write), or copy it to a "
                "writable place")
    return "free disk space or fix the folder's permissions"
