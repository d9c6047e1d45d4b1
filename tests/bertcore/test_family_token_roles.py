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


def test_pieces_that_continue_a_word_and_their_text_in_every_family():
    from bertcore.tokenization.pieces import continues_word, piece_text

    assert continues_word("##ing", "wordpiece") and not continues_word("cat", "wordpiece")
    assert continues_word("ing", "byte_level") and not continues_word("Ġcat", "byte_level")
    assert continues_word("ing", "sentencepiece") and not continues_word("▁cat", "sentencepiece")
    assert [piece_text(t, s) for t, s in [("##ing", "wordpiece"), ("Ġcat", "byte_level"), ("Ã©", "byte_level"),
                                          ("▁cat", "sentencepiece"), ("cat", "plain")]] == ["ing", "cat", "é", "cat",
                                                                                           "cat"]


def test_token_task_word_starts_and_embedding_kinds_of_a_byte_level_encoding():
    from bertcore.analysis.embedding_views import _token_kind
    from bertcore.tasks.outputs import _token_output
    from bertcore.tokenization.encoding import Encoding

    tokens = ["<s>", "Rome", "o", "Ġand", "Ġjul", "iet", "</s>"]
    special = [1, 0, 0, 0, 0, 0, 1]
    encoding = Encoding(tokens, list(range(7)), [0] * 7, list(range(7)), [1] * 7, special,
                        [None, 0, 0, 0, 0, 0, None], [(0, 0)] * 7, None, [], piece_style="byte_level")
    config = type("Config", (), {"id2label": {0: "O", 1: "B-PER"}})()
    import torch

    output = _token_output(config, encoding, torch.zeros(7, 2))
    assert output.word_starts.tolist() == [False, True, False, True, True, False, False]
    assert [_token_kind(encoding, p) for p in range(7)] == ["special", "word", "subword", "word", "word", "subword",
                                                            "special"]
