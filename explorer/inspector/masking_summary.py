"""The masking in words, for the Inspect tab's note under the token table: "Masking (BERT recipe, seed 3): 4 of 20
tokens — 3 → [MASK], 1 → random, 0 kept"."""

from __future__ import annotations

from bertcore.data.masking import MaskDecision, Masking
from bertcore.tokenization.wordpiece import Encoding

# A random masking's recipe in the summary line, and what it counts its units as (None: tokens, said already)
RECIPE_NAMES = {"token": ("BERT recipe", None), "whole-word": ("whole-word recipe", "word"),
                "span": ("SpanBERT spans", "span")}


def recipe_name(masking: Masking) -> str:
    """The recipe a random masking was drawn with, as the summary line names it ("whole-word recipe")."""
    return RECIPE_NAMES.get(masking.recipe or "token", RECIPE_NAMES["token"])[0]


def masking_line(how: str, encoding: Encoding, masking: Masking, mask_token: str | None = None) -> str:
    """One line on what the masking did: how it was made, how many tokens it picked (in how many words or spans),
    and how many became the mask token, a random token, or stayed.
    `mask_token`: the model's own (RoBERTa's <mask>); else read where the masking put one, else [MASK]."""
    decisions = [MaskDecision(decision) for decision in masking.decisions]
    if mask_token is None:
        mask_token = next((masking.masked_tokens[position] for position, decision in enumerate(decisions)
                           if decision is MaskDecision.MASK), "[MASK]")
    counts = {kind: decisions.count(kind) for kind in (MaskDecision.MASK, MaskDecision.RANDOM, MaskDecision.KEEP)}
    candidates = sum(1 for special in encoding.special_tokens_mask if not special)
    picked = f"{sum(counts.values())} of {candidates} tokens"
    unit = RECIPE_NAMES.get(masking.recipe or "token", RECIPE_NAMES["token"])[1]
    if unit is not None and masking.units:
        # a word or span is decided as a whole, so its counts below come in whole units
        picked += f" in {masking.num_units} {unit}{'s' if masking.num_units != 1 else ''}"
    return (f"Masking ({how}): {picked} — {counts[MaskDecision.MASK]} → "
            f"{mask_token}, {counts[MaskDecision.RANDOM]} → random, {counts[MaskDecision.KEEP]} kept")
