"""A value axis that can be logarithmic, its ticks naming values ("0.01", "2", "10").

pyqtgraph's own log mode labels its ticks "10⁻²"-style and, with its SI prefix on, names the axis "loss (x1e+09)";
and its PlotItem log switch (the generic Transforms menu) transforms only the items that know how, so a plot of
bare curves and held-out points showed half of them as logs. Here the plot's owner draws log10 of its values into
every item itself and switches this axis with `set_log`; the axis places its ticks as pyqtgraph does in log mode
(decades, and 2 … 9 between them when few decades are in view) and writes each as the value it stands for.
"""

from __future__ import annotations

import pyqtgraph as pg


def value_text(value: float) -> str:
    """A tick's value in at most three significant digits, without an exponent from 0.0001 to 99,999 ("0.001", "20",
    "1000"), with one beyond ("1e-05")."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e5:
        text = f"{value:.3g}"
        return f"{float(text):f}".rstrip("0").rstrip(".") if "e" in text else text
    return f"{value:.0e}"


class LogValueAxis(pg.AxisItem):
    """A value axis, linear until `set_log(True)`: from then on its view holds log10 of the values drawn."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)  # "(x1e+09)": the SI prefix was computed from the logs' range

    @property
    def is_log(self) -> bool:
        return bool(self.logMode)

    def set_log(self, on: bool) -> None:
        if bool(on) != self.is_log:
            self.setLogMode(bool(on))

    def logTickStrings(self, values, scale, spacing):
        return [value_text(10.0 ** float(value) * scale) for value in values]
