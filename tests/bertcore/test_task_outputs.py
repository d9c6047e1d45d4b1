"""An inspection of a fine-tuned model carries its head's output, equal to the model's own forward pass."""

import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import inspect, inspect_encoding
from bertcore.models.bert import BertForPreTraining
from bertcore.models.task_heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertcore.tasks.outputs import QuestionAnsweringTaskOutput, SequenceTaskOutput, TokenTaskOutput
from bertcore.tasks.qa import best_spans
from tests.tiny_configs import tiny_bert

QUESTION, CONTEXT = "where did the cat sleep", "the cat ran far away and then came back home to sleep on a mat"
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


def task_model(model_class, tokenizer, **config_changes):
    torch.manual_seed(0)
    config = tiny_bert(tokenizer.vocab_size, **config_changes)
    model = model_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():  # an untrained head gives near-uniform outputs: make them differ
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


def own_forward(model, encoding, head_mask=None, **extra):
    with torch.no_grad():
        return model(torch.tensor([encoding.input_ids]), token_type_ids=torch.tensor([encoding.segment_ids]),
                     attention_mask=torch.tensor([encoding.attention_mask]),
                     head_mask=None if head_mask is None else torch.from_numpy(head_mask), **extra)


@pytest.mark.slow
def test_sequence_classification_probabilities_and_label(tokenizer):
    model = task_model(BertForSequenceClassification, tokenizer, id2label=LABELS)
    result = inspect(model, tokenizer, QUESTION, CONTEXT)
    output = result.task_output
    assert isinstance(output, SequenceTaskOutput) and output.kind == "sequence"
    assert output.labels == ("negative", "neutral", "positive") and output.problem_type == "single_label_classification"
    logits = own_forward(model, result.encoding, output_attentions=True)
    np.testing.assert_allclose(output.probabilities, logits.logits[0].softmax(-1).numpy(), atol=1e-6)
    assert output.predicted_label == LABELS[int(logits.logits.argmax())] and output.chosen.sum() == 1
    np.testing.assert_allclose(result.attentions, torch.cat(logits.attentions).numpy(), atol=1e-6)
    assert result.predictions == [] and result.is_next_probability is None and not result.has_pretraining_heads


@pytest.mark.parametrize(("changes", "problem_type"), [
    ({"id2label": LABELS, "problem_type": "multi_label_classification"}, "multi_label_classification"),
    ({"num_labels": 1}, "regression"),
])
@pytest.mark.slow
def test_multi_label_and_regression_outputs(tokenizer, changes, problem_type):
    model = task_model(BertForSequenceClassification, tokenizer, **changes)
    output = inspect(model, tokenizer, QUESTION).task_output
    logits = own_forward(model, tokenizer.encode(QUESTION)).logits[0]
    assert output.problem_type == problem_type
    if problem_type == "regression":
        np.testing.assert_allclose(output.probabilities, logits.numpy(), atol=1e-6)
        assert output.predicted_label == f"{logits.item():.4g}"
    else:
        np.testing.assert_allclose(output.probabilities, logits.sigmoid().numpy(), atol=1e-6)
        assert list(output.chosen) == (logits.sigmoid() > 0.5).tolist()
        names = [name for name, on in zip(LABELS.values(), output.chosen, strict=True) if on]
        assert output.predicted_label == ", ".join(names)


def test_token_classification_per_position(tokenizer):
    model = task_model(BertForTokenClassification, tokenizer, id2label={0: "B-PER", 1: "I-PER", 2: "O"})
    result = inspect(model, tokenizer, "the cat sat on a mattress", "the dogs ran")  # words in ## pieces too
    output = result.task_output
    assert isinstance(output, TokenTaskOutput)
    logits = own_forward(model, result.encoding).logits[0]
    assert output.probabilities.shape == (len(result.encoding), 3)
    np.testing.assert_allclose(output.probabilities, logits.softmax(-1).numpy(), atol=1e-6)
    assert output.predicted_ids.tolist() == logits.argmax(-1).tolist()
    tokens = result.encoding.tokens
    specials = [token in ("[CLS]", "[SEP]") for token in tokens]
    assert output.scored.tolist() == [not s for s in specials]
    assert [label == "" for label in output.predicted_labels] == specials
    assert output.word_starts.tolist() == [not s and not t.startswith("##") for s, t in zip(specials, tokens,
                                                                                           strict=True)]
    assert any(t.startswith("##") for t in tokens)  # the case word_starts is for


def test_question_answering_span_in_the_context(tokenizer):
    model = task_model(BertForQuestionAnswering, tokenizer)
    result = inspect(model, tokenizer, QUESTION, CONTEXT)
    output = result.task_output
    assert isinstance(output, QuestionAnsweringTaskOutput)
    forward = own_forward(model, result.encoding)
    start, end = forward.start_logits[0], forward.end_logits[0]
    np.testing.assert_allclose(output.start_probabilities, start.softmax(-1).numpy(), atol=1e-6)
    np.testing.assert_allclose(output.end_probabilities, end.softmax(-1).numpy(), atol=1e-6)
    context = [sequence == 1 for sequence in result.encoding.sequence_ids]
    assert output.context.tolist() == context
    best = best_spans(start.numpy(), end.numpy(), context, context)[0]
    assert output.span == (best.start, best.end) and context[best.start] and context[best.end]
    assert output.span_score == pytest.approx(float(start[best.start] + end[best.end]), abs=1e-5)
    offsets = result.encoding.offsets
    assert output.answer == CONTEXT[offsets[best.start][0] : offsets[best.end][1]] and output.answer
    assert output.null_score == pytest.approx(float(start[0] + end[0]), abs=1e-5)
    without_text = inspect_encoding(model, tokenizer, result.encoding).task_output
    assert without_text.span == output.span and without_text.answer == tokenizer.decode(
        result.encoding.input_ids[best.start : best.end + 1])
    assert inspect(model, tokenizer, QUESTION).task_output.span is None  # no sentence B: nowhere to answer


def test_head_mask_reaches_the_task_output(tokenizer):
    model = task_model(BertForSequenceClassification, tokenizer, id2label=LABELS)
    head_mask = np.ones((3, 5), np.float32)
    head_mask[0, :4] = 0
    result = inspect(model, tokenizer, QUESTION, CONTEXT, head_mask=head_mask)
    ablated = own_forward(model, result.encoding, head_mask=head_mask).logits[0]
    np.testing.assert_allclose(result.task_output.logits, ablated.numpy(), atol=1e-5)
    assert not np.allclose(result.task_output.logits, inspect(model, tokenizer, QUESTION, CONTEXT).task_output.logits)


def test_a_pretraining_model_has_no_task_output(tokenizer):
    model = BertForPreTraining(tiny_bert(tokenizer.vocab_size, num_hidden_layers=1))
    result = inspect(model, tokenizer, QUESTION, CONTEXT)
    assert result.task_output is None and result.is_next_probability is not None
