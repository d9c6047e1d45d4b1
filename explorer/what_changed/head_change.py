"""What the "What changed" tab shows, without Qt: two checkpoints' attention on one input, head by head.

    computer = ChangeComputer()                     # lives in the tab's worker thread; keeps the two models
    change = computer(ChangeRequest("runs/mood/checkpoints/step-000000", "runs/mood/final", "what a day!"))
    change.divergence                               # (L, H) Jensen–Shannon divergence in bits (attention_change)
    change.summary()                                # "Most changed: layer 4 head 2 (0.214 bits), …"
    detail = change.head_detail(3, 1)               # A's and B's (t, t) heatmaps of that head and B − A

The numbers are `bertcore.analysis.attention_change`'s; this module adds what a view needs around them: loading the two
checkpoints once (a typed character recomputes, it does not reload), the colour levels, the most-changed heads
in words, and one head's matrices with their difference.

Beside the heads, how alike the two checkpoints' representations are layer by layer (`change.similarity`: linear CKA,
`bertcore.representation_similarity`, over the words of the shipped treebank's first sentences, not the input: a
handful of tokens is too few examples for a CKA). It does not depend on the input, so it is computed once per pair
of checkpoints and kept; a pair it cannot compare says why (`change.similarity_note`) and the heads still show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertcore.analysis.attention_change import AttentionChange, attention_change
from explorer.common.attention_math import colour_levels
from explorer.common.model_names import display_name

MOST_CHANGED_COUNT = 3  # heads named in the summary line
NAMES = ("A", "B")
SMALLEST_PLAIN = 0.01  # a largest value below this is written in a power of ten: three decimals read "0.00x"
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def value_exponent(largest: float) -> int:
    """The power of ten the grid writes its numbers in: 0 (bits, three decimals) while the largest value has two
    significant digits there, else the largest value's own exponent, so a comparison of two checkpoints that barely
    differ reads "4.65" (× 10⁻⁵ bits, named on the colour bar) instead of "0.000" in every cell."""
    if not math.isfinite(largest) or largest <= 0 or largest >= SMALLEST_PLAIN:
        return 0
    return math.floor(math.log10(largest))


def power_of_ten(exponent: int) -> str:
    """"10⁻⁵" for -5."""
    return "10" + str(exponent).translate(SUPERSCRIPT)


@dataclass(frozen=True)
class ChangeRequest:
    """Compare checkpoint folder A (before) with B (after) on a sentence pair (B None or "": one sentence)."""

    folder_a: str
    folder_b: str
    text_a: str
    text_b: str | None = None

    def __post_init__(self) -> None:
        for name, folder in zip(NAMES, (self.folder_a, self.folder_b), strict=True):
            if not str(folder).strip():
                raise ValueError(f"choose checkpoint {name}: a folder with config.json, the weights and vocab.txt")


@dataclass(frozen=True, eq=False)
class HeadDetail:
    """One head in A and in B on the real tokens, and how it moved (B − A)."""

    layer: int  # 0-based
    head: int
    tokens: tuple[str, ...]  # every input token, in the encoding's numbering
    positions: np.ndarray  # (t,) intp: the real (unpadded) positions shown
    attention_a: np.ndarray  # (t, t) float32, rows are queries
    attention_b: np.ndarray  # (t, t) float32
    difference: np.ndarray  # (t, t) float32: B − A
    levels: tuple[float, float]  # colour levels shared by A and B
    difference_levels: tuple[float, float]  # (−m, m): symmetric, so 0 is the middle of a diverging map
    divergence: float  # the head's mean JS divergence, bits


@dataclass(frozen=True, eq=False)
class HeadChange:
    """What one comparison found: the request, the two checkpoints' names and `attention_change`'s result."""

    request: ChangeRequest
    names: tuple[str, str]  # how the two checkpoints are called in the view, e.g. ("default-model", "mood/final")
    change: AttentionChange
    # linear CKA per layer (bertcore.analysis.similarity.RepresentationSimilarity), None when it could not be had
    similarity: Any = None
    similarity_note: str = ""  # why there is no similarity

    @property
    def divergence(self) -> np.ndarray:
        return self.change.divergence

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.change.encoding.tokens)

    @property
    def positions(self) -> np.ndarray:
        """(t,) the real tokens' positions (padding is no part of any number here)."""
        return np.flatnonzero(np.asarray(self.change.encoding.attention_mask, bool))

    @property
    def levels(self) -> tuple[float, float]:
        """The grid's colour levels: 0 … the largest divergence (0 … 1 bit when nothing moved)."""
        top = float(self.divergence.max()) if self.divergence.size else 0.0
        return 0.0, top if top > 0 else 1.0

    def most_changed(self, count: int = MOST_CHANGED_COUNT) -> list[tuple[int, int, float]]:
        """The `count` heads that moved most, as (layer, head, bits), 0-based, largest first."""
        return self.change.ranked_heads(count)

    def summary(self, count: int = MOST_CHANGED_COUNT) -> str:
        """The most-changed heads in one line (1-based, as the grid numbers them)."""
        if not self.divergence.size or float(self.divergence.max()) == 0.0:
            return "No head moved: A and B attend exactly alike on this input."
        heads = ", ".join(f"layer {layer + 1} head {head + 1} ({bits:.3g} bits)"
                          for layer, head, bits in self.most_changed(count) if bits > 0)
        mean = float(self.divergence.mean())
        return f"Most changed: {heads}. Mean over all heads {mean:.3g} bits."

    def head_detail(self, layer: int, head: int) -> HeadDetail:
        num_layers, num_heads = self.divergence.shape
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"layer {layer + 1}, head {head + 1} is outside the {num_layers} × {num_heads} grid")
        positions = self.positions
        attention_a = self.change.attentions_a[layer, head][np.ix_(positions, positions)]
        attention_b = self.change.attentions_b[layer, head][np.ix_(positions, positions)]
        difference = (attention_b.astype(np.float64) - attention_a).astype(np.float32)
        reach = float(np.abs(difference).max()) if difference.size else 0.0
        reach = reach if reach > 0 else 1.0
        return HeadDetail(layer, head, self.tokens, positions, attention_a, attention_b, difference,
                          colour_levels(np.stack([attention_a, attention_b])), (-reach, reach),
                          float(self.divergence[layer, head]))


def checkpoint_name(folder: str | Path) -> str:
    """A folder's short name for captions ("mood/final", "default-model")."""
    return display_name(Path(folder).expanduser())


class ChangeComputer:
    """Loads the two checkpoints and compares them; call it from one thread (the tab's worker).

    The models stay loaded while their folders stay chosen (keyed by folder and the weights' modification time,
    so a checkpoint rewritten by a running training is read again), so a new input costs two forward passes,
    not two loads. The same folder twice is loaded once and compares to zero everywhere.
    """

    def __init__(self, load=None):
        from bertcore.models.checkpoint import load_pretrained

        self._load = load or load_pretrained
        self._models: dict[tuple, tuple] = {}
        self._similarity: tuple[tuple, Any, str] | None = None  # (the pair's keys, similarity, note), the newest

    def model(self, folder: str, name: str) -> tuple:
        """(model, tokenizer) of `folder`; ValueError naming checkpoint `name` and the folder when unreadable."""
        path = Path(folder).expanduser()
        key = _model_key(path)
        if key not in self._models:
            try:
                self._models[key] = self._load(path)
            except (OSError, ValueError) as error:
                raise ValueError(f"checkpoint {name} ({path}) cannot be read: {error}") from error
        return self._models[key]

    def __call__(self, request: ChangeRequest) -> HeadChange:
        model_a, tokenizer_a = self.model(request.folder_a, NAMES[0])
        model_b, tokenizer_b = self.model(request.folder_b, NAMES[1])
        kept = {id(model_a), id(model_b)}
        self._models = {key: value for key, value in self._models.items() if id(value[0]) in kept}
        change = attention_change(model_a, tokenizer_a, model_b, tokenizer_b, request.text_a, request.text_b or None,
                                  names=NAMES)
        keys = (_model_key(Path(request.folder_a).expanduser()), _model_key(Path(request.folder_b).expanduser()))
        similarity, note = self.similarity(keys, model_a, tokenizer_a, model_b, tokenizer_b)
        return HeadChange(request, (checkpoint_name(request.folder_a), checkpoint_name(request.folder_b)), change,
                          similarity, note)

    def similarity(self, key: tuple, model_a, tokenizer_a, model_b, tokenizer_b) -> tuple[Any, str]:
        """(linear CKA per layer of the two models, "") or (None, why not); computed once per pair of checkpoints
        (`key`: the two models' keys, their folders and modification times)."""
        from bertcore.analysis.similarity import representation_similarity
        from bertcore.errors import AnalysisError

        if self._similarity is None or self._similarity[0] != key:
            try:
                found, note = representation_similarity(model_a, tokenizer_a, model_b, tokenizer_b), ""
            except AnalysisError as error:
                found, note = None, str(error)
            self._similarity = (key, found, note)
        return self._similarity[1], self._similarity[2]


def _model_key(folder: Path) -> tuple[str, float]:
    """What a loaded checkpoint is kept by: its folder, and its files' newest modification time (a checkpoint
    rewritten by a running training is read again)."""
    return str(folder.resolve()), _modified(folder)


def _modified(folder: Path) -> float:
    """The newest modification time of a checkpoint's files (0 when there are none: the load will say why)."""
    try:
        return max((entry.stat().st_mtime for entry in folder.iterdir() if entry.is_file()), default=0.0)
    except OSError:
        return 0.0
