"""BERT's masked-language-model corruption, with every decision recorded so it can be shown.

Per row, exactly max(1, round(p * n)) of the n candidate positions (not special, not padding) are picked
uniformly without replacement; each picked position becomes [MASK] with probability 0.8, a random
non-special token with 0.1, and stays unchanged with 0.1. The labels hold the original id at picked
positions and -100 elsewhere, so the loss is computed only where the model had to guess.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from bertcore.models.bert import IGNORE_INDEX
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding


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


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    special_token_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
    mlm_probability: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
) -> MaskedBatch:
    """Corrupt a batch the BERT way; vectorised, on the tensors' device, reproducible through generator.

    special_tokens_mask is True (or 1) at specials AND padding; a position holding one of special_token_ids
    (or mask_token_id) is never picked either, and random replacements never draw those ids.
    """
    if input_ids.shape != special_tokens_mask.shape:
        raise ValueError(
            f"input_ids has shape {tuple(input_ids.shape)} but special_tokens_mask has shape "
            f"{tuple(special_tokens_mask.shape)}; they must match"
        )
    if input_ids.dim() not in (1, 2):
        raise ValueError(f"input_ids must be (T,) or (B, T), got shape {tuple(input_ids.shape)}")
    if not 0.0 < mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability={mlm_probability} must be in (0, 1]; BERT uses 0.15")
    if mask_fraction < 0 or random_fraction < 0 or mask_fraction + random_fraction > 1:
        raise ValueError(
            f"mask_fraction={mask_fraction} and random_fraction={random_fraction} must be >= 0 and sum to "
            "at most 1; BERT uses 0.8 and 0.1"
        )
    excluded_ids = sorted({int(i) for i in special_token_ids} | {int(mask_token_id)})
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id={mask_token_id} is outside the vocabulary (0..{vocab_size - 1})")
    replacement_ids = torch.ones(vocab_size, dtype=torch.bool)
    replacement_ids[[i for i in excluded_ids if 0 <= i < vocab_size]] = False
    replacement_ids = replacement_ids.nonzero().squeeze(1)  # (V',) ids a random replacement may draw
    if len(replacement_ids) == 0:
        raise ValueError(f"every one of the {vocab_size} vocabulary ids is special; nothing to draw from")

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

    # all randomness drawn up front in a fixed order, on the generator's device, so a seed reproduces
    draw_device = generator.device if generator is not None else device
    shape = (batch_size, seq_len)
    priority = torch.rand(shape, generator=generator, device=draw_device).to(device)
    decision_draw = torch.rand(shape, generator=generator, device=draw_device).to(device)
    replacement_index = torch.randint(len(replacement_ids), shape, generator=generator, device=draw_device).to(device)

    # a uniform random order of each row's candidates (non-candidates sort last); pick the first k
    priority = priority.masked_fill(~candidates, 2.0)
    order = priority.argsort(dim=1)  # (B, T) positions, best priority first
    rank_is_picked = torch.arange(seq_len, device=device).unsqueeze(0) < num_picked.unsqueeze(1)  # (B, T)
    picked = torch.zeros_like(candidates).scatter(1, order, rank_is_picked)  # (B, T)

    to_mask = picked & (decision_draw < mask_fraction)
    to_random = picked & (decision_draw >= mask_fraction) & (decision_draw < mask_fraction + random_fraction)
    to_keep = picked & ~to_mask & ~to_random

    random_ids = replacement_ids.to(device)[replacement_index].to(input_ids.dtype)  # (B, T)
    masked_ids = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked_ids = torch.where(to_random, random_ids, masked_ids)
    labels = torch.where(picked, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    decisions = torch.zeros(shape, dtype=torch.int8, device=device)
    decisions[to_mask] = MaskDecision.MASK
    decisions[to_random] = MaskDecision.RANDOM
    decisions[to_keep] = MaskDecision.KEEP

    if is_single:
        masked_ids, labels, decisions = masked_ids[0], labels[0], decisions[0]  # (T,)
    return MaskedBatch(input_ids=masked_ids, labels=labels, decisions=decisions)


@dataclass(frozen=True)
class Masking:
    """One example's masking in plain python, position by position, for inspection and the UI."""

    decisions: list[MaskDecision]
    original_ids: list[int]
    masked_ids: list[int]
    original_tokens: list[str]
    masked_tokens: list[str]
    seed: int | None  # None when the positions were chosen by hand

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


def mask_like_bert(encoding: Encoding, tokenizer: BertTokenizer, seed: int, mlm_probability: float = 0.15) -> Masking:
    """The random BERT recipe applied to one encoding, reproducible from seed."""
    generator = torch.Generator().manual_seed(int(seed))
    batch = mask_tokens(
        torch.tensor(encoding.input_ids, dtype=torch.long),
        torch.tensor(encoding.special_tokens_mask, dtype=torch.bool),
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size,
        special_token_ids=tokenizer.special_token_ids,
        generator=generator,
        mlm_probability=mlm_probability,
    )
    masked_ids = batch.input_ids.tolist()
    return Masking(
        decisions=[MaskDecision(d) for d in batch.decisions.tolist()],
        original_ids=list(encoding.input_ids),
        masked_ids=masked_ids,
        original_tokens=list(encoding.tokens),
        masked_tokens=tokenizer.convert_ids_to_tokens(masked_ids),
        seed=int(seed),
    )


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
