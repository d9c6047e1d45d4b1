"""Layer probes (bertcore.analysis.probes): the linear probe against scikit-learn's RidgeClassifier on the same
standardised features (its ridge strength chosen the same way), the control task's labels by their definition,
the structural probe's tree distances, spanning trees and Spearman against scipy, a structural probe that recovers
trees written into its features, determinism for a seed, and on MiniLM the probe beating its control task by far
more than it does on a random model of the same shape."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis import probes
from bertcore.analysis.probes import (
    RIDGE_GRID,
    WordRepresentations,
    fit_layer_probes,
    fit_structural_probes,
    probe_layers,
    structural_probe,
    tree_distances,
)
from bertcore.analysis.treebank import shipped_treebank
from bertcore.analysis.word_inputs import SkippedSentences
from bertcore.errors import AnalysisError

pytestmark = pytest.mark.usefixtures("one_thread")


def synthetic(sentences, width: int, seed: int) -> WordRepresentations:
    """Two layers of word vectors: noise, then noise plus a direction per UPOS tag (a probe can read the tag)."""
    rng = np.random.default_rng(seed)
    tags = sorted({tag for sentence in shipped_treebank("dev") for tag in sentence.upos})
    directions = np.random.default_rng(99).normal(size=(len(tags), width))
    upos = [tags.index(tag) for sentence in sentences for tag in sentence.upos]
    noise = rng.normal(size=(2, len(upos), width))
    noise[1] += 1.5 * directions[upos]
    noise[1, :, 0] *= 1000.0  # dimensions on other scales: standardising must take them back, or the ridge
    noise[1, :, 1:9] *= 0.001  # penalty would fall on the small ones alone
    return WordRepresentations(noise.astype(np.float32), tuple(sentences), SkippedSentences())


def sklearn_probe_accuracy(train: WordRepresentations, test: WordRepresentations, layer: int, train_y, test_y):
    """The probe rebuilt from scikit-learn: standardise with the training words' statistics, pick the ridge strength
    on the last fifth of the training sentences (ties to the larger), refit on all, score the test words."""
    linear_model = pytest.importorskip("sklearn.linear_model")
    x = train.vectors[layer].astype(np.float64)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    standardise = lambda values: (values.astype(np.float64) - mean) / scale  # noqa: E731
    x = standardise(x)
    sentences = len(train.sentences)
    start = int(train.sentence_starts[sentences - round(sentences * 0.2)])
    best, best_accuracy = None, -1.0
    for strength in RIDGE_GRID:
        fitted = linear_model.RidgeClassifier(alpha=strength * start).fit(x[:start], train_y[:start])
        accuracy = (fitted.predict(x[start:]) == train_y[start:]).mean()
        if accuracy >= best_accuracy:
            best, best_accuracy = strength, accuracy
    fitted = linear_model.RidgeClassifier(alpha=best * len(x)).fit(x, train_y)
    return best, (fitted.predict(standardise(test.vectors[layer])) == test_y).mean()


@pytest.mark.slow  # importing scikit-learn
def test_the_linear_probe_is_scikit_learns_ridge_classifier_with_its_strength_chosen_on_held_out_sentences():
    sentences = shipped_treebank("dev")
    train, test = synthetic(sentences[:80], 16, 0), synthetic(sentences[80:120], 16, 1)
    result = fit_layer_probes(train, test, task="upos", seed=0)
    labels = {name: index for index, name in enumerate(result.labels)}
    train_y = np.array([labels[tag] for sentence in train.sentences for tag in sentence.upos])
    test_y = np.array([labels.get(tag, -1) for sentence in test.sentences for tag in sentence.upos])
    for layer in range(2):
        strength, accuracy = sklearn_probe_accuracy(train, test, layer, train_y, test_y)
        assert result.ridge[layer] == strength
        assert result.accuracy[layer] == pytest.approx(accuracy, abs=1e-12)
    assert result.accuracy[1] > 0.9 > 0.4 > result.accuracy[0]  # the tags are written into layer 1 only
    counts = Counter(train_y.tolist())
    assert result.labels[0] == max(result.labels, key=lambda name: counts[labels[name]])
    assert result.majority_baseline == pytest.approx((test_y == 0).mean())
    assert (result.num_train_words, result.num_test_words) == (len(train_y), len(test_y))
    np.testing.assert_array_equal(result.selectivity, result.accuracy - result.control_accuracy)


def test_the_control_task_gives_each_word_type_one_label_drawn_from_the_training_distribution():
    sentences = shipped_treebank("dev")
    train, test = sentences[:400], sentences[400:500]
    labels = ("NOUN", "PUNCT", "VERB")
    counts = Counter({"NOUN": 6, "PUNCT": 3, "VERB": 1})
    control_train, control_test = probes._control_labels(train, test, labels, counts, seed=3)
    words = [word for sentence in (*train, *test) for word in sentence.words]
    drawn = np.concatenate([control_train, control_test])
    by_type = {}
    for word, label in zip(words, drawn, strict=True):
        assert by_type.setdefault(word, label) == label  # one label per type, wherever it occurs
    shares = np.bincount(list(by_type.values()), minlength=3) / len(by_type)
    np.testing.assert_allclose(shares, [0.6, 0.3, 0.1], atol=0.04)  # drawn per type from the label distribution
    again = probes._control_labels(train, test, labels, counts, seed=3)
    other = probes._control_labels(train, test, labels, counts, seed=4)
    assert np.array_equal(again[0], control_train) and not np.array_equal(other[0], control_train)


def test_the_same_seed_gives_the_same_probes_and_tasks_are_checked():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=12,
                                                                num_hidden_layers=2, num_attention_heads=2,
                                                                intermediate_size=16, max_position_embeddings=128))
    sentences = shipped_treebank("dev")
    first = probe_layers(model, tokenizer, sentences[:40], sentences[40:60], task="deprel", seed=5)
    second = probe_layers(model, tokenizer, sentences[:40], sentences[40:60], task="deprel", seed=5)
    for name in ("accuracy", "control_accuracy", "ridge", "control_ridge"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert first.accuracy.shape == (3,) and "root" in first.labels and "nmod:poss" in first.labels
    assert probe_layers(model, tokenizer, sentences[:40], sentences[40:60], task="xpos").labels[0] in ("NN", "IN")
    with pytest.raises(AnalysisError, match="task is 'lemma'; a probe predicts one of upos, xpos, deprel"):
        probe_layers(model, tokenizer, sentences[:4], sentences[4:6], task="lemma")
    assert bertcore.probe_layers is probe_layers and bertcore.structural_probe is structural_probe


@pytest.mark.slow  # importing scipy
def test_tree_distances_spanning_trees_and_spearman_agree_with_scipy():
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    stats = pytest.importorskip("scipy.stats")
    from scipy.sparse import csr_matrix

    for sentence in shipped_treebank("dev")[:30]:
        count = len(sentence)
        edges = np.zeros((count, count))
        for index, head in enumerate(sentence.heads):
            if head:
                edges[index, head - 1] = 1
        np.testing.assert_array_equal(tree_distances(sentence),
                                      csgraph.shortest_path(csr_matrix(edges), directed=False, unweighted=True))
    rng = np.random.default_rng(0)
    for size in (2, 5, 17):
        weights = rng.random((size, size))
        weights = weights + weights.T
        keep = np.ones(size, bool)
        keep[size // 2] = size < 3
        tree = probes._spanning_tree(weights, keep)
        kept = np.flatnonzero(keep)
        reference = csgraph.minimum_spanning_tree(csr_matrix(np.triu(weights[np.ix_(kept, kept)], 1))).tocoo()
        assert tree == {(int(kept[min(a, b)]), int(kept[max(a, b)])) for a, b in zip(reference.row, reference.col,
                                                                                      strict=True)}
    gold = tree_distances(shipped_treebank("dev")[1]).astype(float)
    predicted = gold + rng.normal(scale=0.8, size=gold.shape)
    correlations = probes._row_correlations(probes._row_ranks(predicted), probes._row_ranks(gold))
    expected = [stats.spearmanr(p, g).statistic for p, g in zip(predicted, gold, strict=True)]
    np.testing.assert_allclose(correlations, expected)


def tree_written_into_vectors(sentences, width: int) -> WordRepresentations:
    """Each word's vector marks the edges on its path to the root (edge k: word k to its head), so that the squared
    distance of two words of a sentence is their distance in its tree: a linear probe of full rank recovers it."""
    vectors = []
    for sentence in sentences:
        for word in range(len(sentence)):
            vector = np.zeros(width)
            node = word
            while sentence.heads[node]:
                vector[node] = 1.0
                node = sentence.heads[node] - 1
            vectors.append(vector)
    stacked = np.array(vectors, np.float32)
    noise = np.random.default_rng(0).normal(size=stacked.shape).astype(np.float32)
    return WordRepresentations(np.stack([noise, stacked]), tuple(sentences), SkippedSentences())


@pytest.mark.slow
def test_the_structural_probe_recovers_trees_written_into_the_vectors_and_not_from_noise():
    short = [sentence for sentence in shipped_treebank("dev") if 3 <= len(sentence) <= 16]
    train, test = tree_written_into_vectors(short[:80], 16), tree_written_into_vectors(short[80:110], 16)
    result = fit_structural_probes(train, test, rank=16, steps=300, seed=0)
    assert result.uuas[1] > 0.95 and result.spearman[1] > 0.9  # gold distances tie a lot; predictions break ties
    assert result.uuas[0] < 0.6 and result.spearman[0] < 0.6
    again = fit_structural_probes(train, test, rank=16, steps=300, seed=0)
    np.testing.assert_array_equal(again.uuas, result.uuas)
    np.testing.assert_array_equal(again.final_loss, result.final_loss)
    with pytest.raises(AnalysisError, match="rank is 64; the structural probe's rank is 1 to 32"):
        fit_structural_probes(train, test, rank=64)
    with pytest.raises(AnalysisError, match="steps is 0"):
        fit_structural_probes(train, test, steps=0)


@pytest.mark.slow
def test_on_minilm_the_probe_beats_its_control_and_a_random_models_selectivity(minilm_path):
    model, tokenizer = bertcore.load_pretrained(minilm_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        untrained = type(model)(model.config).eval()  # MiniLM's shape, random weights
    train, test = shipped_treebank("dev")[:300], shipped_treebank("test")[:150]
    trained = probe_layers(model, tokenizer, train, test, task="upos", seed=0)
    random = probe_layers(untrained, tokenizer, train, test, task="upos", seed=0)
    assert (trained.accuracy > trained.control_accuracy).all()
    best = trained.best_layer
    assert 0 < best < 6  # a middle layer, not the embeddings nor the last
    assert trained.accuracy[best] > 0.85 and trained.selectivity[best] > 0.2
    assert trained.selectivity.max() > random.selectivity.max() + 0.1
    structure = structural_probe(model, tokenizer, train[:150], test[:80], steps=60)
    random_structure = structural_probe(untrained, tokenizer, train[:150], test[:80], steps=60)
    assert structure.uuas.max() > random_structure.uuas.max() + 0.05
