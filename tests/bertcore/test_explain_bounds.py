"""The Explain API's bounds (issue 34): a number of steps that would need gigabytes is refused with the allowed
range before anything is allocated, and a model whose output is NaN (NaN weights, or an overflow) is an
ExplainError saying why, not a map of NaN scores."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from bertcore.errors import ExplainError
from bertcore.explain.attribution import ATTRIBUTION_METHODS, MAX_STEPS, attribute
from bertcore.explain.faithfulness import faithfulness
from bertcore.explain.mixing import MIXING_METHODS, context_mixing
from bertcore.explain.patching import activation_patching
from bertcore.models.bert import BertForMaskedLM
from tests.tiny_configs import tiny_bert

NAN_WEIGHT = "bert.encoder.layer.1.attention.self.query.weight"


@pytest.fixture(scope="module")
def encoding(small_vocab_tokenizer):
    return small_vocab_tokenizer.encode("the cat sat on a mat", "the dog ran")


@pytest.fixture
def model(small_vocab_tokenizer):
    torch.manual_seed(0)
    return BertForMaskedLM(tiny_bert(small_vocab_tokenizer.vocab_size)).eval()


def target(tokenizer):
    return ("mlm", 3, tokenizer.token_to_id("cat"))


@pytest.mark.slow
@pytest.mark.parametrize("steps", [20_000, 10**7])
def test_too_many_steps_are_refused_with_the_range_in_bounded_memory(steps):
    """20,000 steps took 3.5 GB (Gauss–Legendre's nodes from a 20,000² eigenproblem), 10^7 asked for 728 TiB.
    In a child process under a 2 GB address-space limit, so that the old behaviour fails the test, not the run."""
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        import torch
        from bertcore.errors import ExplainError
        from bertcore.explain.attribution import attribute
        from bertcore.models.bert import BertForMaskedLM
        from bertcore.tokenization.wordpiece import BertTokenizer
        from tests.tiny_configs import tiny_bert
        tokenizer = BertTokenizer.train(["the cat sat on a mat the dog ran"] * 20, vocab_size=60, min_frequency=1)
        model = BertForMaskedLM(tiny_bert(tokenizer.vocab_size)).eval()
        encoding = tokenizer.encode("the cat sat on a mat")
        try:
            attribute(model, tokenizer, encoding, ("mlm", 3, tokenizer.token_to_id("cat")), steps={steps})
        except ExplainError as error:
            print("refused:", error)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"refused: steps is {steps}; give a whole number from 1 to 2,048"), done.stdout


@pytest.mark.slow
def test_the_largest_number_of_steps_is_taken(model, small_vocab_tokenizer, encoding):
    """With a tolerance, steps is a budget: the bound itself is accepted and only what is needed is spent."""
    result = attribute(model, small_vocab_tokenizer, encoding, target(small_vocab_tokenizer), steps=MAX_STEPS,
                       tolerance=0.01)
    assert result.steps < 100 and abs(result.delta) <= 0.01 * abs(result.target_value - result.baseline_value)
    with pytest.raises(ExplainError, match=r"steps is 2049; give a whole number from 1 to 2,048"):
        attribute(model, small_vocab_tokenizer, encoding, target(small_vocab_tokenizer), steps=MAX_STEPS + 1)


def with_nan(model):
    with torch.no_grad():
        model.get_parameter(NAN_WEIGHT)[2, 3] = float("nan")
    return model


NAMED = (rf"the model's weights hold 1 NaN or infinite value\(s\), the first in {NAN_WEIGHT}, so every score made "
         r"from them would be NaN or meaningless; load a checkpoint whose weights are finite")


@pytest.mark.parametrize("method", ATTRIBUTION_METHODS)
def test_nan_weights_are_named_not_nan_scores(method, model, small_vocab_tokenizer, encoding):
    """The NaN spreads through the gradients; the fused attention kernel even keeps the forward finite, so the
    scores would have been NaN or finite and meaningless."""
    with pytest.raises(ExplainError, match=NAMED):
        attribute(with_nan(model), small_vocab_tokenizer, encoding, target(small_vocab_tokenizer), method=method,
                  steps=8)


@pytest.mark.parametrize("method", MIXING_METHODS)
def test_nan_weights_are_named_in_context_mixing(method, model, small_vocab_tokenizer, encoding):
    with pytest.raises(ExplainError, match=NAMED):
        context_mixing(with_nan(model), small_vocab_tokenizer, encoding, method)


def test_nan_weights_are_named_in_activation_patching_and_faithfulness(model, small_vocab_tokenizer, encoding):
    corrupted = dataclasses.replace(encoding, input_ids=[*encoding.input_ids[:3], small_vocab_tokenizer.token_to_id(
        "dog"), *encoding.input_ids[4:]])
    with pytest.raises(ExplainError, match=NAMED):
        activation_patching(with_nan(model), small_vocab_tokenizer, encoding, corrupted,
                            target(small_vocab_tokenizer))
    with pytest.raises(ExplainError, match=NAMED):
        faithfulness(model, small_vocab_tokenizer, encoding, target(small_vocab_tokenizer), [0.0] * len(encoding))


def test_an_overflow_of_finite_weights_is_named_as_one(model, small_vocab_tokenizer, encoding):
    with torch.no_grad():
        model.cls.predictions.transform.LayerNorm.weight.fill_(3e38)
        model.cls.predictions.transform.LayerNorm.bias.fill_(3e38)
    with pytest.raises(ExplainError, match=r"the target's logit is (nan|-?inf) on this input although every weight "
                                           r"of the model is finite: the computation overflowed"):
        attribute(model, small_vocab_tokenizer, encoding, target(small_vocab_tokenizer), method="gradient_norm")
