"""All attention views of one inspection, as one widget the main window embeds.

Tabs: "Heads" (the current layer's head grid + one head large), "All layers" (layers x heads in one
image) and "Rollout". Above them: the layer stepper, hide-special-tokens / renormalise, the colour scale,
room for tools others add (`add_tool`) and the export menu. The panel renders an Inspection (plain numpy);
the only thing it sends back is the head mask the user edits (headMaskChanged) and the token under the
mouse (tokenHovered).

What the views draw are pictures (`explorer.attention_images`): the current layer's `LayerView` with a
thumbnail per head, the selected head, the overview, the rollout. Each is drawn once per (inspection,
what it depends on) and kept until one of those changes. The inspection worker draws them for a new
inspection before it reaches the GUI thread (`picture_spec()` says what the panel shows now;
`set_inspection(inspection, pictures)` takes them), so a keystroke at 512 tokens costs the GUI thread only
the hand-over; what the user changes here (layer, head, option, tab, size) is drawn here, one picture.

Run `python -m explorer._qt.attention_demo [--tokens N] [--real]` to open it alone.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QPushButton,
    QSlider,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from explorer import attention_images, attention_math
from explorer._qt.exporting import ask_save_path, export_png, export_svg
from explorer._qt.head_grid import HeadGrid
from explorer._qt.heatmap_style import colour_lookup
from explorer._qt.model_overview import ModelOverview
from explorer._qt.token_heatmap import TokenHeatmap
from explorer.export_data import labelled_tokens, save_attention_npz, save_matrix_csv

# colour scales shared by what is shown together (a layer's heads, the overview, the rollout); the first is
# the default (see attention_math.COLOUR_SCALES)
SCALE_CHOICES = {"p99": "colour: 0 … 99th pct", "sqrt": "colour: √ 0 … max", "max": "colour: 0 … max",
                 "fixed": "colour: 0 … 1"}
RESIZE_REDRAW_MS = 120  # redraw the pictures at a new size once a resize pauses this long
ROLLOUT_CHOICES = ("through the current layer", "through the last layer")
VIEW_NAMES = ("current", "heads", "grid", "detail", "overview", "rollout", "panel")


def _named(widget: QWidget, name: str, accessible: str) -> QWidget:
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    return widget


class AttentionPanel(QWidget):
    headMaskChanged = Signal(object)  # np.ndarray (L, H) float32, 1 = head on, 0 = switched off
    tokenHovered = Signal(int)  # position under the mouse in any view, -1 when none
    layerShown = Signal(int)  # the layer the head grid now shows (tools that mark its heads follow it)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.inspection = None
        self.mask = np.ones((0, 0), np.float32)  # (L, H) the head mask the user edits
        self._pictures: dict[str, object] = {}  # "layer", "detail", "overview", "rollout": the last drawn
        self.layer = 0
        self.selected_head = 0
        self.highlighted = -1
        self._hovered = -1
        self._rollout: np.ndarray | None = None  # (L, T, T), for self._rollout_mask
        self._rollout_mask: bytes = b""
        self._stale: set[str] = set()  # tabs to redraw when they are next shown
        self.timings_ms: dict[str, float] = {}

        # controls
        self.previous_button = _named(QPushButton("◀"), "previousLayerButton", "previous layer")
        self.previous_button.setToolTip("Previous layer (PageUp)")
        self.next_button = _named(QPushButton("▶"), "nextLayerButton", "next layer")
        self.next_button.setToolTip("Next layer (PageDown)")
        for button in (self.previous_button, self.next_button):
            button.setFixedWidth(32)
        self.layer_slider = _named(QSlider(Qt.Orientation.Horizontal), "layerSlider", "layer")
        self.layer_slider.setRange(0, 0)
        self.layer_slider.setPageStep(1)
        self.layer_slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.layer_slider.setMinimumWidth(140)
        self.layer_slider.setToolTip("The encoder layer whose heads are shown (PageUp / PageDown step through them)")
        self.layer_label = _named(QLabel("Layer – / –"), "layerLabel", "current layer")
        self.layer_label.setMinimumWidth(90)
        self.hide_special_check = _named(QCheckBox("Hide special tokens"), "hideSpecialCheck",
                                         "hide special tokens")
        self.hide_special_check.setToolTip("Drop the [CLS], [SEP] and [PAD] rows and columns in every view")
        self.renormalise_check = _named(QCheckBox("Renormalise rows"), "renormaliseCheck", "renormalise rows")
        self.renormalise_check.setToolTip("Rescale each row to sum to 1 over the tokens still shown")
        self.scale_combo = _named(QComboBox(), "colourScaleCombo", "colour scale")
        for scale, text in SCALE_CHOICES.items():
            self.scale_combo.addItem(text, scale)
        self.scale_combo.setToolTip(
            "How attention becomes colour, the same for everything shown together so heads stay comparable:\n"
            "0 … 99th percentile (default; shows structure at any length, the top 1% saturates),\n"
            "√ 0 … max (a square-root scale: faint weights lift, nothing saturates),\n"
            "0 … max (linear), or fixed 0 … 1 (comparable across inputs). The colour bar names the scale.")
        self.export_button = _named(QToolButton(), "attentionExportButton", "export attention")
        self.export_button.setText("Export")
        self.export_button.setToolTip("Save a view as PNG or SVG, a matrix as CSV, or every attention array as NPZ")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.export_menu = self._build_export_menu()
        self.export_button.setMenu(self.export_menu)

        self.controls = QHBoxLayout()
        self.controls.setContentsMargins(4, 2, 4, 2)
        for widget in (self.previous_button, self.layer_slider, self.next_button, self.layer_label):
            self.controls.addWidget(widget)
        self.controls.addSpacing(12)
        for widget in (self.hide_special_check, self.renormalise_check, self.scale_combo):
            self.controls.addWidget(widget)
        self.controls.addStretch(1)
        self.controls.addWidget(self.export_button)

        # views
        self.head_grid = _named(HeadGrid(), "headGrid", "attention heads of the current layer")
        self.head_detail = _named(TokenHeatmap("", "attention"), "headDetail", "selected attention head")
        self.overview = _named(ModelOverview(), "modelOverview", "all layers and heads")
        self.rollout_view = _named(TokenHeatmap("", "rollout"), "rolloutView", "attention rollout")
        self.rollout_combo = _named(QComboBox(), "rolloutLayerCombo", "rollout through")
        self.rollout_combo.addItems(ROLLOUT_CHOICES)
        self.rollout_combo.setToolTip("Roll the attention out through the layer shown, or through every layer")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("headsSplitter")
        self.splitter.addWidget(self.head_grid)
        self.splitter.addWidget(self.head_detail)
        self.splitter.setStretchFactor(0, 4)
        self.splitter.setStretchFactor(1, 5)
        self.splitter.setSizes([400, 500])
        rollout_page = QWidget()
        rollout_layout = QVBoxLayout(rollout_page)
        rollout_layout.setContentsMargins(0, 0, 0, 0)
        rollout_row = QHBoxLayout()
        rollout_row.addWidget(QLabel("Attention rollout (Abnar & Zuidema 2020), mean over the heads that are on,"))
        rollout_row.addWidget(self.rollout_combo)
        rollout_row.addStretch(1)
        rollout_layout.addLayout(rollout_row)
        rollout_layout.addWidget(self.rollout_view, 1)
        self.rollout_page = rollout_page
        self.tabs = _named(QTabWidget(), "attentionTabs", "attention views")
        self.tabs.addTab(self.splitter, "Heads")
        self.tabs.addTab(self.overview, "All layers")
        self.tabs.addTab(rollout_page, "Rollout")
        self.tabs.setTabToolTip(0, "The heads of one layer, and the one you click large")
        self.tabs.setTabToolTip(1, "Every layer × head at once; click one to open it")
        self.tabs.setTabToolTip(2, "Attention rollout: how much each position draws on each input token")
        self.empty_label = QLabel("No inspection yet: type a sentence to see its attention.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self.controls)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.tabs, 1)

        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(RESIZE_REDRAW_MS)
        self._resize_timer.timeout.connect(self._redraw_at_new_size)
        for view in (self.head_grid.graphics, self.head_detail.graphics, self.rollout_view.graphics):
            view.installEventFilter(self)
        self.layer_slider.installEventFilter(self)  # PageDown is the next (deeper) layer, as everywhere here

        # wiring
        self.layer_slider.valueChanged.connect(self.set_layer)
        self.previous_button.clicked.connect(lambda: self.set_layer(self.layer - 1))
        self.next_button.clicked.connect(lambda: self.set_layer(self.layer + 1))
        self.hide_special_check.toggled.connect(self._on_options_changed)
        self.renormalise_check.toggled.connect(self._on_options_changed)
        self.scale_combo.currentIndexChanged.connect(self._on_options_changed)
        self.rollout_combo.currentIndexChanged.connect(lambda _: self._refresh_rollout())
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.head_grid.headClicked.connect(lambda head: self.select_head(self.layer, head))
        self.head_grid.headToggled.connect(lambda head, on: self.set_head_enabled(self.layer, head, on))
        self.overview.headClicked.connect(self._on_overview_clicked)
        for view in (self.head_grid, self.head_detail, self.overview, self.rollout_view):
            view.hovered.connect(self._on_view_hovered)
        self.set_inspection(None)

    def add_tool(self, widget: QWidget) -> None:
        """Put `widget` in the toolbar, before Export (a tab's own toggles; later the head-lab modes)."""
        self.controls.insertWidget(self.controls.indexOf(self.export_button), widget)

    # ------------------------------------------------------------------ the interface the window uses
    def picture_spec(self) -> attention_images.PictureSpec:
        """What the panel shows now, for a worker to draw for the next inspection (its own head mask)."""
        tab = self.tabs.currentIndex()
        return attention_images.PictureSpec(
            layer=self.layer, head=self.selected_head, options=self.options(), lookup=colour_lookup(),
            thumbnail_px=self.head_grid.thumbnail_pixels(self.num_heads), detail_px=self.head_detail.image_pixels(),
            overview=tab == 1, rollout_layer=self._rollout_layer_for_spec() if tab == 2 else None)

    def set_inspection(self, inspection, pictures: attention_images.PanelPictures | None = None) -> None:
        """Shows an Inspection (or nothing for None), with the pictures a worker drew for it (`picture_spec`)
        when there are; what they lack or what changed since is drawn here. Its head_mask becomes the
        panel's head mask."""
        self.inspection = inspection
        has_data = inspection is not None
        for widget in (self.layer_slider, self.previous_button, self.next_button, self.hide_special_check,
                       self.renormalise_check, self.scale_combo, self.export_button, self.rollout_combo):
            widget.setEnabled(has_data)
        self.tabs.setVisible(has_data)
        self.empty_label.setVisible(not has_data)
        self._rollout, self._rollout_mask = None, b""
        self._pictures = {}
        if not has_data:
            self.mask = np.ones((0, 0), np.float32)
            self.layer_label.setText("Layer – / –")
            return
        attentions = inspection.attentions
        if attentions.ndim != 4 or attentions.shape[-1] != attentions.shape[-2]:
            raise ValueError(f"inspection.attentions must be (L, H, T, T), got shape {attentions.shape}")
        num_layers, num_heads = attentions.shape[:2]
        self.layer = min(self.layer, num_layers - 1)
        self.selected_head = min(self.selected_head, num_heads - 1)
        mask = inspection.head_mask
        self.mask = (np.ones((num_layers, num_heads), np.float32) if mask is None
                     else np.array(mask, np.float32).reshape(num_layers, num_heads))
        if pictures is not None:
            self._pictures = {name: picture for name, picture in (
                ("layer", pictures.layer), ("detail", pictures.detail), ("overview", pictures.overview),
                ("rollout", pictures.rollout)) if picture is not None}
        self.layer_slider.blockSignals(True)
        self.layer_slider.setRange(0, num_layers - 1)
        self.layer_slider.setValue(self.layer)
        self.layer_slider.blockSignals(False)
        self._refresh_all()

    def set_layer(self, layer: int) -> None:
        if self.inspection is None:
            return
        layer = int(np.clip(layer, 0, self.num_layers - 1))
        changed = layer != self.layer
        self.layer = layer
        if self.layer_slider.value() != layer:
            self.layer_slider.blockSignals(True)
            self.layer_slider.setValue(layer)
            self.layer_slider.blockSignals(False)
        if changed or self.layer_label.text().startswith("Layer –"):
            self._refresh_layer()

    def current_layer(self) -> int:
        return self.layer

    def highlight_token(self, position: int) -> None:
        """Highlights the token at `position` (its row and column) in every view; -1 clears. No signal."""
        self.highlighted = int(position)
        for view in (self.head_grid, self.head_detail, self.overview, self.rollout_view):
            view.highlight_position(self.highlighted)

    # ------------------------------------------------------------------ more public API (tests, menus)
    @property
    def num_layers(self) -> int:
        return self.mask.shape[0]

    @property
    def num_heads(self) -> int:
        return self.mask.shape[1]

    def head_mask(self) -> np.ndarray:
        return self.mask.copy()

    def options(self) -> attention_math.ViewOptions:
        return attention_math.ViewOptions(self.hide_special_check.isChecked(), self.renormalise_check.isChecked(),
                                          self.colour_scale())

    def _spec(self) -> attention_images.PictureSpec:
        """The pictures wanted now, with the head mask the user edits (not inspected yet, maybe)."""
        spec = self.picture_spec()
        rollout_layer = self.rollout_layer() if self.inspection is not None else None
        return dataclasses.replace(spec, head_mask=self.mask, rollout_layer=rollout_layer)

    def _layer_pictures(self, spec: attention_images.PictureSpec | None = None) -> attention_images.LayerPictures:
        spec = spec or self._spec()
        pictures = self._pictures.get("layer")
        if pictures is None or pictures.key != attention_images.layer_key(spec, self.inspection):
            pictures = attention_images.draw_layer(self.inspection, spec)
            self._pictures["layer"] = pictures
        return pictures

    def layer_view(self) -> attention_math.LayerView:
        """What the views of the current layer draw, computed once per (inspection, layer, options, head mask)."""
        return self._layer_pictures().view

    def set_options(self, hide_special: bool | None = None, renormalise: bool | None = None) -> None:
        for check, value in ((self.hide_special_check, hide_special), (self.renormalise_check, renormalise)):
            if value is not None:
                check.blockSignals(True)
                check.setChecked(value)
                check.blockSignals(False)
        self._on_options_changed()

    def select_head(self, layer: int, head: int) -> None:
        """Opens `head` of `layer` in the detail view (and moves the stepper to that layer)."""
        if self.inspection is None:
            return
        self.selected_head = int(np.clip(head, 0, self.num_heads - 1))
        if layer != self.layer:
            self.set_layer(layer)
        else:
            self.head_grid.select(self.selected_head)
            self._refresh_detail()
        self.overview.select(self.layer, self.selected_head)

    def set_head_enabled(self, layer: int, head: int, enabled: bool) -> None:
        """Switches one head on/off and emits the whole (L, H) mask."""
        if self.inspection is None:
            return
        head_mask = self.mask.copy()
        head_mask[layer, head] = 1.0 if enabled else 0.0
        self.set_head_mask(head_mask)

    def set_head_mask(self, head_mask) -> None:
        """Switch heads on/off as the user would, all at once: (L, H), 1 = on. Emits headMaskChanged when it
        changes anything (the head lab's "switch off the k least important heads")."""
        if self.inspection is None:
            return
        head_mask = np.asarray(head_mask, np.float32)
        if head_mask.shape != self.mask.shape:
            raise ValueError(f"head mask has shape {head_mask.shape}; this model needs {self.mask.shape}")
        if np.array_equal(head_mask, self.mask):
            return
        self.mask = head_mask.copy()
        self.head_grid.set_enabled(self.layer_view().heads_on)
        self._refresh_detail()
        self.overview.set_head_mask(self.mask)
        self._mark_stale({"rollout"})
        self.headMaskChanged.emit(self.mask.copy())

    def visible_positions(self) -> np.ndarray:
        """(t,) the original positions every view shows."""
        return self.layer_view().positions

    def rollout(self) -> np.ndarray:
        """(L, T, T) rollout of the full inspection under the current head mask (cached)."""
        key = self.mask.tobytes()
        if self._rollout is None or key != self._rollout_mask:
            self._rollout = attention_math.compute_rollout(self.inspection.attentions, self.mask)
            self._rollout_mask = key
        return self._rollout

    def rollout_layer(self) -> int:
        return self.num_layers - 1 if self.rollout_combo.currentIndex() == 1 else self.layer

    def _rollout_layer_for_spec(self) -> int:
        # before the first inspection the number of layers is unknown: "the last" is as far as any model has
        return (self.num_layers - 1 if self.num_layers else 10_000) if self.rollout_combo.currentIndex() == 1 \
            else self.layer

    # ------------------------------------------------------------------ export (no dialogs: take a path)
    def view_widget(self, view: str = "current") -> QWidget:
        if view not in VIEW_NAMES:
            raise ValueError(f"unknown view {view!r}; choose one of {', '.join(VIEW_NAMES)}")
        if view == "current":
            view = ("heads", "overview", "rollout")[self.tabs.currentIndex()]
        return {"heads": self.splitter, "grid": self.head_grid, "detail": self.head_detail,
                "overview": self.overview, "rollout": self.rollout_page, "panel": self}[view]

    def _require_inspection(self, what: str) -> None:
        if self.inspection is None:
            raise ValueError(f"nothing to export as {what}: no inspection is shown yet")

    def export_png(self, path, view: str = "current") -> Path:
        self._require_inspection("PNG")
        self._ensure_drawn(view)
        return export_png(self.view_widget(view), path)

    def export_svg(self, path, view: str = "current") -> Path:
        self._require_inspection("SVG")
        self._ensure_drawn(view)
        return export_svg(self.view_widget(view), path)

    def export_npz(self, path) -> Path:
        """attentions (L, H, T, T), tokens (T,), rollout (L, T, T), head_mask (L, H): the full inspection."""
        self._require_inspection("NPZ")
        view = self.layer_view()
        return save_attention_npz(path, self.inspection.attentions, list(view.tokens), self.rollout(), view.head_mask)

    def export_head_csv(self, path) -> Path:
        """The selected head of the current layer, as shown (hidden tokens dropped, renormalised)."""
        self._require_inspection("CSV")
        view = self.layer_view()
        labels = labelled_tokens(view.tokens, view.positions)
        return save_matrix_csv(path, self.head_detail.matrix, labels, labels)

    def export_rollout_csv(self, path) -> Path:
        self._require_inspection("CSV")
        self._refresh_rollout()
        view = self.layer_view()
        labels = labelled_tokens(view.tokens, view.positions)
        return save_matrix_csv(path, self.rollout_view.matrix, labels, labels, corner="position \\ input token")

    def _build_export_menu(self) -> QMenu:
        menu = QMenu(self)
        entries = (
            ("Current view as PNG…", "png", "current"), ("Current view as SVG…", "svg", "current"),
            ("Head grid as PNG…", "png", "grid"), ("Head grid as SVG…", "svg", "grid"),
            ("Selected head as PNG…", "png", "detail"), ("Selected head as SVG…", "svg", "detail"),
            ("All layers as PNG…", "png", "overview"), ("Rollout as PNG…", "png", "rollout"),
        )
        for text, kind, view in entries:
            menu.addAction(text, lambda kind=kind, view=view: self._export_with_dialog(kind, view))
        menu.addSeparator()
        menu.addAction("Selected head matrix as CSV…", lambda: self._export_with_dialog("csv", "detail"))
        menu.addAction("Rollout matrix as CSV…", lambda: self._export_with_dialog("csv", "rollout"))
        menu.addAction("Attention arrays as NPZ…", lambda: self._export_with_dialog("npz", "all"))
        return menu

    def _export_with_dialog(self, kind: str, view: str) -> None:
        filters = {"png": "PNG image (*.png)", "svg": "SVG drawing (*.svg)", "csv": "CSV table (*.csv)",
                   "npz": "NumPy arrays (*.npz)"}
        name = f"attention-layer{self.layer + 1}-head{self.selected_head + 1}-{view}.{kind}"
        path = ask_save_path(self, f"Export {view} as {kind.upper()}", name, filters[kind])
        if path is None:
            return
        try:
            if kind == "png":
                self.export_png(path, view)
            elif kind == "svg":
                self.export_svg(path, view)
            elif kind == "npz":
                self.export_npz(path)
            elif view == "rollout":
                self.export_rollout_csv(path)
            else:
                self.export_head_csv(path)
        except (OSError, ValueError) as error:
            QMessageBox.warning(self, "Export failed", f"Could not export to {path}:\n{error}")

    # ------------------------------------------------------------------ drawing
    def colour_scale(self) -> str:
        return self.scale_combo.currentData()

    def set_colour_scale(self, scale: str) -> None:
        index = self.scale_combo.findData(scale)
        if index < 0:
            raise ValueError(f"unknown colour scale {scale!r}; choose one of {', '.join(SCALE_CHOICES)}")
        self.scale_combo.setCurrentIndex(index)

    def _refresh_all(self) -> None:
        self._refresh_layer()
        self._mark_stale({"overview", "rollout"})
        self.overview.set_head_mask(self.mask)
        self.highlight_token(self.highlighted)

    def _refresh_layer(self) -> None:
        started = time.perf_counter()
        self.layer_label.setText(f"Layer {self.layer + 1} / {self.num_layers}")
        pictures = self._layer_pictures()
        self.head_grid.show_layer(pictures.view, pictures.thumbnails)
        self.head_grid.select(self.selected_head)
        self.layerShown.emit(self.layer)
        self._refresh_detail()
        self.timings_ms["layer"] = (time.perf_counter() - started) * 1e3
        self.overview.select(self.layer, self.selected_head)
        if self.rollout_combo.currentIndex() == 0:
            self._mark_stale({"rollout"})
        self.highlight_token(self.highlighted)

    def _refresh_detail(self) -> None:
        spec = self._spec()
        view, head = self._layer_pictures(spec).view, self.selected_head
        picture = self._pictures.get("detail")
        if picture is None or picture.key != attention_images.detail_key(spec, self.inspection):
            picture = attention_images.draw_detail(view, self.inspection, spec)
            self._pictures["detail"] = picture
        off = "" if view.heads_on[head] else " (switched off)"
        self.head_detail.set_title(f"Layer {self.layer + 1} · head {head + 1}{off}")
        self.head_detail.show_picture(picture, view.tokens, view.positions, view.options.colour_scale)
        self.head_detail.highlight_position(self.highlighted)

    def _refresh_overview(self) -> None:
        started = time.perf_counter()
        spec = self._spec()
        view = self._layer_pictures(spec).view
        picture = self._pictures.get("overview")
        if picture is None or picture.key != attention_images.overview_key(spec):
            picture = attention_images.draw_overview(self.inspection, view, spec)
            self._pictures["overview"] = picture
        self.overview.set_picture(picture, self.num_layers, self.num_heads, view.positions, list(view.tokens),
                                  view.options.colour_scale)
        self.overview.set_head_mask(self.mask)
        self.overview.select(self.layer, self.selected_head)
        self.overview.highlight_position(self.highlighted)
        self._stale.discard("overview")
        self.timings_ms["overview"] = (time.perf_counter() - started) * 1e3

    def _refresh_rollout(self) -> None:
        if self.inspection is None:
            return
        spec = self._spec()
        view, layer = self._layer_pictures(spec).view, spec.rollout_layer
        picture = self._pictures.get("rollout")
        if picture is None or picture.key != attention_images.rollout_key(spec, self.inspection):
            picture = attention_images.draw_rollout(self.inspection, view, spec, self.rollout())
            self._pictures["rollout"] = picture
        heads_on = int(self.mask[: layer + 1].sum())
        self.rollout_view.set_title(
            f"Rollout through layer {layer + 1} / {self.num_layers} "
            f"({heads_on} of {(layer + 1) * self.num_heads} heads on)")
        self.rollout_view.show_picture(picture, view.tokens, view.positions, view.options.colour_scale)
        self.rollout_view.highlight_position(self.highlighted)
        self._stale.discard("rollout")

    def _mark_stale(self, views: set[str]) -> None:
        """Redraws the overview / rollout now if their tab is shown, otherwise when it is next shown."""
        self._stale |= views
        self._on_tab_changed(self.tabs.currentIndex())

    def _ensure_drawn(self, view: str) -> None:
        if view in ("overview", "panel") and "overview" in self._stale:
            self._refresh_overview()
        if view in ("rollout", "panel") and "rollout" in self._stale:
            self._refresh_rollout()

    def _on_tab_changed(self, index: int) -> None:
        if self.inspection is None:
            return
        if index == 1 and "overview" in self._stale:
            self._refresh_overview()
        elif index == 2 and "rollout" in self._stale:
            self._refresh_rollout()

    def eventFilter(self, watched, event) -> bool:
        if watched is self.layer_slider and event.type() == QEvent.Type.KeyPress and \
                event.key() in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            self.set_layer(self.layer + (1 if event.key() == Qt.Key.Key_PageDown else -1))
            return True  # a slider's own PageDown would step back
        if event.type() == QEvent.Type.Resize and self.inspection is not None:
            self._resize_timer.start()  # the pictures follow the new size once the resize pauses
        return super().eventFilter(watched, event)

    def _redraw_at_new_size(self) -> None:
        if self.inspection is None:
            return
        spec = self._spec()
        if self._pictures.get("layer") is not None and \
                self._pictures["layer"].key != attention_images.layer_key(spec, self.inspection):
            self._refresh_layer()
        elif self._pictures.get("detail") is not None and \
                self._pictures["detail"].key != attention_images.detail_key(spec, self.inspection):
            self._refresh_detail()
        if self.tabs.currentIndex() == 2:
            self._refresh_rollout()

    def _on_options_changed(self, *_) -> None:
        if self.inspection is not None:
            self._refresh_all()

    def _on_overview_clicked(self, layer: int, head: int) -> None:
        self.select_head(layer, head)
        self.tabs.setCurrentIndex(0)

    def _on_view_hovered(self, position: int) -> None:
        self.highlight_token(position)
        if position != self._hovered:
            self._hovered = position
            self.tokenHovered.emit(position)

    def keyPressEvent(self, event) -> None:
        step = {Qt.Key.Key_Left: -1, Qt.Key.Key_Right: 1, Qt.Key.Key_PageUp: -1,
                Qt.Key.Key_PageDown: 1}.get(event.key())
        if step is not None and self.inspection is not None:
            self.set_layer(self.layer + step)
            event.accept()
            return
        super().keyPressEvent(event)
