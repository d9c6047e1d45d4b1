"""Masked-language-model corruption in three recipes, with every decision recorded so it can be shown.

Per row, a budget of max(1, round(p * n)) of the n candidate positions (not special, not padding) is picked;
the recipe says in what units:

- "token" (BERT 2018): exactly that many positions, uniformly without replacement.
- "whole-word" (BERT's later release): whole words in a random order, every piece of a word picked together,
  until the budget; whole words cannot always land on it, so a row's count is its budget in expectation (off by
  less than its longest word), and a word's chance of being picked barely depends on how many pieces it has.
- "span" (SpanBERT): random anchor words in a random order, each starting a span of L whole words, L drawn from
  a geometric distribution (p = 0.2) cut at 10 words and renormalised, as SpanBERT's code draws it (mean 3.80;
  clipping with min(L, 10) would give 4.46). A span stops early at a special token, at a word already picked and
  at the budget (the word crossing it taken by chance, so the budget holds in expectation).

Each picked unit (a token, a word, a span) becomes [MASK] with probability 0.8, random tokens with 0.1 and stays
unchanged with 0.1, the whole unit alike: SpanBERT decides per span, and a word half [MASK] half original would
give itself away. Random replacements are drawn per token. The labels hold the original id at picked positions
and -100 elsewhere, so the loss is computed only where the model had to guess.

Word boundaries come from the vocabulary (`continues_word`, below); a token after a special always starts a word.
The recipes' names and descriptions, torch-free for configs and forms, are bertcore.data.masking_recipes.
"""

from __future__ import annotations

import enum
import functools
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from bertcore.data.masking_recipes import check_recipe
from bertcore.models.parts import IGNORE_INDEX
from bertcore.tokenization.pieces import BYTE_LEVEL_SPACE, SENTENCEPIECE_SPACE, WORDPIECE_CONTINUATION
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding

BERT_MASK_FRACTION, BERT_RANDOM_FRACTION = 0.8, 0.1  # of the picked units: [MASK], a random token (the rest: kept)


class MaskDecision(enum.IntEnum):
    NONE = 0  # not picked
    MASK = 1  # replaced by [MASK]
    RANDOM = 2  # replaced by a random token
    KEEP = 3  # picked, left unchanged (the model must still predict it)


@dataclass(frozen=True)
class MaskedBatch:
    input_ids: torch.Tensor  # (B, T) or (T,) long, after corruption
    labels: torch.Tensor  # same shape, original id where picked, -100 elsewhere
    decisions: torch.Tensor  # same shape, int8 MaskDecision values
    units: torch.Tensor  # same shape, long: 0 where not picked, else the row's unit (token, word or span) 1, 2, ..


# ---- the corruption -------------------------------------------------------------------------------------------


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    special_token_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
    mlm_probability: float = 0.15,
    mask_fraction: float = BERT_MASK_FRACTION,
    random_fraction: float = BERT_RANDOM_FRACTION,
    recipe: str = "token",
    word_continues: torch.Tensor | None = None,
) -> MaskedBatch:
    """Corrupt a batch with `recipe` (see the module's notes); reproducible through generator.

    special_tokens_mask is True (or 1) at specials AND padding; a position holding one of special_token_ids
    (or mask_token_id) is never picked either, and random replacements never draw those ids. "whole-word" and
    "span" need word_continues, (vocab_size,) bool from `continues_word(tokenizer)`. The token recipe is
    vectorised on the tensors' device; the other two pick their words row by row on the CPU.
    """
    if input_ids.shape != special_tokens_mask.shape:
        raise ValueError(
            f"input_ids has shape {tuple(input_ids.shape)} but special_tokens_mask has shape "
            f"{tuple(special_tokens_mask.shape)}; they must match"
        )
    if input_ids.dim() not in (1, 2):
        raise ValueError(f"input_ids must be (T,) or (B, T), got shape {tuple(input_ids.shape)}")
    _check_fractions(mlm_probability, mask_fraction, random_fraction)
    check_recipe(recipe)
    if recipe != "token" and (word_continues is None or tuple(word_continues.shape) != (vocab_size,)):
        got = "none" if word_continues is None else f"shape {tuple(word_continues.shape)}"
        raise ValueError(f"the {recipe} recipe needs word_continues of shape ({vocab_size},), one flag per "
                         f"vocabulary id, and got {got}; pass continues_word(tokenizer)")
    excluded_ids = _excluded_ids(mask_token_id, vocab_size, special_token_ids)
    replacement_ids = _replacement_ids(vocab_size, excluded_ids)  # (V',) ids a random replacement may draw

    is_single = input_ids.dim() == 1
    if is_single:
        input_ids, special_tokens_mask = input_ids.unsqueeze(0), special_tokens_mask.unsqueeze(0)  # (1, T)
    device = input_ids.device
    batch_size, seq_len = input_ids.shape
    excluded = torch.tensor(excluded_ids, dtype=input_ids.dtype, device=device)
    candidates = ~special_tokens_mask.bool() & ~torch.isin(input_ids, excluded)  # (B, T)

    # exact count per row; float64 so that round() agrees with Python's round(p * n) (MPS has no float64)
    count_dtype = torch.float32 if device.type == "mps" else torch.float64
    num_candidates = candidates.sum(dim=1)  # (B,)
    num_picked = torch.round(num_candidates.to(count_dtype) * mlm_probability).long().clamp(min=1)
    num_picked = torch.minimum(num_picked, num_candidates)  # (B,) 0 for rows with no candidates

    # all randomness drawn up front in a fixed order, on the generator's device, so a seed reproduces; the token
    # recipe draws exactly what it drew before the other recipes existed, so its masks did not change
    draw_device = generator.device if generator is not None else device
    shape = (batch_size, seq_len)
    priority = torch.rand(shape, generator=generator, device=draw_device).to(device)
    decision_draw = torch.rand(shape, generator=generator, device=draw_device).to(device)
    replacement_index = torch.randint(len(replacement_ids), shape, generator=generator, device=draw_device).to(device)

    if recipe == "token":
        # a uniform random order of each row's candidates (non-candidates sort last); pick the first k
        order = priority.masked_fill(~candidates, 2.0).argsort(dim=1)  # (B, T) positions, best priority first
        rank_is_picked = torch.arange(seq_len, device=device).unsqueeze(0) < num_picked.unsqueeze(1)  # (B, T)
        picked = torch.zeros_like(candidates).scatter(1, order, rank_is_picked)  # (B, T)
        units = picked.long().cumsum(dim=1) * picked  # each picked token its own unit
        unit_draw = decision_draw
    else:
        boundary_draw = torch.rand(batch_size, generator=generator, device=draw_device).to(device)
        continues = word_continues.to(device)[input_ids.clamp(0, vocab_size - 1)] & candidates  # (B, T)
        if recipe == "whole-word":
            units, unit_draw = pick_whole_words(candidates, continues, priority, decision_draw, num_picked,
                                                 boundary_draw)
        else:
            span_draw = torch.rand(shape, generator=generator, device=draw_device)
            units_np, unit_draw_np = pick_spans(
                candidates.cpu().numpy(), continues.cpu().numpy(), priority.cpu().numpy(),
                decision_draw.cpu().numpy(), num_picked.cpu().numpy(),
                span_lengths_from_uniform(span_draw.cpu().numpy()), boundary_draw.cpu().numpy(),
            )
            units = torch.from_numpy(units_np).to(device)
            unit_draw = torch.from_numpy(unit_draw_np).to(device=device, dtype=decision_draw.dtype)
        picked = units > 0

    decisions = _decisions(unit_draw, mask_fraction, random_fraction) * picked  # NONE where not picked
    random_ids = replacement_ids.to(device)[replacement_index].to(input_ids.dtype)  # (B, T)
    masked_ids = torch.where(decisions == MaskDecision.MASK, mask_token_id, input_ids)
    masked_ids = torch.where(decisions == MaskDecision.RANDOM, random_ids, masked_ids)
    labels = torch.where(picked, input_ids, IGNORE_INDEX)

    if is_single:
        masked_ids, labels, decisions, units = masked_ids[0], labels[0], decisions[0], units[0]  # (T,)
    return MaskedBatch(input_ids=masked_ids, labels=labels, decisions=decisions, units=units)


def _check_fractions(mlm_probability: float, mask_fraction: float, random_fraction: float) -> None:
    if not 0.0 < mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability={mlm_probability} must be in (0, 1]; BERT uses 0.15")
    if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
        raise ValueError(
            f"mask_fraction={mask_fraction} and random_fraction={random_fraction} must be >= 0 and sum to "
            "at most 1; BERT uses 0.8 and 0.1"
        )


def _excluded_ids(mask_token_id: int, vocab_size: int, special_token_ids: Iterable[int]) -> tuple[int, ...]:
    """The ids never picked and never drawn: the special ones and [MASK], sorted."""
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id={mask_token_id} is outside the vocabulary (0..{vocab_size - 1})")
    return tuple(sorted({int(i) for i in special_token_ids} | {int(mask_token_id)}))


def _decisions(unit_draw: torch.Tensor, mask_fraction: float, random_fraction: float) -> torch.Tensor:
    """int8 of unit_draw's shape, what a picked unit with that draw becomes: MASK (1) below mask_fraction, RANDOM (2)
    below mask_fraction + random_fraction, KEEP (3) above (the thresholds compared in the draws' float32)."""
    return (unit_draw >= mask_fraction).to(torch.int8) + (unit_draw >= mask_fraction + random_fraction) + 1


@functools.lru_cache(maxsize=8)
def _replacement_ids(vocab_size: int, excluded_ids: tuple[int, ...]) -> torch.Tensor:
    """(V',) the ids a random replacement may draw: the vocabulary without excluded_ids, made once per vocabulary
    and special set rather than once per batch (shared: read, never written)."""
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[[i for i in excluded_ids if 0 <= i < vocab_size]] = False
    ids = allowed.nonzero().squeeze(1)
    if len(ids) == 0:
        raise ValueError(f"every one of the {vocab_size} vocabulary ids is special; nothing to draw from")
    return ids


# ---- where words begin, from a tokenizer's vocabulary: WordPiece marks continuations with "##", byte-level BPE
# (RoBERTa, ModernBERT) and SentencePiece (ALBERT, XLM-R) mark word starts with "Ġ" and "▁"; a vocabulary
# without marks counts every token as a word

def infer_piece_style(tokens: Iterable[str]) -> str:
    """How a bare vocabulary marks words, by counting its marks (a tokenizer says it as `piece_style`):
    "wordpiece" ("##" continuations), "byte_level" ("Ġ" after a space), "sentencepiece" ("▁" word starts), or
    "plain" (no marks: every token counts as a word)."""
    counts = {"wordpiece": 0, "byte_level": 0, "sentencepiece": 0}
    for token in tokens:
        if token.startswith(WORDPIECE_CONTINUATION) and len(token) > len(WORDPIECE_CONTINUATION):
            counts["wordpiece"] += 1
        elif token.startswith(BYTE_LEVEL_SPACE):
            counts["byte_level"] += 1
        elif token.startswith(SENTENCEPIECE_SPACE):
            counts["sentencepiece"] += 1
    style, count = max(counts.items(), key=lambda item: item[1])
    return style if count else "plain"


def continuation_mask(tokens: list[str], piece_style: str | None = None) -> torch.Tensor:
    """(V,) bool: True at the ids whose token carries on the word of the token before it. piece_style is the
    tokenizer's (bertcore.tokenization.pieces); None infers it from the tokens."""
    style = piece_style or infer_piece_style(tokens)
    if style == "wordpiece":
        continues = [token.startswith(WORDPIECE_CONTINUATION) and len(token) > 2 for token in tokens]
    elif style in ("byte_level", "sentencepiece"):
        marker = BYTE_LEVEL_SPACE if style == "byte_level" else SENTENCEPIECE_SPACE
        continues = [not token.startswith(marker) for token in tokens]
    else:
        continues = [False] * len(tokens)
    return torch.tensor(continues, dtype=torch.bool)


def _vocabulary(tokenizer) -> list[str]:
    """Every id's token; "" for an id the tokenizer has no token for (a gap among added tokens)."""
    try:
        return tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    except ValueError:
        tokens = []
        for token_id in range(tokenizer.vocab_size):
            try:
                tokens.append(tokenizer.id_to_token(token_id))
            except ValueError:
                tokens.append("")
        return tokens


# One mask per tokenizer object, computed on first use: a 250k-token vocabulary takes ~50 ms to scan. Weak keys, so
# a tokenizer the app drops takes its mask with it; the lock because the app's training thread and its GUI thread
# can ask at once.
_continuations: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_continuations_lock = threading.Lock()


def continues_word(tokenizer) -> torch.Tensor:
    """(V,) bool for `tokenizer`'s vocabulary: True where a token continues the previous token's word
    (`continuation_mask`, by the tokenizer's `piece_style` where it has one), cached per tokenizer. Treat it as
    read-only."""
    def compute() -> torch.Tensor:
        return continuation_mask(_vocabulary(tokenizer), getattr(tokenizer, "piece_style", None))

    with _continuations_lock:
        try:
            cached = _continuations.get(tokenizer)
        except TypeError:  # not weakly referable: computed every time
            return compute()
        if cached is None:
            cached = _continuations[tokenizer] = compute()
        return cached


# ---- how the whole-word and span recipes pick their units: whole words vectorised in torch on the batch's
# device, SpanBERT's spans row by row, and the span lengths, geometric as SpanBERT draws them

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


# ---- one example's masking, for inspection and the app

@dataclass(frozen=True)
class Masking:
    """One example's masking in plain python, position by position, for inspection and the UI."""

    decisions: list[MaskDecision]
    original_ids: list[int]
    masked_ids: list[int]
    original_tokens: list[str]
    masked_tokens: list[str]
    seed: int | None  # None when the positions were chosen by hand
    recipe: str | None = None  # "token", "whole-word" or "span" (MASKING_RECIPES); None when chosen by hand
    units: tuple[int, ...] = ()  # per position: 0, or the picked word or span it belongs to (1, 2, ..); () by hand

    @property
    def positions(self) -> list[int]:
        """The picked positions (the ones the model is asked to predict)."""
        return [i for i, decision in enumerate(self.decisions) if decision != MaskDecision.NONE]

    @property
    def labels(self) -> list[int]:
        return [
            original if decision != MaskDecision.NONE else IGNORE_INDEX
            for original, decision in zip(self.original_ids, self.decisions, strict=True)
        ]


    @property
    def num_units(self) -> int:
        """How many words or spans were picked (tokens for the token recipe and by hand)."""
        return max(self.units, default=0) if self.units else len(self.positions)


def mask_like_bert(
    encoding: Encoding, tokenizer: BertTokenizer, seed: int, mlm_probability: float = 0.15, recipe: str = "token",
) -> Masking:
    """A random pretraining recipe (BERT's token masking by default) applied to one encoding, reproducible from
    seed: the same draw mask_tokens makes for a batch of this one row."""
    recipe = check_recipe(recipe)
    generator = torch.Generator().manual_seed(int(seed))
    settings = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size,
                    special_token_ids=tokenizer.special_token_ids, generator=generator, mlm_probability=mlm_probability)
    if recipe == "token":
        masked_ids, decisions, units = _mask_one_row(list(encoding.input_ids), list(encoding.special_tokens_mask),
                                                     **settings)
    else:
        batch = mask_tokens(torch.tensor(encoding.input_ids, dtype=torch.long),
                            torch.tensor(encoding.special_tokens_mask, dtype=torch.bool),
                            recipe=recipe, word_continues=continues_word(tokenizer), **settings)
        masked_ids, decisions, units = batch.input_ids.tolist(), batch.decisions.tolist(), batch.units.tolist()
    return Masking(
        decisions=[MaskDecision(d) for d in decisions],
        original_ids=list(encoding.input_ids),
        masked_ids=masked_ids,
        original_tokens=list(encoding.tokens),
        masked_tokens=tokenizer.convert_ids_to_tokens(masked_ids),
        seed=int(seed),
        recipe=recipe,
        units=tuple(units),
    )


def _mask_one_row(
    input_ids: list[int], special_tokens_mask: list, *, mask_token_id: int, vocab_size: int,
    special_token_ids: Iterable[int], generator: torch.Generator, mlm_probability: float,
) -> tuple[list[int], list[int], list[int]]:
    """The token recipe on one row, exactly as `mask_tokens` masks a batch of that row: the same checks, the same
    three draws from `generator`, the same sort and the same decisions, and the rest (candidates, count, ids) in
    plain Python. A sentence typed in the window is a few dozen tokens: there ~25 small tensor operations, run
    cold between two keystrokes, cost the GUI thread 1.0-1.2 ms; this 0.65-0.75. Returns (masked ids, decisions,
    units), pinned to mask_tokens' by a test."""
    _check_fractions(mlm_probability, BERT_MASK_FRACTION, BERT_RANDOM_FRACTION)
    excluded_ids = _excluded_ids(mask_token_id, vocab_size, special_token_ids)
    replacement_ids = _replacement_ids(vocab_size, excluded_ids)
    excluded = set(excluded_ids)
    candidates = [not special and token not in excluded for token, special in zip(input_ids, special_tokens_mask,
                                                                                   strict=True)]
    count = sum(candidates)
    num_picked = min(max(1, round(count * mlm_probability)), count)
    shape = (1, len(input_ids))
    priority = torch.rand(shape, generator=generator)
    decision_draw = torch.rand(shape, generator=generator)
    replacement_index = torch.randint(len(replacement_ids), shape, generator=generator)
    order = priority.masked_fill(~torch.tensor([candidates], dtype=torch.bool), 2.0).argsort(dim=1)
    picked = set(order[0, :num_picked].tolist())
    kinds = _decisions(decision_draw, BERT_MASK_FRACTION, BERT_RANDOM_FRACTION)[0].tolist()
    drawn = replacement_index[0].tolist()
    masked_ids, decisions, units, unit = [], [], [], 0
    for position, token in enumerate(input_ids):
        kind = kinds[position] if position in picked else MaskDecision.NONE
        unit += kind != MaskDecision.NONE  # each picked token its own unit, numbered left to right
        decisions.append(int(kind))
        units.append(unit if kind else 0)
        if kind == MaskDecision.MASK:
            token = mask_token_id
        elif kind == MaskDecision.RANDOM:
            token = int(replacement_ids[drawn[position]])
        masked_ids.append(token)
    return masked_ids, decisions, units


def mask_exactly(encoding: Encoding, tokenizer: BertTokenizer, positions: Iterable[int]) -> Masking:
    """Hand-picked masking: each given position becomes [MASK]; specials, padding and bad indices raise."""
    positions = sorted({int(p) for p in positions})
    num_positions = len(encoding)
    for position in positions:
        if not 0 <= position < num_positions:
            raise ValueError(
                f"position {position} is out of range; this encoding has {num_positions} positions "
                f"(0..{num_positions - 1})"
            )
        token = encoding.tokens[position]
        if encoding.attention_mask[position] == 0:
            raise ValueError(f"position {position} is padding ({token}); only sentence tokens can be masked")
        if encoding.special_tokens_mask[position] or encoding.input_ids[position] in tokenizer.special_token_ids:
            raise ValueError(f"position {position} is {token}, a special token; only sentence tokens can be masked")
    decisions = [MaskDecision.NONE] * num_positions
    masked_ids = list(encoding.input_ids)
    for position in positions:
        decisions[position] = MaskDecision.MASK
        masked_ids[position] = tokenizer.mask_token_id
    return Masking(
        decisions=decisions,
        original_ids=list(encoding.input_ids),
        masked_ids=masked_ids,
        original_tokens=list(encoding.tokens),
        masked_tokens=tokenizer.convert_ids_to_tokens(masked_ids),
        seed=None,
    )


