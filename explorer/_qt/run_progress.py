"""How far a run is: "step 120 / 300 · 5,400 tok/s · 0:42 left", from the `StepStats` it yields."""

from __future__ import annotations

import math
import time
from typing import Any

from PySide6.QtWidgets import QProgressBar

from explorer.training_run import StepPace, format_duration


class RunProgress(QProgressBar):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("trainingProgress")
        self.setAccessibleName("Training progress")
        self.setTextVisible(True)
        self._pace = StepPace()  # for the time left
        self._started_at = time.perf_counter()
        self.begin(1, "idle")

    def begin(self, total: int | None, text: str) -> None:
        """A run begins (or a run folder is opened): nothing done yet, its pace unknown."""
        self._pace.clear()
        self._started_at = time.perf_counter()
        self.setRange(0, total or 1)
        self.setValue(0)
        self.setFormat(text)

    def forget_pace(self) -> None:
        """A pause is not part of the pace."""
        self._pace.clear()

    def show_step(self, stats: Any, total: int | None) -> None:
        """A `StepStats`; `total` is the run's planned steps when the record does not say (0)."""
        step = stats.step
        total = int(stats.total_steps or total or max(step, 1))
        self.setRange(0, total)
        self.setValue(min(step, total))
        parts = [f"step {step:,} / {total:,}"]
        if math.isfinite(stats.tokens_per_second) and stats.tokens_per_second:
            parts.append(f"{stats.tokens_per_second:,.0f} tok/s")
        elapsed = stats.elapsed_seconds
        if not math.isfinite(elapsed):  # a metrics file that does not say: the time since it was opened
            elapsed = time.perf_counter() - self._started_at
        self._pace.add(step, elapsed)
        seconds_left = self._pace.seconds_left(step, total)
        if seconds_left is not None:
            parts.append(f"{format_duration(seconds_left)} left")
        self.setFormat("  ·  ".join(parts))

    def mark_failed(self) -> None:
        self.setFormat(self.format() + "  ·  failed")
