"""What the Inspect tab's views of one inspection share: following the inspection an `ExplorerState` shows."""

from __future__ import annotations

from explorer.inspector.state import SHOWN_CHANGES, Change, ExplorerState


class ShownInspectionView:
    """Mixed into a view with `show_inspection(inspection)`: `follow(state)` shows `state.shown_inspection()` now
    and again whenever the state announces that it may be another (`SHOWN_CHANGES`)."""

    def follow(self, state: ExplorerState) -> None:
        state.changed.connect(self._show_what_state_shows)  # a bound method: the state holds it weakly
        self.show_inspection(state.shown_inspection())

    def _show_what_state_shows(self, state: ExplorerState, what: Change) -> None:
        if what in SHOWN_CHANGES:
            self.show_inspection(state.shown_inspection())
