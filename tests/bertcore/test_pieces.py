"""Readable pieces (bertcore.tokenization.pieces) and which models read segment ids (families.uses_segments)."""

from types import SimpleNamespace

import pytest
import torch

from bertcore.models.families import uses_segments
from bertcore.tokenization.pieces import describe_piece, readable_piece, readable_tokens


@pytest.mark.parametrize(("token", "style", "shown"), [
    ("##ing", "wordpiece", "·ing"),
    ("play", "wordpiece", "play"),
    ("##", "wordpiece", "##"),  # the piece "#" alone, not a mark
    ("Ġcat", "byte_level", "␣cat"),
    ("cat", "byte_level", "cat"),
    ("Ã©", "byte_level", "é"),  # the two bytes of é, each by its stand-in
    ("ðŁĺĢ", "byte_level", "😀"),
    ("Ċ", "byte_level", "↵"),
    ("ĠĠ", "byte_level", "␣␣"),
    ("Ã", "byte_level", "<0xC3>"),  # half a character
    ("<mask>", "byte_level", "<mask>"),
    ("▁cat", "sentencepiece", "␣cat"),
    ("cat", "sentencepiece", "cat"),
    ("<0x0A>", "sentencepiece", "<0x0A>"),
    ("Ġcat", "plain", "Ġcat"),
])
def test_readable_piece(token, style, shown):
    assert readable_piece(token, style) == shown


def test_describe_piece_names_the_raw_piece_and_its_mark():
    assert describe_piece("Ġcat", "byte_level") == "'Ġcat': follows a space, so it begins a word (byte-level BPE's Ġ)"
    assert "continues the word before it" in describe_piece("##ing", "wordpiece")
    assert "begins a word" in describe_piece("▁cat", "sentencepiece")
    assert "'é'" in describe_piece("Ã©", "byte_level")


@pytest.mark.slow
def test_uses_segments_only_where_a_token_type_table_has_rows_to_choose_from():
    from bertcore.models.albert import AlbertConfig, AlbertForMaskedLM
    from bertcore.models.bert import BertForMaskedLM
    from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
    from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
    from tests.tiny_configs import two_layer_bert

    sizes = dict(vocab_size=50, hidden_size=24, num_hidden_layers=1, num_attention_heads=3, intermediate_size=37)
    with torch.device("meta"):
        models = {
            "bert": BertForMaskedLM(two_layer_bert(50)),
            "albert": AlbertForMaskedLM(AlbertConfig(**sizes, embedding_size=10)),
            "roberta": RobertaForMaskedLM(RobertaConfig(**sizes, max_position_embeddings=40)),
            "distilbert": DistilBertForMaskedLM(DistilBertConfig(**sizes)),
            "modernbert": ModernBertForMaskedLM(ModernBertConfig(**sizes, pad_token_id=0, cls_token_id=1,
                                                                 sep_token_id=2, bos_token_id=1, eos_token_id=2)),
        }
    assert {name: uses_segments(model) for name, model in models.items()} == {
        "bert": True, "albert": True, "roberta": False, "distilbert": False, "modernbert": False}


def test_readable_tokens_render_sentence_pieces_and_leave_the_layouts_specials():
    encoding = SimpleNamespace(tokens=["<s>", "Ġcat", "s", "</s>", "</s>", "Ġdog", "</s>"],
                               sequence_ids=[None, 0, 0, None, None, 1, None], piece_style="byte_level")
    assert readable_tokens(encoding) == ["<s>", "␣cat", "s", "</s>", "</s>", "␣dog", "</s>"]
