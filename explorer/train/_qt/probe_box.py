"""The Train tab's probe box: which sentence pairs are re-inspected during training, and their snapshots.

The pairs are the inspector's current pair plus the ones the user pins. Each probe snapshot (the pairs
inspected with the weights of one step) lands in a `ProbeHistory`; a step slider walks the snapshots of
the selected pair (its right end is that pair's newest, and it follows new ones while it is there), the
selected snapshot is drawn small here (`SnapshotView`) and, only while "Show snapshots in the inspector"
is ticked, offered to the Inspect tab (`showInspection`): by default the inspector stays on the live model.
It knows no run and no worker: the Train tab feeds it snapshots (`add_snapshot`) and reads the pairs to
probe (`pairs`, a tuple the training thread may read: it is replaced whole, never changed in place).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.signal_blocker import blocked
from explorer.runs.probe_history import ProbeHistory, ProbePair
from explorer.train._qt.probe_snapshot_view import NO_SNAPSHOT, SnapshotView

NOT_PROBED = "this pair is not probed yet: the next probe inspects it"


class ProbeBox(QGroupBox):
    snapshotShown = Signal(int)  # the step of the snapshot now selected (the loss plots' marker follows)
    showInspection = Signal(object, str)  # the selected snapshot's Inspection and caption, for the inspector

    def __init__(self, default_pair: ProbePair, parent=None):
        super().__init__("Probe pairs, re-inspected with the training weights", parent)
        self.history = ProbeHistory()
        self.pairs: tuple[ProbePair, ...] = ()  # what to probe now: read by the training thread, replaced whole
        self._current_pair: ProbePair | None = None
        self._pinned: list[ProbePair] = []

        self.probe_list = QListWidget()
        self.probe_list.setObjectName("probeList")
        self.probe_list.setAccessibleName("Probe pairs")
        self.probe_list.setMaximumHeight(80)
        self.probe_list.setToolTip("The sentence pairs re-inspected during training: the inspector's pair, the "
                                   "ones you pin, and earlier ones; select one to see its snapshots")
        self.probe_list.currentRowChanged.connect(lambda _: self._on_pair_selected())
        self.pin_button = QPushButton("Pin the inspector's pair")
        self.pin_button.setObjectName("pinPairButton")
        self.pin_button.setToolTip("Keep probing the Inspect tab's current pair even after you type another")
        self.pin_button.clicked.connect(self._pin_current)
        self.unpin_button = QPushButton("Unpin")
        self.unpin_button.setObjectName("unpinPairButton")
        self.unpin_button.setToolTip("Stop probing the selected pinned pair (its snapshots so far stay)")
        self.unpin_button.clicked.connect(self._unpin_selected)
        self.to_inspector_check = QCheckBox("Show snapshots in the inspector")
        self.to_inspector_check.setObjectName("snapshotsToInspectorCheck")
        self.to_inspector_check.setToolTip("Tick to show the selected training snapshot in the Inspect tab (until "
                                           "you edit its input); unticked, the inspector stays on the live model")
        self.to_inspector_check.setChecked(False)
        self.to_inspector_check.toggled.connect(lambda on: on and self._show_selected_snapshot())
        self.step_slider = QSlider(Qt.Orientation.Horizontal)
        self.step_slider.setObjectName("snapshotSlider")
        self.step_slider.setAccessibleName("Probe snapshot step")
        self.step_slider.setToolTip("Walk the selected pair's snapshots, from the first step to the newest")
        self.step_slider.valueChanged.connect(lambda _: self._show_selected_snapshot())
        self.step_label = plain_label(QLabel())
        self.step_label.setObjectName("snapshotLabel")
        self.step_label.setMinimumWidth(130)
        self.snapshot_view = SnapshotView()
        self.snapshot_view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

        column = QVBoxLayout()
        column.addWidget(self.probe_list)
        pin_row = QHBoxLayout()
        pin_row.addWidget(self.pin_button)
        pin_row.addWidget(self.unpin_button)
        pin_row.addStretch(1)
        pin_row.addWidget(self.to_inspector_check)
        column.addLayout(pin_row)
        # The slider in a bar of its own: the Train tab places it above its views (`take_slider_bar`), since the
        # analysis timelines follow it too.
        self.slider_bar = QWidget()
        self.slider_bar.setObjectName("snapshotSliderBar")
        slider_row = QHBoxLayout(self.slider_bar)
        slider_row.setContentsMargins(0, 0, 0, 0)
        slider_row.addWidget(QLabel("Step"))
        slider_row.addWidget(self.step_slider, 1)
        slider_row.addWidget(self.step_label)
        column.addWidget(self.slider_bar)
        column.addWidget(self.snapshot_view.controls, 1)
        self._column = column
        layout = QHBoxLayout(self)
        layout.addLayout(column, 3)
        layout.addWidget(self.snapshot_view, 2)

        self._reset_slider()
        self.set_current_pair(default_pair.text_a, default_pair.text_b)

    def take_slider_bar(self) -> QWidget:
        """The step slider's bar, out of this box's layout, for the caller to place (the Train tab shows it above
        the probe pairs and the analysis timelines, which all follow it)."""
        self._column.removeWidget(self.slider_bar)
        self.slider_bar.setParent(None)
        return self.slider_bar

    # ---- the pairs ----
    def set_current_pair(self, text_a: str, text_b: str | None) -> None:
        """The inspector's pair: the first probe pair from the next probe on (a blank A changes nothing)."""
        text_a = (text_a or "").strip()
        if not text_a:
            return
        following = self.selected_pair() in (None, self._current_pair)  # the user looks at the inspector's pair
        self._current_pair = ProbePair(text_a, (text_b or "").strip() or None)
        self._refresh_list()
        if following and self.probe_list.count() and self.selected_pair() != self._current_pair:
            self.probe_list.setCurrentRow(0)  # the inspector's pair is listed first

    def pin_pair(self, text_a: str, text_b: str | None = None) -> ProbePair:
        pair = ProbePair(text_a.strip(), (text_b or "").strip() or None)
        if not pair.text_a:
            raise ValueError("a probe pair needs a sentence A; type one in the inspector first")
        if pair not in self._pinned:
            self._pinned.append(pair)
        self._refresh_list()
        return pair

    def _pin_current(self) -> None:
        if self._current_pair is not None:
            self.pin_pair(self._current_pair.text_a, self._current_pair.text_b)

    def _unpin_selected(self) -> None:
        pair = self.selected_pair()
        if pair in self._pinned:
            self._pinned.remove(pair)
            self._refresh_list()

    def _refresh_list(self) -> None:
        selected = self.selected_pair()
        pairs = [self._current_pair] if self._current_pair else []
        self.pairs = tuple(pairs + [pair for pair in self._pinned if pair not in pairs])
        known = list(self.pairs) + [pair for pair in self.history.pairs() if pair not in self.pairs]
        with blocked(self.probe_list):
            self.probe_list.clear()
            for pair in known:
                tag = "inspector" if pair == self._current_pair else ("pinned" if pair in self._pinned else "earlier")
                item = QListWidgetItem(f"[{tag}] {pair.caption}")
                item.setData(Qt.ItemDataRole.UserRole, pair)
                self.probe_list.addItem(item)
            row = known.index(selected) if selected in known else 0
            self.probe_list.setCurrentRow(row if known else -1)
        if self.selected_pair() != selected:
            self._fit_slider(near=self.selected_snapshot_step(any_pair=True))
            self._show_selected_snapshot(send=False)  # the inspector keeps what was just typed into it

    def selected_pair(self) -> ProbePair | None:
        item = self.probe_list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    # ---- the snapshots ----
    def clear(self) -> None:
        """Forget every snapshot (a new run, another run folder)."""
        self.history.clear()
        self._reset_slider()
        self.snapshot_view.clear(NO_SNAPSHOT)
        self._refresh_list()

    def add_snapshot(self, step: int, inspections: dict[ProbePair, Any]) -> None:
        """The pairs inspected with the weights of `step`; the slider follows when it was at the newest."""
        follow = self.step_slider.value() == self.step_slider.maximum()
        self.history.add(step, inspections)
        if set(inspections) - set(self.pairs) or self.selected_pair() is None:
            self._refresh_list()
        self._fit_slider(to_newest=follow)
        self._show_selected_snapshot(send=follow)

    def _steps(self) -> list[int]:
        """The snapshots the slider walks: the selected pair's."""
        pair = self.selected_pair()
        return self.history.steps(pair) if pair is not None else []

    def _fit_slider(self, to_newest: bool = False, near: int | None = None) -> None:
        """Range the slider over the selected pair's snapshots; at the newest, or nearest to `near`."""
        steps = self._steps()
        with blocked(self.step_slider):
            self.step_slider.setRange(0, max(0, len(steps) - 1))
            self.step_slider.setEnabled(len(steps) > 0)
            if steps:
                if to_newest or near is None:
                    index = len(steps) - 1
                else:
                    index = min(range(len(steps)), key=lambda i: (abs(steps[i] - near), steps[i]))
                self.step_slider.setValue(index)

    def _on_pair_selected(self) -> None:
        self._fit_slider(near=self.selected_snapshot_step(any_pair=True))
        self._show_selected_snapshot()

    def _reset_slider(self) -> None:
        with blocked(self.step_slider):
            self.step_slider.setRange(0, 0)
            self.step_slider.setEnabled(False)
        self.step_label.setText("snapshot: none")
        self._shown_step: int | None = None

    def selected_snapshot_step(self, any_pair: bool = False) -> int | None:
        """The step of the snapshot selected (`any_pair`: the one last shown, whichever pair it was of)."""
        if any_pair:
            return getattr(self, "_shown_step", None)
        steps = self._steps()
        if not steps:
            return None
        return steps[min(self.step_slider.value(), len(steps) - 1)]

    def show_snapshot(self, step: int) -> int | None:
        """Select the selected pair's snapshot nearest to `step` (what the slider and the plots' marker do);
        returns its step."""
        steps = self._steps()
        if not steps:
            return None
        index = min(range(len(steps)), key=lambda i: (abs(steps[i] - step), steps[i]))
        self.step_slider.setValue(index)
        self._show_selected_snapshot()
        return steps[index]

    def _show_selected_snapshot(self, send: bool = True) -> None:
        step, pair = self.selected_snapshot_step(), self.selected_pair()
        inspection = self.history.get(step, pair) if step is not None and pair is not None else None
        if inspection is None:  # another pair's snapshot must not stay on show under this pair's name
            self.step_label.setText("snapshot: none")
            if pair is None or not len(self.history):
                self.snapshot_view.clear(NO_SNAPSHOT)
            else:
                self.snapshot_view.clear("not probed yet", NOT_PROBED)
            return
        self._shown_step = step
        caption = f"training step {step:,}"
        self.step_label.setText(f"snapshot: step {step:,}")
        self.snapshot_view.show_inspection(inspection, caption)
        self.snapshotShown.emit(step)
        if send and self.to_inspector_check.isChecked():
            self.showInspection.emit(inspection, f"{pair.caption} — {caption}")
