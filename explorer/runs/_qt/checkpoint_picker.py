"""The Train tab's "Trained model" box: a run's final weights and checkpoints, newest first, one click from
the inspector."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QGroupBox, QPushButton, QVBoxLayout

from bertcore.files.run_folder import list_checkpoints


class CheckpointPicker(QGroupBox):
    chosen = Signal(str)  # the checkpoint folder the user wants in the inspector

    def __init__(self, parent=None):
        super().__init__("Trained model", parent)
        self.run_dir: Path | None = None
        self.combo = QComboBox()
        self.combo.setObjectName("checkpointCombo")
        self.combo.setAccessibleName("Checkpoint")
        self.combo.setToolTip("The run's final weights and its checkpoints, newest first")
        self.use_button = QPushButton("Use this model in the inspector")
        self.use_button.setObjectName("useModelButton")
        self.use_button.setAccessibleName("Use this model in the inspector")
        self.use_button.setToolTip("Open the chosen weights in the Inspect tab (the run goes on unchanged)")
        self.use_button.clicked.connect(self.choose)
        layout = QVBoxLayout(self)
        layout.addWidget(self.combo)
        layout.addWidget(self.use_button)
        self.refresh()

    def show_run(self, run_dir: Path | None) -> None:
        self.run_dir = run_dir
        self.refresh()

    def refresh(self) -> None:
        """List what the run folder holds now (a checkpoint may have been written or pruned)."""
        self.combo.clear()
        if self.run_dir is not None:
            final = self.run_dir / "final"
            if (final / "config.json").is_file():
                self.combo.addItem("final weights  (final)", str(final))
            for step, folder in reversed(list_checkpoints(self.run_dir)):
                label = f"step {step:,}" if step is not None else folder.name
                self.combo.addItem(f"{label}  ({folder.name})", str(folder))
        self.use_button.setEnabled(self.combo.count() > 0)

    def latest(self, reported: Path | None = None) -> Path | None:
        """The newest checkpoint: the one the running engine `reported` while it exists, else the newest listed."""
        if reported is not None and reported.is_dir():
            return reported
        checkpoints = list_checkpoints(self.run_dir) if self.run_dir else []
        return checkpoints[-1][1] if checkpoints else None

    def choose(self) -> str | None:
        """Offer the selected checkpoint to the inspector; None when there is none yet."""
        path = self.combo.currentData()
        if path:
            self.chosen.emit(path)
        return path or None
