"""bertcore's dropout: torch's Bernoulli(1 - p) keep mask drawn more cheaply on the CPU (16 random bits per value)."""

import math

import pytest
import torch
import torch.nn.functional as F

from bertcore.models.bert import BertForPreTraining, BertSelfAttention
from bertcore.models.config import preset
from bertcore.models.parts import Dropout, TokenRows, dropout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keeps_each_value_with_probability_one_minus_p_and_scales_it(p, dtype):
    torch.manual_seed(0)
    x = torch.rand(1_000_000, dtype=torch.float32).add_(0.5).to(dtype)  # no zeros of its own
    y = dropout(x, p, training=True)
    kept = y != 0
    n = x.numel()
    # 5 standard deviations of a binomial: a bf16 uniform (8 bits) would keep 1 - 26/256 at p = 0.1, 15 sd away
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(y[kept], x[kept] * torch.tensor(1 / (1 - p), dtype=torch.float32).to(dtype))


def test_every_value_of_a_draw_has_its_own_uniform_bits_whatever_the_shape():
    """Four values share each 64-bit draw: at p = 0.5 each of the four keeps half (a 63-bit draw, whose top bit is
    always 0, would keep every fourth value), and a size that is not a multiple of four is covered."""
    torch.manual_seed(2)
    x = torch.ones(250_001)
    kept = (dropout(x, 0.5, training=True) != 0).float()
    assert kept.shape == x.shape
    for lane in range(4):
        share = kept[lane::4]
        assert abs(share.mean().item() - 0.5) < 5 * math.sqrt(0.25 / share.numel())
    grid = dropout(torch.ones(3, 5, 7), 0.2, training=True)
    assert grid.shape == (3, 5, 7) and set(grid.unique().tolist()) <= {0.0, 1.25}


def test_gradient_is_the_same_mask_and_scale():
    torch.manual_seed(1)
    x = torch.randn(4096, requires_grad=True)
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / 0.75)


def test_evaluation_and_p_zero_return_the_input_itself_and_p_one_zeros():
    x = torch.randn(8, 4)
    assert dropout(x, 0.3, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    module = Dropout(0.3).eval()
    assert module(x) is x and isinstance(module, torch.nn.Dropout)  # an nn.Dropout: no parameters, HF's tree


def test_draws_from_torchs_generator_so_a_seed_replays_it():
    x = torch.randn(1000)
    torch.manual_seed(7)
    first = dropout(x, 0.1, training=True)
    torch.manual_seed(7)
    assert torch.equal(dropout(x, 0.1, training=True), first)


def test_training_attention_on_the_cpu_drops_probabilities_with_this_mask():
    """In CPU training with dropout the attention runs its explicit path, through the module's Dropout: replaying
    the same draws by hand gives the same context, to float rounding."""
    config = preset("tiny", attention_probs_dropout_prob=0.3)
    attention = BertSelfAttention(config).train()
    hidden = torch.randn(2, 6, config.hidden_size)
    rows = TokenRows(2, 6)
    torch.manual_seed(3)
    context, probs = attention(hidden.view(12, -1), rows, None, None, output_attentions=False)
    assert probs is None  # not asked for, not returned
    torch.manual_seed(3)
    q, k, v = (attention.split_heads(layer(hidden)) for layer in (attention.query, attention.key, attention.value))
    weights = (q @ k.transpose(-2, -1) / math.sqrt(attention.head_dim)).softmax(-1)
    expected = (dropout(weights, 0.3, training=True) @ v).transpose(1, 2).flatten(2).reshape(12, -1)
    torch.testing.assert_close(context, expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(context, F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(12, -1))


def test_a_model_in_evaluation_is_deterministic_and_in_training_is_not():
    torch.manual_seed(0)
    model = BertForPreTraining(preset("tiny"))
    ids = torch.randint(5, 100, (2, 10))
    model.eval()
    assert torch.equal(model(ids).prediction_logits, model(ids).prediction_logits)
    model.train()
    assert not torch.equal(model(ids).prediction_logits, model(ids).prediction_logits)
