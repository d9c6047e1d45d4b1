"""What the attention panel writes to files: a view as PNG or SVG, the selected head's or the rollout's matrix
as CSV, every attention array as NPZ; each without a dialog (the caller gives the path, as tests and scripts
do) and from the panel's Export menu, which asks. The menu writes the NPZ off the GUI thread, with its progress and
Cancel (`npz_writing`, run by `explorer.common._qt.background_write`): MiniLM's arrays at 512 tokens, compressed,
and their rollout took ~14 s, during which the window was frozen.

`AttentionExports` is mixed into `AttentionPanel`, whose views and drawing it uses: `tabs`,
`head_grid`, `head_detail`, `overview`, `rollout_view`, `rollout_page`, `inspection`, `mask`, `layer`,
`selected_head`, `layer_view()`, `rollout()`, `_ensure_drawn(view)`, `_refresh_rollout()`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QMenu, QWidget

from explorer.common._qt.exporting import (
    CopyPicture,
    WrittenInBackground,
    copy_with_message,
    export_png,
    export_svg,
    export_with_dialog,
    render_picture,
)
from explorer.common.attention_math import compute_rollout
from explorer.common.export_data import (
    Computed,
    attention_npz_arrays,
    labelled_tokens,
    npz_writing,
    save_attention_npz,
    save_matrix_csv,
)

VIEW_NAMES = ("current", "heads", "grid", "detail", "overview", "rollout", "panel")
EXPORTS = (  # (menu text, view, kind); a separator between the pictures and the arrays
    (("Current view as PNG…", "current", "png"), ("Current view as SVG…", "current", "svg"),
     ("Head grid as PNG…", "grid", "png"), ("Head grid as SVG…", "grid", "svg"),
     ("Selected head as PNG…", "detail", "png"), ("Selected head as SVG…", "detail", "svg"),
     ("All layers as PNG…", "overview", "png"), ("Rollout as PNG…", "rollout", "png")),
    (("Selected head matrix as CSV…", "detail", "csv"), ("Rollout matrix as CSV…", "rollout", "csv"),
     ("Attention arrays as NPZ…", "all", "npz")),
)


class AttentionExports:
    """The attention panel's exports (see the module docstring for what it uses of the panel)."""

    def view_parts(self, view: str = "current") -> tuple[QWidget, ...]:
        """The plots a picture of `view` holds: the views themselves, not their boxes, hint lines or the rollout's
        combo; "panel" is the whole panel, toolbar and all, as on screen."""
        if view not in VIEW_NAMES:
            raise ValueError(f"unknown view {view!r}; choose one of {', '.join(VIEW_NAMES)}")
        if view == "current":
            view = ("heads", "overview", "rollout")[self.tabs.currentIndex()]
        return {"heads": (self.head_grid.graphics, self.head_detail.graphics), "grid": (self.head_grid.graphics,),
                "detail": (self.head_detail.graphics,), "overview": (self.overview.graphics,),
                "rollout": (self.rollout_view.graphics,), "panel": (self,)}[view]

    def _require_inspection(self, what: str) -> None:
        if self.inspection is None:
            raise ValueError(f"nothing to export as {what}: no inspection is shown yet")

    def export_png(self, path, view: str = "current") -> Path:
        self._require_inspection("PNG")
        self._ensure_drawn(view)
        return export_png(self.view_parts(view), path)

    def picture(self, view: str = "current") -> QImage:
        """What export_png writes of `view`, for the clipboard."""
        self._require_inspection("a picture")
        self._ensure_drawn(view)
        return render_picture(self.view_parts(view))

    def export_svg(self, path, view: str = "current") -> Path:
        self._require_inspection("SVG")
        self._ensure_drawn(view)
        return export_svg(self.view_parts(view), path)

    def export_npz(self, path) -> Path:
        """attentions (L, H, T, T), tokens (T,), rollout (L, T, T), head_mask (L, H): the full inspection."""
        self._require_inspection("NPZ")
        view = self.layer_view()
        return save_attention_npz(path, self.inspection.attentions, list(view.tokens), self.rollout(), view.head_mask)

    def npz_writing(self, path):
        """The NPZ of `export_npz` as a generator of (fraction, what) for a worker thread: the arrays shown now are
        taken here (the GUI thread); the rollout, when the panel has not computed it for this head mask, is computed
        in the worker."""
        self._require_inspection("NPZ")
        view = self.layer_view()
        attentions, mask = self.inspection.attentions, self.mask.copy()
        rollout = self.rollout_page.cached_rollout(mask)
        if rollout is None:
            num_layers, _, length, _ = attentions.shape  # (L, H, T, T)
            rollout = Computed("the rollout", 4 * num_layers * length * length,
                               lambda: compute_rollout(attentions, mask))
        return npz_writing(path, attention_npz_arrays(attentions, list(view.tokens), rollout, view.head_mask))

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

    def export(self, kind: str, view: str, path) -> Path:
        """`kind` "png" / "svg" of a view (VIEW_NAMES), "csv" of the "detail" or "rollout" matrix, or "npz"."""
        if kind in ("png", "svg"):
            return (self.export_png if kind == "png" else self.export_svg)(path, view)
        if kind == "npz":
            return self.export_npz(path)
        return self.export_rollout_csv(path) if view == "rollout" else self.export_head_csv(path)

    def _build_export_menu(self) -> QMenu:
        menu = QMenu(self)
        copy = menu.addAction("Copy picture", lambda: copy_with_message(self, "the current view",
                                                                      CopyPicture(self.picture)))
        copy.setToolTip("The current view, as its PNG holds it, on the clipboard")
        for group, entries in enumerate(EXPORTS):
            if group:
                menu.addSeparator()
            for text, view, kind in entries:
                menu.addAction(text, lambda view=view, kind=kind: export_with_dialog(
                    self, "the attention arrays" if kind == "npz" else f"{view} as {kind.upper()}",
                    f"attention-layer{self.layer + 1}-head{self.selected_head + 1}-{view}.{kind}",
                    WrittenInBackground(self.npz_writing) if kind == "npz"
                    else lambda path, view=view, kind=kind: self.export(kind, view, path)))
        return menu
