"""The Inspect tab's input form: sentence A and B, the masking controls, padding, and the masking summary.

It holds no state of its own beyond what the fields show: it says when the text was edited (`edited`, on
every keystroke) and when the views should follow it (`settled`), and what the user asked of the masking.
The Inspect tab decides what that means.

`settled` is a throttle with a maximum wait, not a debounce: the first key after a quiet spell settles at
once, and while keys keep coming it settles at most once every `throttle_ms` (never later than that after
a key), always with the text as it is then; the last key of a burst is always settled. A debounce that
restarts on every key showed nothing at all to a typist faster than its delay (60–100 ms a key is
ordinary) until they stopped.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget

from explorer.common._qt.widget_names import named
from explorer.inspector.state import Change, ExplorerState

DEFAULT_THROTTLE_MS = 150
DEFAULT_SENTENCE_A = "the king is dead, long live the king"
DEFAULT_SENTENCE_B = "his son shall take the crown tomorrow"


class InputForm(QWidget):
    edited = Signal()  # the text of A or B changed (every keystroke)
    settled = Signal()  # an edit has settled: encode `current_pair()` now
    maskRequested = Signal(int)  # "Mask like BERT" with this seed
    rerollRequested = Signal()
    clearRequested = Signal()
    seedChanged = Signal(int)  # the user changed the seed
    padChanged = Signal(int)  # pad to this many positions (0: no padding)

    def __init__(self, throttle_ms: int = DEFAULT_THROTTLE_MS, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("inputForm")
        self.throttle_ms = throttle_ms
        self._last_settled = float("-inf")
        self._throttle = QTimer(self)
        self._throttle.setSingleShot(True)
        self._throttle.timeout.connect(self.flush)

        self.sentence_a_edit = _line_edit("sentenceAEdit", "Sentence A", "Type a sentence (required)")
        self.sentence_b_edit = _line_edit("sentenceBEdit", "Sentence B", "Optional second sentence: does B follow A?")
        self.sentence_a_edit.setText(DEFAULT_SENTENCE_A)
        self.sentence_b_edit.setText(DEFAULT_SENTENCE_B)
        self.sentence_a_edit.setToolTip("Sentence A (Alt+A). The views follow as you type.")
        self.sentence_b_edit.setToolTip("Sentence B (Alt+B), optional: with it BERT sees a pair and predicts "
                                        "whether B follows A")
        form = QFormLayout()
        form.addRow("Sentence A:", self.sentence_a_edit)
        form.addRow("Sentence B:", self.sentence_b_edit)

        self.mask_button = named(QPushButton("Mask like BERT"), "maskButton", "Mask like BERT",
                                 "Pick 15% of the tokens; 80% become [MASK], 10% a random token, 10% stay (Ctrl+M)")
        self.seed_spin = QSpinBox()
        self.seed_spin.setObjectName("seedSpin")
        self.seed_spin.setAccessibleName("Masking seed")
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setPrefix("seed ")
        self.seed_spin.setToolTip("The seed of BERT's masking: the same seed masks the same positions")
        self.reroll_button = named(QPushButton("Re-roll"), "rerollButton", "Re-roll the masking",
                                   "Next seed: another draw of BERT's masking (Ctrl+R)")
        self.clear_masks_button = named(QPushButton("Clear masks"), "clearMasksButton", "Clear masks",
                                        "Unmask every position (Ctrl+Shift+M)")
        self.pad_spin = QSpinBox()
        self.pad_spin.setObjectName("padSpin")
        self.pad_spin.setAccessibleName("Pad to length")
        self.pad_spin.setRange(0, 512)
        self.pad_spin.setSpecialValueText("no padding")
        self.pad_spin.setPrefix("pad to ")
        self.pad_spin.setToolTip("Pad the input with [PAD] to this many positions (attention mask 0 there)")
        self.masking_label = QLabel()
        self.masking_label.setObjectName("maskingLabel")
        self.masking_label.setAccessibleName("Masking summary")
        controls = QHBoxLayout()
        for widget in (self.mask_button, self.seed_spin, self.reroll_button, self.clear_masks_button, self.pad_spin):
            controls.addWidget(widget)
        controls.addWidget(self.masking_label, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addLayout(controls)

        self.sentence_a_edit.textChanged.connect(self._on_text_changed)
        self.sentence_b_edit.textChanged.connect(self._on_text_changed)
        self.mask_button.clicked.connect(lambda: self.maskRequested.emit(self.seed_spin.value()))
        self.reroll_button.clicked.connect(self.rerollRequested)
        self.clear_masks_button.clicked.connect(self.clearRequested)
        self.seed_spin.valueChanged.connect(self.seedChanged)
        self.pad_spin.valueChanged.connect(self.padChanged)

    def follow(self, state: ExplorerState) -> None:
        """Show `state`'s masking note and seed, redrawn whenever it announces a change of them (a snapshot's
        masking while one is shown)."""
        state.changed.connect(self._on_state_changed)
        self._on_state_changed(state, Change.MASKING)

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        if what in (Change.MODEL, Change.INPUT, Change.MASKING, Change.SNAPSHOT):
            self.show_masking_summary(state.masking_summary())
            self.show_seed(state.seed)

    def current_pair(self) -> tuple[str, str | None]:
        """What the fields hold now; B is None when its field is blank."""
        text_b = self.sentence_b_edit.text()
        return self.sentence_a_edit.text(), text_b if text_b.strip() else None

    def seed(self) -> int:
        return self.seed_spin.value()

    def show_seed(self, seed: int) -> None:
        """Show the seed in use without reporting it as the user's change."""
        with QSignalBlocker(self.seed_spin):
            self.seed_spin.setValue(seed)

    def set_max_positions(self, positions: int) -> None:
        self.pad_spin.setMaximum(positions)

    def show_masking_summary(self, text: str) -> None:
        self.masking_label.setText(text)

    def flush(self) -> None:
        """Settle pending edits now (the timer does it; tests and the benchmark call it instead of waiting)."""
        self._throttle.stop()
        self._last_settled = time.monotonic()
        self.settled.emit()

    def stop(self) -> None:
        """Drop a pending settle (the window is closing)."""
        self._throttle.stop()

    def _on_text_changed(self) -> None:
        self.edited.emit()
        if self._throttle.isActive():
            return  # a settle is due already; it will read the text as it is then
        since_ms = (time.monotonic() - self._last_settled) * 1000
        if since_ms >= self.throttle_ms:
            self.flush()  # the first key after a quiet spell: at once
        else:
            self._throttle.start(max(1, round(self.throttle_ms - since_ms)))  # never restarted by later keys


def _line_edit(name: str, accessible: str, placeholder: str) -> QLineEdit:
    edit = named(QLineEdit(), name, accessible)
    edit.setPlaceholderText(placeholder)
    edit.setClearButtonEnabled(True)
    return edit
