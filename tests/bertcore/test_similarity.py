"""Representation similarity (bertcore.analysis.similarity): linear CKA against the paper's kernel formula written in
numpy (HSIC of the centred linear kernels), its invariances (orthogonal transforms, isotropic scale) and what it is
not invariant to; per layer between two models, equal to CKA of the word vectors the probes use, with two different
tokenizers and sentences only one of them takes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis.probes import word_representations
from bertcore.analysis.similarity import linear_cka, representation_similarity
from bertcore.analysis.treebank import shipped_treebank
from bertcore.errors import AnalysisError
from tests.bertcore.analysis_checkpoints import family_checkpoints

pytestmark = pytest.mark.usefixtures("one_thread")


def kernel_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al.'s eq. 3 with linear kernels, as written: HSIC(K, L) = tr(KHLH) / (n - 1)², normalised."""
    n = len(x)
    centring = np.eye(n) - np.ones((n, n)) / n
    k, m = x @ x.T, y @ y.T

    def hsic(a, b):
        return np.trace(a @ centring @ b @ centring) / (n - 1) ** 2

    return hsic(k, m) / np.sqrt(hsic(k, k) * hsic(m, m))


def random_orthogonal(size: int, rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(size, size)))
    return q * np.sign(np.diag(r))


def test_linear_cka_is_the_kernel_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(57, 13))
    y = x[:, :7] @ rng.normal(size=(7, 9)) + 0.8 * rng.normal(size=(57, 9))  # related, of another width
    assert linear_cka(x, y) == pytest.approx(kernel_cka(x, y), rel=1e-12)
    unrelated = rng.normal(size=(57, 5))
    assert linear_cka(x, unrelated) == pytest.approx(kernel_cka(x, unrelated), rel=1e-12)
    assert linear_cka(x, unrelated) < 0.5 < linear_cka(x, y) < 1
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-14)
    assert linear_cka(torch.from_numpy(x).float(), torch.from_numpy(y).float()) == pytest.approx(
        kernel_cka(x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)), rel=1e-9)


def test_linear_cka_ignores_rotations_and_scale_but_not_every_linear_map():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 12))
    y = np.tanh(x @ rng.normal(size=(12, 10))) + 0.3 * rng.normal(size=(80, 10))
    reference = linear_cka(x, y)
    assert linear_cka(x @ random_orthogonal(12, rng), y) == pytest.approx(reference, rel=1e-12)
    assert linear_cka(x, 37.5 * y @ random_orthogonal(10, rng)) == pytest.approx(reference, rel=1e-12)
    assert linear_cka(x + 5.0, y - 3.0) == pytest.approx(reference, rel=1e-12)  # centred: offsets do not count
    stretched = x * np.geomspace(1, 100, 12)  # invertible, not orthogonal: CKA is meant to see it
    assert abs(linear_cka(stretched, y) - reference) > 0.05


def test_linear_cka_refuses_what_it_cannot_compare():
    rng = np.random.default_rng(2)
    with pytest.raises(AnalysisError, match="x holds 5 examples and y 4"):
        linear_cka(rng.normal(size=(5, 3)), rng.normal(size=(4, 3)))
    with pytest.raises(AnalysisError, match="1 example; CKA needs at least 2"):
        linear_cka(np.ones((1, 3)), np.ones((1, 3)))
    with pytest.raises(AnalysisError, match=r"y has shape \(4,\)"):
        linear_cka(rng.normal(size=(4, 3)), np.ones(4))
    with pytest.raises(AnalysisError, match="x holds NaN"):
        linear_cka(np.full((4, 3), np.nan), rng.normal(size=(4, 3)))
    assert np.isnan(linear_cka(np.ones((6, 3)), rng.normal(size=(6, 2))))  # no variance: no similarity to speak of


@pytest.fixture(scope="module")
def default_model():
    return bertcore.load_pretrained(bertcore.files.resources.default_checkpoint_dir())


def perturbed(model, scale: float, seed: int):
    copy = type(model)(model.config)
    copy.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in copy.parameters():
            parameter.add_(scale * parameter.std().nan_to_num(0.0) * torch.randn(parameter.shape, generator=generator))
    return copy.eval()


@pytest.mark.slow
def test_per_layer_similarity_is_cka_of_the_probes_word_vectors(default_model):
    model, tokenizer = default_model
    other = perturbed(model, 0.5, seed=0)
    sentences = shipped_treebank("dev")[:20]
    similarity = representation_similarity(model, tokenizer, other, tokenizer, sentences)
    mine = word_representations(model, tokenizer, sentences).vectors.astype(np.float64)
    theirs = word_representations(other, tokenizer, sentences).vectors.astype(np.float64)
    expected = [kernel_cka(a, b) for a, b in zip(mine, theirs, strict=True)]
    np.testing.assert_allclose(similarity.cka, expected, rtol=1e-6)
    assert similarity.cka.shape == (model.config.num_hidden_layers + 1,)
    assert similarity.num_words == sum(len(sentence) for sentence in sentences) and similarity.skipped == ()
    assert 0.3 < similarity.cka.min() and similarity.cka.max() < 0.999  # changed, not unrelated
    itself = representation_similarity(model, tokenizer, model, tokenizer, [s.text for s in sentences[:5]])
    np.testing.assert_allclose(itself.cka, 1.0, atol=1e-12)
    words = representation_similarity(model, tokenizer, other, tokenizer, [list(s.words) for s in sentences])
    np.testing.assert_array_equal(words.cka, similarity.cka)
    assert bertcore.representation_similarity is representation_similarity and bertcore.linear_cka is linear_cka


def test_models_of_different_depths_or_no_sentences_are_refused(default_model):
    model, tokenizer = default_model
    shallow = bertcore.BertForPreTraining(model.config.replace(num_hidden_layers=2))
    with pytest.raises(AnalysisError, match=r"model A has 4 layers and model B 2; .* the same number of layers"):
        representation_similarity(model, tokenizer, shallow, tokenizer, ["the king is dead"])
    with pytest.raises(AnalysisError, match="no sentences were given"):
        representation_similarity(model, tokenizer, model, tokenizer, [])
    with pytest.raises(AnalysisError, match="not one string"):
        representation_similarity(model, tokenizer, model, tokenizer, "the king is dead")
    with pytest.raises(AnalysisError, match="sentence 1 is a int"):
        representation_similarity(model, tokenizer, model, tokenizer, ["the king", 3])
    with pytest.raises(AnalysisError, match="none of the 1 sentences fits both models"):
        representation_similarity(model, tokenizer, model, tokenizer, ["word " * 600])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers):
    return family_checkpoints(tmp_path_factory, transformers)


@pytest.mark.slow
def test_two_tokenizers_compare_on_the_sentences_both_take(checkpoints):
    roberta, roberta_tokenizer = checkpoints["roberta"].load()  # byte-level BPE, 130 positions
    distil, distil_tokenizer = checkpoints["distilbert"].load()  # WordPiece, 128 positions
    sentences = shipped_treebank("dev")[:45]  # RoBERTa's leaves out 4 of them, DistilBERT's none
    similarity = representation_similarity(roberta, roberta_tokenizer, distil, distil_tokenizer, sentences)
    left_out = set()
    for model, tokenizer in ((roberta, roberta_tokenizer), (distil, distil_tokenizer)):
        left_out |= set(word_representations(model, tokenizer, sentences).skipped.indices)
    assert left_out and similarity.skipped == tuple(sorted(left_out))  # each model's own, for both
    kept = [sentence for index, sentence in enumerate(sentences) if index not in left_out]
    mine = word_representations(roberta, roberta_tokenizer, kept).vectors.astype(np.float64)
    theirs = word_representations(distil, distil_tokenizer, kept).vectors.astype(np.float64)
    np.testing.assert_allclose(similarity.cka, [kernel_cka(a, b) for a, b in zip(mine, theirs, strict=True)],
                               rtol=1e-6)
    assert similarity.num_sentences == len(kept) and similarity.num_words == mine.shape[1]
