"""How the whole-word and span recipes pick their units, in words (`bertcore.data.masking` makes the draws, takes
the units picked here and decides what each becomes): whole words vectorised in torch on the batch's device,
SpanBERT's spans row by row, and the span lengths, geometric as SpanBERT draws them (see masking's notes)."""

from __future__ import annotations

import numpy as np
import torch

SPAN_GEOMETRIC_P = 0.2  # SpanBERT's p: P(L = k) ∝ p (1 - p)^(k - 1)
SPAN_MAX_WORDS = 10  # SpanBERT's longest span, in words


def span_length_distribution(p: float = SPAN_GEOMETRIC_P, max_words: int = SPAN_MAX_WORDS) -> np.ndarray:
    """(max_words,) P(L = 1..max_words): the geometric distribution cut at max_words and renormalised."""
    lengths = np.arange(1, max_words + 1)
    weights = p * (1 - p) ** (lengths - 1)
    return weights / weights.sum()


def span_lengths_from_uniform(uniform: np.ndarray) -> np.ndarray:
    """Span lengths in words (int64, same shape) by inverting the cumulative distribution at `uniform` in [0, 1)."""
    cumulative = np.cumsum(span_length_distribution())
    return np.minimum(np.searchsorted(cumulative, uniform, side="right"), SPAN_MAX_WORDS - 1) + 1


def _word_bounds(candidates: torch.Tensor, continues: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(starts, ends), both (B, T): starts[b, p] is True where a word begins (a candidate that does not continue a
    candidate before it); ends[b, p] is where the word or gap at p ends (the next word start or non-candidate)."""
    seq_len = candidates.shape[1]
    positions = torch.arange(seq_len, device=candidates.device)
    previous_is_candidate = torch.zeros_like(candidates)
    previous_is_candidate[:, 1:] = candidates[:, :-1]
    starts = candidates & ~(continues & previous_is_candidate)
    boundary_at = torch.where(starts | ~candidates, positions, seq_len)  # (B, T)
    # the first boundary at or after each position, then shifted: the first one strictly after it
    at_or_after = boundary_at.flip(1).cummin(dim=1).values.flip(1)
    ends = torch.full_like(boundary_at, seq_len)
    ends[:, :-1] = at_or_after[:, 1:]
    return starts, ends


def pick_whole_words(
    candidates: torch.Tensor, continues: torch.Tensor, priority: torch.Tensor, decision_draw: torch.Tensor,
    budgets: torch.Tensor, boundary_draw: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Whole words, vectorised on the tensors' device: laid end to end in the order of their first piece's
    priority, the words that start before the threshold budget - m - 1/2 + u are picked (u = boundary_draw, m =
    Σ L² / 2 Σ L over the row's word lengths L: the mean half-length of the word the threshold falls in), so a
    row's count is its budget in expectation.

    Where a word starts hardly depends on its own length, so tokens of 2- and 3-piece words are picked at the rate
    of 1-piece words' and those of longer words at 1.05-1.15 times it (measured on Tiny Shakespeare). Passing over
    words that would overrun the budget, as Google's whole-word code does, hits it exactly but picks 4-piece words
    at about half the rate; taking the crossing word by chance, as spans do, at about 0.7.

    Returns units (B, T) long (0 = not picked, else the word's number in its row) and, per position, the decision
    draw of its word's first piece, so one word gets one decision."""
    seq_len = candidates.shape[1]
    positions = torch.arange(seq_len, device=candidates.device)
    starts, ends = _word_bounds(candidates, continues)
    lengths = torch.where(starts, ends - positions, 0)  # (B, T) a word's length at its first piece, else 0
    order = priority.masked_fill(~starts, 2.0).argsort(dim=1)  # (B, T) word starts by priority, then the rest
    laid_out = lengths.gather(1, order)
    offsets = laid_out.cumsum(dim=1) - laid_out  # (B, T) where each word starts, laid end to end
    count_dtype = torch.float32 if candidates.device.type == "mps" else torch.float64
    squares = (lengths.to(count_dtype) ** 2).sum(dim=1)
    half_length = squares / (2 * lengths.sum(dim=1).clamp(min=1).to(count_dtype))  # (B,)
    threshold = budgets.to(count_dtype) - half_length - 0.5 + boundary_draw.to(count_dtype)  # (B,)
    is_word = starts.gather(1, order)
    chosen = is_word & (offsets.to(count_dtype) < threshold.unsqueeze(1))  # (B, T) in laid-out order
    # at least one word per row with a budget, as the token recipe picks at least one token
    chosen[:, 0] |= ~chosen.any(dim=1) & (budgets > 0) & is_word[:, 0]
    numbers = chosen.long().cumsum(dim=1) * chosen  # (B, T) 1, 2, .. in laid-out order
    number_at_start = torch.zeros_like(numbers).scatter(1, order, numbers)  # (B, T) at each word's first piece
    word_start = torch.where(starts, positions, -1).cummax(dim=1).values.clamp(min=0)  # (B, T) its word's start
    units = torch.where(candidates, number_at_start.gather(1, word_start), 0)
    return units, decision_draw.gather(1, word_start)


def pick_spans(
    candidates: np.ndarray, continues: np.ndarray, priority: np.ndarray, decision_draw: np.ndarray,
    budgets: np.ndarray, span_words: np.ndarray, boundary_draw: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """SpanBERT's spans of whole words (span_words[b, i] the length of row b's i-th span), row by row: from anchor
    words in the order of their first piece's priority until each row's budget is spent, the word that would
    cross it taken with probability (budget left) / (its length) (boundary_draw (B,)), so a row's count is its
    budget in expectation.

    Returns units (B, T) int64 (0 = not picked, else the span's number in its row) and, per position, the
    decision draw of its span's first position, so one span gets one decision."""
    starts_word, ends_at = (array.numpy() for array in _word_bounds(torch.from_numpy(candidates),
                                                                     torch.from_numpy(continues)))
    units = np.zeros(candidates.shape, dtype=np.int64)
    unit_draw = decision_draw.copy()
    for row in range(len(candidates)):
        budget = int(budgets[row])
        starts = np.flatnonzero(starts_word[row])  # (W,) first position of each word
        if budget == 0 or len(starts) == 0:
            continue
        ends = ends_at[row, starts]  # (W,)
        order = np.argsort(priority[row, starts], kind="stable")  # (W,) words by priority
        spans = _spans_to_budget(starts, ends, order, budget, span_words[row], float(boundary_draw[row]))
        for number, (first, last) in enumerate(spans, start=1):
            begin, end = int(starts[first]), int(ends[last - 1])
            units[row, begin:end] = number
            unit_draw[row, begin:end] = decision_draw[row, begin]
    return units, unit_draw


def _spans_to_budget(
    starts: np.ndarray, ends: np.ndarray, order: np.ndarray, budget: int, span_words: np.ndarray, draw: float,
) -> list[tuple[int, int]]:
    """One row's spans (first word, last word + 1): from each anchor word in `order` not yet taken, up to
    span_words[i] words to the right, stopping at a gap (a special between them), a taken word or the budget."""
    lengths = (ends - starts).tolist()
    follows = np.append(starts[1:] == ends[:-1], False).tolist()  # word i+1 begins where word i ends
    taken = [False] * len(lengths)
    spans: list[tuple[int, int]] = []
    count = 0
    for attempt, first in enumerate(order.tolist()):
        if count >= budget:
            break
        if taken[first]:
            continue
        last, crossed = first, False
        while last - first < int(span_words[attempt]) and last < len(lengths) and not taken[last] and (
                last == first or follows[last - 1]):
            if count + lengths[last] > budget:
                crossed = True
                # at least one span per row, as the token recipe picks at least one token
                if draw * lengths[last] < budget - count or (not spans and last == first):
                    count += lengths[last]
                    last += 1
                break
            count += lengths[last]
            last += 1
        if last > first:
            taken[first:last] = [True] * (last - first)
            spans.append((first, last))
        if crossed:
            break
    return spans
