"""The "Explain" tab: why the model gave the output the user clicked in the Inspect tab.

A thin view over `ExplainState` (explorer/explain/state.py): a click on an output arrives as `explain(request)`,
the state checks the target and announces it, and the tab asks for the work that target needs; every view
redraws from what the state announces (`_on_state_changed`), never because a sibling called it.

Left: the tokens coloured by attribution, one column per chosen method (`attributionView`), and their deletion
and insertion curves (`faithfulnessPlot`). Right, one page each: context mixing beside raw attention
(`mixingView`), and activation patching from the clean input into an edited copy (`patchingView`).

The work runs off the GUI thread in `GeneratorWorker`s (`job_runner.ExplainJobs`), one job at a time (an
attribution's gradients and the patching's hooks must not share the model between two threads), as the state's
`JobQueue` orders them: a newer job of the running kind stops it (newest wins), Cancel stops everything. The
threads leave a core to the GUI and are niced, as the training thread is, so the window keeps answering while
base-sized patching runs. What the work sends while it runs (progress, a layer of patching, one method's scores) is
drawn at most every REDRAW_INTERVAL_MS: with the worker holding the GIL between its torch calls, every millisecond
the GUI thread spends drawing costs it a switch interval more, and drawing every record doubled the lag measured
(benchmarks/gui_lag_explain.py).
A failure is a sentence in the tab (`explainMessage`), never a traceback.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from bertcore.explain.attribution import ATTRIBUTION_METHODS
from bertcore.tokenization.pieces import readable_tokens
from explorer.common._qt.exporting import (
    CopyPicture,
    WrittenInBackground,
    export_button,
    export_png,
    export_svg,
    render_picture,
)
from explorer.common._qt.line_label import LineLabel
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.explain._qt.attribution_view import AttributionColumn, AttributionView
from explorer.explain._qt.faithfulness_plot import FaithfulnessPlot
from explorer.explain._qt.job_runner import ExplainJobs
from explorer.explain._qt.mixing_view import MixingView
from explorer.explain._qt.patching_view import PatchingView
from explorer.explain.exports import explanation_npz_writing, save_explanation_npz, write_attributions_csv
from explorer.explain.state import ExplainChange, ExplainRequest, ExplainState, mixing_maps

REDRAW_INTERVAL_MS = 150  # what arrives from the work is drawn at most this often (and at once when it ends)
MESSAGE_STYLE = "color: #a40000; background: #fde7e7; border: 1px solid #e0a0a0; border-radius: 3px; padding: 3px;"
POSITIONED = ("mlm", "tag", "start", "end", "rtd")  # target kinds whose second field is a position
VIEW_OF_KIND = {"attribution": "attributions", "mixing": "mixing", "patching": "patching"}  # job kind → its view
INTRO = ("Click an output in the Inspect tab (a masked token's guess, the NSP line, a class, a tag, an answer's "
         "start or end) to see which tokens it rests on, or mix the Inspect tab's input to see its context mixing.")
CANCELLED_TEXT = "Cancelled before {what} came: {again} to compute {them} again."
AGAIN_OUTPUT = "click the output in the Inspect tab"
AGAIN_MIX = "press “Mix the Inspect tab's input”"
NO_TARGETS = ("This model has no head whose output could be explained (a bare encoder): context mixing and attention "
              "still work — press “Mix the Inspect tab's input”.")


class ExplainTab(WindowTab):
    explainShown = Signal(object)  # the target tuple, once the tab took a request

    def __init__(self, parent: QWidget | None = None, *, torch_threads: int | None = None):
        super().__init__(parent)
        self.setObjectName("explainTab")
        self.state = ExplainState()
        self.jobs = ExplainJobs(self.state, torch_threads, parent=self)
        self._inspection: Any = None  # the Inspect tab's last live inspection (`on_inspection_shown`)
        self._pair: tuple[str, str | None] = ("", None)
        self._stale: set[str] = set()  # views to redraw at the next tick of `_redraw_timer`
        self._working: set[str] = set()  # the kinds of work the status line was last told of
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(REDRAW_INTERVAL_MS)
        self._redraw_timer.timeout.connect(self._redraw_stale)

        self.target_label = named(QLabel(html.escape(INTRO, quote=False)), "explainTarget", "what is explained")
        self.target_label.setTextFormat(Qt.TextFormat.RichText)  # the target in bold; what it quotes is escaped
        self.target_label.setWordWrap(True)
        self.message_label = plain_label(named(QLabel(), "explainMessage", "what went wrong"))
        self.message_label.setWordWrap(True)
        self.message_label.setStyleSheet(MESSAGE_STYLE)
        self.message_label.hide()
        self.method_boxes: dict[str, QCheckBox] = {}
        methods_row = QHBoxLayout()
        methods_row.addWidget(QLabel("Methods:"))
        for method in ATTRIBUTION_METHODS:
            box = named(QCheckBox(method.replace("_", " ")), f"method_{method}", f"attribution by {method}")
            box.setChecked(method in self.state.methods)
            box.toggled.connect(self._on_method_toggled)
            self.method_boxes[method] = box
            methods_row.addWidget(box)
        self.progress = named(QProgressBar(), "explainProgress", "progress of the explanation")
        self.progress.setRange(0, 1000)
        self.progress.setFixedWidth(140)
        # its text changes with every step of the work, and may be longer than the room left of the buttons: in a
        # LineLabel it is cut at its box's edge (all of it in the tooltip) instead of being painted under the buttons
        # (a fixed minimum width did that, once the row had less room than its widgets' minimums) or laying the tab
        # out again at every step
        self.status_line = LineLabel()
        self.status_label = plain_label(named(self.status_line.label, "explainStatus", "what is being computed"))
        self.cancel_button = named(QPushButton("Cancel"), "explainCancel", "cancel the explanation",
                                   "Stop every computation in progress; what arrived stays")
        self.cancel_button.clicked.connect(self.cancel)
        self.input_button = named(QPushButton("Mix the Inspect tab's input"), "explainInputButton",
                                  "context mixing of the Inspect tab's input",
                                  "Context mixing and attention of the input shown in the Inspect tab, without an "
                                  "output to explain")
        self.input_button.clicked.connect(self.mix_inspected_input)
        self.input_button.setEnabled(False)
        methods_row.addSpacing(12)
        methods_row.addWidget(self.status_line, 1)
        methods_row.addWidget(self.progress)
        methods_row.addWidget(self.cancel_button)

        self.attribution_view = AttributionView()
        self.faithfulness_plot = FaithfulnessPlot()
        self.mixing_view = MixingView()
        self.patching_view = PatchingView()
        self.corrupted_a = named(QLineEdit(), "corruptedA", "corrupted sentence A",
                                 "A copy of sentence A to edit: change a word, keep the number of tokens")
        self.corrupted_b = named(QLineEdit(), "corruptedB", "corrupted sentence B")
        self.corrupted_note = plain_label(named(QLabel(), "corruptedNote",
                                                "whether the corrupted input can be patched"))
        self.corrupted_note.setWordWrap(True)
        self.patch_button = named(QPushButton("Run patching"), "runPatching", "run activation patching",
                                  "Copy each activation of the clean run into the corrupted run, one at a time, "
                                  "and measure how much of the clicked output comes back")
        for edit in (self.corrupted_a, self.corrupted_b):
            edit.textEdited.connect(self._on_corrupted_edited)
        self.patch_button.clicked.connect(self.run_patching)
        self.mixing_view.layerChosen.connect(self.state.set_layer)
        self.mixing_view.methodChosen.connect(self.state.set_mixing_method)
        self.patching_view.layerClicked.connect(self.state.select_patch_layer)

        self.export = export_button(self, "explainExport", [
            ("Attributions as CSV…", "attributions.csv", self.write_csv),
            ("Everything as NPZ…", "explanation.npz",
             WrittenInBackground(lambda path: explanation_npz_writing(path, self.state))),
            ("Copy picture", "",
             CopyPicture(lambda: render_picture([self.attribution_view, self.faithfulness_plot]))),
            ("Attributions and curves as PNG…", "attributions.png",
             lambda path: export_png([self.attribution_view, self.faithfulness_plot], path)),
            ("Attributions and curves as SVG…", "attributions.svg",
             lambda path: export_svg([self.attribution_view, self.faithfulness_plot], path,
                                     title="bert-explorer attributions")),
            ("Context mixing as PNG…", "mixing.png", lambda path: export_png(self.mixing_view.canvas, path)),
            ("Context mixing as SVG…", "mixing.svg", lambda path: export_svg(self.mixing_view.canvas, path)),
            ("Patching as PNG…", "patching.png", lambda path: export_png(self.patching_view.canvas, path)),
            ("Patching as SVG…", "patching.svg", lambda path: export_svg(self.patching_view.canvas, path)),
        ])
        methods_row.addWidget(self.export)

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.attribution_view)
        left.addWidget(self.faithfulness_plot)
        left.setSizes([500, 300])
        patching_page = QWidget()
        patching_layout = QVBoxLayout(patching_page)
        patching_layout.setContentsMargins(0, 0, 0, 0)
        for label, edit in (("Corrupted A:", self.corrupted_a), ("Corrupted B:", self.corrupted_b)):
            row = QHBoxLayout()
            row.addWidget(QLabel(label))
            row.addWidget(edit, 1)
            patching_layout.addLayout(row)
        row = QHBoxLayout()
        row.addWidget(self.corrupted_note, 1)
        row.addWidget(self.patch_button)
        patching_layout.addLayout(row)
        patching_layout.addWidget(self.patching_view, 1)
        self.pages = QTabWidget()
        self.pages.setObjectName("explainPages")
        self.pages.addTab(self.mixing_view, "Context mixing")
        self.pages.addTab(patching_page, "Patching")
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("explainSplitter")
        splitter.addWidget(left)
        splitter.addWidget(self.pages)
        splitter.setSizes([700, 700])
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(self.target_label, 1)
        top.addWidget(self.input_button)
        layout.addLayout(top)
        layout.addWidget(self.message_label)
        layout.addLayout(methods_row)
        layout.addWidget(splitter, 1)
        self.state.changed.connect(self._on_state_changed)
        self._show_work()
        self._show_corrupted()

    # ---- what the window says ----
    def on_model_changed(self, loaded: Any) -> None:
        if loaded is not None and loaded.model is not self.state.model:
            self.cancel(quietly=True)
            self.state.set_model(loaded.model, loaded.tokenizer, loaded.info.name)
            from bertcore.explain.targets import available_targets

            if not available_targets(loaded.model):
                self.state.set_message(NO_TARGETS)

    def on_pair_changed(self, text_a: str, text_b: str | None) -> None:
        self._pair = (text_a, text_b or None)

    def on_inspection_shown(self, inspection: Any) -> None:
        """The Inspect tab shows a new inspection: kept for "Mix the Inspect tab's input" (nothing is computed)."""
        self._inspection = inspection
        self.input_button.setEnabled(inspection is not None and self.state.model is not None)

    def mix_inspected_input(self) -> bool:
        """Context mixing and attention of the Inspect tab's input, with no output to explain."""
        inspection = self._inspection
        if inspection is None:
            self.state.set_message("The Inspect tab shows no input yet: type a sentence there first.")
            return False
        return self.explain(ExplainRequest(None, inspection.encoding, inspection.masking, *self._pair))

    def explain(self, request: ExplainRequest) -> bool:
        """Explain the output a click named (see ExplainState.explain); False with the reason shown when not."""
        taken = self.state.explain(request)
        if taken:
            self.explainShown.emit(self.state.target)
        return taken

    def run_patching(self) -> None:
        self.jobs.submit(self.state.patching_job())

    def cancel(self, quietly: bool = False) -> None:
        """Stop every job in progress and drop the waiting ones; what arrived stays."""
        if not quietly:
            self.state.cancel_all()
        self.jobs.cancel()

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        return self.jobs.shutdown(timeout_ms)

    @property
    def busy(self) -> bool:
        return self.jobs.busy

    # ---- the state's announcements ----
    def _on_state_changed(self, state: ExplainState, what: ExplainChange) -> None:
        if what is ExplainChange.MODEL:
            self.target_label.setText(html.escape(INTRO, quote=False))
            self._show_attributions()
            self._show_mixing()
            self._show_corrupted()
            self._show_patching()
            self._show_work()
        elif what is ExplainChange.TARGET:
            what_text = f"Explaining {state.target_text}" if state.target is not None else "Context mixing"
            # bold on purpose, so the model's words are escaped: "MLM: '<mask>' …", a folder's name
            model_name = state.model_name or "the loaded model"
            self.target_label.setText(f"<b>{html.escape(what_text, quote=False)}</b> — "
                                      f"{html.escape(model_name, quote=False)}, {len(state.encoding)} tokens")
            job = state.attribution_job()  # asked for first: the views then say it is computing
            self._show_attributions()
            self.jobs.submit(job)
            if state.mixing is None:
                job = state.mixing_job()
                self._show_mixing()
                self.jobs.submit(job)
        elif what is ExplainChange.METHODS:
            with blocked(*self.method_boxes.values()):
                for method, box in self.method_boxes.items():
                    box.setChecked(method in state.methods)
            job = state.attribution_job()
            self._show_attributions()
            self.jobs.submit(job)
        elif what is ExplainChange.ATTRIBUTIONS:
            self._redraw_soon("attributions")
        elif what is ExplainChange.MIXING_METHOD:
            job = state.mixing_job()
            self._show_mixing()
            self.jobs.submit(job)
        elif what is ExplainChange.MIXING:
            self._redraw_soon("mixing")
        elif what is ExplainChange.LAYER:
            self._show_mixing()
        elif what is ExplainChange.CORRUPTED:
            self._show_corrupted()
            self._show_patching()
        elif what is ExplainChange.PATCHING:
            self._redraw_soon("patching")
        elif what is ExplainChange.PATCH_LAYER:
            self._show_patching()
        elif what is ExplainChange.WORK:
            kinds = set(state.work)
            ended, self._working = self._working - kinds, kinds
            # a job ended (finished, failed or cancelled): everything it sent, and what its view says now, is drawn at
            # once; work asked for while none was: Cancel acts from now on
            if ended or (kinds and not self.cancel_button.isEnabled()):
                self._stale |= {"work", *(VIEW_OF_KIND[kind] for kind in ended)}
                self._redraw_stale()
            else:
                self._redraw_soon("work")
        elif what is ExplainChange.MESSAGE:
            self.message_label.setText(state.message)
            self.message_label.setVisible(bool(state.message))

    def _redraw_soon(self, view: str) -> None:
        self._stale.add(view)
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def _redraw_stale(self) -> None:
        self._redraw_timer.stop()
        stale, self._stale = self._stale, set()
        for view, draw in (("attributions", self._show_attributions), ("mixing", self._show_mixing),
                           ("patching", self._show_patching), ("work", self._show_work)):
            if view in stale:
                draw()

    def _show_attributions(self) -> None:
        state = self.state
        if state.encoding is None:
            self.attribution_view.clear(INTRO)
            self.faithfulness_plot.show_curves({})
            return
        columns = []
        for method in state.methods:
            attribution = state.attributions.get(method)
            if attribution is None:
                continue
            scores = np.asarray(attribution.scores, np.float32)
            caption = f"±{float(np.max(np.abs(scores))) if scores.size else 0:.3g}"
            delta = getattr(attribution, "delta", None)
            if delta is not None and np.isfinite(delta):
                caption += f" · δ {float(delta):+.2g}"
            caption += f" · {attribution.steps} eval."
            columns.append(AttributionColumn(method.replace("_", " "), caption, scores))
        target = state.target
        marked = [target[1]] if target is not None and target[0] in POSITIONED else []
        specials = [position for position, special in enumerate(state.encoding.special_tokens_mask) if special]
        if target is None:
            placeholder = "No output chosen: only the context mixing of this input is shown. " + INTRO
        elif state.computing("attribution"):
            placeholder = "Computing the attributions…"
        elif "attribution" in state.stopped:
            placeholder = CANCELLED_TEXT.format(what="the attributions", again=AGAIN_OUTPUT, them="them")
        else:
            placeholder = "No attributions for this output."
        self.attribution_view.show_attributions(state.readable_tokens, columns, marked, specials, placeholder)
        curves = {method: state.faithfulness[method] for method in state.methods if method in state.faithfulness}
        curves_note = "" if state.target is None else "Computing…" if state.computing("attribution") else \
            "Cancelled before the curves came." if "attribution" in state.stopped else ""
        self.faithfulness_plot.show_curves(curves, curves_note)

    def _show_mixing(self) -> None:
        state = self.state
        self.mixing_view.set_choices(state.mixing_method, state.layer, state.num_layers)
        if state.encoding is None:
            self.mixing_view.show_maps([], [], 0, state.num_layers)
            return
        maps = mixing_maps(state.mixing, state.attention, state.layer)
        if maps:
            note = ""
        elif "mixing" in state.stopped and not state.computing("mixing"):
            note = CANCELLED_TEXT.format(what="the context mixing", them="it",
                                         again=AGAIN_OUTPUT if state.target is not None else AGAIN_MIX)
        else:
            note = "Computing the context mixing…"
        self.mixing_view.show_maps(state.readable_tokens, maps, state.layer, state.num_layers, note)

    def _show_corrupted(self) -> None:
        state = self.state
        text_a, text_b = state.corrupted_text or ("", None)
        if self.corrupted_a.text() != text_a:
            self.corrupted_a.setText(text_a)
        if self.corrupted_b.text() != (text_b or ""):
            self.corrupted_b.setText(text_b or "")
        usable = state.corrupted is not None and state.encoding is not None \
            and state.corrupted.input_ids != state.encoding.input_ids
        if usable:
            changed = [position for position, (clean, corrupt) in
                       enumerate(zip(state.encoding.input_ids, state.corrupted.input_ids, strict=True))
                       if clean != corrupt]
            corrupted_tokens = readable_tokens(state.corrupted)
            words = ", ".join(f"{position} {corrupted_tokens[position]!r}" for position in changed[:6])
            note = f"Ready: {len(changed)} position(s) differ ({words})."
            for position in state.corrupted_over_masking:
                note += (f" Position {position} was masked in the clean input (the model saw "
                         f"{state.readable_tokens[position]!r}); the corrupted run sees your "
                         f"{corrupted_tokens[position]!r} there.")
            self.corrupted_note.setText(note)
            self.corrupted_note.setStyleSheet("")
        else:
            self.corrupted_note.setText(state.corrupted_problem or "Edit a word of A or B.")
            self.corrupted_note.setStyleSheet("color: #a40000;" if state.corrupted is None and state.encoding
                                              is not None else "color: #555;")
        self.patch_button.setEnabled(usable and state.target is not None)

    def _show_patching(self) -> None:
        state = self.state
        tokens = state.readable_tokens
        cancelled = "Patching was cancelled; what arrived before stays." if "patching" in state.stopped else ""
        self.patching_view.show_patching(tokens, state.num_layers, state.patching.get("residual"),
                                         state.patching.get("heads"), cancelled)
        self.patching_view.show_layer(state.patch_layer)

    def _show_work(self) -> None:
        fraction = self.state.progress()
        self.progress.setVisible(fraction is not None)
        self.progress.setValue(round(1000 * (fraction or 0.0)))
        line = self.state.work_line()
        self.status_label.setText(line)
        self.status_label.setToolTip(line)
        self.cancel_button.setEnabled(fraction is not None)

    # ---- user input ----
    def _on_method_toggled(self, _checked: bool) -> None:
        chosen = [method for method, box in self.method_boxes.items() if box.isChecked()]
        if not chosen:
            with blocked(*self.method_boxes.values()):
                for method, box in self.method_boxes.items():
                    box.setChecked(method in self.state.methods)
            self.state.set_message("Keep at least one attribution method.")
            return
        self.state.set_methods(chosen)

    def _on_corrupted_edited(self, _text: str) -> None:
        self.state.set_corrupted(self.corrupted_a.text(), self.corrupted_b.text())

    # ---- exports ----
    def write_csv(self, path) -> Path:
        state = self.state
        return write_attributions_csv(path, state.encoding, state.attributions,
                                      [method for method in state.methods if method in state.attributions])

    def write_npz(self, path) -> Path:
        return save_explanation_npz(path, self.state)
