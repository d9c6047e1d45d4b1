"""What a fine-tuned model's head says about the typed input, in the words and colours the window shows it in.

Qt-free: the Inspect tab's task view (explorer/inspector/_qt/task_output_view.py) and the token table's tag row draw
what is decided here, from a `bertcore.tasks.outputs` record:
- sequence classification: one bar per label in class-id order (so bars do not trade places while one types),
  the chosen label(s) marked; regression: the value;
- token classification: the tag of each position (read at a word's first piece, as in training), a colour per
  tag (B-X and I-X share X's hue, B- the stronger), and the entities the tags make;
- question answering: the best span in sentence B, or "no answer" when the null score at [CLS] beats it.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

from bertcore.tasks.metrics import get_entities, is_entity_tagging
from bertcore.tokenization.pieces import piece_text

OUTSIDE_COLOUR = "#f2f2f2"  # "O": no entity, nearly the table's own background
OUTSIDE_BAR_COLOUR = "#c4c4c4"  # an "O" word's bar: visible on the bar's light track
# Hues for tag types, far apart; fills are light enough for black text.
HUES = (0.58, 0.08, 0.33, 0.78, 0.13, 0.47, 0.92, 0.0, 0.66, 0.22)
QA_NOTE = "Sentence A is the question and sentence B the context: the answer is a span of B (SQuAD's layout)."
QA_NEEDS_PAIR = ("Type the question as sentence A and the passage that holds its answer as sentence B: this "
                 "model answers with a span of B.")


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


# ---- sequence classification ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BarRow:
    label: str
    value: float  # a probability in [0, 1] (regression: the predicted value)
    chosen: bool  # the predicted label (multi-label: above 0.5); a word's tag: not "O"
    text: str  # the value as shown
    colour: str | None = None  # the bar's fill ("#rrggbb"); None: the view's own (green when chosen)


def sequence_rows(output) -> list[BarRow]:
    """One row per label, in class-id order."""
    regression = output.problem_type == "regression"
    return [BarRow(label, float(value), bool(chosen), f"{value:.4g}" if regression else percent(float(value)))
            for label, value, chosen in zip(output.labels, output.probabilities, output.chosen, strict=True)]


def sequence_headline(output) -> str:
    if output.problem_type == "regression":
        return f"Predicted value: {output.predicted_label}"
    if output.problem_type == "multi_label_classification":
        chosen = output.predicted_label or "none"
        return f"Labels with probability above 50%: {chosen}"
    best = float(output.probabilities[output.chosen].max())
    return f"Predicted: {output.predicted_label} ({percent(best)})"


# ---- token classification ------------------------------------------------------------------------------------


def tag_colours(labels) -> dict[str, str]:
    """A fill colour per tag: "O" near white; the B-, I-, E-, S- tags of one type share its hue."""
    labels = list(labels)
    entity_like = is_entity_tagging(labels)
    types = list(dict.fromkeys(label[2:] if entity_like and label != "O" else label for label in labels))
    colours = {}
    for label in labels:
        if label == "O":
            colours[label] = OUTSIDE_COLOUR
            continue
        kind = label[2:] if entity_like else label
        hue = HUES[types.index(kind) % len(HUES)]
        strong = not entity_like or label[0] in "BSU"
        red, green, blue = colorsys.hls_to_rgb(hue, 0.72 if strong else 0.85, 0.75)
        colours[label] = f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"
    return colours


@dataclass(frozen=True)
class TagCell:
    text: str  # the tag shown at this position ("" where none is read)
    colour: str | None  # fill, "#rrggbb"; None for [CLS]/[SEP]/[PAD]
    tooltip: str


def tag_cells(output, tokens) -> list[TagCell]:
    """The token table's "tag" row: the predicted tag at each word's first piece (where training reads it), the
    word's colour, fainter and without text, on its other pieces."""
    colours = tag_colours(output.labels)
    cells, word_tag = [], None
    for position, token in enumerate(tokens):
        if not output.scored[position]:
            cells.append(TagCell("", None, f"position {position}: {token} is not tagged"))
            word_tag = None
            continue
        top = output.probabilities[position].argsort()[::-1][:3]
        likely = ", ".join(f"{output.labels[i]} {percent(float(output.probabilities[position, i]))}" for i in top)
        if output.word_starts[position]:
            word_tag = output.predicted_labels[position]
            cells.append(TagCell(word_tag, colours[word_tag], f"position {position}: {token} → {likely}"))
        else:
            read = f"; the word's tag is read at its first piece ({word_tag})" if word_tag else ""
            cells.append(TagCell("", _faint(colours[word_tag]) if word_tag else None,
                                 f"position {position}: {token} (a piece of a word) → {likely}{read}"))
    return cells


def _faint(colour: str) -> str:
    """Half way to white: the pieces of a word after its first."""
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{(value + 255) // 2:02x}" for value in channels)


def tagged_words(output, tokens) -> list[tuple[str, int]]:
    """(word, position of its first piece) of every tagged word: its pieces joined, as the tokenizer wrote
    them (an uncased model's words are lower case)."""
    words: list[tuple[str, int]] = []
    for position, token in enumerate(tokens):
        if output.word_starts[position]:
            words.append((piece_text(token, output.piece_style), position))
        elif output.scored[position] and words:
            word, first = words[-1]
            words[-1] = (word + piece_text(token, output.piece_style), first)
    return words


def word_rows(output, tokens) -> list[BarRow]:
    """One bar per word: its predicted tag and how sure the head is of it, in the tag's colour."""
    colours = tag_colours(output.labels)
    rows = []
    for word, position in tagged_words(output, tokens):
        tag = output.predicted_labels[position]
        probability = float(output.probabilities[position, output.predicted_ids[position]])
        colour = OUTSIDE_BAR_COLOUR if tag == "O" else colours[tag]
        rows.append(BarRow(word, probability, tag != "O", f"{tag} {percent(probability)}", colour))
    return rows


def predicted_entities(output, tokens) -> list[tuple[str, str]]:
    """(type, words) of each entity the predicted word tags make (BIO tagging only)."""
    if not is_entity_tagging(output.labels):
        return []
    words = tagged_words(output, tokens)
    tags = [output.predicted_labels[position] for _, position in words]
    return [(kind, " ".join(word for word, _ in words[first : last + 1])) for kind, first, last in get_entities(tags)]


def token_headline(output, tokens) -> str:
    entities = predicted_entities(output, tokens)
    if entities:
        return "Entities: " + " · ".join(f"{words} ({kind})" for kind, words in entities)
    if is_entity_tagging(output.labels):
        return "No entities: every word is tagged O."
    words = int(output.word_starts.sum())
    return f"{words} word(s) tagged; the tag row of the token table shows each."


# ---- question answering --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QAReading:
    headline: str  # the answer, or why there is none
    span: tuple[int, int] | None  # the best span's first and last position (shown even when "no answer" wins)
    no_answer: bool  # the null score at [CLS] beats the best span (SQuAD 2.0's rule, threshold 0)


def qa_reading(output, has_context: bool) -> QAReading:
    if not has_context:
        return QAReading(QA_NEEDS_PAIR, None, True)
    if output.span is None:
        return QAReading("No answer: no valid span in sentence B (the best starts and ends do not make one).",
                         None, True)
    first, last = output.span
    scores = f"span score {output.span_score:.2f}, no-answer score {output.null_score:.2f}"
    if output.null_score > output.span_score:
        return QAReading(f"No answer: the no-answer score at [CLS] beats the best span “{output.answer}” ({scores}).",
                         output.span, True)
    where = f"position {first}" if first == last else f"positions {first}–{last}"
    return QAReading(f"Answer: “{output.answer}” ({where}; {scores})", output.span, False)
