import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import attention_rollout, inspect
from bertcore.data.masking import MaskDecision, mask_exactly, mask_like_bert
from bertcore.models.bert import BertForPreTraining
from tests.tiny_configs import tiny_bert

TEXT_A, TEXT_B = "the cat sat on the mat", "a dog ran far away"


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = tiny_bert(tokenizer.vocab_size)
    return BertForPreTraining(config)


def test_arrays_match_a_direct_forward(model, tokenizer):
    masking = mask_exactly(tokenizer.encode(TEXT_A, TEXT_B), tokenizer, [2, 9])
    result = inspect(model, tokenizer, TEXT_A, TEXT_B, masking=masking, top_k=4)
    seq_len = len(result.encoding)
    assert result.attentions.shape == (3, 5, seq_len, seq_len) and result.attentions.dtype == np.float32
    assert result.hidden_states.shape == (4, seq_len, 30)
    np.testing.assert_allclose(result.attentions.sum(-1), 1.0, atol=1e-5)
    assert result.input_tokens[2] == result.input_tokens[9] == "[MASK]"
    ids = torch.tensor([masking.masked_ids])
    model.eval()
    with torch.no_grad():
        direct = model(ids, torch.tensor([result.encoding.segment_ids]), output_attentions=True)
    np.testing.assert_allclose(result.attentions, torch.cat(direct.attentions).numpy(), atol=1e-6)
    probabilities = direct.prediction_logits[0].softmax(-1)
    assert [p.position for p in result.predictions] == [2, 9]
    for prediction in result.predictions:
        top = probabilities[prediction.position].topk(4)
        assert prediction.top_ids == top.indices.tolist()
        np.testing.assert_allclose(prediction.top_probabilities, top.values.numpy(), atol=1e-6)
        assert prediction.decision == MaskDecision.MASK
        assert prediction.original_token == result.encoding.tokens[prediction.position]
    expected_nsp = direct.seq_relationship_logits.softmax(-1)[0, 0].item()
    assert result.is_next_probability == pytest.approx(expected_nsp, abs=1e-6)


def test_leaves_the_training_mode_as_it_was(model, tokenizer):
    model.train()
    inspect(model, tokenizer, TEXT_A)
    assert model.training
    model.eval()


def test_a_stray_training_submodule_is_still_switched_off(model, tokenizer):
    # The model says eval but one dropout was left training: the inspection must not drop out at random.
    model.eval()
    model.bert.embeddings.dropout.train()
    first = inspect(model, tokenizer, TEXT_A).hidden_states
    second = inspect(model, tokenizer, TEXT_A).hidden_states
    np.testing.assert_array_equal(first, second)
    model.eval()


def test_head_mask_changes_predictions(model, tokenizer):
    masking = mask_like_bert(tokenizer.encode(TEXT_A, TEXT_B), tokenizer, seed=3)
    plain = inspect(model, tokenizer, TEXT_A, TEXT_B, masking=masking)
    head_mask = np.ones((3, 5), np.float32)
    head_mask[:, :3] = 0
    ablated = inspect(model, tokenizer, TEXT_A, TEXT_B, masking=masking, head_mask=head_mask)
    assert np.all(ablated.attentions[:, :3] == 0)
    assert not np.allclose(plain.predictions[0].top_probabilities, ablated.predictions[0].top_probabilities)
    np.testing.assert_array_equal(ablated.head_mask, head_mask)
    with pytest.raises(ValueError, match=r"needs \(layers, heads\) = \(3, 5\)"):
        inspect(model, tokenizer, TEXT_A, head_mask=np.ones((5, 3)))


def test_model_without_heads_reports_none(model, tokenizer):
    masking = mask_like_bert(tokenizer.encode(TEXT_A), tokenizer, seed=1)
    model.has_pretraining_heads = False
    try:
        result = inspect(model, tokenizer, TEXT_A, masking=masking)
    finally:
        model.has_pretraining_heads = True
    assert result.predictions == [] and result.is_next_probability is None and not result.has_pretraining_heads


def test_masking_of_another_input_is_refused(model, tokenizer):
    masking = mask_like_bert(tokenizer.encode(TEXT_A), tokenizer, seed=1)
    with pytest.raises(ValueError, match="mask the current encoding again"):
        inspect(model, tokenizer, TEXT_A, TEXT_B, masking=masking)


def test_rollout_by_hand():
    first = np.array([[[1.0, 0.0], [1.0, 0.0]]])  # every query reads token 0
    second = np.array([[[0.0, 1.0], [0.0, 1.0]]])  # every query reads token 1
    attentions = np.stack([first, second]).astype(np.float32)  # (L=2, H=1, 2, 2)
    rollout = attention_rollout(attentions)
    layer0 = np.array([[1.0, 0.0], [0.5, 0.5]])  # 0.5·A + 0.5·I
    layer1 = np.array([[0.5, 0.5], [0.0, 1.0]]) @ layer0
    np.testing.assert_allclose(rollout[0], layer0)
    np.testing.assert_allclose(rollout[1], layer1)
    np.testing.assert_allclose(rollout.sum(-1), 1.0)


def test_rollout_ignores_ablated_heads():
    rng = np.random.default_rng(0)
    attentions = rng.random((2, 3, 4, 4)).astype(np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    head_mask = np.array([[1, 0, 0], [1, 1, 1]], np.float32)
    masked = attentions * head_mask[:, :, None, None]
    expected = attention_rollout(np.concatenate([attentions[:1, :1], attentions[1:, :1]]), head_mask=None)
    only_first = attention_rollout(masked, head_mask=head_mask)
    np.testing.assert_allclose(only_first[0], expected[0], atol=1e-6)
