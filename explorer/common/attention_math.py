"""Qt-free numpy helpers behind the attention views.

Every view shows the same thing: some (..., T, T) attention matrices, optionally with the special tokens
([CLS]/[SEP]/[PAD]) dropped and the remaining rows renormalised to sum to 1. Positions always stay in the
inspection's numbering (0..T-1): a view keeps `positions`, the original index of each row/column it shows,
so hovering and highlighting agree between views whatever each one hides.

`layer_view` computes, once per (inspection, layer, options, head mask), everything the views of one layer
draw: the attention panel asks for it and its views render the `LayerView` it returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# without an encoding's own mask: BERT's names and RoBERTa's (<s> opens, </s> closes, <pad>)
SPECIAL_TOKENS_TO_HIDE = frozenset({"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>"})

# How values become colours, for everything shown together (a layer's heads, the overview, the rollout):
#   "p99"   0 … the 99th percentile of those values rounded up to the next step of 1, 1.25, 1.6, 2, 2.5, 3.15,
#           4, 5, 6.3, 8 × a power of ten (at most 28 % above it), linear; higher values saturate. The default:
#           at 512 tokens a typical weight is ~1/512 while a few peaks reach 1, and "0 … max" paints every
#           head of a real 12-head model one flat dark level; the 99th percentile keeps the structure at every
#           length (at 30 tokens it is close to the maximum). Rounded up so that the scale holds still while
#           the user types: each keystroke moves the percentile a little, and a colour bar that moved with it
#           would flicker and be redrawn (its ticks and label) on every keystroke.
#   "sqrt"  0 … max through a square root (a perceptual power scale): nothing saturates, faint weights lift.
#   "max"   0 … max, linear.      "fixed"  0 … 1, linear: comparable across inputs and layers.
COLOUR_SCALES = ("p99", "sqrt", "max", "fixed")
DEFAULT_COLOUR_SCALE = "p99"
COLOUR_GAMMA = {"sqrt": 0.5}  # value fraction f is drawn with the colour at f ** gamma; 1 when absent
P99_STEPS = (1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0, 10.0)  # the R10 series: steps of 25 % or so


@dataclass(frozen=True)
class ViewOptions:
    hide_special: bool = False  # drop [CLS]/[SEP]/[PAD] rows and columns (they soak up most attention)
    renormalise: bool = False  # after dropping, rescale each row to sum to 1 again
    colour_scale: str = DEFAULT_COLOUR_SCALE  # one of COLOUR_SCALES: how what is shown together is coloured

    def __post_init__(self) -> None:
        if self.colour_scale not in COLOUR_SCALES:
            raise ValueError(f"unknown colour scale {self.colour_scale!r}; choose one of {', '.join(COLOUR_SCALES)}")


@dataclass(frozen=True, eq=False)
class LayerView:
    """Everything the attention views draw for one layer of one inspection, under one set of options."""

    layer: int
    num_layers: int
    num_heads: int
    tokens: tuple[str, ...]  # (T,) every input token, in the inspection's numbering
    special_mask: np.ndarray  # (T,) bool, True for [CLS]/[SEP]/[PAD]
    positions: np.ndarray  # (t,) intp: the original positions shown, in order
    matrices: np.ndarray  # (H, t, t) float32: the layer's heads as shown (hidden tokens dropped, renormalised)
    levels: tuple[float, float]  # colour levels shared by the layer's heads
    head_mask: np.ndarray  # (L, H) float32, 1 = head on, 0 = switched off
    options: ViewOptions
    piece_style: str = "wordpiece"  # the tokenizer's word marks, for readable labels (bertcore.tokenization.pieces)

    @property
    def heads_on(self) -> np.ndarray:
        """(H,) bool: which of this layer's heads are on."""
        return self.head_mask[self.layer] > 0.5

    @property
    def labels(self) -> list[str]:
        """(t,) the tokens shown, in order."""
        return [self.tokens[position] for position in self.positions]


def layer_view(inspection, layer: int, options: ViewOptions | None = None,
               head_mask: np.ndarray | None = None) -> LayerView:
    """What the views of `layer` draw for an Inspection (attentions (L, H, T, T), input_tokens, encoding,
    head_mask) under `options` (default: everything shown as computed); `head_mask` (L, H), when given,
    replaces the inspection's (the user's edits not inspected yet)."""
    options = options or ViewOptions()
    attentions = inspection.attentions
    if attentions.ndim != 4 or attentions.shape[-1] != attentions.shape[-2]:
        raise ValueError(f"inspection.attentions must be (L, H, T, T), got shape {attentions.shape}")
    num_layers, num_heads = attentions.shape[:2]
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} does not exist; this model has layers 0..{num_layers - 1}")
    tokens = tuple(inspection.input_tokens)
    special = special_token_mask(list(tokens), inspection.encoding.special_tokens_mask)
    mask = inspection.head_mask if head_mask is None else head_mask
    mask = (np.ones((num_layers, num_heads), np.float32) if mask is None
            else np.array(mask, np.float32).reshape(num_layers, num_heads))
    positions = visible_positions(special, options.hide_special)
    matrices = view_matrix(attentions[layer], positions, options.renormalise)  # (H, t, t)
    return LayerView(
        layer=layer, num_layers=num_layers, num_heads=num_heads, tokens=tokens, special_mask=special,
        positions=positions, matrices=matrices, levels=colour_levels(matrices, options.colour_scale),
        head_mask=mask, options=options, piece_style=inspection.encoding.piece_style,
    )


def special_token_mask(tokens: list[str], special_tokens_mask=None) -> np.ndarray:
    """(T,) bool, True for [CLS]/[SEP]/[PAD]. Prefers the encoding's own mask (a [MASK] is not special)."""
    if special_tokens_mask is not None:
        mask = np.asarray(special_tokens_mask, dtype=bool)
        if mask.shape != (len(tokens),):
            raise ValueError(
                f"special_tokens_mask has shape {mask.shape} but there are {len(tokens)} tokens; "
                "pass one flag per token"
            )
        return mask
    return np.array([token in SPECIAL_TOKENS_TO_HIDE for token in tokens], dtype=bool)


def visible_positions(special_mask: np.ndarray, hide_special: bool) -> np.ndarray:
    """(t,) int64: the original positions a view shows, in order."""
    special_mask = np.asarray(special_mask, dtype=bool)
    if hide_special:
        return np.flatnonzero(~special_mask)
    return np.arange(special_mask.shape[0])


def renormalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows rescaled to sum to 1; all-zero rows (an ablated head) stay zero instead of dividing by 0."""
    row_sums = matrix.sum(axis=-1, keepdims=True)
    return np.divide(matrix, row_sums, out=np.zeros_like(matrix), where=row_sums > 0)


def view_matrix(attention: np.ndarray, positions: np.ndarray, renormalise: bool = False) -> np.ndarray:
    """(..., T, T) -> (..., t, t) float32: rows and columns at `positions`, optionally renormalised."""
    if attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must be square in its last two axes, got shape {attention.shape}")
    positions = np.asarray(positions, dtype=np.intp)
    if positions.size == attention.shape[-1] and np.array_equal(positions, np.arange(positions.size)):
        sliced = attention
    else:
        # np.take along each axis is ~5x faster than chained fancy indexing at 512 tokens
        sliced = np.take(np.take(attention, positions, axis=-2), positions, axis=-1)
    sliced = np.ascontiguousarray(sliced, dtype=np.float32)
    if renormalise:
        sliced = renormalise_rows(sliced)
    return sliced


def compute_rollout(attentions: np.ndarray, head_mask: np.ndarray | None = None) -> np.ndarray:
    """(L, H, T, T) -> (L, T, T) float32: bertcore's attention rollout (Abnar & Zuidema 2020), entry [l]
    through layers 0..l, averaging only the heads the mask keeps on."""
    from bertcore.analysis.inspection import attention_rollout  # imports torch: only when a rollout is wanted

    return np.asarray(attention_rollout(attentions, head_mask=head_mask), dtype=np.float32)


def bin_edges(length: int, num_bins: int) -> np.ndarray:
    """(num_bins + 1,) int: near-equal bins covering 0..length (num_bins <= length)."""
    return np.linspace(0, length, num_bins + 1).round().astype(np.intp)


def block_mean(matrix: np.ndarray, num_bins: int) -> np.ndarray:
    """(..., t, t) -> (..., n, n) with n = min(t, num_bins): the mean over each block of rows x columns."""
    length = matrix.shape[-1]
    if length <= num_bins:
        return matrix.astype(np.float32, copy=False)
    edges = bin_edges(length, num_bins)
    counts = np.diff(edges).astype(np.float32)
    summed = np.add.reduceat(matrix, edges[:-1], axis=-1)  # (..., t, n)
    summed = np.add.reduceat(summed, edges[:-1], axis=-2)  # (..., n, n)
    return (summed / counts[:, None] / counts[None, :]).astype(np.float32, copy=False)


def overview_cell_size(num_visible: int, max_cell: int = 64) -> int:
    return max(1, min(num_visible, max_cell))


def overview_image(
    attentions: np.ndarray,
    positions: np.ndarray | None = None,
    renormalise: bool = False,
    max_cell: int = 64,
) -> tuple[np.ndarray, int]:
    """All layers x heads in one picture: (L, H, T, T) -> ((L * c, H * c) float32, c).

    Cell (l, h) is image[l*c:(l+1)*c, h*c:(h+1)*c], head h of layer l after slicing to `positions`
    (and renormalising), block-averaged down to c x c when more than `max_cell` tokens are visible.
    One layer at a time, so hiding tokens at 512 positions never copies all L*H*T*T values at once.
    """
    num_layers, num_heads, seq_len, _ = attentions.shape
    if positions is None:
        positions = np.arange(seq_len)
    cell = overview_cell_size(len(positions), max_cell)
    image = np.zeros((num_layers * cell, num_heads * cell), np.float32)
    if len(positions) == 0:
        return image, cell
    for layer in range(num_layers):
        heads = block_mean(view_matrix(attentions[layer], positions, renormalise), cell)  # (H, c, c)
        # (H, c, c) -> (c, H, c) -> (c, H*c): heads side by side along the columns
        image[layer * cell:(layer + 1) * cell] = heads.transpose(1, 0, 2).reshape(cell, num_heads * cell)
    return image, cell


def _check_scale(scale: str) -> None:
    if scale not in COLOUR_SCALES:
        raise ValueError(f"unknown colour scale {scale!r}; choose one of {', '.join(COLOUR_SCALES)}")


def colour_levels(values: np.ndarray, scale: str = DEFAULT_COLOUR_SCALE) -> tuple[float, float]:
    """Colour levels shared by everything shown together (see COLOUR_SCALES): "fixed" 0..1, "max" and
    "sqrt" 0..max(values), "p99" 0..the 99th percentile (values above it saturate)."""
    _check_scale(scale)
    if scale == "fixed" or values.size == 0:
        return 0.0, 1.0
    if scale == "p99":
        flat = values.reshape(-1)
        flat = flat[:: max(1, flat.size // 200_000)]  # a strided sample is plenty for a percentile
        top = _step_up(float(np.percentile(flat, 99)))
    else:
        top = float(np.max(values))
    return 0.0, top if top > 0 else 1.0


def _step_up(value: float) -> float:
    """The smallest P99_STEPS value × a power of ten that is at least `value` (> 0); 0 and below unchanged."""
    if not value > 0:
        return value
    power = 10.0 ** math.floor(math.log10(value))
    mantissa = value / power
    step = next(step for step in P99_STEPS if step >= mantissa * (1 - 1e-9))  # 1e-9: 0.3 / 0.1 is 2.9999…
    return float(f"{step * power:.3g}")


def colour_gamma(scale: str) -> float:
    """The power a scale draws value fractions through (1: linear)."""
    _check_scale(scale)
    return COLOUR_GAMMA.get(scale, 1.0)


def describe_scale(scale: str, levels: tuple[float, float]) -> str:
    """The colour scale in a few words, for the colour bar: what the brightest colour means (short enough to run
    along a bar ~150 px tall; the colour box's tooltip says the rest: rounded up, above it saturated)."""
    _check_scale(scale)
    top = f"{levels[1]:.3g}"
    return {"p99": f"0 … {top} (99th pct)", "sqrt": f"√ scale, 0 … {top}",
            "max": f"0 … {top} (max)", "fixed": "0 … 1"}[scale]


def colour_indices(values: np.ndarray, levels: tuple[float, float], gamma: float = 1.0,
                   num_colours: int = 256) -> np.ndarray:
    """(...) float -> (...) uint8 index into a colour table of `num_colours` entries (levels clip)."""
    low, high = levels
    fraction = (np.asarray(values, np.float32) - low) * np.float32(1.0 / max(high - low, 1e-12))
    np.clip(fraction, 0.0, 1.0, out=fraction)
    if gamma != 1.0:
        np.power(fraction, np.float32(gamma), out=fraction)
    fraction *= num_colours - 1
    return np.rint(fraction, out=fraction).astype(np.uint8)


def to_rgba(values: np.ndarray, levels: tuple[float, float], lookup: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """(...) float -> (..., 4) uint8 RGBA through `lookup`, a (n <= 256, 4) uint8 colour table."""
    return lookup[colour_indices(values, levels, gamma, len(lookup))]
