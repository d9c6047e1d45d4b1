"""Following every run the Runs tab shows, off the GUI thread: finding runs in the folders added, tailing their files,
and reading their facts. Qt-free; `explorer.runs._qt.workbench.follow_worker` runs `follow` in a worker thread and
hands what it yields to the tab's state.

The GUI thread only asks (`add_folder`, `forget`, `wake`), from any thread; the follower's own thread does all the
reading. What it finds crosses as plain frozen records: `RunFound`, `CurvesRead` (a `CurveChunk` of numpy arrays),
`FactsRead`, `RunFailed`, `FolderFailed`. Each run's files are polled every `interval_s`; its facts (status,
checkpoints, settings) every `facts_every_s`, and the folders added are searched again for new runs every
`search_every_s` (a new bert-train run in the runs folder appears by itself).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from explorer.runs.curve_files import (
    BERT_FINETUNE,
    BERT_TRAIN,
    TRAINER,
    CurveChunk,
    CurveReader,
    CurveReadError,
    TrainerStateReader,
    find_runs,
    open_run,
)
from explorer.runs.workbench.run_facts import RunFacts, bert_run_facts, tensorboard_facts, trainer_facts


@dataclass(frozen=True)
class RunFound:
    run_id: int
    folder: Path
    kind: str
    name: str  # the folder's path below the folder it was found in ("lr-3e-4", "logs/run-2")
    root: Path


@dataclass(frozen=True)
class CurvesRead:
    run_id: int
    chunk: CurveChunk


@dataclass(frozen=True)
class FactsRead:
    run_id: int
    facts: RunFacts


@dataclass(frozen=True)
class RunFailed:
    run_id: int
    message: str  # the run is no longer followed


@dataclass(frozen=True)
class FolderFailed:
    folder: Path
    message: str


class _Followed:
    def __init__(self, found: RunFound, reader: CurveReader):
        self.found = found
        self.reader = reader
        self.error: str | None = None  # the run's own error record (bert-train)
        self.last_step: int | None = None
        self.facts: RunFacts | None = None
        self.facts_due = 0.0


class RunFollower:
    """The runs followed and the folders searched; see the module docstring."""

    def __init__(self, *, interval_s: float = 1.0, facts_every_s: float = 5.0, search_every_s: float = 15.0):
        self.interval_s, self.facts_every_s, self.search_every_s = interval_s, facts_every_s, search_every_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._roots: dict[Path, float] = {}  # folder added -> when it is searched next
        self._runs: dict[int, _Followed] = {}
        self._known: set[Path] = set()
        self._forgotten: set[int] = set()
        self._next_id = 1

    # ---- asked from any thread
    def add_folder(self, folder: str | os.PathLike) -> None:
        """Search `folder` (a run, or a folder of runs at any depth) at the next poll, and again now and then."""
        with self._lock:
            self._roots[Path(folder).resolve()] = 0.0
        self._wake.set()

    def forget(self, run_id: int) -> None:
        """Stop following a run (it is not found again in its folder)."""
        with self._lock:
            self._forgotten.add(run_id)
            self._runs.pop(run_id, None)
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    # ---- the follower's thread
    def poll(self) -> Iterator[object]:
        """One round: search the folders that are due, then read what each run appended; yields what it found."""
        now = time.monotonic()
        with self._lock:
            due = [root for root, when in self._roots.items() if when <= now]
            for root in due:
                self._roots[root] = now + self.search_every_s
        for root in due:
            yield from self._search(root)
        with self._lock:
            followed = list(self._runs.values())
        for run in followed:
            yield from self._read(run)

    def _search(self, root: Path) -> Iterator[object]:
        if not root.is_dir():
            yield FolderFailed(root, f"{root} is not a folder (any more)")
            return
        for folder, kind in find_runs(root):
            with self._lock:
                if folder in self._known:
                    continue
                self._known.add(folder)
                run_id, self._next_id = self._next_id, self._next_id + 1
            try:
                reader = open_run(folder)
            except CurveReadError as error:
                yield RunFailed(run_id, str(error))
                continue
            name = folder.name if folder == root else folder.relative_to(root).as_posix()
            found = RunFound(run_id, folder, kind, name, root)
            with self._lock:
                if run_id not in self._forgotten:
                    self._runs[run_id] = _Followed(found, reader)
            yield found

    def _read(self, run: _Followed) -> Iterator[object]:
        run_id = run.found.run_id
        try:
            chunk = run.reader.poll()
        except CurveReadError as error:
            with self._lock:
                self._runs.pop(run_id, None)
            yield RunFailed(run_id, str(error))
            return
        if chunk:
            for record in chunk.records:
                if record.get("kind") == "error":
                    run.error = str(record.get("message") or "the run failed")
            if chunk.restarted:
                run.error = None
            steps = [points.steps for name, points in chunk.points.items() if not name.startswith("eval")]
            if steps and any(len(part) for part in steps):
                run.last_step = max(int(part.max()) for part in steps if len(part))
            yield CurvesRead(run_id, chunk)
        now = time.monotonic()
        if chunk or now >= run.facts_due:
            run.facts_due = now + self.facts_every_s
            facts = self._facts(run)
            if facts != run.facts:
                run.facts = facts
                yield FactsRead(run_id, facts)

    @staticmethod
    def _facts(run: _Followed) -> RunFacts:
        folder, kind = run.found.folder, run.found.kind
        if kind in (BERT_TRAIN, BERT_FINETUNE):
            return bert_run_facts(folder, kind, run.error, run.last_step)
        if kind == TRAINER and isinstance(run.reader, TrainerStateReader):
            return trainer_facts(folder, run.reader.state)
        return tensorboard_facts(folder)

    def wait(self, stop: threading.Event) -> None:
        """Sleep until the next round is due, a request arrives, or `stop` is set."""
        deadline = time.monotonic() + self.interval_s
        while not stop.is_set() and not self._wake.is_set() and time.monotonic() < deadline:
            self._wake.wait(min(0.1, max(0.0, deadline - time.monotonic())))
        self._wake.clear()


def follow(follower: RunFollower, stop: threading.Event) -> Iterator[list]:
    """The follower's loop: rounds of `poll`, yielding what each run gave as soon as it is read (a list of records;
    a long first read of many runs fills the tab run by run), until `stop` is set."""
    while not stop.is_set():
        batch: list = []
        began = time.monotonic()
        for found in follower.poll():
            batch.append(found)
            if isinstance(found, CurvesRead) and len(found.chunk.points) and time.monotonic() - began > 0.1:
                yield batch
                batch, began = [], time.monotonic()
            if stop.is_set():
                return
        if batch:
            yield batch
        follower.wait(stop)
