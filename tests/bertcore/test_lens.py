"""The logit lens: the MLM head at every layer; its last row is the model's own prediction."""

import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import inspect_encoding
from bertcore.analysis.lens import encoding_logit_lens, logit_lens
from bertcore.data.masking import mask_exactly, mask_like_bert
from bertcore.files.resources import default_checkpoint_dir
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import load_pretrained
from tests.tiny_configs import tiny_bert

TEXT_A, TEXT_B = "the cat sat on the mat", "a dog ran far away"


@pytest.fixture(scope="module")
def tiny(small_vocab_tokenizer):
    torch.manual_seed(0)
    config = tiny_bert(small_vocab_tokenizer.vocab_size)
    return BertForPreTraining(config).eval(), small_vocab_tokenizer


def test_last_row_is_the_models_own_prediction(tiny):
    model, tokenizer = tiny
    encoding = tokenizer.encode(TEXT_A, TEXT_B)
    masking = mask_exactly(encoding, tokenizer, [2, 5, 9])
    inspection = inspect_encoding(model, tokenizer, encoding, masking=masking, top_k=4)
    lens = logit_lens(model, tokenizer, inspection, top_k=4)
    assert lens.top_ids.shape == (4, 3, 4) and lens.top_probabilities.dtype == np.float32
    assert lens.layer_names == ["embeddings", "layer 1", "layer 2", "layer 3"]
    assert lens.positions.tolist() == [2, 5, 9] and lens.input_tokens == ["[MASK]"] * 3
    assert lens.original_tokens == [encoding.tokens[p] for p in (2, 5, 9)]
    for column, prediction in enumerate(inspection.predictions):
        assert lens.top_ids[-1, column].tolist() == prediction.top_ids
        assert lens.top_tokens[-1, column].tolist() == prediction.top_tokens
        np.testing.assert_allclose(lens.top_probabilities[-1, column], prediction.top_probabilities, atol=1e-6)


def test_every_row_is_the_mlm_head_on_that_layers_hidden_state(tiny):
    model, tokenizer = tiny
    encoding = tokenizer.encode(TEXT_A, TEXT_B)
    masking = mask_like_bert(encoding, tokenizer, seed=4)
    lens = encoding_logit_lens(model, tokenizer, encoding, masking, top_k=3)
    with torch.no_grad():
        output = model(torch.tensor([masking.masked_ids]), torch.tensor([encoding.segment_ids]),
                       output_hidden_states=True)
        for layer, hidden in enumerate(output.hidden_states):
            probabilities = model.cls.predictions(hidden[0, masking.positions]).softmax(-1)  # (P, V)
            top = probabilities.topk(3)
            assert lens.top_ids[layer].tolist() == top.indices.tolist()
            original = probabilities[torch.arange(len(masking.positions)), lens.original_ids]
            np.testing.assert_allclose(lens.original_probability[layer], original.numpy(), atol=1e-6)
            ranks = (probabilities > original[:, None]).sum(-1) + 1
            assert lens.original_rank[layer].tolist() == ranks.tolist()
    assert np.all(lens.original_rank >= 1)
    inspection = inspect_encoding(model, tokenizer, encoding, masking=masking)
    same = logit_lens(model, tokenizer, inspection, top_k=3)
    np.testing.assert_array_equal(same.top_ids, lens.top_ids)
    np.testing.assert_allclose(same.top_probabilities, lens.top_probabilities, atol=1e-6)


def test_head_mask_reaches_the_lens(tiny):
    model, tokenizer = tiny
    encoding = tokenizer.encode(TEXT_A, TEXT_B)
    masking = mask_exactly(encoding, tokenizer, [3])
    head_mask = np.ones((3, 5), np.float32)
    head_mask[:, :4] = 0
    ablated = encoding_logit_lens(model, tokenizer, encoding, masking, head_mask=head_mask)
    from_inspection = logit_lens(model, tokenizer,
                                 inspect_encoding(model, tokenizer, encoding, masking=masking, head_mask=head_mask))
    np.testing.assert_allclose(ablated.top_probabilities, from_inspection.top_probabilities, atol=1e-6)
    plain = encoding_logit_lens(model, tokenizer, encoding, masking)
    np.testing.assert_allclose(plain.top_probabilities[0], ablated.top_probabilities[0])  # embeddings: no heads
    assert not np.allclose(plain.top_probabilities[-1], ablated.top_probabilities[-1])


def test_settled_layer_is_where_the_right_word_comes_to_stay():
    ranks = np.array([[3, 1, 2], [1, 1, 5], [2, 1, 1], [1, 1, 1]])  # (L + 1, P)
    lens = empty_lens_like(ranks)
    assert lens.settled_layer.tolist() == [3, 0, 2]
    assert empty_lens_like(np.array([[1], [2]])).settled_layer.tolist() == [-1]


def empty_lens_like(ranks):
    from bertcore.analysis.lens import LogitLens

    rows, columns = ranks.shape
    return LogitLens(positions=np.arange(columns), original_ids=np.zeros(columns, np.int64),
                     original_tokens=["x"] * columns, input_tokens=["[MASK]"] * columns,
                     layer_names=["embeddings", *(f"layer {i}" for i in range(1, rows))],
                     top_ids=np.zeros((rows, columns, 1), np.int64), top_tokens=np.full((rows, columns, 1), "x"),
                     top_probabilities=np.zeros((rows, columns, 1), np.float32),
                     original_probability=np.zeros((rows, columns), np.float32), original_rank=ranks)


def test_no_masking_gives_an_empty_lens_and_bad_inputs_say_what_to_fix(tiny):
    model, tokenizer = tiny
    encoding = tokenizer.encode(TEXT_A)
    lens = logit_lens(model, tokenizer, inspect_encoding(model, tokenizer, encoding))
    assert lens.top_ids.shape == (4, 0, 5) and lens.top_tokens.shape == (4, 0, 5) and lens.settled_layer.size == 0
    masking = mask_exactly(encoding, tokenizer, [1])
    with pytest.raises(ValueError, match="top_k is 0"):
        encoding_logit_lens(model, tokenizer, encoding, masking, top_k=0)
    with pytest.raises(ValueError, match="mask the current encoding again"):
        encoding_logit_lens(model, tokenizer, tokenizer.encode(TEXT_A, TEXT_B), masking)
    with pytest.raises(ValueError, match=r"needs \(layers, heads\) = \(3, 5\)"):
        encoding_logit_lens(model, tokenizer, encoding, masking, head_mask=np.ones((5, 3)))
    model.has_pretraining_heads = False
    try:
        with pytest.raises(ValueError, match="no MLM head"):
            encoding_logit_lens(model, tokenizer, encoding, masking)
    finally:
        model.has_pretraining_heads = True


@pytest.mark.slow
def test_default_model_forms_the_right_word_in_its_later_layers():
    folder = default_checkpoint_dir()
    if not (folder / "config.json").is_file():
        pytest.skip(f"the default model is not in {folder}")
    model, tokenizer = load_pretrained(folder)
    encoding = tokenizer.encode("what say you , my lord ?")
    masking = mask_exactly(encoding, tokenizer, [encoding.tokens.index("my")])
    lens = encoding_logit_lens(model, tokenizer, encoding, masking)
    assert lens.original_rank[-1, 0] == 1  # the trained model gets "my" right ...
    assert lens.original_rank[0, 0] > 10  # ... which the MLM head cannot read off the [MASK] embedding
    assert lens.original_probability[-1, 0] > 10 * lens.original_probability[0, 0]
    assert 1 <= lens.settled_layer[0] <= 4
