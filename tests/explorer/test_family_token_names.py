"""Explorer's Qt-free helpers on other families' tokens: RoBERTa's <s>/</s>/<pad> hide as [CLS]/[SEP]/[PAD] do."""

from __future__ import annotations

from explorer.common.attention_math import special_token_mask


def test_special_tokens_without_a_mask_include_robertas():
    tokens = ["<s>", "Ġcat", "</s>", "</s>", "Ġdog", "</s>", "<pad>"]
    assert special_token_mask(tokens).tolist() == [True, False, True, True, False, True, True]
    assert special_token_mask(["[CLS]", "cat", "[SEP]", "[PAD]"]).tolist() == [True, False, True, True]


def test_tagged_words_and_marked_sentences_join_byte_level_pieces():
    from types import SimpleNamespace

    import numpy as np

    from explorer.embeddings.requests import marked_sentence
    from explorer.inspector.task_display import tagged_words

    tokens = ["<s>", "Rome", "o", "Ġand", "Ġjul", "iet", "</s>"]
    output = SimpleNamespace(word_starts=np.array([0, 1, 0, 1, 1, 0, 0], bool),
                             scored=np.array([0, 1, 1, 1, 1, 1, 0], bool), piece_style="byte_level")
    assert tagged_words(output, tokens) == [("Romeo", 1), ("and", 3), ("juliet", 4)]
    sample = SimpleNamespace(sentence_index=np.zeros(5, np.int64), tokens=np.array(tokens[1:6]),
                             kind=np.array(["word", "subword", "word", "word", "subword"]), piece_style="byte_level")
    assert marked_sentence(sample, 3) == "Romeo and «jul»iet"


def test_the_masking_summary_names_the_models_own_mask_token():
    from types import SimpleNamespace

    from bertcore.data.masking import MaskDecision
    from explorer.inspector.masking_summary import masking_line

    encoding = SimpleNamespace(special_tokens_mask=[1, 0, 0, 0, 1])
    masking = SimpleNamespace(decisions=[0, MaskDecision.MASK, MaskDecision.RANDOM, 0, 0], recipe="token",
                              masked_tokens=["<s>", "<mask>", "Ġdog", "Ġsat", "</s>"], units=None, num_units=0)
    assert masking_line("by hand", encoding, masking) == (
        "Masking (by hand): 2 of 3 tokens — 1 → <mask>, 1 → random, 0 kept")
