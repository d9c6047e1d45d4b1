"""Every keyboard shortcut of the window, in one table that both installs them and lists them (Help ▸ Keyboard
shortcuts), so the list cannot drift from what the keys do.

A row names its keys, what they do, where they work and the handler's name; whoever owns the handlers
installs its rows: the main window its menu actions (`key_for`), the Inspect tab the rest (`install`), and
the Head lab tab the masking keys its captions name (it scores heads on the input the Inspect tab masks).
The tabs' keys follow the tabs: Ctrl+N shows the N-th, whichever tabs the window has (`tab_shortcut`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QWidget

WINDOW, INSPECT, HEAD_LAB = "anywhere", "Inspect tab", "Head lab tab"


@dataclass(frozen=True)
class Shortcut:
    keys: str  # QKeySequence text, e.g. "Ctrl+M"
    handler: str  # the name its owner installs it under
    description: str
    where: str = WINDOW
    also: tuple[str, ...] = ()  # further tabs that install it too

    def works_in(self, where: str) -> bool:
        return where == self.where or where in self.also

    def places(self) -> str:
        """Where it works, as Help lists it: "Inspect tab, Head lab tab"."""
        return ", ".join((self.where, *self.also))


MASKING_TABS = (HEAD_LAB,)  # the masking keys work here too: its captions ask for a masked token
SHORTCUTS = (
    Shortcut("Alt+A", "focus_sentence_a", "Type sentence A", INSPECT),
    Shortcut("Alt+B", "focus_sentence_b", "Type sentence B", INSPECT),
    Shortcut("Ctrl+M", "mask_like_bert", "Mask like BERT: 15% of the tokens, 80% [MASK] / 10% random / 10% kept",
             INSPECT, MASKING_TABS),
    Shortcut("Ctrl+R", "reroll", "Re-roll the masking with the next seed", INSPECT, MASKING_TABS),
    Shortcut("Ctrl+Shift+M", "clear_masks", "Clear every mask", INSPECT, MASKING_TABS),
    Shortcut("PgUp", "previous_layer", "Previous layer in the attention views", INSPECT),
    Shortcut("PgDown", "next_layer", "Next layer in the attention views", INSPECT),
    Shortcut("Ctrl+P", "toggle_predictions", "Show or hide the predictions (give the heads the room)", INSPECT),
    Shortcut("Ctrl+O", "open_checkpoint", "Open a checkpoint folder"),
    Shortcut("Ctrl+Shift+O", "open_session", "Open a session (.bertx): its model, pair, tab, head, zoom and runs"),
    Shortcut("Ctrl+S", "save_session", "Save the session (.bertx): the model, pair, tab, head, zoom and runs shown"),
    Shortcut("Ctrl+Shift+S", "save_as", "Save the model as a checkpoint folder"),
    Shortcut("F1", "show_shortcuts", "This list of keyboard shortcuts"),
    Shortcut("Ctrl+Q", "quit", "Quit (a training run stops and saves a checkpoint)"),
)
# Keys that work without an entry here because a widget has them: listed for the user all the same.
MAX_TAB_SHORTCUTS = 9  # Ctrl+1 … Ctrl+9
WIDGET_KEYS = (
    ("← / →", "Previous / next layer, with the attention views focused", INSPECT),
    ("Click / Space on a token", "Mask or unmask that token", INSPECT),
)


def key_for(handler: str) -> QKeySequence:
    """The keys of the row named `handler` (for a menu action that owns them)."""
    for shortcut in SHORTCUTS:
        if shortcut.handler == handler:
            return QKeySequence(shortcut.keys)
    raise KeyError(f"no shortcut named {handler!r}; see explorer.common._qt.shortcuts.SHORTCUTS")


def tab_shortcut(index: int, title: str) -> Shortcut | None:
    """Ctrl+N for the window's N-th tab (N = index + 1), named by its title; None past the ninth."""
    if not 0 <= index < MAX_TAB_SHORTCUTS:
        return None
    return Shortcut(f"Ctrl+{index + 1}", f"show_tab_{index + 1}", f"The {title.replace('&', '')} tab")


def install(owner: QWidget, handlers: dict[str, Callable[[], object]], where: str) -> list[QShortcut]:
    """A QShortcut on `owner` for every row of `where` whose handler is given; they work while the focus is
    anywhere inside `owner` (so a tab's keys rest while another tab is shown)."""
    installed = []
    for shortcut in SHORTCUTS:
        if not shortcut.works_in(where) or shortcut.handler not in handlers:
            continue
        key = QShortcut(QKeySequence(shortcut.keys), owner)
        key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        key.activated.connect(handlers[shortcut.handler])
        key.setObjectName(f"shortcut_{shortcut.handler}")
        installed.append(key)
    return installed


def shortcuts_html(tabs: Sequence[Shortcut] = ()) -> str:
    """The table for Help ▸ Keyboard shortcuts, with the window's `tabs` rows (`tab_shortcut`) before its own."""
    table = [row for row in SHORTCUTS if row.where != WINDOW] + [*tabs]
    table += [row for row in SHORTCUTS if row.where == WINDOW]
    rows = [(QKeySequence(shortcut.keys).toString(QKeySequence.SequenceFormat.NativeText), shortcut.description,
             shortcut.places()) for shortcut in table]
    rows += list(WIDGET_KEYS)
    cells = "".join(f"<tr><td><b>{html.escape(keys)}</b></td><td>{html.escape(text)}</td>"
                    f"<td><i>{html.escape(where)}</i></td></tr>" for keys, text, where in rows)
    return f"<table cellspacing='6'>{cells}</table>"
