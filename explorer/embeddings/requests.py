"""The Embeddings tab's plain side: one request for everything the tab shows, computed in its worker. No Qt.

`EmbeddingRequest` is the state of the tab's controls (positions shown, layer, points, the token whose
neighbours are asked); `EmbeddingRunner` turns it into an `EmbeddingResult` with bertcore's embedding views,
keeping the hidden-state sample and each layer's projection of the model it last saw, so that moving the layer
slider costs one PCA and not a forward pass. One request carries every part, so the newest request always wins
without one part's request dropping another's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertcore.tokenization.pieces import piece_text

COLOUR_BY = {"segment": "segment (A / B)", "kind": "token kind", "label": "task label"}
DEFAULT_POINTS = 2000


@dataclass(frozen=True)
class EmbeddingRequest:
    request_id: int
    model: Any
    tokenizer: Any
    num_positions: int  # the first P learned positions in the similarity image
    layer: int  # 0 = embeddings output, l = after layer l
    num_points: int = DEFAULT_POINTS
    include_special: bool = True  # [CLS] and [SEP] in the projection
    neighbour_token: str = ""  # "" for none
    num_neighbours: int = 10
    corpus_path: str | None = None  # None = the built-in corpus
    seed: int = 0


@dataclass(frozen=True)
class EmbeddingResult:
    request_id: int
    position_similarity: np.ndarray | None  # (P, P) float32; None for a model without learned positions
    position_note: str  # why there is no position_similarity ("" when there is)
    segments: Any  # bertcore.analysis.embedding_views.SegmentComparison, or None
    segment_note: str
    projection: Any  # bertcore.analysis.embedding_views.Projection
    pairs: list[tuple[str, str]]  # the sample's inputs, indexed by projection.sample.sentence_index
    neighbours: Any  # bertcore.analysis.embedding_views.Neighbours, or None
    neighbour_note: str
    seconds: float


def sample_pairs(corpus: Any, num_pairs: int, seed: int = 0) -> list[tuple[str, str]]:
    """num_pairs (A, B) pairs of corpus sentences drawn at random (seeded), so both segments appear."""
    from bertcore.analysis.embedding_views import sample_sentences

    sentences = sample_sentences(corpus, 2 * num_pairs, seed=seed)
    return list(zip(sentences[0::2], sentences[1::2], strict=False))


def marked_sentence(sample: Any, index: int) -> str:
    """The input point `index` came from, as its pieces joined back into words, with its token in «»."""
    sentence = sample.sentence_index[index]
    piece_style = sample.piece_style
    words: list[str] = []
    for point in np.flatnonzero(sample.sentence_index == sentence):
        piece = piece_text(str(sample.tokens[point]), piece_style)
        if point == index:
            piece = f"«{piece}»"
        if sample.kind[point] == "subword" and words:
            words[-1] += piece
        else:
            words.append(piece)
    return " ".join(words)


class EmbeddingRunner:
    """Computes requests in one worker thread (never two at once), caching the sample of the last model."""

    def __init__(self):
        self._sample_key: tuple | None = None
        self._sample = None
        self._pairs: list[tuple[str, str]] = []
        self._projections: dict[int, Any] = {}

    def __call__(self, request: EmbeddingRequest) -> EmbeddingResult:
        from bertcore.analysis.embedding_views import (
            nearest_neighbours,
            position_similarity,
            project_hidden_states,
            sample_hidden_states,
            segment_comparison,
        )
        from bertcore.analysis.inspection import max_input_length
        from bertcore.data.corpus import read_corpus
        from bertcore.files.resources import default_corpus_path

        started = time.perf_counter()
        model, tokenizer = request.model, request.tokenizer
        num_positions = min(request.num_positions, max_input_length(model.config))
        try:
            similarity, position_note = position_similarity(model, num_positions), ""
        except ValueError as error:  # ModernBERT: rotary positions, no table to compare
            similarity, position_note = None, str(error)
        try:
            segments, segment_note = segment_comparison(model), ""
        except ValueError as error:
            segments, segment_note = None, str(error)
        key = (model, request.num_points, request.include_special, request.corpus_path, request.seed)
        if self._sample_key is None or self._sample_key[0] is not model or self._sample_key[1:] != key[1:]:
            corpus = read_corpus(request.corpus_path or default_corpus_path())
            # about 30 tokens a pair: ask for enough pairs to fill the points; sampling stops when it has them
            pairs = sample_pairs(corpus, max(8, request.num_points // 10), seed=request.seed)
            self._sample = sample_hidden_states(model, tokenizer, pairs, max_points=request.num_points,
                                                include_special=request.include_special)
            self._pairs, self._projections, self._sample_key = pairs, {}, key
        layer = min(max(0, request.layer), self._sample.hidden_states.shape[0] - 1)
        if layer not in self._projections:
            self._projections[layer] = project_hidden_states(self._sample, layer)
        neighbours, neighbour_note = None, ""
        if request.neighbour_token.strip():
            try:
                neighbours = nearest_neighbours(model, tokenizer, request.neighbour_token.strip(),
                                                k=request.num_neighbours)
            except ValueError as error:
                neighbour_note = str(error)
        return EmbeddingResult(
            request_id=request.request_id, position_similarity=similarity, position_note=position_note,
            segments=segments,
            segment_note=segment_note, projection=self._projections[layer], pairs=self._pairs,
            neighbours=neighbours, neighbour_note=neighbour_note, seconds=time.perf_counter() - started)


def describe_segments(segments: Any) -> str:
    """The two segment embeddings in words and numbers."""
    if segments is None:
        return ""
    return (f"cos(A, B) = {segments.cosine:.2f}; ‖A‖ = {segments.norm_a:.2f}, ‖B‖ = {segments.norm_b:.2f}. "
            f"Sentence B's tokens differ from A's by ‖A − B‖ = {segments.difference_norm:.2f}, "
            f"{segments.relative_difference:.0%} of a typical word embedding's length "
            f"({segments.typical_word_norm:.2f}): how loudly the model marks “this is sentence B”.")
