"""What the other families' own heads and layers look like in the Inspect tab, decided here without Qt:

- ALBERT's sentence-order prediction (SOP), where BERT shows next-sentence prediction: the probability that A then B
  is the order the two segments came in (ALBERT was trained on consecutive segments, half of them swapped);
- ELECTRA's discriminator as a "replaced?" row of the token table: per token the probability that it is not the
  text's own, fed by the masking panel's corruption (its random tokens, and [MASK]), each cell saying what the
  masking did there;
- ModernBERT's global and local layers: the layer stepper, the head grid and the all-layers view name each layer's
  kind, and a local layer's window (each token sees `sliding_window` positions to each side).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.data.masking import MaskDecision
from explorer.inspector.task_display import TagCell, percent

REPLACED_ROW_NAME = "replaced?"
SOP_TITLE = "<b>Sentence order (SOP):</b>"
SOP_MEANING = ("ALBERT's sentence-order prediction: in pretraining, sentence B was either the segment that follows "
               "A (in order) or the one before it (swapped). The bar is P(in order).")
GLOBAL_COLOUR, LOCAL_COLOUR = "#1f5fa8", "#b8620b"  # the two layer kinds, told apart in every view that names them


def sentence_order_text(in_order_probability: float | None, has_pair: bool) -> str:
    """The SOP line beside the predictions."""
    if not has_pair:
        return ("Sentence-order prediction needs a pair: type a sentence B to see whether ALBERT reads A then B as "
                "their original order.")
    if in_order_probability is None:
        return "No sentence-order probability in this inspection."
    return (f"A then B, in order: {percent(in_order_probability)} · swapped: "
            f"{percent(1.0 - in_order_probability)}")


# ---- ELECTRA: the "replaced?" row --------------------------------------------------------------------------------

_MASKING_SAYS = {
    MaskDecision.RANDOM: "the masking put a random token here",
    MaskDecision.MASK: "the masking put [MASK] here",
    MaskDecision.KEEP: "picked by the masking but left as it was",
}


def replaced_colour(probability: float) -> str:
    """White at 0, a strong orange-red at 1: the tokens the discriminator calls replaced light up."""
    probability = min(max(float(probability), 0.0), 1.0)
    red, green, blue = 255, round(255 - 170 * probability), round(255 - 215 * probability)
    return f"#{red:02x}{green:02x}{blue:02x}"


def replaced_cells(inspection) -> list[TagCell]:
    """One cell per position: P(replaced) as text and colour, and what the masking did there in the tooltip."""
    masking = inspection.masking
    cells = []
    for position, probability in enumerate(inspection.replaced_probabilities):
        decision = MaskDecision(masking.decisions[position]) if masking is not None else MaskDecision.NONE
        if decision in (MaskDecision.RANDOM, MaskDecision.MASK):
            truth = f"{_MASKING_SAYS[decision]} (the text has {masking.original_tokens[position]!r})"
        elif decision == MaskDecision.KEEP:
            truth = _MASKING_SAYS[decision]
        else:
            truth = "the text's own token"
        tooltip = (f"ELECTRA's discriminator: P(replaced) = {percent(float(probability))} at position {position} "
                   f"({inspection.input_tokens[position]!r}); {truth}")
        cells.append(TagCell(text=f"{100 * float(probability):.0f}%", colour=replaced_colour(probability),
                             tooltip=tooltip))
    return cells


# ---- ModernBERT: global and local layers ------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerKind:
    is_local: bool
    short: str  # "G" or "L": beside the layer's number in the all-layers view
    text: str  # "global" or "local ±64": in the stepper and the head grid
    description: str  # a sentence for tooltips and the head grid's caption
    colour: str


def window_edges(positions, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges of a local layer's band in a heatmap whose rows and columns show `positions` (ascending; some
    may be hidden): per row, the first and one past the last column within ±window, as x, y pairs of segments
    (a staircase that reads as two diagonal lines at 500 tokens), in the heatmap's one-unit-per-token space."""
    positions = np.asarray(positions)
    rows = np.arange(len(positions))
    first = np.searchsorted(positions, positions - window, side="left")  # (t,)
    past_last = np.searchsorted(positions, positions + window, side="right")
    xs, ys = [], []
    for edge in (first, past_last):
        xs += [np.repeat(edge, 2), np.stack([edge[:-1], edge[1:]], 1).ravel()]  # down each row, then across
        ys += [np.stack([rows, rows + 1], 1).ravel(), np.repeat(rows[1:], 2)]
    return np.concatenate(xs).astype(float), np.concatenate(ys).astype(float)


def layer_kinds(inspection) -> list[LayerKind] | None:
    """Each layer's kind, for a model with local layers (ModernBERT); None where every layer attends globally."""
    local_layers = set(getattr(inspection, "local_layers", ()) or ())
    if inspection is None or not local_layers:
        return None
    window = inspection.sliding_window
    global_layers = [layer + 1 for layer in range(inspection.num_layers) if layer not in local_layers]
    every = ", ".join(map(str, global_layers))
    kinds = []
    for layer in range(inspection.num_layers):
        if layer in local_layers:
            kinds.append(LayerKind(True, "L", f"local ±{window}",
                                   f"Layer {layer + 1} attends locally: each token sees only the {window} positions "
                                   f"on each side of it (the band); the global layers are {every}.", LOCAL_COLOUR))
        else:
            kinds.append(LayerKind(False, "G", "global",
                                   f"Layer {layer + 1} attends globally: every token sees every other; the global "
                                   f"layers are {every}, the others see ±{window} positions.", GLOBAL_COLOUR))
    return kinds
