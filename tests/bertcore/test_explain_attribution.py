"""Token attributions: integrated gradients complete (the scores sum to f(x) − f(baseline)) and equal an
independent IG (Captum's LayerIntegratedGradients on transformers' BERT with the same weights); gradient × input,
the gradient norm and gradient-weighted attention rollout equal hand computations on transformers' model; every
head kind can be explained; long work reports progress and can be stopped."""

import numpy as np
import pytest
import torch

from bertcore.errors import ExplainError
from bertcore.explain.attribution import ATTRIBUTION_METHODS, attribute, attribute_progress, gauss_legendre
from bertcore.models.bert import BertForMaskedLM
from bertcore.models.task_heads import BertForSequenceClassification
from tests.bertcore.test_explain_targets import CASES, FAMILY_TASK_CASES, build, example_target
from tests.tiny_configs import tiny_bert


def wide_bert(vocab_size: int, model_class=BertForMaskedLM, **overrides):
    """The tiny BERT with weights 17 times the usual spread, so that attention is far from uniform and every
    position gets a share of the attribution (at 0.02 the target's own position takes nearly all of it)."""
    torch.manual_seed(1)
    return model_class(tiny_bert(vocab_size, initializer_range=0.35, **overrides)).eval()


@pytest.fixture(scope="module")
def encoding(small_vocab_tokenizer):
    return small_vocab_tokenizer.encode("the cat sat on a mat", "the dog ran", pad_to=16)  # 14 tokens, 2 pads


def transformers_twin(transformers, model, class_name="BertForMaskedLM"):
    """transformers' model of the same class with the same weights, eager attention (probabilities returned)."""
    config = transformers.BertConfig(**model.config.to_dict(), attn_implementation="eager")
    twin = getattr(transformers, class_name)(config).eval()
    twin.load_state_dict(model.state_dict(), strict=False)
    return twin


def tensors(encoding):
    return (torch.tensor([encoding.input_ids]), torch.tensor([encoding.segment_ids]),
            torch.tensor([encoding.attention_mask]))


def test_gauss_legendre_integrates_polynomials_exactly():
    nodes, weights = gauss_legendre(3, 0.25, 1.0)
    assert np.all((nodes > 0.25) & (nodes < 1.0))
    assert np.dot(weights, nodes**5) == pytest.approx((1.0 - 0.25**6) / 6, rel=1e-12)


@pytest.mark.slow  # importing Captum brings matplotlib: seconds
def test_integrated_gradients_equal_captum_on_transformers(transformers, small_vocab_tokenizer, encoding):
    captum_attr = pytest.importorskip("captum.attr")
    model = wide_bert(small_vocab_tokenizer.vocab_size)
    twin = transformers_twin(transformers, model)
    position, token_id = 3, small_vocab_tokenizer.token_to_id("cat")
    ours = attribute(model, small_vocab_tokenizer, encoding, ("mlm", position, token_id), steps=24)

    input_ids, segment_ids, attention_mask = tensors(encoding)
    pad = small_vocab_tokenizer.pad_token_id
    baseline_ids = torch.where(torch.tensor([encoding.special_tokens_mask]).bool(), input_ids, pad)

    def logit(ids, segments, mask):
        return twin(ids, token_type_ids=segments, attention_mask=mask).logits[:, position, token_id]

    integrated = captum_attr.LayerIntegratedGradients(logit, twin.bert.embeddings)
    theirs, delta = integrated.attribute(input_ids, baselines=baseline_ids,
                                         additional_forward_args=(segment_ids, attention_mask), n_steps=24,
                                         method="gausslegendre", return_convergence_delta=True)
    expected = theirs.sum(dim=-1)[0].double().numpy()
    words = np.flatnonzero(np.array(encoding.special_tokens_mask) == 0)  # the specials are the baseline's own
    assert np.abs(expected[words]).min() > 1e-3  # every word takes part, none by a rounding error
    np.testing.assert_allclose(ours.scores, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    assert ours.delta == pytest.approx(float(delta), abs=1e-4 * abs(ours.target_value - ours.baseline_value))
    with torch.no_grad():
        assert ours.target_value == pytest.approx(float(logit(input_ids, segment_ids, attention_mask)), abs=1e-5)
        assert ours.baseline_value == pytest.approx(float(logit(baseline_ids, segment_ids, attention_mask)),
                                                    abs=1e-5)
    assert ours.scores[14:].tolist() == [0.0, 0.0]  # padding


def test_integrated_gradients_are_complete_at_enough_steps(small_vocab_tokenizer, encoding):
    model = wide_bert(small_vocab_tokenizer.vocab_size)
    result = attribute(model, small_vocab_tokenizer, encoding, ("mlm", 5, 9), steps=64)
    change = result.target_value - result.baseline_value
    assert abs(change) > 0.1
    assert abs(result.delta) <= 1e-4 * abs(change)
    assert result.delta == pytest.approx(float(result.scores.astype(np.float64).sum()) - change, abs=1e-5)
    assert result.steps == 65  # 64 forward-and-backward passes, 2 forward passes (f(x), f(baseline))


def test_a_tolerance_stops_once_the_scores_are_complete_enough(small_vocab_tokenizer, encoding):
    model = wide_bert(small_vocab_tokenizer.vocab_size)
    fixed = attribute(model, small_vocab_tokenizer, encoding, ("mlm", 5, 9), steps=48)
    records = list(attribute_progress(model, small_vocab_tokenizer, encoding, ("mlm", 5, 9), steps=128,
                                      tolerance=0.001))
    refined = records[-1].result
    change = refined.target_value - refined.baseline_value
    assert abs(refined.delta) <= 0.001 * abs(change) < abs(records[0].result.delta)
    assert len(records) > 2 and refined.steps < 128  # refined more than once, and stopped when good enough
    np.testing.assert_allclose(refined.scores, fixed.scores, atol=0.01 * np.abs(fixed.scores).max())
    assert [record.done for record in records] == sorted(record.done for record in records)


@pytest.mark.slow
def test_gradient_x_input_and_gradient_norm_equal_a_hand_computation(transformers, small_vocab_tokenizer, encoding):
    model = wide_bert(small_vocab_tokenizer.vocab_size, BertForSequenceClassification, num_labels=3)
    twin = transformers_twin(transformers, model, "BertForSequenceClassification")
    input_ids, segment_ids, attention_mask = tensors(encoding)
    caught = []
    handle = twin.bert.embeddings.register_forward_hook(lambda module, args, output: caught.append(output))
    logit = twin(input_ids, token_type_ids=segment_ids, attention_mask=attention_mask).logits[0, 2]
    handle.remove()
    (gradient,) = torch.autograd.grad(logit, caught[0])
    products = (gradient * caught[0])[0].detach()  # (T, hidden)
    by_hand = products.sum(dim=-1).numpy()
    # A score is a sum over the hidden size whose terms cancel, so two fp32 implementations agree to a share of
    # the terms' magnitude, not of the sum: on PyTorch 2.11 one score, -0.644, differed by 2.2e-4 (3e-4 of it)
    # while its terms' magnitudes add to 21. A missing or wrong term would be off by a term's size.
    terms = products.abs().sum(dim=-1).numpy()

    times_input = attribute(model, small_vocab_tokenizer, encoding, ("class", 2), method="gradient_x_input")
    np.testing.assert_array_less(np.abs(times_input.scores - by_hand), 1e-4 * terms + 1e-6)
    assert times_input.target_value == pytest.approx(float(logit.detach()), abs=1e-5)
    assert times_input.delta is None and times_input.baseline_value is None and times_input.steps == 1
    norm = attribute(model, small_vocab_tokenizer, encoding, ("class", 2), method="gradient_norm")
    np.testing.assert_allclose(norm.scores, gradient.norm(dim=-1)[0].numpy(), rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_grad_attention_rollout_equals_chefer_by_hand(transformers, small_vocab_tokenizer, encoding):
    model = wide_bert(small_vocab_tokenizer.vocab_size)
    twin = transformers_twin(transformers, model)
    input_ids, segment_ids, attention_mask = tensors(encoding)
    position, token_id = 6, 11
    outputs = twin(input_ids, token_type_ids=segment_ids, attention_mask=attention_mask, output_attentions=True)
    logit = outputs.logits[0, position, token_id]
    gradients = torch.autograd.grad(logit, outputs.attentions)
    rollout = np.eye(16)
    for attention, gradient in zip(outputs.attentions, gradients, strict=True):
        heads = (attention * gradient)[0].detach().numpy()  # (nh, T, T)
        rollout = rollout + np.maximum(heads, 0).mean(axis=0) @ rollout
    expected = (rollout - np.eye(16))[position]

    result = attribute(model, small_vocab_tokenizer, encoding, ("mlm", position, token_id),
                       method="grad_attention_rollout")
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(result.scores, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("name", list(CASES))
def test_every_method_on_every_head_kind(name, small_vocab_tokenizer, encoding):
    model = build(name, small_vocab_tokenizer.vocab_size)
    was_training = model.train().training
    for kind in CASES[name]:
        for method in ATTRIBUTION_METHODS:
            result = attribute(model, small_vocab_tokenizer, encoding, example_target(kind), method=method, steps=8)
            assert result.scores.shape == (16,) and result.scores.dtype == np.float32
            assert np.isfinite(result.scores).all() and result.method == method
            if method == "integrated_gradients":
                assert abs(result.delta) <= 1e-3 * max(abs(result.target_value - result.baseline_value), 1e-3)
    assert model.training == was_training  # eval mode for the explanation, then as it was


@pytest.mark.parametrize("name", list(FAMILY_TASK_CASES))
def test_every_familys_task_heads_are_explained(name, small_vocab_tokenizer, encoding):
    model = build(name, small_vocab_tokenizer.vocab_size)
    for kind in FAMILY_TASK_CASES[name]:
        integrated = attribute(model, small_vocab_tokenizer, encoding, example_target(kind), steps=8)
        assert abs(integrated.delta) <= 1e-3 * max(abs(integrated.target_value - integrated.baseline_value), 1e-3)
        rollout = attribute(model, small_vocab_tokenizer, encoding, example_target(kind),
                            method="grad_attention_rollout")
        assert rollout.scores.shape == (16,) and np.isfinite(rollout.scores).all()


def test_progress_can_be_stopped_midway(small_vocab_tokenizer, encoding, monkeypatch):
    import bertcore.explain.attribution as attribution

    monkeypatch.setattr(attribution, "_TOKENS_PER_BATCH", 16 * 8)  # 8 steps at a time
    model = wide_bert(small_vocab_tokenizer.vocab_size).train()
    progress = attribute_progress(model, small_vocab_tokenizer, encoding, ("mlm", 2, 4), steps=32)
    first = next(progress)
    assert (first.done, first.total) == (8, 32)
    assert model.training  # between records: the mode it had
    with torch.no_grad():
        second = next(progress)  # the work takes its gradients whatever the caller's grad mode ...
        assert not torch.is_grad_enabled()  # ... and hands the caller's back
    assert second.done == 16 and model.training
    progress.close()
    assert model.training  # the mode it had


@pytest.mark.parametrize(("arguments", "message"), [
    (dict(method="lime"), r"attribution method 'lime' is unknown; the methods are integrated_gradients"),
    (dict(steps=0), r"steps is 0"),
    (dict(tolerance=2.0), r"tolerance is 2.0"),
    (dict(target=("nsp", 0)), r"BertForMaskedLM has no head for a 'nsp' target"),
])
def test_bad_requests_are_refused_by_name(arguments, message, small_vocab_tokenizer, encoding):
    model = wide_bert(small_vocab_tokenizer.vocab_size)
    target = arguments.pop("target", ("mlm", 1, 1))
    with pytest.raises(ExplainError, match=message):
        attribute(model, small_vocab_tokenizer, encoding, target, **arguments)
