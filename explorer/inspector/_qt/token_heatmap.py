"""One attention matrix large: a labelled, square heatmap (the head detail, the rollout, a probe snapshot).

It shows a finished picture (`explorer.inspector.attention_images`: an RGBA array a worker or the attention panel drew)
and keeps the values beside it for hovering. The picture is placed over the token grid, 0..t on both axes
(queries down, keys across), whatever its resolution, so hovering, highlighting and labels work in token
units. Items are created once. It zooms (`explorer.common._qt.zoom_view`): the labels thin out to what fits the tokens
in view, and `image_pixels` asks for as many more pixels as the zoom needs, up to one per token.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from bertcore.tokenization.pieces import readable_piece
from explorer.common._qt.cell_numbers import cell_at
from explorer.common._qt.heatmap_style import (
    colour_lookup,
    diverging_lookup,
    highlight_band,
    insert_scale_bar,
    make_scale_bar,
    show_difference_scale,
    show_scale,
)
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import let_title_overflow, show_title, style_canvas, style_plot
from explorer.common._qt.token_axis import HoverReadout, TokenAxis
from explorer.common._qt.zoom_view import ZoomViewBox
from explorer.common.attention_math import DEFAULT_COLOUR_SCALE, colour_gamma, to_rgba
from explorer.common.heatmap_layout import picture_pixels, shown_index
from explorer.inspector.attention_images import MatrixPicture, fit


class TokenHeatmap(HoverReadout, QWidget):
    """One (t, t) matrix, large and square: token labels on both axes (queries down, keys across), a colour
    bar that names its scale, the hovered cell's "query → key: value", and a highlighted row/column."""

    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none
    cellHovered = Signal(int, int)  # original (query, key) positions, (-1, -1) when none

    def __init__(self, title: str = "", value_name: str = "attention", parent: QWidget | None = None, *,
                 difference: bool = False):
        """difference: the matrix is a signed difference, drawn with the diverging map over symmetric levels
        (white at 0), its colour bar named after `value_name`."""
        super().__init__(parent)
        self.value_name = value_name
        self.difference = difference
        self.matrix = np.zeros((0, 0), np.float32)
        self.levels = (0.0, 1.0)
        self.scale = DEFAULT_COLOUR_SCALE
        self.tokens: list[str] = []
        self.positions = np.zeros(0, np.intp)
        self._labels_key: tuple = ()
        self._hover_inside = False

        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.left_axis = TokenAxis("left")
        self.bottom_axis = TokenAxis("bottom")
        self.plot = self.graphics.addPlot(viewBox=ZoomViewBox(),
                                          axisItems={"left": self.left_axis, "bottom": self.bottom_axis})
        let_title_overflow(self.plot)  # kept square, the plot may be narrower than its title
        show_title(self.plot, title)
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)  # square cells: a head's pattern keeps its shape
        style_plot(self.plot)
        self.image_item = PictureItem()
        self.plot.addItem(self.image_item)
        self.color_bar = make_scale_bar()
        if difference:  # from the start: a signed scale, white at 0
            show_difference_scale(self.color_bar, (-1.0, 1.0), f"{value_name}, ±1")
        insert_scale_bar(self.plot, self.color_bar)
        self.row_band = highlight_band(self.plot.vb)
        self.column_band = highlight_band(self.plot.vb)

        self.hover_label = plain_label(QLabel(" "))
        self.hover_label.setObjectName("hoverLabel")
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The plot is kept square (centred, as wide as it is tall) so that its axes sit at the image's edges.
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        row.addWidget(self.graphics, 100)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row, 1)
        layout.addWidget(self.hover_label)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.plot.vb.sigRangeChanged.connect(self._rehover)

    def set_title(self, title: str) -> None:
        show_title(self.plot, title)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_square()

    def _fit_square(self) -> None:
        """Give the graphics just the width that makes the plot's view square (what is around it: axes, the
        colour bar, the title, stays as it is)."""
        view = self.plot.vb.sceneBoundingRect()
        graphics = self.graphics.size()
        if view.width() <= 0 or view.height() <= 0:
            return
        around_x, around_y = graphics.width() - view.width(), graphics.height() - view.height()
        side = max(40.0, min(self.width() - around_x, graphics.height() - around_y))
        width = round(side + around_x)
        if abs(width - graphics.width()) > 1:
            self.graphics.setFixedWidth(min(self.width(), width))

    def image_pixels(self) -> int:
        """The resolution a picture for this view should have: the plot's current size times its zoom, rounded
        up; never more than one pixel per token (a picture has no more to show)."""
        rect = self.plot.vb.sceneBoundingRect()
        pixels = (min(rect.width(), rect.height()) or 256) * self.plot.vb.zoom()
        return picture_pixels(min(pixels, max(1, len(self.positions))) if self.plot.vb.is_zoomed() else pixels)

    def view_all(self) -> None:
        """Zoom out to every token."""
        self.plot.vb.view_all()

    def set_matrix(self, matrix: np.ndarray, tokens, positions: np.ndarray, levels: tuple[float, float],
                   scale: str = DEFAULT_COLOUR_SCALE, *, piece_style: str = "wordpiece") -> None:
        """matrix (t, t): row i / column j are the tokens at original positions[i] / positions[j]; drawn here.
        piece_style: the tokenizer's word marks, for readable axis labels (the hover names the raw piece)."""
        lookup, gamma = (diverging_lookup(), 1.0) if self.difference else (colour_lookup(), colour_gamma(scale))
        image = to_rgba(fit(matrix, self.image_pixels()), levels, lookup, gamma)
        self.show_picture(MatrixPicture((), matrix, image, levels), tokens, positions, scale, piece_style=piece_style)

    def show_picture(self, picture: MatrixPicture, tokens, positions: np.ndarray, scale: str, *,
                     piece_style: str = "wordpiece") -> None:
        """A picture drawn elsewhere (`attention_images`), its values, their tokens and positions."""
        self.matrix, self.levels, self.scale = picture.matrix, picture.levels, scale
        self.tokens = list(tokens)
        self.positions = np.asarray(positions, np.intp)
        length = max(1, len(self.positions))
        self.image_item.set_picture(picture.image, QRectF(0, 0, length, length))
        if self.difference:
            show_difference_scale(self.color_bar, picture.levels, f"{self.value_name}, ±{picture.levels[1]:.3g}")
        else:
            show_scale(self.color_bar, scale, picture.levels)
        labels_key = (tuple(self.tokens), tuple(self.positions.tolist()), piece_style)
        if labels_key != self._labels_key:
            self._labels_key = labels_key
            labels = [readable_piece(self.tokens[position], piece_style) for position in self.positions]
            self.left_axis.set_labels(labels, self.positions)
            self.bottom_axis.set_labels(labels, self.positions)
            if self.plot.vb.content.width() != length:  # the same tokens in another head keep the zoom
                self.plot.vb.set_content(QRectF(0, 0, length, length))
                self.plot.vb.view_all()
            self.plot.vb.updateMatrix()  # now, not while painting (which would paint everything twice)
            QTimer.singleShot(0, self, self._fit_square)  # the axes' widths changed with their labels

    def clear(self) -> None:
        levels = (-1.0, 1.0) if self.difference else (0.0, 1.0)  # a difference's scale is symmetric about 0
        self.set_matrix(np.zeros((0, 0), np.float32), [], np.zeros(0, np.intp), levels)
        self.hover_label.setText(" ")
        self.highlight_position(-1)

    def highlight_position(self, position: int, key: int | None = None) -> None:
        """The row of the token at original `position` and the column of the one at `key` (by default the same
        token: its row and column); -1 or a hidden token: no band there."""
        key = position if key is None else key
        self._show_bands(shown_index(self.positions, position), shown_index(self.positions, key))

    def _show_bands(self, row: int, column: int) -> None:
        length = len(self.positions)
        self.row_band.setVisible(row >= 0)
        self.column_band.setVisible(column >= 0)
        if row >= 0:
            self.row_band.setRect(QRectF(0, row, length, 1))
        if column >= 0:
            self.column_band.setRect(QRectF(column, 0, 1, length))

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        """(row, column) of the visible matrix under a scene point, (-1, -1) outside it."""
        return cell_at(self.plot, self.matrix.shape, scene_pos)

    def describe_cell(self, row: int, column: int) -> str:
        query, key = int(self.positions[row]), int(self.positions[column])
        value = float(self.matrix[row, column])
        shown = f"{value:+.4f}" if self.difference else f"{value:.4f}"
        return f"{self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): {self.value_name} {shown}"

    def _clear_hover_marks(self) -> None:
        self._show_bands(-1, -1)
        self.left_axis.set_hovered(-1)
        self.bottom_axis.set_hovered(-1)
        self.cellHovered.emit(-1, -1)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        self._mouse_at = scene_pos
        row, column = self.cell_at(scene_pos)
        if row < 0:
            self._end_hover()
            return
        self._hover_inside = True
        self.hover_label.setText(self.describe_cell(row, column))
        self._show_bands(row, column)
        self.left_axis.set_hovered(row)
        self.bottom_axis.set_hovered(column)
        self.hovered.emit(int(self.positions[row]))
        self.cellHovered.emit(int(self.positions[row]), int(self.positions[column]))


