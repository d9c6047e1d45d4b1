"""A masked LM alone (BertForMaskedLM, DistilBertForMaskedLM, ElectraForMaskedLM) through the analyses: its MLM
head is read (inspection, importance, logit lens, pruning metric), its missing NSP head never is; a
BertForPreTraining keeps both, and a bare encoder still has neither."""

import numpy as np
import pytest
import torch

from bertcore.analysis.importance import input_head_importance
from bertcore.analysis.inspection import inspect
from bertcore.analysis.lens import encoding_logit_lens, logit_lens
from bertcore.analysis.pruning import pretraining_metric
from bertcore.data.masking import mask_exactly
from bertcore.files.resources import default_vocab_path
from bertcore.models.bert import IGNORE_INDEX, BertForMaskedLM, BertForPreTraining
from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from bertcore.models.electra import ElectraConfig, ElectraForMaskedLM
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.tiny_configs import tiny_bert

SENTENCE_A, SENTENCE_B = "the cat sat on the mat", "then it ran away"
SIZES = dict(hidden_size=30, num_hidden_layers=3, num_attention_heads=5, intermediate_size=37,
             max_position_embeddings=40)


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.from_vocab_file(default_vocab_path())


def build(name: str, vocab_size: int) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "BertForMaskedLM":
        return BertForMaskedLM(tiny_bert(vocab_size)).eval()
    if name == "DistilBertForMaskedLM":
        return DistilBertForMaskedLM(DistilBertConfig(vocab_size=vocab_size, **SIZES)).eval()
    if name == "ElectraForMaskedLM":
        return ElectraForMaskedLM(ElectraConfig(vocab_size=vocab_size, embedding_size=18, **SIZES)).eval()
    return BertForPreTraining(tiny_bert(vocab_size)).eval()


MASKED_LMS = ["BertForMaskedLM", "DistilBertForMaskedLM", "ElectraForMaskedLM"]


def masked_pair(tokenizer):
    encoding = tokenizer.encode(SENTENCE_A, SENTENCE_B)
    return encoding, mask_exactly(encoding, tokenizer, [2, 8])


@pytest.mark.parametrize("name", MASKED_LMS)
def test_a_masked_lm_has_its_mlm_head_and_no_nsp_head(name, tokenizer):
    model = build(name, tokenizer.vocab_size)
    assert (model.has_mlm_head, model.has_nsp_head) == (True, False)


@pytest.mark.parametrize("name", MASKED_LMS)
def test_inspection_of_a_masked_lm_predicts_masked_tokens_and_no_nsp(name, tokenizer):
    model = build(name, tokenizer.vocab_size)
    _, masking = masked_pair(tokenizer)
    inspection = inspect(model, tokenizer, SENTENCE_A, SENTENCE_B, masking=masking, top_k=3)
    assert [prediction.position for prediction in inspection.predictions] == [2, 8]
    assert inspection.has_mlm_head and not inspection.has_nsp_head and inspection.is_next_probability is None


@pytest.mark.parametrize("name", MASKED_LMS)
def test_importance_on_a_pair_takes_the_mlm_loss_alone(name, tokenizer):
    """The pair used to make importance read seq_relationship_logits, which a masked LM's output lacks."""
    model = build(name, tokenizer.vocab_size)
    encoding, masking = masked_pair(tokenizer)
    scores = input_head_importance(model, encoding, masking)  # next_sentence="predicted": NSP wanted if there
    assert scores.shape == (3, 5) and np.all(np.isfinite(scores)) and scores.sum() > 0
    np.testing.assert_array_equal(scores, input_head_importance(model, encoding, masking, next_sentence="none"))
    with pytest.raises(ValueError, match="no NSP head"):  # nothing masked: a pair alone gives it no loss
        input_head_importance(model, encoding, None)


@pytest.mark.parametrize("name", MASKED_LMS)
def test_logit_lens_reads_a_masked_lms_own_head(name, tokenizer):
    model = build(name, tokenizer.vocab_size)
    encoding, masking = masked_pair(tokenizer)
    inspection = inspect(model, tokenizer, SENTENCE_A, SENTENCE_B, masking=masking, top_k=3)
    lens = logit_lens(model, tokenizer, inspection, top_k=3)
    assert lens.top_probabilities.shape == (4, 2, 3) and np.all(np.isfinite(lens.top_probabilities))
    # the last row is the model's own prediction
    assert lens.top_ids[-1, :, 0].tolist() == [prediction.top_ids[0] for prediction in inspection.predictions]
    again = encoding_logit_lens(model, tokenizer, encoding, masking, top_k=3)
    np.testing.assert_allclose(again.top_probabilities, lens.top_probabilities, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", MASKED_LMS)
def test_pruning_metric_of_a_masked_lm_is_its_mlm_accuracy(name, tokenizer):
    model = build(name, tokenizer.vocab_size)
    values = pretraining_metric(model, [_pretraining_batch(*masked_pair(tokenizer))])(np.ones((3, 5), np.float32))
    assert set(values) == {"mlm_accuracy", "loss"} and np.isfinite(values["loss"])


def test_pretraining_model_keeps_both_heads(tokenizer):
    model = build("BertForPreTraining", tokenizer.vocab_size)
    assert (model.has_mlm_head, model.has_nsp_head, model.has_pretraining_heads) == (True, True, True)
    encoding, masking = masked_pair(tokenizer)
    inspection = inspect(model, tokenizer, SENTENCE_A, SENTENCE_B, masking=masking, top_k=3)
    assert inspection.is_next_probability is not None and len(inspection.predictions) == 2
    with_nsp = input_head_importance(model, encoding, masking)
    assert not np.array_equal(with_nsp, input_head_importance(model, encoding, masking, next_sentence="none"))
    assert set(pretraining_metric(model, [_pretraining_batch(encoding, masking)])(np.ones((3, 5)))) == {
        "mlm_accuracy", "nsp_accuracy", "loss"}


def _pretraining_batch(encoding, masking):
    labels = torch.full((1, len(encoding)), IGNORE_INDEX)
    labels[0, masking.positions] = torch.tensor([masking.original_ids[p] for p in masking.positions])
    return {"input_ids": torch.tensor([masking.masked_ids]), "token_type_ids": torch.tensor([encoding.segment_ids]),
            "attention_mask": torch.tensor([encoding.attention_mask]), "labels": labels,
            "next_sentence_label": torch.tensor([0])}


def test_a_bare_encoder_still_has_no_heads(tokenizer):
    model = build("BertForPreTraining", tokenizer.vocab_size)
    model.has_pretraining_heads = False  # as the loader marks a bare BertModel checkpoint
    assert (model.has_mlm_head, model.has_nsp_head) == (False, False)
    encoding, masking = masked_pair(tokenizer)
    with pytest.raises(ValueError, match="no MLM or NSP head"):
        input_head_importance(model, encoding, masking)
    with pytest.raises(ValueError, match="no MLM head"):
        encoding_logit_lens(model, tokenizer, encoding, masking)
