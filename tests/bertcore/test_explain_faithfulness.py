"""Faithfulness curves and ERASER's scores (bertcore.explain.faithfulness) on a toy whose answer is known: a
bag-of-words classifier whose logit is the sum of one weight per token, so removing a token lowers it by exactly
that token's weight; and on a tiny BERT, against target_logit on the same edited inputs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from bertcore.errors import ExplainError
from bertcore.explain.faithfulness import ERASER_BINS, faithfulness, faithfulness_progress
from bertcore.explain.targets import model_inputs, target_logit
from bertcore.models.bert import BertForPreTraining
from tests.tiny_configs import tiny_bert

PAD, CLS, SEP = 0, 1, 2
WEIGHTS = {5: 4.0, 6: -1.0, 7: 2.5, 8: 0.5, 9: 3.0, 10: -2.0, 11: 1.0}  # token id -> its share of the logit


@dataclass
class ToyOutput:
    logits: torch.Tensor  # (B, 1)
    attentions: None = None


class ToyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(16, 1)  # its weight is the token's share; pad, [CLS] and [SEP] give 0
        with torch.no_grad():
            self.embeddings.weight.zero_()
            for token_id, weight in WEIGHTS.items():
                self.embeddings.weight[token_id] = weight


class BagOfWordsForSequenceClassification(nn.Module):
    """logit = Σ_t weight(token_t): a classifier whose every token's contribution is its weight, exactly."""

    def __init__(self):
        super().__init__()
        self.config = type("Config", (), {"num_labels": 1, "pad_token_id": PAD, "hidden_size": 1})()
        self.encoder = ToyEncoder()

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, head_mask=None, output_attentions=False):
        return ToyOutput(self.encoder.embeddings(input_ids).sum(dim=(1, 2))[:, None])


class Tokenizer:
    pad_token_id = PAD


def toy_encoding(ids: list[int]):
    from tests.bertcore.test_explain_mixing import encoding_of

    encoding = encoding_of([CLS, *ids, SEP])
    special = [1] + [0] * len(ids) + [1]
    return type(encoding)(**{**encoding.__dict__, "special_tokens_mask": special})


IDS = [5, 6, 7, 8, 9, 10, 11]  # positions 1..7


def test_the_true_order_gives_the_exact_curves_and_scores():
    model, encoding = BagOfWordsForSequenceClassification(), toy_encoding(IDS)
    weights = np.array([0.0] + [WEIGHTS[token_id] for token_id in IDS] + [0.0])
    result = faithfulness(model, Tokenizer(), encoding, ("class", 0), weights)
    ranked = sorted(WEIGHTS.values(), reverse=True)  # 4, 3, 2.5, 1, 0.5, -1, -2
    assert result.order.tolist() == [1, 5, 3, 7, 4, 2, 6]
    total = sum(ranked)
    assert result.full_value == pytest.approx(total)
    np.testing.assert_allclose(result.fractions, np.arange(8) / 7, atol=1e-7)
    np.testing.assert_allclose(result.deletion, total - np.concatenate([[0], np.cumsum(ranked)]), atol=1e-5)
    np.testing.assert_allclose(result.insertion, np.concatenate([[0], np.cumsum(ranked)]), atol=1e-5)
    assert result.empty_value == pytest.approx(0.0) and result.replacement_token_id == PAD
    # ERASER's rationale sizes for 7 tokens: ceil(7 b) = 1, 1, 1, 2, 4 tokens
    sizes = [math.ceil(7 * b) for b in ERASER_BINS]
    assert sizes == [1, 1, 1, 2, 4]
    comprehensiveness = [sum(ranked[:size]) for size in sizes]
    sufficiency = [total - sum(ranked[:size]) for size in sizes]
    np.testing.assert_allclose(result.comprehensiveness_per_bin, comprehensiveness, atol=1e-5)
    np.testing.assert_allclose(result.sufficiency_per_bin, sufficiency, atol=1e-5)
    assert result.comprehensiveness == pytest.approx(np.mean(comprehensiveness), abs=1e-5)
    assert result.sufficiency == pytest.approx(np.mean(sufficiency), abs=1e-5)
    deletion = total - np.concatenate([[0], np.cumsum(ranked)])
    assert result.deletion_auc == pytest.approx(np.sum((deletion[1:] + deletion[:-1]) / 2) / 7, abs=1e-5)


def test_the_true_order_beats_its_reverse_on_every_measure():
    model, encoding = BagOfWordsForSequenceClassification(), toy_encoding(IDS)
    weights = np.array([0.0] + [WEIGHTS[token_id] for token_id in IDS] + [0.0])
    good = faithfulness(model, Tokenizer(), encoding, ("class", 0), weights)
    bad = faithfulness(model, Tokenizer(), encoding, ("class", 0), -weights)
    assert good.deletion_auc < bad.deletion_auc and good.insertion_auc > bad.insertion_auc
    assert good.comprehensiveness > bad.comprehensiveness and good.sufficiency < bad.sufficiency


def test_a_long_input_is_sampled_at_max_points_and_the_bins():
    model = BagOfWordsForSequenceClassification()
    ids = [5 + (index % 7) for index in range(150)]
    encoding = toy_encoding(ids)
    weights = np.concatenate([[0.0], [WEIGHTS[token_id] for token_id in ids], [0.0]])
    result = faithfulness(model, Tokenizer(), encoding, ("class", 0), weights, max_points=10)
    sizes = np.rint(result.fractions * 150).astype(int)
    assert {0, 15, 30, 150} <= set(sizes) and {2, 8, 15, 30, 75} <= set(sizes)  # bins: ceil(150 b)
    assert len(sizes) == len(set(sizes)) and np.all(np.diff(sizes) > 0)
    assert len(result.deletion) == len(sizes)


def test_on_bert_the_curve_points_are_the_target_logit_of_the_edited_inputs(small_vocab_tokenizer):
    tokenizer = small_vocab_tokenizer
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_bert(tokenizer.vocab_size)).eval()
    encoding = tokenizer.encode("the cat sat on the mat", "a dog ran")
    target = ("mlm", 3, tokenizer.mask_token_id)
    scores = np.random.default_rng(0).normal(size=len(encoding))
    records = list(faithfulness_progress(model, tokenizer, encoding, target, scores))
    result = records[-1].result
    assert 3 not in result.order and not any(encoding.special_tokens_mask[p] for p in result.order)
    ids = torch.tensor([encoding.input_ids])
    ids[0, result.order[:2]] = tokenizer.pad_token_id
    with torch.no_grad():
        expected = target_logit(model, target, **{**model_inputs(encoding), "input_ids": ids})
    assert result.deletion[2] == pytest.approx(float(expected[0]), abs=1e-5)
    assert result.full_value == pytest.approx(result.deletion[0], abs=1e-5)


def test_bad_scores_are_explain_errors():
    model, encoding = BagOfWordsForSequenceClassification(), toy_encoding(IDS)
    with pytest.raises(ExplainError, match=r"scores have shape \(3,\) but the input has 9 positions"):
        faithfulness(model, Tokenizer(), encoding, ("class", 0), [1.0, 2.0, 3.0])
    with pytest.raises(ExplainError, match="NaN or infinite"):
        faithfulness(model, Tokenizer(), encoding, ("class", 0), [np.nan] * 9)
    with pytest.raises(ExplainError, match="no token to remove"):
        faithfulness(model, Tokenizer(), toy_encoding([]), ("class", 0), [0.0, 0.0])
