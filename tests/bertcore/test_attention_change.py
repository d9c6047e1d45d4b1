"""Head-by-head change between two checkpoints: the Jensen–Shannon numbers against an independent computation."""

import math

import numpy as np
import pytest
import torch

from bertcore.analysis.attention_change import attention_change, check_comparable, head_divergence, js_divergence
from bertcore.models.bert import BertForPreTraining
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.tiny_configs import tiny_bert


def entropy_bits(distribution) -> float:
    return -sum(x * math.log2(x) for x in distribution if x > 0)


def js_by_entropies(p, q) -> float:
    """JS(P, Q) = H(M) − ½ H(P) − ½ H(Q): another formula than the module's sum of two KL terms."""
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    return entropy_bits(m) - 0.5 * entropy_bits(p) - 0.5 * entropy_bits(q)


def model(tokenizer, seed, **changes) -> BertForPreTraining:
    config = tiny_bert(tokenizer.vocab_size, **changes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForPreTraining(config).eval()


def test_js_divergence_known_values_and_exact_zeros():
    same = np.array([0.2, 0.3, 0.5])
    assert js_divergence(same, same) == pytest.approx(0.0, abs=1e-15)
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)  # disjoint support: exactly one bit
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.25, 0.75])  # zeros on both sides, no epsilon needed
    assert js_divergence(p, q) == pytest.approx(js_by_entropies(p, q), abs=1e-12)
    assert js_divergence(p, q) == pytest.approx(js_divergence(q, p), abs=1e-15)
    assert np.isfinite(js_divergence(p, q))
    assert js_divergence(p, q, base=math.e) == pytest.approx(js_by_entropies(p, q) * math.log(2), abs=1e-12)


def test_head_divergence_leaves_padding_out_and_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    layers, heads, length = 2, 3, 6
    real = np.array([1, 1, 1, 1, 0, 0])

    def attention():
        logits = rng.normal(size=(layers, heads, length, length))
        logits[..., real == 0] = -np.inf  # padding keys get exactly 0, as BERT's mask gives them
        values = np.exp(logits - logits.max(-1, keepdims=True))
        return (values / values.sum(-1, keepdims=True)).astype(np.float32)

    a, b = attention(), attention()
    b[..., 4:, :] = rng.dirichlet(np.ones(length), size=(layers, heads, 2))  # padding rows: anything at all
    expected = np.zeros((layers, heads))
    for layer in range(layers):
        for head in range(heads):
            rows = [js_by_entropies(a[layer, head, query, :4].tolist(), b[layer, head, query, :4].tolist())
                    for query in range(4)]
            expected[layer, head] = sum(rows) / len(rows)
    np.testing.assert_allclose(head_divergence(a, b, real), expected, atol=1e-6)
    assert head_divergence(a, a, real) == pytest.approx(np.zeros((layers, heads)), abs=1e-12)


def test_attention_change_of_two_models_on_one_input(small_vocab_tokenizer):
    model_a, model_b = model(small_vocab_tokenizer, 0), model(small_vocab_tokenizer, 1)
    change = attention_change(model_a, small_vocab_tokenizer, model_b, small_vocab_tokenizer,
                              "the cat sat on a mat", "the dog ran far away")
    assert change.divergence.shape == (3, 5) and (change.divergence > 0).all() and (change.divergence <= 1).all()
    np.testing.assert_allclose(change.divergence, head_divergence(change.attentions_a, change.attentions_b))
    assert change.divergence[change.most_changed] == change.divergence.max()
    same = attention_change(model_a, small_vocab_tokenizer, model_a, small_vocab_tokenizer, "the cat sat")
    assert np.abs(same.divergence).max() < 1e-9


def test_checkpoints_of_other_shapes_or_vocabularies_are_refused(small_vocab_tokenizer):
    base = model(small_vocab_tokenizer, 0)
    shallower = model(small_vocab_tokenizer, 0, num_hidden_layers=2)
    with pytest.raises(ValueError, match=r"A is L3/H30/A5 and B is L2/H30/A5.*same shape"):
        check_comparable(base.config, small_vocab_tokenizer, shallower.config, small_vocab_tokenizer)
    other = BertTokenizer([*small_vocab_tokenizer.vocab[:-1], "zebra"])
    with pytest.raises(ValueError, match="different vocabularies"):
        check_comparable(base.config, small_vocab_tokenizer, base.config, other, names=("start", "final"))


@pytest.mark.slow
def test_byte_level_bpe_checkpoints_compare_and_a_long_input_fits_roberta(roberta_folder):
    """RoBERTa's tokenizer has no WordPiece `lowercase` (the comparison raised AttributeError), and its 514
    position rows take 512 tokens (encoding to 514 was refused)."""
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
    from bertcore.tokenization.pretrained import tokenizer_from_folder

    tokenizer = tokenizer_from_folder(roberta_folder)
    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=64, max_position_embeddings=514,
                                             type_vocab_size=1, pad_token_id=tokenizer.pad_token_id)).eval()
    change = attention_change(model, tokenizer, model, tokenizer, "the cat sat " * 300)
    assert len(change.encoding) == 512 and np.abs(change.divergence).max() < 1e-9


def test_a_cased_and_an_uncased_tokenizer_of_one_vocabulary_are_refused(small_vocab_tokenizer):
    base = model(small_vocab_tokenizer, 0)
    cased = BertTokenizer(small_vocab_tokenizer.vocab, lowercase=False)
    with pytest.raises(ValueError, match="share a vocabulary but split text differently"):
        check_comparable(base.config, small_vocab_tokenizer, base.config, cased)
