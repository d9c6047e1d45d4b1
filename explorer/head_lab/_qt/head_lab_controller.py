"""The head lab's live side: it follows the inspector's state and runs the analyses off the GUI thread.

It follows `ExplorerState` (its `changed` announcements: another model, a live inspection, a snapshot shown or
left), never the Inspect tab's widgets; what it changes there it writes into that state (the head mask), and the
tab redraws from the state as it does for a user's clicks.

For every live inspection it asks a newest-wins worker (`LatestJobWorker`, one torch thread, as an inspection
gets) for that input's logit lens, and, while someone looks at them (the heads in importance or roles mode, or
the Head lab tab shown), its head importance and roles: `explorer.head_lab.analyses.analyse_input`. A corpus run
(importance and roles over held-out pairs, the pruning curve) is a `GeneratorWorker` over
`explorer.head_lab.corpus_run.corpus_run`, cancellable after every batch; starting another cancels it (newest wins). Its
thread leaves a core to the GUI and is niced, as the training thread is.

What it shows: the chosen source's marks on the attention panel's heads (`HeadMarks`, a tool it adds to the
panel's toolbar), the lens under the predictions (the two views it is given); what it tells the Head lab tab:
the signals below. "Switch off the k least important heads" is a head mask written into the state.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.head_lab._qt.head_marks import HeadMarks
from explorer.head_lab.analyses import (
    OBJECTIVES,
    SOURCES,
    HeadScores,
    HeldOutData,
    InputAnalysis,
    InputJob,
    analyse_input,
    recommend_objective,
    warm_up_analyses,
)
from explorer.head_lab.corpus_run import CorpusProgress, CorpusSettings, corpus_run
from explorer.inspector.state import Change, ExplorerState

CORPUS_NICENESS = 5  # as the training thread: the GUI thread wins the CPU
PUBLISH_INTERVAL_S = 0.5  # a corpus run redraws the table and the heads at most this often (and at its end)


class HeadLabController(QObject):
    scoresChanged = Signal(object)  # HeadScores of the source shown (or None), whenever they change
    sourceChanged = Signal(str)  # a key of SOURCES
    objectiveChanged = Signal(str, str)  # a key of OBJECTIVES ("" for none: no heads), why it is the default
    corpusProgress = Signal(object)  # CorpusProgress of the run in progress
    corpusEnded = Signal(str, str)  # "finished" | "stopped" | "failed", a sentence for the status line
    curveChanged = Signal(object)  # bertcore.analysis.pruning.PruningCurve so far, or None
    inputAnalysed = Signal(object)  # InputAnalysis of the inspection on screen

    def __init__(self, state: ExplorerState, attention_panel: Any, logit_lens: Any, *,
                 corpus_threads: int | None = None, parent: QObject | None = None):
        """`state` is followed and written; `attention_panel` gets the head marks tool, `logit_lens` the lens."""
        super().__init__(parent)
        self.state = state
        self.attention_panel = attention_panel
        self.logit_lens = logit_lens
        self.corpus_threads = corpus_threads or max(1, (os.cpu_count() or 1) - 1)
        self.objective: str | None = "mlm"
        self.objective_reason = ""
        self.source = "input"
        self.input_scores: HeadScores | None = None
        self.corpus_scores: HeadScores | None = None
        self.corpus_settings: CorpusSettings | None = None  # of corpus_scores
        self.curve = None
        self.last_analysis: InputAnalysis | None = None
        self._model = None
        self._watchers: set[str] = set()  # who wants this input's importance and roles ("heads", "lab")
        self._request_id = 0
        self.corpus_worker: GeneratorWorker | None = None
        self.held_out = HeldOutData()  # the tokenized corpus, kept between runs
        self._warmed_up = False
        self._published_at = 0.0
        self._retired: list[GeneratorWorker] = []  # ended or cancelled runs whose threads may still be ending
        self._cancelled: GeneratorWorker | None = None
        self._pending_settings: CorpusSettings | None = None
        self.input_worker = LatestJobWorker(analyse_input, name="headLabInputThread", torch_threads=1,
                                            drop_superseded=True)
        self.input_worker.done.connect(self._on_input_analysed)
        self.input_worker.failed.connect(self._on_input_failed)
        self.marks = HeadMarks(self.attention_panel)  # "Heads: attention / importance / roles" in its toolbar
        self.marks.modeChanged.connect(self._on_head_mode_changed)
        state.changed.connect(self._on_state_changed)

    # ---- what the window and the tab ask ----
    @property
    def model(self) -> Any:
        return self.state.model

    @property
    def has_pretraining_heads(self) -> bool:
        """An MLM or an NSP head: a masked LM alone (BertForMaskedLM, DistilBERT…) has a loss to rank heads by."""
        return self.model is not None and (self.model.has_mlm_head or self.model.has_nsp_head)

    @property
    def input_analysis_current(self) -> bool:
        """Whether `last_analysis` is of the inspection on screen (nothing newer is being computed)."""
        return self.last_analysis is not None and self.last_analysis.request_id == self._request_id

    def shown_scores(self) -> HeadScores | None:
        return self.corpus_scores if self.source == "corpus" else self.input_scores

    def on_model_changed(self, loaded: Any = None) -> None:
        """A new model: forget every result of the old one, cancel its corpus run, choose its objective."""
        state = self.state
        if state.model is self._model:
            return
        self._model = state.model
        self.cancel_corpus_run()
        self.input_scores = self.corpus_scores = self.corpus_settings = self.curve = self.last_analysis = None
        self._request_id += 1  # results of the old model still in flight are dropped
        path = state.model_info.path if state.model_info is not None else None
        choice = recommend_objective(state.model, path) if state.model is not None else None
        self.objective = choice.objective if choice else None
        self.objective_reason = choice.reason if choice else ""
        self.source = "input"
        self.logit_lens.show_lens(None, "No inspection yet.")
        self.objectiveChanged.emit(self.objective or "", self.objective_reason)
        self.sourceChanged.emit(self.source)
        self.curveChanged.emit(None)
        self._publish()

    def set_objective(self, objective: str) -> None:
        """The loss importance differentiates; corpus importance of another loss is dropped (roles stay)."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective is {objective!r}; use one of {', '.join(OBJECTIVES)}")
        if objective == self.objective or not self.has_pretraining_heads:
            return
        self.objective = objective
        if self.corpus_scores is not None and self.corpus_scores.importance is not None:
            self.corpus_scores = dataclasses.replace(self.corpus_scores, importance=None,
                                                     importance_note="run again for this loss")
            self.curve = None
            self.curveChanged.emit(None)
        self.objectiveChanged.emit(objective, self.objective_reason)
        self._publish()
        self.request_input_analysis()

    def set_source(self, source: str) -> None:
        if source not in SOURCES:
            raise ValueError(f"source is {source!r}; use one of {', '.join(SOURCES)}")
        if source != self.source:
            self.source = source
            self.sourceChanged.emit(source)
            self._publish()

    def watch(self, who: str, watching: bool) -> None:
        """`who` ("heads", "lab") looks at this input's importance and roles, or stops looking."""
        before = bool(self._watchers)
        self._watchers = self._watchers | {who} if watching else self._watchers - {who}
        if bool(self._watchers) and not before and not self._input_complete():
            self.request_input_analysis()

    def switch_off_least_important(self, count: int) -> Any:
        """Write the head mask with the `count` least important heads of the shown source off (the others on)
        into the inspector's state, as a user's clicks do. Returns the mask."""
        scores = self.shown_scores()
        if scores is None:
            raise ValueError("no importance yet: mask a token in the inspector or run the corpus sample")
        mask = scores.mask_without_least_important(count)
        if self.state.shown_inspection() is None:
            raise ValueError("the inspector shows no input yet; type a sentence first")
        self.state.set_head_mask(mask)
        return mask

    def all_heads_on(self) -> None:
        if self.state.shown_inspection() is not None:
            self.state.set_head_mask(None)

    # ---- this input ----
    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        """Only a live inspection is analysed (not a training snapshot): the lens and marks are the live model's."""
        if what is Change.MODEL:
            self.on_model_changed()
        elif what is Change.INSPECTION:
            # after the views have drawn and painted it: submitted now, the lens' Python holds the GIL while the GUI
            # thread draws the inspection (a keystroke's paint took twice its CPU time); the lens comes a moment later.
            # A timer, not a zero-delay call: that is a posted event, which can run before the paint's posted event.
            # Until the request goes out, the analysis held is of the inspection before: it is no longer current.
            self._request_id += 1
            QTimer.singleShot(1, self, self.request_input_analysis)
        elif what is Change.SNAPSHOT and state.snapshot is not None:
            self._request_id += 1
            self.logit_lens.show_lens(None, "A training snapshot is shown: the logit lens follows the live model. "
                                            "Edit the input to return to it.")
            self.input_scores = None  # this input's marks were the live model's
            if self.source == "input":
                self._publish()
        elif what is Change.SNAPSHOT:
            self.request_input_analysis()  # the live inspection is back on screen

    def request_input_analysis(self) -> None:
        state = self.state
        inspection = state.inspection
        if state.model is None or inspection is None:
            return
        if state.model is not self._model:
            self.on_model_changed()
        self._warm_up()
        self._request_id += 1
        wanted = bool(self._watchers)
        self.input_worker.submit(self._request_id, InputJob(
            request_id=self._request_id, model=state.model, tokenizer=state.tokenizer, inspection=inspection,
            objective=self.objective if self.has_pretraining_heads else None, want_importance=wanted,
            want_roles=wanted, top_k=state.top_k))

    def _input_complete(self) -> bool:
        scores = self.input_scores
        return scores is not None and scores.roles is not None and (
            scores.importance is not None or scores.importance_note != "not computed")

    def _on_input_analysed(self, request_id: int, analysis: InputAnalysis) -> None:
        if request_id != self._request_id:
            return
        self.last_analysis = analysis
        self.input_scores = analysis.scores
        self.logit_lens.show_lens(analysis.lens, analysis.lens_note)
        self.inputAnalysed.emit(analysis)
        if self.source == "input":
            self._publish()

    def _on_input_failed(self, request_id: int, failure: Any) -> None:
        if request_id == self._request_id:
            self.logit_lens.show_lens(None, f"The head lab could not analyse this input: {failure.text}")

    def _on_head_mode_changed(self, mode: str) -> None:
        self.watch("heads", mode != "attention")

    # ---- the corpus sample ----
    @property
    def corpus_running(self) -> bool:
        return self.corpus_worker is not None and self.corpus_worker.is_running

    def start_corpus_run(self, settings: CorpusSettings, *, reuse: bool = False) -> None:
        """Run `settings` in the background (cancelling a run in progress); with `reuse`, what the last run
        computed on the same sample and loss is kept, not computed again. ValueError when it cannot start."""
        state = self.state
        if state.model is None:
            raise ValueError("no model is loaded yet")
        if state.model is not self._model:
            self.on_model_changed()
        if not self.has_pretraining_heads and settings.pruning:
            raise ValueError("this model has no MLM or NSP head: there is no held-out metric to prune against")
        known = None
        if reuse and self.corpus_scores is not None and self.corpus_settings is not None \
                and self.corpus_settings.same_sample(settings):
            known = self.corpus_scores
        self.cancel_corpus_run()
        self._retired = [worker for worker in self._retired if not worker.wait(0)]
        self._warm_up()
        model, tokenizer, held_out = state.model, state.tokenizer, self.held_out
        worker = GeneratorWorker(lambda: corpus_run(model, tokenizer, settings, known, held_out),
                                 torch_threads=self.corpus_threads, niceness=CORPUS_NICENESS,
                                 name="headLabCorpusThread")
        self.corpus_worker = worker
        self._pending_settings = settings
        worker.yielded.connect(lambda progress: self._on_corpus_progress(worker, progress))
        worker.returned.connect(lambda _: self._on_corpus_ended(worker, "finished", ""))
        worker.stopped.connect(lambda _: self._on_corpus_ended(worker, "stopped", ""))
        worker.errored.connect(lambda failure, _: self._on_corpus_ended(worker, "failed", failure.text))
        worker.start()

    def cancel_corpus_run(self) -> None:
        """Stop the run in progress after its current batch; its results so far stay."""
        worker, self.corpus_worker = self.corpus_worker, None
        if worker is not None:
            worker.request_stop()
            self._cancelled = worker
            self._retired.append(worker)  # kept until its thread has ended (rule 6 of explorer.common._qt.workers)

    def _on_corpus_progress(self, worker: GeneratorWorker, progress: CorpusProgress) -> None:
        if worker is not self.corpus_worker or worker.stop_requested:
            return
        if progress.scores is not None:
            changed = progress.scores is not self.corpus_scores
            self.corpus_scores = progress.scores
            self.corpus_settings = self._pending_settings
            if changed and self.source == "corpus" and time.monotonic() - self._published_at >= PUBLISH_INTERVAL_S:
                self._publish()
        if progress.curve is not None:
            self.curve = progress.curve
            self.curveChanged.emit(progress.curve)
        self.corpusProgress.emit(progress)

    def _on_corpus_ended(self, worker: GeneratorWorker, outcome: str, message: str) -> None:
        if worker is self._cancelled and self.corpus_worker is None:
            self.corpusEnded.emit("stopped", "Cancelled; the results so far stay.")
            return
        if worker is not self.corpus_worker:
            return  # a run replaced by a newer one
        self._retired.append(worker)
        self.corpus_worker = None
        if outcome == "failed":
            self.corpusEnded.emit("failed", f"The corpus run failed: {message}")
            return
        scores = self.corpus_scores
        text = f"Done: {scores.caption}." if scores is not None else "Done."
        if scores is not None and scores.importance is None and scores.importance_note:
            text += f" No importance: {scores.importance_note}."
        if self.curve is not None:
            text += " The pruning curve is drawn."
        if scores is not None and self.source != "corpus":
            self.set_source("corpus")
        elif scores is not None:
            self._publish()  # what a throttled run did not draw yet
        self.corpusEnded.emit(outcome, text)

    # ---- showing ----
    def _warm_up(self) -> None:
        if not self._warmed_up:
            warm_up_analyses()
            self._warmed_up = True

    def _publish(self) -> None:
        self._published_at = time.monotonic()
        scores = self.shown_scores()
        self.marks.set_annotations(scores.annotations() if scores is not None else None,
                                   computing=scores is None and bool(self._watchers) and self.model is not None)
        self.scoresChanged.emit(scores)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop the corpus run and the input worker and join their threads (the window is closing)."""
        self.cancel_corpus_run()
        joined = self.input_worker.shutdown(timeout_ms)
        for worker in self._retired + ([self.corpus_worker] if self.corpus_worker is not None else []):
            joined = worker.shutdown(timeout_ms) and joined
        return joined
