"""What a fine-tuned model's head says about the typed input (objectName `taskOutput`), in the Inspect tab
where a pretraining model shows its MLM and NSP predictions.

- sequence / pair classification: a bar per label with its name and probability, the predicted one in green;
  multi-label: every label above 50% in green, with the 50% line; regression: the predicted value;
- token classification: the entities the predicted tags make, a legend of the tag colours and a bar per word
  (its tag, how sure the head is of it); the tags are also a row of the token table, which the Inspect tab
  draws from the same inspection;
- question answering: P(start) and P(end) over the tokens (`QACurves`), sentence B shaded, the best span framed
  and its text, or "no answer" when the null score wins; a note that A is the question and B the context.
Every empty state is a sentence. What to show is decided in `explorer.inspector.task_display`. In the Inspect tab
the view follows the tab's `ExplorerState` (`follow`): it shows the inspection shown there.

A click on a label's bar asks for it to be explained (`explainRequested(("class", label))`), on a word's bar for
its tag (`("tag", first piece's position, tag id)`); a regression head's "Why?" asks for `("class", 0)`, a QA
head's "Why the start?" / "Why the end?" for the best span's `("start", position)` / `("end", position)` ([CLS]
when there is none). The window hands the request to the Explain tab.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from explorer.common._qt.widget_names import named
from explorer.inspector._qt.qa_curves import QACurves
from explorer.inspector._qt.shown_inspection_view import ShownInspectionView
from explorer.inspector.task_display import (
    QA_NOTE,
    BarRow,
    qa_reading,
    sequence_headline,
    sequence_rows,
    tag_colours,
    tagged_words,
    token_headline,
    word_rows,
)

BAR_COLOUR, CHOSEN_COLOUR, TRACK_COLOUR = QColor("#8fb3e0"), QColor("#5cb85c"), QColor("#eeeeee")
TITLES = {SEQUENCE_TASK: "Sequence classification", TOKEN_TASK: "Token classification", QA_TASK: "Question answering"}
NOTE_STYLE = "color: #555;"


class ProbabilityBars(QWidget):
    """One row per label: its name, a bar as long as its probability (green when chosen), the percentage."""

    ROW_HEIGHT = 24
    rowClicked = Signal(int)  # the index of the row clicked

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("taskBars")
        self.rows: list[BarRow] = []
        self.threshold: float | None = None  # multi-label: the 50% line
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

    def set_rows(self, rows: list[BarRow], threshold: float | None = None) -> None:
        self.rows, self.threshold = list(rows), threshold
        self.setAccessibleDescription("; ".join(f"{row.label} {row.text}" for row in self.rows))
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(260, max(1, len(self.rows)) * self.ROW_HEIGHT + 4)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def mousePressEvent(self, event) -> None:
        row = int((event.position().y() - 2) // self.ROW_HEIGHT)
        if 0 <= row < len(self.rows):
            self.rowClicked.emit(row)
        super().mousePressEvent(event)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        bold = QFont(self.font())
        bold.setBold(True)
        metrics = QFontMetrics(bold)  # the widest a label or value is drawn
        label_width = min(self.width() // 3, max((metrics.horizontalAdvance(row.label) for row in self.rows),
                                                 default=40) + 10)
        value_width = max((metrics.horizontalAdvance(row.text) for row in self.rows), default=40) + 10
        bar_left, bar_width = label_width, max(10, self.width() - label_width - value_width)
        for index, row in enumerate(self.rows):
            top = 2 + index * self.ROW_HEIGHT
            painter.setFont(bold if row.chosen else self.font())
            painter.setPen(self.palette().text().color())
            label_rect = QRectF(0, top, label_width - 6, self.ROW_HEIGHT)
            painter.drawText(label_rect, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                             metrics.elidedText(row.label, Qt.TextElideMode.ElideRight, label_width - 6))
            track = QRectF(bar_left, top + 4, bar_width, self.ROW_HEIGHT - 8)
            painter.fillRect(track, TRACK_COLOUR)
            share = max(0.0, min(1.0, row.value))
            fill = QColor(row.colour) if row.colour else CHOSEN_COLOUR if row.chosen else BAR_COLOUR
            painter.fillRect(QRectF(track.left(), track.top(), track.width() * share, track.height()), fill)
            painter.drawText(QRectF(bar_left + bar_width + 6, top, value_width, self.ROW_HEIGHT),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), row.text)
        if self.threshold is not None and self.rows:
            painter.setPen(QPen(QColor("#555"), 1, Qt.PenStyle.DashLine))
            x = bar_left + bar_width * self.threshold
            painter.drawLine(round(x), 2, round(x), 2 + len(self.rows) * self.ROW_HEIGHT)
        painter.end()


class TaskOutputView(ShownInspectionView, QWidget):
    """The task head's output for the inspection shown (`show_inspection`); see the module docstring."""

    explainRequested = Signal(object)  # a bertcore.explain target tuple: ("class", label), ("tag", …), ("start", …)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("taskOutput")
        self.setAccessibleName("Task head output")
        self.row_targets: list[tuple] = []  # the explanation target of each bar shown
        self.button_targets: dict[str, tuple] = {}  # "why", "start", "end" -> the target its button asks for
        self.why_buttons: dict[str, QToolButton] = {}
        buttons_row = QHBoxLayout()
        for key, text, tip in (("why", "Why?", "Which tokens give this value (the Explain tab)"),
                               ("start", "Why the start?", "Which tokens make the answer start here"),
                               ("end", "Why the end?", "Which tokens make the answer end here")):
            button = named(QToolButton(), f"explain{key.title()}Button", tip)
            button.setText(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, key=key: self.explainRequested.emit(self.button_targets[key]))
            button.hide()
            self.why_buttons[key] = button
            buttons_row.addWidget(button)
        buttons_row.addStretch(1)
        self.title_label = QLabel("<b>Task head</b>")
        self.headline_label = named(QLabel(), "taskHeadline", "What the task head predicts")
        self.headline_label.setWordWrap(True)
        self.headline_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note_label = named(QLabel(), "taskNote", "Task head note")
        self.note_label.setWordWrap(True)
        self.note_label.setStyleSheet(NOTE_STYLE)
        self.bars = ProbabilityBars()
        self.bars.setToolTip("Click a bar to see why the head gives it, in the Explain tab")
        self.bars.rowClicked.connect(self._on_row_clicked)
        self.bars_scroll = QScrollArea()
        self.bars_scroll.setWidget(self.bars)
        self.bars_scroll.setWidgetResizable(True)
        self.bars_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.bars_scroll.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.legend_label = named(QLabel(), "tagLegend", "Tag colours")
        self.legend_label.setWordWrap(True)
        self.qa_curves = QACurves()
        self.pages = QStackedWidget()
        self.empty_page = QWidget()
        for page in (self.empty_page, self.bars_scroll, self.qa_curves):
            self.pages.addWidget(page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.title_label, self.headline_label, self.note_label, self.legend_label):
            layout.addWidget(widget)
        layout.addLayout(buttons_row)
        layout.addWidget(self.pages, 1)
        self.kind: str | None = None
        self.show_inspection(None)

    def show_inspection(self, inspection) -> None:
        self.row_targets, self.button_targets = [], {}
        for button in self.why_buttons.values():
            button.hide()
        output = None if inspection is None else inspection.task_output
        if output is None:
            self.kind = None
            self.title_label.setText("<b>Task head</b>")
            self.headline_label.setText("No inspection yet." if inspection is None else
                                        "This model has no task head: it was not fine-tuned for a task.")
            self._show_note("")
            self.legend_label.hide()
            self.pages.setCurrentWidget(self.empty_page)
            return
        self.kind = output.kind
        self.title_label.setText(f"<b>{TITLES[output.kind]}</b>")
        tokens = list(inspection.encoding.tokens)
        self.legend_label.setVisible(output.kind == TOKEN_TASK)
        if output.kind == SEQUENCE_TASK:
            self._show_sequence(output, has_pair=1 in inspection.encoding.sequence_ids)
        elif output.kind == TOKEN_TASK:
            self._show_tags(output, tokens)
        else:
            self._show_qa(output, tokens, has_context=bool(output.context.any()))

    def _show_note(self, text: str) -> None:
        self.note_label.setText(text)
        self.note_label.setVisible(bool(text))

    def _show_sequence(self, output, has_pair: bool) -> None:
        self.headline_label.setText(sequence_headline(output))
        multi = output.problem_type == "multi_label_classification"
        regression = output.problem_type == "regression"
        self.bars.set_rows([] if regression else sequence_rows(output), 0.5 if multi else None)
        self.row_targets = [("class", label) for label in range(len(output.labels))]
        if regression:
            self._offer("why", ("class", 0))
        what = "the pair" if has_pair else "sentence A (type a sentence B for a pair task)"
        if regression:
            self._show_note(f"A regression head: one number for {what}, read off the pooled [CLS] vector.")
        else:
            self._show_note(f"The head reads the pooled [CLS] vector of {what}; bars in label order, "
                            + ("each label on its own (multi-label, sigmoid)." if multi else "softmax over labels."))
        self.pages.setCurrentWidget(self.empty_page if regression else self.bars_scroll)

    def _show_tags(self, output, tokens) -> None:
        self.headline_label.setText(token_headline(output, tokens))
        swatches = " ".join(f"<span style='background:{colour}; color:black;'>&nbsp;{html.escape(label)}&nbsp;</span>"
                            for label, colour in tag_colours(output.labels).items())
        self.legend_label.setText(f"Tag colours: {swatches}")
        self._show_note("Each word's tag is read at its first piece, as in training: the “tag” row of the token "
                        "table (other pieces shaded lighter; hover a cell for the three likeliest tags) and the "
                        "bars below, as long as the head's probability of the tag.")
        self.bars.set_rows(word_rows(output, tokens))
        self.row_targets = [("tag", position, int(output.predicted_ids[position]))
                            for _, position in tagged_words(output, tokens)]
        self.pages.setCurrentWidget(self.bars_scroll)

    def _show_qa(self, output, tokens, has_context: bool) -> None:
        reading = qa_reading(output, has_context)
        self.headline_label.setText(reading.headline)
        self._show_note(QA_NOTE + " Shaded green: sentence B; framed: the best span.")
        self.qa_curves.show_output(output, tokens, reading.span, reading.no_answer)
        first, last = reading.span if reading.span is not None and not reading.no_answer else (0, 0)
        self._offer("start", ("start", int(first)))
        self._offer("end", ("end", int(last)))
        self.pages.setCurrentWidget(self.qa_curves)

    def _offer(self, key: str, target: tuple) -> None:
        self.button_targets[key] = target
        self.why_buttons[key].show()

    def _on_row_clicked(self, row: int) -> None:
        if 0 <= row < len(self.row_targets):
            self.explainRequested.emit(self.row_targets[row])

    def text(self) -> str:
        """Everything the view says now, in one string (tests, accessibility)."""
        parts = [self.title_label.text(), self.headline_label.text(), self.note_label.text()]
        if self.legend_label.isVisibleTo(self):
            parts.append(self.legend_label.text())
        if self.pages.currentWidget() is self.bars_scroll:
            parts.append(self.bars.accessibleDescription())
        return "\n".join(parts)
