"""The Train tab's probe box: which sentence pairs are re-inspected during training, and their snapshots.

The pairs are the inspector's current pair plus the ones the user pins. Each probe snapshot (the pairs
inspected with the weights of one step) lands in a `ProbeHistory`; a step slider walks them, the selected
snapshot of the selected pair is drawn small here (`SnapshotView`) and, while "Show snapshots in the
inspector" is ticked, offered to the Inspect tab (`showInspection`). It knows no run and no worker: the
Train tab feeds it snapshots (`add_snapshot`) and reads the pairs to probe (`pairs`, a tuple the training
thread may read: it is replaced whole, never changed in place).
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
)

from explorer._qt.probe_snapshot_view import SnapshotView
from explorer.probe_history import ProbeHistory, ProbePair


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
        self.probe_list.currentRowChanged.connect(lambda _: self._show_selected_snapshot())
        self.pin_button = QPushButton("Pin the inspector's pair")
        self.pin_button.setObjectName("pinPairButton")
        self.pin_button.clicked.connect(self._pin_current)
        self.unpin_button = QPushButton("Unpin")
        self.unpin_button.setObjectName("unpinPairButton")
        self.unpin_button.clicked.connect(self._unpin_selected)
        self.to_inspector_check = QCheckBox("Show snapshots in the inspector")
        self.to_inspector_check.setObjectName("snapshotsToInspectorCheck")
        self.to_inspector_check.setToolTip("the Inspect tab shows the selected training snapshot until you edit "
                                           "its input; untick to keep it on the live model")
        self.to_inspector_check.setChecked(True)
        self.step_slider = QSlider(Qt.Orientation.Horizontal)
        self.step_slider.setObjectName("snapshotSlider")
        self.step_slider.setAccessibleName("Probe snapshot step")
        self.step_slider.valueChanged.connect(lambda _: self._show_selected_snapshot())
        self.step_label = QLabel()
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
        slider_row = QHBoxLayout()
        slider_row.addWidget(self.step_slider, 1)
        slider_row.addWidget(self.step_label)
        column.addLayout(slider_row)
        column.addWidget(self.snapshot_view.controls, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(column, 3)
        layout.addWidget(self.snapshot_view, 2)

        self._reset_slider()
        self.set_current_pair(default_pair.text_a, default_pair.text_b)

    # ---- the pairs ----
    def set_current_pair(self, text_a: str, text_b: str | None) -> None:
        """The inspector's pair: the first probe pair from the next probe on (a blank A changes nothing)."""
        text_a = (text_a or "").strip()
        if not text_a:
            return
        self._current_pair = ProbePair(text_a, (text_b or "").strip() or None)
        self._refresh_list()

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
        self.probe_list.blockSignals(True)
        self.probe_list.clear()
        for pair in known:
            tag = "inspector" if pair == self._current_pair else ("pinned" if pair in self._pinned else "earlier")
            item = QListWidgetItem(f"[{tag}] {pair.caption}")
            item.setData(Qt.ItemDataRole.UserRole, pair)
            self.probe_list.addItem(item)
        row = known.index(selected) if selected in known else 0
        self.probe_list.setCurrentRow(row if known else -1)
        self.probe_list.blockSignals(False)

    def selected_pair(self) -> ProbePair | None:
        item = self.probe_list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    # ---- the snapshots ----
    def clear(self) -> None:
        """Forget every snapshot (a new run, another run folder)."""
        self.history.clear()
        self._reset_slider()
        self._refresh_list()

    def add_snapshot(self, step: int, inspections: dict[ProbePair, Any]) -> None:
        """The pairs inspected with the weights of `step`; the slider follows when it was at the newest."""
        follow = self.step_slider.value() == self.step_slider.maximum()
        self.history.add(step, inspections)
        steps = self.history.steps()
        self.step_slider.blockSignals(True)
        self.step_slider.setRange(0, len(steps) - 1)
        self.step_slider.setEnabled(len(steps) > 0)
        if follow:
            self.step_slider.setValue(len(steps) - 1)
        self.step_slider.blockSignals(False)
        if set(inspections) - set(self.pairs):
            self._refresh_list()
        self._show_selected_snapshot(send=follow)

    def _reset_slider(self) -> None:
        self.step_slider.blockSignals(True)
        self.step_slider.setRange(0, 0)
        self.step_slider.setEnabled(False)
        self.step_slider.blockSignals(False)
        self.step_label.setText("snapshot: none")

    def selected_snapshot_step(self) -> int | None:
        steps = self.history.steps()
        if not steps:
            return None
        return steps[min(self.step_slider.value(), len(steps) - 1)]

    def show_snapshot(self, step: int) -> int | None:
        """Select the snapshot nearest to `step` (what the slider and the plots' marker do); returns its step."""
        nearest = self.history.nearest_step(step)
        if nearest is not None:
            self.step_slider.setValue(self.history.steps().index(nearest))
            self._show_selected_snapshot()
        return nearest

    def _show_selected_snapshot(self, send: bool = True) -> None:
        step, pair = self.selected_snapshot_step(), self.selected_pair()
        if step is None or pair is None:
            return
        shown_step, inspection = self.history.nearest(step, pair)
        if inspection is None:
            return
        caption = f"training step {shown_step:,}"
        self.step_label.setText(f"snapshot: step {shown_step:,}")
        self.snapshot_view.show_inspection(inspection, caption)
        self.snapshotShown.emit(shown_step)
        if send and self.to_inspector_check.isChecked():
            self.showInspection.emit(inspection, f"{pair.caption} — {caption}")
