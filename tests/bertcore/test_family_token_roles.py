"""Other families' tokens where BERT's names were hard-coded: RoBERTa's <s>/</s> take the [CLS]/[SEP] roles, and
byte-level (Ġ) and SentencePiece (▁) pieces are grouped into words and punctuation as WordPiece's ## are."""

from __future__ import annotations

import numpy as np

from bertcore.analysis.roles import head_roles, is_punctuation

ROBERTA_TOKENS = ["<s>", "the", "Ġcat", "Ġsat", ",", "Ġon", "Ġmat", "</s>", "<pad>", "<pad>"]
SPECIAL = [1, 0, 0, 0, 0, 0, 0, 1, 1, 1]
MASK = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]


def attention_on(key: int) -> np.ndarray:
    attention = np.zeros((1, 1, len(ROBERTA_TOKENS), len(ROBERTA_TOKENS)), np.float32)
    attention[0, 0, :, key] = 1.0
    return attention


def test_robertas_opening_and_closing_tokens_take_the_cls_and_sep_roles():
    on_start = head_roles(attention_on(0), ROBERTA_TOKENS, MASK, special_tokens_mask=SPECIAL)
    assert on_start.labels[0, 0] == "[CLS]" and on_start.share("cls")[0, 0] == 1.0
    on_end = head_roles(attention_on(7), ROBERTA_TOKENS, MASK, special_tokens_mask=SPECIAL)
    assert on_end.labels[0, 0] == "[SEP]" and on_end.share("sep")[0, 0] == 1.0


def test_punctuation_pieces_of_every_family():
    assert is_punctuation(",") and is_punctuation("##,") and is_punctuation("Ġ,") and is_punctuation("▁?")
    assert not is_punctuation("Ġcat") and not is_punctuation("Ġ") and not is_punctuation("▁")
