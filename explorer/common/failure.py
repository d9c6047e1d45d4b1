"""A failure in a worker thread, described in plain values so that it can cross a signal to the GUI.

Every kind of background work (`explorer.common._qt.workers`) reports an exception as a `Failure`: the exception
itself stays in its thread (its traceback holds frames, tensors and locks of that thread), the window gets
what it needs to say what went wrong in words.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

# Errors a user causes (a bad file, a bad value, a full disk): their message alone says what is wrong.
USER_ERRORS = ("ValueError", "OSError", "KeyError")


@dataclass(frozen=True)
class Failure:
    kind: str  # the exception's class name, e.g. "NonFiniteLossError"
    lineage: tuple[str, ...]  # that class and its bases, most derived first: ("NonFiniteLossError", "TrainingError", …)
    message: str  # str(exception), or its class name when that is empty
    errno: int | None  # an OSError's number (errno.ENOSPC: the disk is full), else None
    where: str  # "file:line" of the innermost frame, "" when unknown
    traceback: str  # the whole traceback, for a bug report; never shown as the message

    def is_a(self, class_name: str) -> bool:
        """Whether the exception was an instance of the class named so (by name: no import needed)."""
        return class_name in self.lineage

    @property
    def text(self) -> str:
        """One line for a message: the message alone for errors a user causes, else the type and where it
        happened, so that a bug report says where."""
        if any(self.is_a(name) for name in USER_ERRORS):
            return self.message
        location = f" (at {self.where})" if self.where else ""
        return f"{self.kind}: {self.message}{location}"


def describe_exception(error: BaseException) -> Failure:
    """The plain description of `error` that a worker's failure signal carries."""
    kind = type(error).__name__
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    number = getattr(error, "errno", None)
    return Failure(
        kind=kind,
        lineage=tuple(cls.__name__ for cls in type(error).__mro__),
        message=str(error).strip() or kind,
        errno=number if isinstance(number, int) else None,
        where=f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "",
        traceback="".join(traceback.format_exception(type(error), error, error.__traceback__)),
    )
