"""A value axis that can be logarithmic, its ticks naming values ("0.01", "2", "10").

pyqtgraph's own log mode labels its ticks "10⁻²"-style and, with its SI prefix on, names the axis "loss (x1e+09)";
and its PlotItem log switch (the generic Transforms menu) transforms only the items that know how, so a plot of
bare curves and held-out points showed half of them as logs. Here the plot's owner draws log10 of its values into
every item itself and switches this axis with `set_log`; the axis places its ticks at the decades and, between them,
at as many of 2 … 9, or of 2 and 5, as have room for their text, and writes each as the value it stands for.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

MIN_TICK_GAP_PX = 16  # between two labelled ticks of a vertical log axis (a line of 8-point text and some air)


def value_text(value: float) -> str:
    """A tick's value in at most three significant digits, without an exponent from 0.0001 to 99,999 ("0.001", "20",
    "1000"), with one beyond ("1e-05")."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e5:
        text = f"{value:.3g}"
        return f"{float(text):f}".rstrip("0").rstrip(".") if "e" in text else text
    return f"{value:.0e}"


class NoSIPrefix:
    """An axis (mixed in before pyqtgraph's) whose ticks are never scaled by an SI prefix once it is switched off.

    pyqtgraph 0.14's `enableAutoSIPrefix(False)` still computes a prefix for the range it holds and keeps its scale:
    an axis restyled while it showed 0.001 … 0.003 (a plot's axes changed) then drew 1 … 3 with no prefix named."""

    def updateAutoSIPrefix(self) -> None:
        if self.autoSIPrefix:
            super().updateAutoSIPrefix()
            return
        self.autoSIPrefixScale = 1.0
        self.labelUnitPrefix = ""
        self._updateLabel()


class LogValueAxis(NoSIPrefix, pg.AxisItem):
    """A value axis, linear until `set_log(True)`: from then on its view holds log10 of the values drawn."""

    min_tick_gap_px = MIN_TICK_GAP_PX  # between two labelled log ticks (a horizontal axis' labels need more)

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)  # "(x1e+09)": the SI prefix was computed from the logs' range

    @property
    def is_log(self) -> bool:
        return bool(self.logMode)

    def set_log(self, on: bool) -> None:
        if bool(on) != self.is_log:
            self.setLogMode(bool(on))

    def logTickValues(self, minVal, maxVal, size, stdTicks):
        """Decades, then 2 … 9 between them where each has `min_tick_gap_px`, else 2 and 5, else none (pyqtgraph's
        own put 2 … 9 everywhere, their labels written over each other on a short axis)."""
        low, high = sorted((float(minVal), float(maxVal)))
        if not (math.isfinite(low) and math.isfinite(high)) or high <= low or size <= 0:
            return []
        px_per_decade = size / (high - low)
        decades = list(range(math.floor(low), math.ceil(high) + 1))
        levels = [(1.0, [float(decade) for decade in decades if low <= decade <= high])]
        for multiples in ((2, 3, 4, 5, 6, 7, 8, 9), (2, 5)):
            gaps = np.diff(np.log10([1, *multiples, 10])) * px_per_decade
            if gaps.min() >= self.min_tick_gap_px:
                minor = [decade + math.log10(multiple) for decade in decades for multiple in multiples]
                levels.append((None, [value for value in minor if low <= value <= high]))
                break
        return levels

    def logTickStrings(self, values, scale, spacing):
        return [value_text(10.0 ** float(value) * scale) for value in values]
