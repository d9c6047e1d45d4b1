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

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from bertcore.data.masking_recipes import RECIPE_DESCRIPTIONS
from explorer.common._qt.line_label import LineLabel
from explorer.common._qt.widget_names import named
from explorer.inspector.state import Change, ExplorerState

DEFAULT_THROTTLE_MS = 150
DEFAULT_SENTENCE_A = "the king is dead, long live the king"
DEFAULT_SENTENCE_B = "his son shall take the crown tomorrow"
RECIPE_LABELS = {"token": "tokens", "whole-word": "whole words", "span": "spans (SpanBERT)"}


class InputForm(QWidget):
    edited = Signal()  # the text of A or B changed (every keystroke)
    settled = Signal()  # an edit has settled: encode `current_pair()` now
    maskRequested = Signal(int)  # "Mask like BERT" with this seed
    rerollRequested = Signal()
    clearRequested = Signal()
    seedChanged = Signal(int)  # the user changed the seed
    recipeChanged = Signal(str)  # the user picked a masking recipe ("token", "whole-word", "span")
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
        self.recipe_combo = named(QComboBox(), "maskingRecipeCombo", "Masking recipe",
                                  "What “Mask like BERT” picks: " + "; ".join(
                                      f"{RECIPE_LABELS[name]}: {text}" for name, text in RECIPE_DESCRIPTIONS.items()))
        for name in RECIPE_DESCRIPTIONS:
            self.recipe_combo.addItem(RECIPE_LABELS[name], name)
            self.recipe_combo.setItemData(self.recipe_combo.count() - 1, RECIPE_DESCRIPTIONS[name],
                                          Qt.ItemDataRole.ToolTipRole)
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
        self.masking_line = LineLabel()  # its new text each keystroke re-lays out nothing
        self.masking_label = self.masking_line.label
        self.masking_label.setObjectName("maskingLabel")
        self.masking_label.setAccessibleName("Masking summary")
        # "68 of 454 tokens" where the table has 457 positions: the count is of the tokens a masking may pick
        self.masking_label.setToolTip("What the masking picked, of the tokens it may pick: [CLS], [SEP] and "
                                      "padding are never masked, so they are not counted")
        controls = QHBoxLayout()
        for widget in (self.mask_button, self.recipe_combo, self.seed_spin, self.reroll_button, self.clear_masks_button,
                       self.pad_spin):
            controls.addWidget(widget)
        controls.addWidget(self.masking_line, 1)

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
        self.recipe_combo.currentIndexChanged.connect(lambda: self.recipeChanged.emit(self.recipe()))
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
            self.show_recipe(state.masking_recipe)

    def current_pair(self) -> tuple[str, str | None]:
        """What the fields hold now; B is None when its field is blank."""
        text_b = self.sentence_b_edit.text()
        return self.sentence_a_edit.text(), text_b if text_b.strip() else None

    def full_fields(self) -> list[str]:
        """The notes for fields whose text reached the most a field holds (a long paste is cut there, silently)."""
        return [f"{name} holds at most {edit.maxLength():,} characters: the text pasted into it was cut there"
                for name, edit in (("Sentence A", self.sentence_a_edit), ("Sentence B", self.sentence_b_edit))
                if len(edit.text()) >= edit.maxLength()]

    def seed(self) -> int:
        return self.seed_spin.value()

    def recipe(self) -> str:
        return str(self.recipe_combo.currentData())

    def show_recipe(self, recipe: str) -> None:
        """Show the recipe in use without reporting it as the user's change."""
        with QSignalBlocker(self.recipe_combo):
            self.recipe_combo.setCurrentIndex(max(0, self.recipe_combo.findData(recipe)))

    def show_seed(self, seed: int) -> None:
        """Show the seed in use without reporting it as the user's change."""
        with QSignalBlocker(self.seed_spin):
            self.seed_spin.setValue(seed)

    def set_max_positions(self, positions: int) -> None:
        self.pad_spin.setMaximum(positions)

    def show_masking_summary(self, text: str) -> None:
        self.masking_label.setText(text)

    def flush(self) -> None:
        """Settle pending edits now (the timer does it; tests and the benchmark call it instead of waiting).

        The throttle counts from the END of the settle: a settle slower than the throttle (a 512-token table on a
        busy machine) would otherwise leave every next key due at once, and the window would do nothing else."""
        self._throttle.stop()
        self.settled.emit()
        self._last_settled = time.monotonic()

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
