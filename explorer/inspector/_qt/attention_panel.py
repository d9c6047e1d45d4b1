"""All attention views of one inspection, as one widget the main window embeds.

Tabs: "Heads" (the current layer's head grid + one head large), "All layers" (layers x heads in one
image) and "Rollout". Above them the toolbar (`AttentionToolbar`: the layer stepper, the options, room for
tools others add, Export; what Export writes is `AttentionExports`). The panel renders an Inspection (plain
numpy); the only thing it sends back is the head mask the user edits (headMaskChanged) and the token under
the mouse (tokenHovered).

The tabs' pages are `HeadsPage` and `RolloutPage`. What the views draw are pictures
(`explorer.inspector.attention_images`): the current layer's `LayerView` with a thumbnail per head, the selected
head, the overview, the rollout, each kept until what it depends on changes (`DrawnPictures`). The inspection worker
draws them for a new inspection before it reaches the GUI thread (`picture_spec()` says what the panel shows now;
`set_inspection(inspection, pictures)` takes them), so a keystroke at 512 tokens costs the GUI thread only the
hand-over; what the user changes here (layer, head, option, tab, size) is drawn here, one picture. In the Inspect tab
the panel follows the tab's `ExplorerState` (`follow`): it redraws when the state announces another inspection shown
or another head mask, not when a sibling calls it.

Run `python -m explorer.inspector._qt.attention_demo [--tokens N] [--real]` to open it alone.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QTabWidget, QVBoxLayout, QWidget

import explorer.common.attention_math as attention_math
import explorer.inspector.attention_images as attention_images
from explorer.common._qt.heatmap_style import colour_lookup
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.inspector._qt.attention_export import AttentionExports
from explorer.inspector._qt.attention_toolbar import AttentionToolbar
from explorer.inspector._qt.heads_page import HeadsPage
from explorer.inspector._qt.model_overview import ModelOverview
from explorer.inspector._qt.rollout_page import RolloutPage
from explorer.inspector.drawn_pictures import DrawnPictures
from explorer.inspector.family_display import layer_kinds
from explorer.inspector.state import SHOWN_CHANGES, Change, ExplorerState

RESIZE_REDRAW_MS = 120  # redraw the pictures at a new size once a resize pauses this long


class AttentionPanel(AttentionExports, QWidget):
    headMaskChanged = Signal(object)  # np.ndarray (L, H) float32, 1 = head on, 0 = switched off
    tokenHovered = Signal(int)  # position under the mouse in any view, -1 when none
    layerShown = Signal(int)  # the layer the head grid now shows (tools that mark its heads follow it)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.inspection = None
        self.mask = np.ones((0, 0), np.float32)  # (L, H) the head mask the user edits
        self._pictures = DrawnPictures()
        self.layer = 0
        self.selected_head = 0
        self.highlighted = (-1, -1)  # (query, key) original positions marked in every view: a cell, or a token's
        # row and column
        self._hovered = -1
        self._stale: set[str] = set()  # tabs to redraw when they are next shown
        self.timings_ms: dict[str, float] = {}

        self.toolbar = AttentionToolbar()
        self.export_menu = self._build_export_menu()
        self.toolbar.export_button.setMenu(self.export_menu)

        # views
        self.heads_page = HeadsPage()
        self.head_grid, self.head_detail = self.heads_page.head_grid, self.heads_page.head_detail
        self.window_edges = self.heads_page.window_edges  # ModernBERT: a local layer's window over the selected head
        self.overview = named(ModelOverview(), "modelOverview", "all layers and heads")
        self.rollout_page = RolloutPage()
        self.rollout_view, self.rollout_combo = self.rollout_page.view, self.rollout_page.combo
        self.tabs = named(QTabWidget(), "attentionTabs", "attention views")
        self.tabs.addTab(self.heads_page, "Heads")
        self.tabs.addTab(self.overview, "All layers")
        self.tabs.addTab(self.rollout_page, "Rollout")
        self.tabs.setTabToolTip(0, "The heads of one layer, and the one you click large")
        self.tabs.setTabToolTip(1, "Every layer × head at once; click one to open it")
        self.tabs.setTabToolTip(2, "Attention rollout: how much each position draws on each input token")
        self.empty_label = QLabel("No inspection yet: type a sentence to see its attention.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.tabs, 1)

        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(RESIZE_REDRAW_MS)
        self._resize_timer.timeout.connect(self._redraw_at_new_size)
        for view in (self.head_grid.graphics, self.head_detail.graphics, self.rollout_view.graphics):
            view.installEventFilter(self)
        for heatmap in (self.head_detail, self.rollout_view):  # zoomed in, a picture needs more pixels
            heatmap.plot.vb.sigRangeChanged.connect(lambda *_: self._resize_timer.start())

        # wiring
        self.toolbar.layerChosen.connect(self.set_layer)
        self.toolbar.layerStepped.connect(lambda step: self.set_layer(self.layer + step))
        self.toolbar.optionsChanged.connect(self._on_options_changed)
        self.toolbar.viewAllRequested.connect(self.view_all)
        self.rollout_combo.currentIndexChanged.connect(lambda _: self._refresh_rollout())
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.head_grid.headClicked.connect(lambda head: self.select_head(self.layer, head))
        self.head_grid.headToggled.connect(lambda head, on: self.set_head_enabled(self.layer, head, on))
        self.overview.headClicked.connect(self._on_overview_clicked)
        for view in (self.head_grid, self.head_detail, self.overview, self.rollout_view):
            view.hovered.connect(self._on_view_hovered)
            view.cellHovered.connect(self.highlight_cell)  # the cell under the mouse, in every view
        self.set_inspection(None)

    def add_tool(self, widget: QWidget) -> None:
        """Put `widget` in the toolbar, before Export (a tab's own toggles; the head-lab modes)."""
        self.toolbar.add_tool(widget)

    # ------------------------------------------------------------------ the interface the window uses
    def picture_spec(self) -> attention_images.PictureSpec:
        """What the panel shows now, for a worker to draw for the next inspection (its own head mask)."""
        tab = self.tabs.currentIndex()
        return attention_images.PictureSpec(
            layer=self.layer, head=self.selected_head, options=self.options(), lookup=colour_lookup(),
            thumbnail_px=self.head_grid.thumbnail_pixels(self.num_heads), detail_px=self.head_detail.image_pixels(),
            overview=tab == 1, rollout_layer=self._rollout_layer_for_spec() if tab == 2 else None)

    def follow(self, state: ExplorerState) -> None:
        """Show what `state` shows (`shown_inspection`, with the pictures drawn for it) and its head mask, redrawn
        whenever it announces a change of them."""
        state.changed.connect(self._on_state_changed)
        self.set_inspection(state.shown_inspection(), state.shown_pictures())

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        if what in SHOWN_CHANGES:
            self.set_inspection(state.shown_inspection(), state.shown_pictures())
        elif what is Change.HEAD_MASK and self.inspection is not None and state.model_info is not None:
            # the state's mask drawn, not sent back to it as the user's edit (headMaskChanged)
            with blocked(self):
                self.set_head_mask(state.heads_on())

    def set_inspection(self, inspection, pictures: attention_images.PanelPictures | None = None) -> None:
        """Shows an Inspection (or nothing for None), with the pictures a worker drew for it (`picture_spec`)
        when there are; what they lack or what changed since is drawn here. Its head_mask becomes the
        panel's head mask."""
        self.inspection = inspection
        has_data = inspection is not None
        self.toolbar.set_controls_enabled(has_data)
        self.rollout_combo.setEnabled(has_data)
        self.tabs.setVisible(has_data)
        self.empty_label.setVisible(not has_data)
        self.rollout_page.forget()
        self._pictures.reset()
        if not has_data:
            self.mask = np.ones((0, 0), np.float32)
            self.toolbar.show_no_layer()
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
        self._pictures.reset(pictures)
        self.toolbar.show_layer(self.layer, num_layers)
        self._refresh_all()

    def set_layer(self, layer: int) -> None:
        if self.inspection is None:
            return
        layer = int(np.clip(layer, 0, self.num_layers - 1))
        changed = layer != self.layer or not self.toolbar.shows_a_layer()
        self.layer = layer
        if changed:
            self._refresh_layer()

    def view_all(self) -> None:
        """Zoom every view out to all its tokens (and the overview to every head)."""
        for view in (self.head_detail, self.overview, self.rollout_view):
            view.view_all()

    def current_layer(self) -> int:
        return self.layer

    def highlight_token(self, position: int) -> None:
        """Highlights the token at `position` (its row and column) in every view; -1 clears. No signal."""
        self.highlight_cell(position, position)

    def highlight_cell(self, query: int, key: int) -> None:
        """Marks the row of the token at original position `query` and the column of the one at `key` in every
        view (a hovered cell: where one token attends to another); -1 clears that line. No signal."""
        self.highlighted = (int(query), int(key))
        for view in (self.head_grid, self.head_detail, self.overview, self.rollout_view):
            view.highlight_position(*self.highlighted)

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
        return self.toolbar.options()

    def _spec(self) -> attention_images.PictureSpec:
        """The pictures wanted now, with the head mask the user edits (not inspected yet, maybe)."""
        spec = self.picture_spec()
        rollout_layer = self.rollout_layer() if self.inspection is not None else None
        return dataclasses.replace(spec, head_mask=self.mask, rollout_layer=rollout_layer)

    def _layer_pictures(self, spec: attention_images.PictureSpec | None = None) -> attention_images.LayerPictures:
        spec = spec or self._spec()
        return self._pictures.get("layer", attention_images.layer_key(spec, self.inspection),
                                  lambda: attention_images.draw_layer(self.inspection, spec))

    def layer_view(self) -> attention_math.LayerView:
        """What the views of the current layer draw, computed once per (inspection, layer, options, head mask)."""
        return self._layer_pictures().view

    def set_options(self, hide_special: bool | None = None, renormalise: bool | None = None) -> None:
        self.toolbar.set_options(hide_special, renormalise)
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
        return self.rollout_page.rollout(self.inspection.attentions, self.mask)

    def rollout_layer(self) -> int:
        return self.rollout_page.through_layer(self.layer, self.num_layers)

    def _rollout_layer_for_spec(self) -> int:
        # before the first inspection the number of layers is unknown: "the last" is as far as any model has
        return self.rollout_page.through_layer(self.layer, self.num_layers or 10_001)

    # ------------------------------------------------------------------ drawing
    def colour_scale(self) -> str:
        return self.toolbar.colour_scale()

    def set_colour_scale(self, scale: str) -> None:
        self.toolbar.set_colour_scale(scale)

    def _refresh_all(self) -> None:
        self._refresh_layer()
        self._mark_stale({"overview", "rollout"})
        self.overview.set_head_mask(self.mask)
        self.highlight_cell(*self.highlighted)

    def _layer_kind(self):
        """The current layer's kind (global, or local with its window) for ModernBERT; None for other models."""
        kinds = layer_kinds(self.inspection)
        return None if kinds is None else kinds[self.layer]

    def _refresh_layer(self) -> None:
        started = time.perf_counter()
        kind = self._layer_kind()
        self.toolbar.show_layer(self.layer, self.num_layers, kind)
        self.head_grid.set_layer_kind(kind)
        spec = self._spec()  # once for the grid and the detail (asking the views their sizes: ~0.15 ms of a keystroke)
        pictures = self._layer_pictures(spec)
        self.head_grid.show_layer(pictures.view, pictures.thumbnails)
        self.head_grid.select(self.selected_head)
        self.layerShown.emit(self.layer)
        self._refresh_detail(spec)
        self.timings_ms["layer"] = (time.perf_counter() - started) * 1e3
        self.overview.select(self.layer, self.selected_head)
        if self.rollout_combo.currentIndex() == 0:
            self._mark_stale({"rollout"})
        self.highlight_cell(*self.highlighted)

    def _refresh_detail(self, spec: attention_images.PictureSpec | None = None) -> None:
        spec = spec or self._spec()
        view, head = self._layer_pictures(spec).view, self.selected_head
        picture = self._pictures.get("detail", attention_images.detail_key(spec, self.inspection),
                                     lambda: attention_images.draw_detail(view, self.inspection, spec))
        self.heads_page.show_head(picture, view, head, self._layer_kind(), self.inspection.sliding_window,
                                  self.highlighted)

    def _refresh_overview(self) -> None:
        started = time.perf_counter()
        spec = self._spec()
        view = self._layer_pictures(spec).view
        picture = self._pictures.get("overview", attention_images.overview_key(spec),
                                     lambda: attention_images.draw_overview(self.inspection, view, spec))
        self.overview.set_layer_kinds(layer_kinds(self.inspection))
        self.overview.set_picture(picture, self.num_layers, self.num_heads, view.positions, list(view.tokens),
                                  view.options.colour_scale)
        self.overview.set_head_mask(self.mask)
        self.overview.select(self.layer, self.selected_head)
        self.overview.highlight_position(*self.highlighted)
        self._stale.discard("overview")
        self.timings_ms["overview"] = (time.perf_counter() - started) * 1e3

    def _refresh_rollout(self) -> None:
        if self.inspection is None:
            return
        spec = self._spec()
        if self.rollout_view.plot.vb.is_zoomed():
            spec = dataclasses.replace(spec, detail_px=self.rollout_view.image_pixels())
        view, layer = self._layer_pictures(spec).view, spec.rollout_layer
        picture = self._pictures.get("rollout", attention_images.rollout_key(spec, self.inspection),
                                     lambda: attention_images.draw_rollout(self.inspection, view, spec, self.rollout()))
        self.rollout_page.show_rollout(picture, view, layer, self.mask, self.highlighted)
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
        if event.type() == QEvent.Type.Resize and self.inspection is not None:
            self._resize_timer.start()  # the pictures follow the new size once the resize pauses
        return super().eventFilter(watched, event)

    def _redraw_at_new_size(self) -> None:
        if self.inspection is None:
            return
        spec = self._spec()
        if self._pictures.outdated("layer", attention_images.layer_key(spec, self.inspection)):
            self._refresh_layer()
        elif self._pictures.outdated("detail", attention_images.detail_key(spec, self.inspection)):
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
        """The query token under the mouse, for the views outside the panel (the views in it mark the whole cell:
        `highlight_cell`)."""
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
