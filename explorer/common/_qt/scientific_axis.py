"""A value axis in scientific notation, for values such as learning rates."""

from __future__ import annotations

import math

import pyqtgraph as pg


class ScientificAxis(pg.AxisItem):
    """Tick values in scientific notation ("2.0e-05"), for learning rates: an SI prefix read "(x1e-06)"
    beside ticks of 20…100, true but a sum to do in one's head."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):
        largest = max((abs(value) for value in values), default=0.0)
        # Enough digits that neighbouring ticks differ: 1.00e-03, 1.05e-03, … for a narrow range.
        digits = max(1, math.ceil(math.log10(largest / spacing))) if largest > 0 and spacing > 0 else 1
        return ["0" if value == 0 else f"{value * scale:.{digits}e}" for value in values]
