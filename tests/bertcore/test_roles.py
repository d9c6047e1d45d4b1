"""Head roles (Clark et al. 2019): hand-built attention patterns get their names; shares are a partition."""

import math

import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import inspect_encoding
from bertcore.analysis.roles import (
    BROAD,
    CATEGORIES,
    CONTENT,
    corpus_head_roles,
    head_roles,
    inspection_head_roles,
    is_punctuation,
    iter_corpus_head_roles,
    role_sample,
)
from bertcore.data.batches import PretrainingData
from bertcore.data.corpus import read_corpus
from bertcore.files.resources import default_checkpoint_dir, default_corpus_path
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import load_pretrained
from tests.tiny_configs import two_layer_bert

TOKENS = ["[CLS]", "the", "cat", "sat", ",", "on", "mat", "[SEP]", "[PAD]", "[PAD]"]
MASK = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
REAL = 8
COMMA = 4


def one_head(rows_to_keys: dict[int, int]) -> np.ndarray:
    """(1, 1, T, T) attention where query q puts everything on key rows_to_keys[q]; padded rows attend anywhere."""
    attention = np.zeros((1, 1, len(TOKENS), len(TOKENS)), np.float32)
    for query in range(len(TOKENS)):
        attention[0, 0, query, rows_to_keys.get(query, 0)] = 1.0
    attention[0, 0, REAL:] = 0.3  # garbage in padded query rows must not count
    return attention


def roles_of(rows_to_keys: dict[int, int]):
    return head_roles(one_head(rows_to_keys), TOKENS, MASK)


def test_pure_previous_token_head():
    roles = roles_of({q: max(q - 1, 0) for q in range(REAL)})
    assert roles.labels[0, 0] == "previous token"
    # Rows 0 and 1 land on [CLS] ([CLS] outranks "previous"); rows 2..7 on their previous token.
    assert roles.share("cls")[0, 0] == pytest.approx(2 / REAL)
    assert roles.share("previous")[0, 0] == pytest.approx(6 / REAL)
    assert roles.num_rows == REAL and roles.num_inputs == 1
    assert roles.entropy[0, 0] == pytest.approx(0.0, abs=1e-6)


def test_pure_sep_head_is_the_no_op():
    roles = roles_of(dict.fromkeys(range(REAL), 7))
    assert roles.labels[0, 0] == "[SEP]" and roles.share("sep")[0, 0] == pytest.approx(1.0)


def test_next_self_cls_and_punctuation_heads():
    assert roles_of({q: min(q + 1, 7) for q in range(REAL)}).labels[0, 0] == "next token"
    assert roles_of({q: q for q in range(REAL)}).labels[0, 0] == "self"
    assert roles_of(dict.fromkeys(range(REAL), 0)).labels[0, 0] == "[CLS]"
    punctuation = roles_of(dict.fromkeys(range(REAL), COMMA))
    # The comma is "self" for itself, "next" for the row before, "previous" for the row after: 5 of 8 rows left.
    assert punctuation.share("punctuation")[0, 0] == pytest.approx(5 / REAL)
    assert punctuation.labels[0, 0] == "punctuation"
    assert roles_of(dict.fromkeys(range(REAL), 2)).labels[0, 0] == CONTENT  # one word, picked for what it is


def test_without_a_positional_role_entropy_tells_broad_from_content():
    attention = np.zeros((1, 2, len(TOKENS), len(TOKENS)), np.float32)
    attention[0, 0, :, [2, 5]] = 0.5  # two content words: e^H = 2 keys of 8, below √8
    attention[0, 1, :, [1, 2, 3, 5, 6]] = 0.2  # five words: e^H = 5 keys, above √8
    roles = head_roles(attention, TOKENS, MASK)
    np.testing.assert_allclose(roles.normalized_entropy[0], [math.log(2) / math.log(8), math.log(5) / math.log(8)])
    assert roles.labels.tolist() == [[CONTENT, BROAD]]
    assert head_roles(attention, TOKENS, MASK, broad_entropy=0.3).labels.tolist() == [[BROAD, BROAD]]


def test_uniform_rows_have_entropy_log_n_and_are_broad():
    attention = np.zeros((1, 1, len(TOKENS), len(TOKENS)), np.float32)
    attention[..., :REAL] = 1.0 / REAL
    roles = head_roles(attention, TOKENS, MASK)
    assert roles.entropy[0, 0] == pytest.approx(math.log(REAL), rel=1e-6)
    assert roles.normalized_entropy[0, 0] == pytest.approx(1.0)
    assert roles.labels[0, 0] == BROAD
    assert roles.shares[0, 0].sum() == pytest.approx(1.0)
    assert roles.share("other")[0, 0] < 0.5


def test_shares_partition_real_keys_for_any_attention():
    generator = np.random.default_rng(0)
    scores = generator.normal(size=(3, 5, len(TOKENS), len(TOKENS))) * 3
    scores[..., REAL:] = -np.inf  # padding keys get no attention, as in the model
    attention = np.exp(scores - scores.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    roles = head_roles(attention.astype(np.float32), TOKENS, MASK)
    assert roles.shares.shape == (3, 5, len(CATEGORIES))
    assert np.all(roles.shares >= 0) and np.all(roles.shares <= 1)
    np.testing.assert_allclose(roles.shares.sum(-1), 1.0, rtol=1e-5)
    leaky = attention.copy()
    leaky[..., REAL:] += 0.1  # attention on padding is not counted: shares then sum to less than 1
    leaky /= leaky.sum(-1, keepdims=True)
    assert np.all(head_roles(leaky, TOKENS, MASK).shares.sum(-1) < 1)
    assert np.all(roles.entropy > 0) and np.all(roles.entropy <= math.log(REAL) + 1e-5)
    np.testing.assert_array_equal(roles.dominant, np.asarray(CATEGORIES)[roles.shares.argmax(-1)])


def test_threshold_decides_whether_the_largest_share_names_the_role():
    head = {q: max(q - 1, 0) for q in range(REAL)}  # previous-token share 0.75, every row on one key
    assert head_roles(one_head(head), TOKENS, MASK, threshold=0.8).labels[0, 0] == CONTENT
    assert head_roles(one_head(head), TOKENS, MASK, threshold=0.75).labels[0, 0] == "previous token"


def test_punctuation_follows_bert():
    assert all(is_punctuation(token) for token in (",", "...", "##.", "$", "`", "—", "«", "?!"))
    assert not any(is_punctuation(token) for token in ("a", "##s", "[CLS]", "", "##", "3", "a."))


def test_bad_inputs_say_what_to_fix():
    attention = one_head({})
    with pytest.raises(ValueError, match=r"\(layers, heads, tokens, tokens\)"):
        head_roles(attention[0], TOKENS)
    with pytest.raises(ValueError, match="9 tokens for attentions over 10 positions"):
        head_roles(attention, TOKENS[:-1])
    with pytest.raises(ValueError, match="no position as real"):
        head_roles(attention, TOKENS, [0] * len(TOKENS))
    with pytest.raises(ValueError, match=r"threshold is 0; it must be in \(0, 1\]"):
        head_roles(attention, TOKENS, threshold=0)
    with pytest.raises(ValueError, match=r"broad_entropy is 2; it must be in \[0, 1\]"):
        head_roles(attention, TOKENS, broad_entropy=2)
    with pytest.raises(ValueError, match="no category 'prev'"):
        head_roles(attention, TOKENS).share("prev")


# ---- from a model -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(small_vocab_tokenizer):
    torch.manual_seed(0)
    config = two_layer_bert(small_vocab_tokenizer.vocab_size, intermediate_size=29)
    return BertForPreTraining(config), small_vocab_tokenizer


PAIRS = [("the cat sat on a mat", "a dog ran far away"), ("then came back", "home to sleep , and the dog ran"),
         ("a mat", "the cat"), ("the dog ran far away and then came back home", "to sleep")]


@pytest.mark.slow
def test_corpus_roles_are_the_row_weighted_mean_of_single_inputs(tiny):
    model, tokenizer = tiny
    encodings = [tokenizer.encode(a, b, max_length=32, pad_to=28) for a, b in PAIRS]
    batches = [{name: torch.tensor([getattr(e, field) for e in group]) for name, field in
                (("input_ids", "input_ids"), ("token_type_ids", "segment_ids"), ("attention_mask", "attention_mask"))}
               for group in (encodings[:3], encodings[3:])]
    model.train()
    seen = list(iter_corpus_head_roles(model, tokenizer, batches))
    assert [(p.done, p.total) for p in seen] == [(1, 2), (2, 2)] and model.training
    model.eval()
    singles = [inspection_head_roles(inspect_encoding(model, tokenizer, encoding)) for encoding in encodings]
    rows = np.array([single.num_rows for single in singles], np.float64)
    assert rows.sum() == seen[-1].result.num_rows == sum(e.num_tokens for e in encodings)

    def row_weighted(values, weights):
        return sum(value * weight for value, weight in zip(values, weights, strict=True)) / weights.sum()

    final, first = seen[-1].result, seen[0].result
    np.testing.assert_allclose(final.shares, row_weighted([s.shares for s in singles], rows), atol=1e-6)
    np.testing.assert_allclose(final.entropy, row_weighted([s.entropy for s in singles], rows), atol=1e-5)
    np.testing.assert_allclose(first.shares, row_weighted([s.shares for s in singles[:3]], rows[:3]), atol=1e-6)
    assert final.num_inputs == 4 and first.num_inputs == 3


@pytest.mark.slow
def test_default_model_has_the_previous_token_head_of_its_screenshot():
    folder = default_checkpoint_dir()
    if not (folder / "config.json").is_file():
        pytest.skip(f"the default model is not in {folder}")
    model, tokenizer = load_pretrained(folder)
    data = PretrainingData(read_corpus(default_corpus_path()), tokenizer, seq_len=64, seed=0)
    sample = role_sample(data, 40, batch_size=16)
    assert [len(batch["input_ids"]) for batch in sample] == [16, 16, 8]
    assert all(not (batch["input_ids"] == tokenizer.mask_token_id).any() for batch in sample)  # unmasked text
    roles = corpus_head_roles(model, tokenizer, sample)
    assert roles.labels[0, 0] == "previous token"  # layer 1, head 1 in the README's screenshot
    assert roles.share("previous")[0, 0] > 0.5
    assert roles.num_inputs == 40
