"""The attention panel's toolbar: the layer stepper, hide-special-tokens / renormalise, the colour scale, room
for the tools others add (`add_tool`), View all (undoes the views' zoom) and the Export button.

It holds no inspection: it says what the user asks for (`layerChosen`, `layerStepped`, `optionsChanged`,
`viewAllRequested`) and shows the layer the panel tells it (`show_layer`).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QToolButton,
    QWidget,
)

from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common.attention_math import ViewOptions

# colour scales shared by what is shown together (a layer's heads, the overview, the rollout); the first is
# the default (see attention_math.COLOUR_SCALES)
SCALE_CHOICES = {"p99": "colour: 0 … 99th pct", "sqrt": "colour: √ 0 … max", "max": "colour: 0 … max",
                 "fixed": "colour: 0 … 1"}
NO_LAYER_TEXT = "Layer – / –"


class AttentionToolbar(QWidget):
    layerChosen = Signal(int)  # the slider was moved to this layer
    layerStepped = Signal(int)  # -1 / +1: the previous / next button, or PageUp / PageDown on the slider
    optionsChanged = Signal()  # hide special tokens, renormalise rows or the colour scale changed
    viewAllRequested = Signal()  # zoom every view out to all its tokens

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.previous_button = named(QPushButton("◀"), "previousLayerButton", "previous layer",
                                     "Previous layer (PageUp)")
        self.next_button = named(QPushButton("▶"), "nextLayerButton", "next layer", "Next layer (PageDown)")
        for button in (self.previous_button, self.next_button):
            button.setFixedWidth(32)
        self.layer_slider = named(QSlider(Qt.Orientation.Horizontal), "layerSlider", "layer",
                                  "The encoder layer whose heads are shown (PageUp / PageDown step through them)")
        self.layer_slider.setRange(0, 0)
        self.layer_slider.setPageStep(1)
        self.layer_slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        # The toolbar, the tools added to it and the predictions beside the panel share the window's default
        # 1400 px: every control takes only the width it needs, or the window grows past the screen.
        self.layer_slider.setMinimumWidth(70)
        self.layer_label = named(QLabel(NO_LAYER_TEXT), "layerLabel", "current layer")
        self._plain_label_width = self.layer_label.fontMetrics().horizontalAdvance("Layer 24 / 24") + 4
        self.layer_label.setMinimumWidth(self._plain_label_width)
        self.hide_special_check = named(QCheckBox("Hide specials"), "hideSpecialCheck", "hide special tokens",
                                        "Drop the [CLS], [SEP] and [PAD] rows and columns in every view")
        self.renormalise_check = named(QCheckBox("Renormalise"), "renormaliseCheck", "renormalise rows",
                                       "Rescale each row to sum to 1 over the tokens still shown")
        self.scale_combo = named(QComboBox(), "colourScaleCombo", "colour scale",
            "How attention becomes colour, the same for everything shown together so heads stay comparable:\n"
            "0 … 99th percentile (default; shows structure at any length, the top 1% saturates; rounded up to a\n"
            "step of about 25 %, so that the scale holds still while you type),\n"
            "√ 0 … max (a square-root scale: faint weights lift, nothing saturates),\n"
            "0 … max (linear), or fixed 0 … 1 (comparable across inputs). The colour bar names the scale.")
        for scale, text in SCALE_CHOICES.items():
            self.scale_combo.addItem(text, scale)
        self.scale_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.scale_combo.setMinimumContentsLength(10)  # "colour: 0 … 99" shows; the list shows them whole
        self.view_all_button = named(QToolButton(), "viewAllButton", "view all tokens",
                                     "Zoom out to every token. In the head large and the all-layers view the wheel "
                                     "zooms, a drag pans and a right-drag zooms to the rectangle drawn; the labels "
                                     "name every token once there is room.")
        self.view_all_button.setText("View all")
        self.export_button = named(QToolButton(), "attentionExportButton", "export attention",
                                   "Save a view as PNG or SVG, a matrix as CSV, or every attention array as NPZ")
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)

        self.controls = QHBoxLayout(self)
        self.controls.setContentsMargins(4, 2, 4, 2)
        self.controls.setSpacing(2)
        for widget in (self.previous_button, self.layer_slider, self.next_button, self.layer_label):
            self.controls.addWidget(widget)
        self.controls.addSpacing(6)
        for widget in (self.hide_special_check, self.renormalise_check, self.scale_combo):
            self.controls.addWidget(widget)
        self.controls.addSpacing(6)
        self.controls.addWidget(self.view_all_button)
        self.controls.addStretch(1)
        self.controls.addWidget(self.export_button)

        self.layer_slider.installEventFilter(self)  # PageDown is the next (deeper) layer, as everywhere here
        self.layer_slider.valueChanged.connect(self.layerChosen)
        self.previous_button.clicked.connect(lambda: self.layerStepped.emit(-1))
        self.next_button.clicked.connect(lambda: self.layerStepped.emit(1))
        self.hide_special_check.toggled.connect(self.optionsChanged)
        self.renormalise_check.toggled.connect(self.optionsChanged)
        self.scale_combo.currentIndexChanged.connect(self.optionsChanged)
        self.view_all_button.clicked.connect(self.viewAllRequested)

    def add_tool(self, widget: QWidget) -> None:
        """Put `widget` in the toolbar, before Export (a tab's own toggles; the head-lab modes)."""
        self.controls.insertWidget(self.controls.indexOf(self.export_button), widget)

    def set_controls_enabled(self, enabled: bool) -> None:
        """The toolbar's own controls (not the tools added) work only while there is an inspection."""
        for widget in (self.layer_slider, self.previous_button, self.next_button, self.hide_special_check,
                       self.renormalise_check, self.scale_combo, self.view_all_button, self.export_button):
            widget.setEnabled(enabled)

    def show_layer(self, layer: int, num_layers: int, kind=None) -> None:
        """The stepper at `layer` of `num_layers` (no layerChosen); `kind` (family_display.LayerKind) names a
        ModernBERT layer's attention, global or local with its window, in its colour."""
        with blocked(self.layer_slider):
            self.layer_slider.setRange(0, num_layers - 1)
            self.layer_slider.setValue(layer)
        suffix = f" · {kind.text}" if kind is not None else ""
        text = f"Layer {layer + 1} / {num_layers}{suffix}"
        self.layer_label.setText(text)
        self.layer_label.setStyleSheet(f"color: {kind.colour}; font-weight: bold;" if kind is not None else "")
        self.layer_label.setToolTip(kind.description if kind is not None else "")
        if kind is not None:
            # the toolbar gives the label no more than its minimum when it is crowded, and the minimum was the plain
            # "Layer 24 / 24": ModernBERT's bold "· global" was cut to "· globa". It grows to the widest text of the
            # model shown (set once per kind of layer, not per step), so the label never re-lays the toolbar out
            bold = QFont(self.layer_label.font())
            bold.setBold(True)
            widest = QFontMetrics(bold).horizontalAdvance(f"Layer {num_layers} / {num_layers}{suffix}") + 6
            if widest > self.layer_label.minimumWidth():
                self.layer_label.setMinimumWidth(widest)

    def show_no_layer(self) -> None:
        self.layer_label.setMinimumWidth(self._plain_label_width)  # the next model's layers say how wide they are
        self.layer_label.setText(NO_LAYER_TEXT)
        self.layer_label.setStyleSheet("")
        self.layer_label.setToolTip("")

    def shows_a_layer(self) -> bool:
        return self.layer_label.text() != NO_LAYER_TEXT

    def options(self) -> ViewOptions:
        return ViewOptions(self.hide_special_check.isChecked(), self.renormalise_check.isChecked(),
                           self.colour_scale())

    def set_options(self, hide_special: bool | None = None, renormalise: bool | None = None) -> None:
        """Tick or untick the boxes without optionsChanged (None leaves one as it is)."""
        for check, value in ((self.hide_special_check, hide_special), (self.renormalise_check, renormalise)):
            if value is not None:
                with blocked(check):
                    check.setChecked(value)

    def colour_scale(self) -> str:
        return self.scale_combo.currentData()

    def set_colour_scale(self, scale: str) -> None:
        index = self.scale_combo.findData(scale)
        if index < 0:
            raise ValueError(f"unknown colour scale {scale!r}; choose one of {', '.join(SCALE_CHOICES)}")
        self.scale_combo.setCurrentIndex(index)

    def eventFilter(self, watched, event) -> bool:
        if watched is self.layer_slider and event.type() == QEvent.Type.KeyPress and \
                event.key() in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            self.layerStepped.emit(1 if event.key() == Qt.Key.Key_PageDown else -1)
            return True  # a slider's own PageDown would step back
        return super().eventFilter(watched, event)
