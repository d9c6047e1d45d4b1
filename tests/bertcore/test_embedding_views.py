"""Embedding views: position similarity, segments, token neighbours and hidden-state projections."""

import math

import numpy as np
import pytest
import torch

from bertcore.analysis.embedding_views import (
    TOKEN_KINDS,
    nearest_neighbours,
    pca_2d,
    position_similarity,
    project_hidden_states,
    sample_hidden_states,
    sample_sentences,
    segment_comparison,
)
from bertcore.analysis.inspection import inspect
from bertcore.data.corpus import read_corpus
from bertcore.files.resources import default_checkpoint_dir, default_corpus_path
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import load_pretrained
from tests.tiny_configs import tiny_bert


@pytest.fixture(scope="module")
def tiny(small_vocab_tokenizer):
    torch.manual_seed(0)
    config = tiny_bert(small_vocab_tokenizer.vocab_size, max_position_embeddings=24)
    return BertForPreTraining(config).eval(), small_vocab_tokenizer


def test_position_similarity_is_the_cosine_of_position_embeddings(tiny):
    model, _ = tiny
    similarity = position_similarity(model)
    assert similarity.shape == (24, 24) and similarity.dtype == np.float32
    weights = model.bert.embeddings.position_embeddings.weight.detach().numpy()
    expected = (weights @ weights.T) / np.outer(np.linalg.norm(weights, axis=1), np.linalg.norm(weights, axis=1))
    np.testing.assert_allclose(similarity, expected, atol=1e-6)
    np.testing.assert_allclose(np.diag(similarity), 1.0, atol=1e-6)
    np.testing.assert_allclose(position_similarity(model, 7), similarity[:7, :7], atol=1e-6)
    with pytest.raises(ValueError, match="the model has 24 position embeddings; ask for at most 24"):
        position_similarity(model, 25)
    with pytest.raises(ValueError, match="at least 1 position"):
        position_similarity(model, 0)


def test_segments_compared_with_a_typical_word(tiny):
    model, _ = tiny
    comparison = segment_comparison(model)
    segments = model.bert.embeddings.token_type_embeddings.weight.detach()
    words = model.bert.embeddings.word_embeddings.weight.detach()[1:]  # [PAD] (id 0) excluded
    assert comparison.norm_a == pytest.approx(segments[0].norm().item(), rel=1e-6)
    assert comparison.difference_norm == pytest.approx((segments[0] - segments[1]).norm().item(), rel=1e-6)
    assert comparison.cosine == pytest.approx(torch.cosine_similarity(segments[0], segments[1], dim=0).item(),
                                              abs=1e-6)
    assert comparison.typical_word_norm == pytest.approx(words.norm(dim=1).median().item(), rel=1e-6)
    assert comparison.relative_difference == pytest.approx(comparison.difference_norm / comparison.typical_word_norm)
    one_segment = BertForPreTraining(model.config.replace(type_vocab_size=1))
    with pytest.raises(ValueError, match="has 1 segment embedding"):
        segment_comparison(one_segment)


def test_nearest_neighbours_by_cosine(tiny):
    model, tokenizer = tiny
    cat, sat, mat = (tokenizer.token_to_id(word) for word in ("cat", "sat", "mat"))
    weights = model.bert.embeddings.word_embeddings.weight
    original = weights.detach().clone()
    try:
        with torch.no_grad():
            weights[sat] = 3 * weights[cat]  # same direction: cosine 1
            weights[mat] = -weights[cat]  # opposite: last
            weights[tokenizer.sep_token_id] = weights[cat]
        neighbours = nearest_neighbours(model, tokenizer, "cat", k=3)
        assert neighbours.token == "cat" and neighbours.token_id == cat
        assert neighbours.tokens[0] == "sat" and neighbours.similarities[0] == pytest.approx(1.0, abs=1e-6)
        assert "cat" not in neighbours.tokens and "[SEP]" not in neighbours.tokens
        assert np.all(np.diff(neighbours.similarities) <= 0)
        with_specials = nearest_neighbours(model, tokenizer, cat, k=2, exclude_specials=False)
        assert set(with_specials.tokens) == {"sat", "[SEP]"}
        everything = nearest_neighbours(model, tokenizer, "cat", k=1000)
        assert len(everything.ids) == tokenizer.vocab_size - 6 and everything.tokens[-1] == "mat"
    finally:
        with torch.no_grad():
            weights.copy_(original)
    with pytest.raises(ValueError, match="'cats' is not one token of this vocabulary"):
        nearest_neighbours(model, tokenizer, "cats")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        nearest_neighbours(model, tokenizer, 10_000)


def test_pca_finds_the_axes_and_fixes_their_sign():
    generator = np.random.default_rng(0)
    rotation, _ = np.linalg.qr(generator.normal(size=(5, 5)))
    vectors = (generator.normal(size=(400, 5)) * [5.0, 2.0, 0.3, 0.2, 0.1]) @ rotation.T + 7.0
    points, ratio = pca_2d(vectors)
    assert points.shape == (400, 2) and points.dtype == np.float32
    centred = vectors - vectors.mean(0)
    _, singular_values, components = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(ratio, singular_values[:2] ** 2 / (singular_values**2).sum())
    assert ratio[0] > 0.8 and ratio[1] > 0.1
    np.testing.assert_allclose(np.abs(points), np.abs(centred @ components[:2].T), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(points, -pca_2d(-vectors)[0], atol=1e-4)  # the sign follows the data, not the SVD
    np.testing.assert_allclose(np.abs(points @ np.array([1.0, 0.0])).max(), np.abs(points[:, 0]).max())
    one_dimensional, one_ratio = pca_2d(np.arange(6.0)[:, None])
    assert np.all(one_dimensional[:, 1] == 0) and one_ratio.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="N >= 2"):
        pca_2d(np.ones((1, 3)))


SENTENCES = ["the cat sat on a mat", ("a dog ran far away", "and then came back home"), "to sleep", "the dog"]


@pytest.mark.slow
def test_sample_holds_each_layers_hidden_states_with_their_metadata(tiny):
    model, tokenizer = tiny
    sample = sample_hidden_states(model, tokenizer, SENTENCES, labels=["x", "y", "x", "z"], batch_size=2)
    lengths = [len(tokenizer.encode(*((s,) if isinstance(s, str) else s))) for s in SENTENCES]
    assert sample.num_points == sum(lengths) and sample.hidden_states.shape == (4, sum(lengths), 30)
    start = 0
    for index, sentence in enumerate(SENTENCES):
        text_a, text_b = (sentence, None) if isinstance(sentence, str) else sentence
        inspection = inspect(model, tokenizer, text_a, text_b)
        rows = slice(start, start + lengths[index])
        np.testing.assert_allclose(sample.hidden_states[:, rows], inspection.hidden_states, atol=1e-5)
        assert sample.tokens[rows].tolist() == inspection.encoding.tokens
        assert sample.segment[rows].tolist() == inspection.encoding.segment_ids
        assert sample.position[rows].tolist() == list(range(lengths[index]))
        assert set(sample.sentence_index[rows].tolist()) == {index}
        start += lengths[index]
    assert sample.texts[1] == "a dog ran far away [SEP] and then came back home"
    assert sample.labels[sample.sentence_index == 3].tolist() == ["z"] * lengths[3]
    assert set(sample.kind.tolist()) <= set(TOKEN_KINDS) and sample.kind[0] == "special" and sample.kind[1] == "word"
    projection = project_hidden_states(sample, layer=2)
    assert projection.points.shape == (sample.num_points, 2) and projection.layer == 2
    assert projection.describe(1) == "the (word, sentence A, position 1, label x)\nthe cat sat on a mat"
    with pytest.raises(ValueError, match=r"layers 0 \(embeddings\) to 3"):
        project_hidden_states(sample, layer=4)


def test_sample_stops_at_max_points_and_can_leave_specials_out(tiny):
    model, tokenizer = tiny
    sample = sample_hidden_states(model, tokenizer, SENTENCES * 10, max_points=11, include_special=False)
    assert sample.num_points == 11 and "special" not in sample.kind.tolist()
    assert sample.sentence_index.tolist() == [0] * 6 + [1] * 5  # the second input cut short
    assert sample.labels is None
    with pytest.raises(ValueError, match="2 labels for 4 sentences"):
        sample_hidden_states(model, tokenizer, SENTENCES, labels=[1, 2])
    with pytest.raises(ValueError, match="sentence 1 cannot be encoded"):
        sample_hidden_states(model, tokenizer, ["the cat", "   "])
    with pytest.raises(ValueError, match="needs 2 to"):
        sample_hidden_states(model, tokenizer, SENTENCES, max_points=1)


@pytest.mark.slow
def test_default_model_positions_and_projection():
    folder = default_checkpoint_dir()
    if not (folder / "config.json").is_file():
        pytest.skip(f"the default model is not in {folder}")
    model, tokenizer = load_pretrained(folder)
    similarity = position_similarity(model, 128)
    offsets = [np.mean(np.diag(similarity, k)) for k in (1, 64)]
    assert offsets[0] > offsets[1] + 0.2  # neighbouring positions look alike; far ones less so
    sentences = sample_sentences(read_corpus(default_corpus_path()), 200, seed=1)
    assert sentences == sample_sentences(read_corpus(default_corpus_path()), 200, seed=1)
    sample = sample_hidden_states(model, tokenizer, sentences, max_points=2000)
    assert sample.num_points == 2000 and sample.hidden_states.shape == (5, 2000, 128)
    for layer in range(5):
        projection = project_hidden_states(sample, layer)
        assert np.all(np.isfinite(projection.points)) and 0 < projection.explained_variance_ratio.sum() <= 1
    assert math.isfinite(segment_comparison(model).relative_difference)
