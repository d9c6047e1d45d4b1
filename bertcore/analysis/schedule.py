"""The analysis records of a run as it trains: when they are due, and where they run (the training loop's
`analysis` hook, bertcore.training.loop.AnalysisHook).

    with bertcore.Trainer(bertcore.TrainingConfig(analysis_every=100, ...),
                          analysis=bertcore.AnalysisSchedule()) as trainer:
        for stats in trainer.steps():
            if stats.analysis is not None:            # the record finished since the previous step, else None
                print(stats.analysis["step"], stats.analysis["best_head"])

**When.** A record is due at step 0 of a new run, every `analysis_every` steps and at the last step. It measures
the weights of the step it was taken at (bertcore.analysis.records.analysis_record on the published model: a
checkpoint of that step holds the same weights, and analysis_record on it, with the same index, gives the same
record, its "seconds" aside). Its `index`
(the record's number in the run, which decides BLiMP) is its due step's number: 0, 1, 2, … for steps 0, N, 2N, …
and one more for a last step between two of those. A resumed run first reads the records it has (metrics.jsonl,
already cut after the resumed step) and measures its starting step only when that step is due and has none: one
record per step.

**Where.** `in_background=False` (bert-train's way): in the loop's own thread, between two steps, on the model
itself; training waits for it. A stop requested meanwhile (Ctrl-C) abandons it between two of its parts, so a stop
is never held up by more than a part; a resumed run measures that step then. `in_background=True` (the app's
way: off the training thread): on a CPU copy of the weights taken at the step boundary, in a thread of its own
running `threads` torch threads, while training goes on. At most one record is in flight: a record falling due
while another is being measured is deferred to the first boundary after that one is handed over, where it measures
that step's weights and says so ("due_step": the step it was due at); due steps passed over meanwhile are listed in
the next record ("skipped_steps"), never queued. At the last two steps training waits for the record in flight and
for theirs, so that a finished run's step records carry its records; after a stop, the record in flight is finished
and written, and kept in `uncarried_records` (no step record follows to carry it).

Beside CPU training the background thread runs one torch thread (BACKGROUND_THREADS): torch.set_num_threads is per
thread, so the training thread keeps its own count, and the app trains on all cores but one (one for the GUI): on 2
cores, one each. Beside GPU training it runs torch's usual count on the CPU, which the GPU leaves idle.

Each step record carries at most one record (its `analysis` field). Two are finished at one boundary only with
`analysis_every` 1 in the loop's thread (step 0's record, measured before the first step, and step 1's): the older
one is written all the same, and kept in `uncarried_records` with those a stop left. A measurement that fails (a
bug, a model the treebank does not fit) becomes a "warning" record and the step record's warning, and the run goes
on without records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from bertcore.analysis.records import RECORD_KIND, RecordSettings, iter_analysis_record
from bertcore.analysis.run_analysis import analysis_data, check_analysis_data, read_analysis_records
from bertcore.analysis.word_inputs import layout_words
from bertcore.errors import AnalysisError

BACKGROUND_THREADS = 1  # torch threads of the background record when training runs on the CPU (see the docstring)


class _Abandoned(Exception):
    """A record stopped between two parts (a stop request, a cancel)."""


class AnalysisSchedule:
    """The records of `config.analysis_every` (and `config.treebank`) for one `TrainingLoop` (see the module's
    docstring). `settings` says what each record measures; `threads`: the background thread's torch threads (None:
    BACKGROUND_THREADS beside CPU training, torch's own count beside a GPU's)."""

    def __init__(self, *, in_background: bool = False, settings: RecordSettings | None = None,
                 threads: int | None = None):
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads is {threads!r}; give a whole number of at least 1, or None")
        self.in_background = in_background
        self.settings = settings or RecordSettings()
        self.threads = threads
        # Records written to metrics.jsonl that no step record carried (see the module's docstring), oldest first.
        self.uncarried_records: list[dict[str, Any]] = []
        self._loop = None
        self._every = 0
        self._data = None
        self._executor: ThreadPoolExecutor | None = None
        self._cancel = threading.Event()
        self._copy = None  # the CPU model the background records measure, its weights loaded at each start
        self._analysed: set[int] = set()
        self._pending: int | None = None  # the newest due step without a record
        self._skipped: list[int] = []  # due steps passed over since the last record
        self._ready: dict[str, Any] | None = None  # a finished record not yet handed over
        self._in_flight: Future | None = None
        self._in_flight_step = 0
        self._failure: str | None = None  # why the records stopped, once one failed
        self._ended = True

    # ---- the loop's hook ---------------------------------------------------------------------------------------

    def attach(self, loop) -> None:
        """Read the data and check that the model takes it (a ValueError naming what is wrong ends the setup)."""
        self._loop = loop
        self._every = loop.config.analysis_every
        treebank = getattr(loop.config, "treebank", None)
        self._data = analysis_data(treebank)  # LinguisticDataError names the file and the line
        check_analysis_data(self._data, self.settings, where=treebank or "the shipped treebank")
        sentences = [sentence.words for sentence in self._data[0][: self.settings.sentences]]
        inputs, _ = layout_words(loop.task.published_model, loop.tokenizer, sentences)
        if not inputs:
            raise AnalysisError(f"none of the first {len(sentences)} sentences of {treebank or 'the shipped treebank'}"
                                f" fits this model ({loop.task.published_model.config.max_position_embeddings} "
                                "positions, or words its tokenizer makes no piece of); give a treebank of shorter "
                                "sentences (--treebank)")

    def begin(self) -> None:
        loop = self._loop
        self._ended = False
        self._cancel.clear()
        if not self._every:
            return
        self._analysed = {record["step"] for record in read_analysis_records(loop.out_dir)
                          if isinstance(record.get("step"), int)}
        self._pending, self._skipped, self._ready = None, [], None
        if self._is_due(loop.step) and loop.step not in self._analysed:
            self._pending = loop.step
            self._start(wait=False)

    def after_step(self) -> list[dict[str, Any]]:
        loop = self._loop
        if not self._every or self._failure is not None:
            return []
        step = loop.step
        if self._is_due(step) and step not in self._analysed:
            if self._pending is not None and self._pending != step:
                self._skipped.append(self._pending)
            self._pending = step
        last = step >= loop.total_steps
        before_last = step + 1 >= loop.total_steps  # from here on, records are waited for
        warnings = self._collect(wait=before_last)
        uncarried = []
        # In the background a record waits for the previous one to be handed over; in the loop's thread, or at the
        # last step, it is measured now, and one not handed over yet is written beside it, carried by no step record.
        if (self._pending is not None and self._in_flight is None and self._failure is None
                and (self._ready is None or last or not self.in_background)):
            if self._ready is not None:
                uncarried, self._ready = [self._ready], None
                self.uncarried_records.extend(uncarried)
            warnings += self._start(wait=before_last)
        handed, self._ready = ([self._ready] if self._ready is not None else []), None
        return uncarried + handed + warnings

    def end(self, *, cancel: bool) -> list[dict[str, Any]]:
        if self._ended:
            return []
        self._ended = True
        if cancel:
            self._cancel.set()
        records = self._collect(wait=True)
        if self._ready is not None:
            records.insert(0, self._ready)
            self._ready = None
        if cancel:
            return []
        self.uncarried_records.extend(record for record in records if record["kind"] == RECORD_KIND)
        return records

    def close(self) -> None:
        self._cancel.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._copy = None

    # ---- when, and where ---------------------------------------------------------------------------------------

    def _is_due(self, step: int) -> bool:
        return step % self._every == 0 or step == self._loop.total_steps

    def _index(self, due: int) -> int:
        """The record's number in the run: its due step's (0, 1, 2, … for 0, N, 2N, …; one more for a last step
        between two of those)."""
        return due // self._every + (1 if due % self._every else 0)

    def _start(self, *, wait: bool) -> list[dict[str, Any]]:
        """Measure the current weights for the pending due step: now (inline), or on a copy in the background
        thread (waiting for it when `wait`). Returns warning records of a failure."""
        loop, due = self._loop, self._pending
        step, skipped = loop.step, self._skipped
        self._pending, self._skipped = None, []
        make = self._record_maker(due, step, skipped)
        if not self.in_background:
            return self._finished(lambda: make(loop.task.published_model, lambda: loop.stop_requested), step)
        model = self._snapshot()
        self._in_flight = self._background().submit(make, model, self._cancel.is_set)
        self._in_flight_step = step
        return self._collect(wait=wait)

    def _record_maker(self, due: int, step: int, skipped: list[int]) -> Callable[..., dict[str, Any]]:
        treebank, test, pairs = self._data
        settings, index = self.settings, self._index(due)

        def make(model, stop: Callable[[], bool]) -> dict[str, Any]:
            record = None
            for part in iter_analysis_record(model, self._loop.tokenizer, treebank, pairs, test_treebank=test,
                                             settings=settings, index=index):
                record = part.result
                if part.done < part.total and stop():
                    raise _Abandoned
            line = {"kind": RECORD_KIND, "step": step, **record}
            if due != step:
                line["due_step"] = due
            if skipped:
                line["skipped_steps"] = skipped
            return line

        return make

    def _collect(self, *, wait: bool) -> list[dict[str, Any]]:
        """The background record, if it is done (or when `wait`): ready to hand over. Returns warning records."""
        future = self._in_flight
        if future is None or not (wait or future.done()):
            return []
        self._in_flight = None
        return self._finished(future.result, self._in_flight_step)

    def _finished(self, result: Callable[[], dict[str, Any]], step: int) -> list[dict[str, Any]]:
        try:
            record = result()
        except _Abandoned:
            return []
        except Exception as error:  # a measurement must never end the training it watches
            self._failure = f"{type(error).__name__}: {error}"
            return [{"kind": "warning", "step": step,
                     "message": f"the analysis of step {step} failed ({self._failure}); the run goes on without "
                                "analysis records"}]
        self._analysed.add(record["step"])
        self._ready = record
        return []

    def _snapshot(self):
        """The CPU copy holding the current weights (made once, then loaded: nothing is in flight to read it)."""
        loop = self._loop
        if self._copy is None:
            self._copy = loop.snapshot_model()
        else:
            self._copy.load_state_dict(loop.snapshot_state_dict())
        return self._copy

    def _background(self) -> ThreadPoolExecutor:
        if self._executor is None:
            threads = self.threads
            if threads is None:
                threads = BACKGROUND_THREADS if self._loop.device.type == "cpu" else torch.get_num_threads()
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analysis",
                                                initializer=torch.set_num_threads, initargs=(threads,))
        return self._executor
