"""Text shown as it is written, never read as markup.

Qt guesses: a QLabel (its default format, AutoText) and every tooltip show a text as HTML as soon as it looks like
HTML (`Qt.mightBeRichText`: a known tag near its start). Model and user text often does: RoBERTa's `<s>` is the
strike-through tag and its pair layout `<s> A </s></s> B </s>` was shown as " A  B " in the truncation notice; a
folder or a sentence may hold anything. So a label that shows such text is plain (`plain_label`); a label that is
rich text on purpose (a bold title) escapes what it quotes with `html.escape`; a tooltip, which has no format of its
own, is handed `plain_tooltip(text)`.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt  # PySide6 keeps Qt::mightBeRichText in QtGui's namespace
from PySide6.QtWidgets import QLabel


def plain_label(label: QLabel) -> QLabel:
    """`label`, showing whatever text it is given as written (`<s>` too)."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_tooltip(text: str) -> str:
    """What to pass as a tooltip so that it shows `text` as written: `text` itself when Qt would not take it for
    HTML, else the same words as escaped HTML that keeps their line breaks and spaces."""
    if not text or not GuiQt.mightBeRichText(text):
        return text
    return f"<p style='white-space:pre'>{html.escape(text)}</p>"
