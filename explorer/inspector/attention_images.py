"""The pictures the attention views show, as RGBA arrays, made without Qt so that a worker thread can make them.

At 512 tokens one layer of a 12-head model is 3 million weights; averaging them down to the thumbnails'
pixels and mapping them to colours costs tens of milliseconds, and the all-layers overview ~100 ms. Done
by pyqtgraph at paint time, that was a stall of the GUI thread on every keystroke. So the attention panel
says what it shows now (`PictureSpec`, captured in the GUI thread with its colour table), the inspection
worker draws it right after the forward pass (`draw_panel`), and the panel only hands finished images to
its picture items (`explorer.common._qt.picture_item`). What the user changes in the panel itself (another
layer, head, option) is drawn by the same functions in the GUI thread: one image at a time, a few milliseconds.

An image never has more rows than the pixels it is shown in (`fit`: block means, so a thin diagonal stays
visible instead of being dropped by nearest-pixel scaling); the views place it over the token grid
(0..t on both axes) whatever its resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from explorer.common.attention_math import (
    LayerView,
    ViewOptions,
    block_mean,
    colour_gamma,
    colour_levels,
    compute_rollout,
    layer_view,
    overview_image,
    to_rgba,
    view_matrix,
)


@dataclass(frozen=True, eq=False)
class PictureSpec:
    """What the attention panel shows now; `draw_panel` makes the pictures for it."""

    layer: int
    head: int
    options: ViewOptions
    lookup: np.ndarray  # (n, 4) uint8 colour table (the panel's colour map)
    thumbnail_px: int  # the head grid's thumbnails are this many pixels wide
    detail_px: int  # the head detail's image is this many pixels wide
    overview: bool = False  # the "All layers" tab is shown: draw it too
    rollout_layer: int | None = None  # the "Rollout" tab is shown: the rollout through this layer
    head_mask: np.ndarray | None = None  # (L, H); None = the inspection's own

    def mask_key(self, inspection) -> bytes:
        """The head mask drawn with, resolved (the inspection's own when None; all on when it has none)."""
        mask = self.head_mask if self.head_mask is not None else inspection.head_mask
        if mask is None:
            mask = np.ones(inspection.attentions.shape[:2], np.float32)
        return np.asarray(mask, np.float32).tobytes()

    def within(self, inspection) -> PictureSpec:
        """This spec with its layer, head and rollout layer brought inside what `inspection` has (a spec
        captured for the previous model may name a layer the next one lacks)."""
        num_layers, num_heads = inspection.attentions.shape[:2]
        rollout = None if self.rollout_layer is None else min(self.rollout_layer, num_layers - 1)
        return replace(self, layer=min(self.layer, num_layers - 1), head=min(self.head, num_heads - 1),
                       rollout_layer=rollout)


@dataclass(frozen=True, eq=False)
class LayerPictures:
    """The head grid of one layer: its LayerView and one thumbnail per head."""

    key: tuple
    view: LayerView
    thumbnails: np.ndarray  # (H, s, s, 4) uint8, s <= the thumbnail pixels


@dataclass(frozen=True, eq=False)
class MatrixPicture:
    """One matrix drawn large (the head detail, the rollout): its values for hovering, its image."""

    key: tuple
    matrix: np.ndarray  # (t, t) float32, as shown
    image: np.ndarray  # (n, n, 4) uint8, n <= the image's pixels
    levels: tuple[float, float]


@dataclass(frozen=True, eq=False)
class OverviewPicture:
    key: tuple
    values: np.ndarray  # (L * c, H * c) float32 block means, for hovering
    image: np.ndarray  # (L * c, H * c, 4) uint8
    cell: int
    levels: tuple[float, float]


@dataclass(frozen=True, eq=False)
class PanelPictures:
    """Everything a `PictureSpec` asked for, drawn for one inspection."""

    layer: LayerPictures
    detail: MatrixPicture
    overview: OverviewPicture | None
    rollout: MatrixPicture | None


def fit(matrices: np.ndarray, pixels: int) -> np.ndarray:
    """(..., t, t) -> (..., n, n), n = min(t, pixels): block means when there are more rows than pixels."""
    return block_mean(matrices, max(1, int(pixels)))


def layer_key(spec: PictureSpec, inspection) -> tuple:
    return spec.layer, spec.options, spec.mask_key(inspection), spec.thumbnail_px


def detail_key(spec: PictureSpec, inspection) -> tuple:
    return spec.layer, spec.options, spec.mask_key(inspection), spec.head, spec.detail_px


def overview_key(spec: PictureSpec) -> tuple:
    return (spec.options,)


def rollout_key(spec: PictureSpec, inspection) -> tuple:
    return spec.options, spec.mask_key(inspection), spec.rollout_layer, spec.detail_px


def draw_layer(inspection, spec: PictureSpec) -> LayerPictures:
    view = layer_view(inspection, spec.layer, spec.options, spec.head_mask)
    gamma = colour_gamma(spec.options.colour_scale)
    thumbnails = to_rgba(fit(view.matrices, spec.thumbnail_px), view.levels, spec.lookup, gamma)
    return LayerPictures(layer_key(spec, inspection), view, thumbnails)


def draw_matrix(matrix: np.ndarray, levels: tuple[float, float], spec: PictureSpec, key: tuple) -> MatrixPicture:
    image = to_rgba(fit(matrix, spec.detail_px), levels, spec.lookup, colour_gamma(spec.options.colour_scale))
    return MatrixPicture(key, matrix, image, levels)


def draw_detail(view: LayerView, inspection, spec: PictureSpec) -> MatrixPicture:
    head = min(spec.head, view.num_heads - 1)
    return draw_matrix(view.matrices[head], view.levels, spec, detail_key(spec, inspection))


def draw_overview(inspection, view: LayerView, spec: PictureSpec) -> OverviewPicture:
    values, cell = overview_image(inspection.attentions, view.positions, view.options.renormalise)
    levels = colour_levels(values, view.options.colour_scale)
    image = to_rgba(values, levels, spec.lookup, colour_gamma(view.options.colour_scale))
    return OverviewPicture(overview_key(spec), values, image, cell, levels)


def draw_rollout(inspection, view: LayerView, spec: PictureSpec, rollout: np.ndarray | None = None) -> MatrixPicture:
    """The rollout through `spec.rollout_layer`; `rollout` (L, T, T) when the caller has it under this mask."""
    if rollout is None:
        rollout = compute_rollout(inspection.attentions, view.head_mask)
    matrix = view_matrix(rollout[spec.rollout_layer], view.positions, view.options.renormalise)
    levels = colour_levels(matrix, view.options.colour_scale)
    return draw_matrix(matrix, levels, spec, rollout_key(spec, inspection))


def draw_panel(inspection, spec: PictureSpec) -> PanelPictures:
    """Every picture `spec` asks for (run in the inspection worker, right after the forward pass)."""
    spec = spec.within(inspection)
    layer = draw_layer(inspection, spec)
    overview = draw_overview(inspection, layer.view, spec) if spec.overview else None
    rollout = draw_rollout(inspection, layer.view, spec) if spec.rollout_layer is not None else None
    return PanelPictures(layer, draw_detail(layer.view, inspection, spec), overview, rollout)
