"""A run folder held by one training loop across its `steps()` loops: the lock is let go when a loop ends and
taken back for the next loop or save only if no other run changed the folder meanwhile (`RunClaim`).
Torch-free; bertcore.training.loop uses it for pretraining and fine-tuning alike."""

from __future__ import annotations

from bertcore.errors import RunFolderError, TrainingError
from bertcore.files.run_folder import RunFolder


class RunClaim:
    """`folder`'s lock, taken at once when `hold` (rank 0; other ranks write nothing and hold nothing).

    `take()` holds it for a loop or a write (True when this call took it and must `give_back()`); `close()`
    releases it for good. `owner` names the holder in messages ("this Trainer")."""

    def __init__(self, folder: RunFolder, *, hold: bool, owner: str):
        self.folder = folder
        self.owner = owner
        self.closed = False
        self._lock = folder.lock() if hold else None  # RunFolderBusyError when another run holds it
        self._stamp_when_released: tuple | None = None

    def take(self) -> bool:
        """Hold the lock; refuses when this claim was closed, when another run holds the folder, or when another
        run changed it while this one did not hold it (its latest checkpoint or metrics differ): continuing then
        would write over that run's progress."""
        if self.closed:
            raise TrainingError(f"{self.owner} on {self.folder.path} was closed; create a new one (resume=True) "
                                "to go on")
        if self._lock is None or self._lock.held:
            return False
        self._lock.acquire()
        if self._stamp() != self._stamp_when_released:
            self._lock.release()
            raise RunFolderError(
                f"{self.folder.path} was changed by another run since {self.owner} last trained in it (its latest "
                "checkpoint or metrics differ); create a new one with resume=True to continue from there")
        return True

    def give_back(self) -> None:
        if self._lock is not None and self._lock.held:
            self._stamp_when_released = self._stamp()
            self._lock.release()

    def close(self) -> None:
        self.closed = True
        if self._lock is not None:
            self._lock.release()

    def _stamp(self) -> tuple:
        """What another run would change: the `latest` pointer and the metrics file's identity and size."""
        try:
            pointer = self.folder.latest_pointer_path.read_bytes()
        except OSError:
            pointer = None
        try:
            stat = self.folder.metrics_path.stat()
            metrics = (stat.st_ino, stat.st_size)
        except OSError:
            metrics = None
        return pointer, metrics
