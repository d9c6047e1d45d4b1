"""The demo inspection is a real bertcore Inspection with an encoding laid out as the tokenizer lays one out."""

import numpy as np

from bertcore.analysis.inspection import Inspection
from explorer.inspector.demo_inspection import DEMO_TEXT_A, DEMO_TEXT_B, demo_inspection


def test_the_demo_is_an_inspection_whose_encoding_adds_up():
    inspection = demo_inspection(12, 2, 3, num_padding=2)
    assert isinstance(inspection, Inspection)
    encoding = inspection.encoding
    assert encoding.tokens == inspection.input_tokens and len(encoding) == 12
    assert encoding.tokens[0] == "[CLS]" and encoding.tokens[-2:] == ["[PAD]", "[PAD]"]
    assert encoding.attention_mask == [1] * 10 + [0, 0] and encoding.position_ids == list(range(12))
    assert encoding.special_tokens_mask == [int(t in ("[CLS]", "[SEP]", "[PAD]")) for t in encoding.tokens]
    texts = {0: DEMO_TEXT_A, 1: DEMO_TEXT_B}
    for token, sentence, (start, end), segment in zip(encoding.tokens, encoding.sequence_ids, encoding.offsets,
                                                      encoding.segment_ids, strict=True):
        if sentence is not None:
            assert texts[sentence][start:end] == token and segment == sentence
    same_token = {}
    for token, token_id in zip(encoding.tokens, encoding.input_ids, strict=True):
        assert same_token.setdefault(token, token_id) == token_id
    assert len(set(encoding.input_ids)) == len(same_token) and encoding.input_ids[-1] == 0  # [PAD] is 0
    assert np.array_equal(inspection.input_ids, encoding.input_ids)
    assert inspection.num_layers == 2 and inspection.num_heads == 3
    np.testing.assert_allclose(inspection.attentions.sum(axis=-1), 1, rtol=1e-5)
    assert inspection.hidden_states.shape[:2] == (3, 12)
