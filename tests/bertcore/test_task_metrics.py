"""Metrics against hand-computed values, and against scikit-learn / scipy where they are installed."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from bertcore.tasks.metrics import (
    accuracy,
    average_ranks,
    entity_scores,
    get_entities,
    macro_f1,
    normalize_answer,
    pearson,
    spearman,
    squad_exact_match,
    squad_f1,
    squad_metrics,
    token_classification_metrics,
)


def test_accuracy_and_macro_f1_by_hand():
    assert accuracy(["a", "b", "c", "a"], ["a", "b", "b", "a"]) == 0.75
    # a: tp 1, 2 predicted, 1 gold -> 2/3; b: tp 1, 1 predicted, 3 gold -> 1/2; c: only predicted -> 0
    assert macro_f1(["a", "a", "b", "c"], ["a", "b", "b", "b"]) == pytest.approx((2 / 3 + 1 / 2 + 0) / 3)
    # a label that is neither predicted nor gold does not count
    assert macro_f1([1, 1, 0], [1, 0, 0]) == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_pearson_and_spearman_by_hand():
    assert pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))
    assert list(average_ranks([10, 20, 20, 30, 20])) == [1, 3, 3, 5, 3]
    # ranks [1, 2.5, 2.5, 4] vs [1, 3, 2, 4]
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_lengths_must_agree():
    with pytest.raises(ValueError, match="2 predictions but 3 references"):
        accuracy([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="the evaluation set is empty"):
        macro_f1([], [])


@pytest.mark.slow
def test_against_scikit_learn_and_scipy():
    metrics = pytest.importorskip("sklearn.metrics")
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(0)
    for _ in range(20):
        gold = [rng.choice("abcd") for _ in range(50)]
        predicted = [rng.choice("abcde") for _ in range(50)]
        assert macro_f1(predicted, gold) == pytest.approx(metrics.f1_score(gold, predicted, average="macro"))
        assert accuracy(predicted, gold) == pytest.approx(metrics.accuracy_score(gold, predicted))
        x = [rng.randint(0, 5) for _ in range(40)]  # many ties
        y = [v + rng.gauss(0, 2) for v in x]
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
        assert spearman(x, [round(v) for v in y]) == pytest.approx(stats.spearmanr(x, [round(v) for v in y])[0])


# ---- entities -------------------------------------------------------------------------------------------------


def test_entities_bio_improper_starts_and_bioes():
    assert get_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    # seqeval's default: an I- after O or after another type starts an entity
    assert get_entities(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)]
    assert get_entities(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]
    assert get_entities(["B-PER", "E-PER", "S-LOC", "O", "B-ORG", "I-ORG", "E-ORG"]) == \
        [("PER", 0, 1), ("LOC", 2, 2), ("ORG", 4, 6)]
    assert get_entities(["O", "O"]) == []


def test_entity_f1_the_seqeval_readme_example():
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    predicted = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    assert entity_scores(predicted, gold) == {"entity_precision": 0.5, "entity_recall": 0.5, "entity_f1": 0.5}
    metrics = token_classification_metrics(predicted, gold)
    assert metrics["accuracy"] == pytest.approx(8 / 10)  # two words differ in the first sentence
    assert entity_scores([["O"]], [["O"]])["entity_f1"] == 0.0  # nothing to find: 0, as seqeval
    assert "entity_f1" not in token_classification_metrics([["NN", "VB"]], [["NN", "NN"]])  # POS tags
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags but 2 gold tags"):
        entity_scores([["O"]], [["O", "O"]])


@pytest.mark.slow
def test_entity_f1_against_seqeval():
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = random.Random(1)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-MISC"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(60)]
    predicted = [[rng.choice(tags) if rng.random() < 0.4 else t for t in sentence] for sentence in gold]
    ours = entity_scores(predicted, gold)
    assert ours["entity_f1"] == pytest.approx(seqeval.f1_score(gold, predicted))
    assert ours["entity_precision"] == pytest.approx(seqeval.precision_score(gold, predicted))
    assert ours["entity_recall"] == pytest.approx(seqeval.recall_score(gold, predicted))


# ---- SQuAD ----------------------------------------------------------------------------------------------------


def test_normalize_answer_is_the_official_one():
    assert normalize_answer("The  Cat's, a hat!") == "cats hat"
    assert normalize_answer("An apple\tthen") == "apple then"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match_and_f1_by_hand():
    assert squad_exact_match("the Cat!", ["a dog", "cat"]) == 1.0
    # pred [cat, sat] vs gold [cat, sat, down]: precision 1, recall 2/3
    assert squad_f1("the cat sat", ["a cat sat down"]) == pytest.approx(0.8)
    assert squad_f1("dog", ["cat"]) == 0.0
    assert squad_f1("cat cat", ["cat"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # repeated tokens count once


def test_squad_v2_scores_with_unanswerable_questions():
    references = {"a": ["the cat", "cat"], "b": [], "c": ["mat"], "d": []}
    predictions = {"a": "cat", "b": "", "c": "", "d": "the mat"}
    metrics = squad_metrics(predictions, references)
    assert metrics == {"exact_match": 0.5, "f1": 0.5, "has_answer_exact_match": 0.5, "has_answer_f1": 0.5,
                       "no_answer_exact_match": 0.5}
    assert squad_metrics({"a": "sat on"}, {"a": ["cat sat on"]}) == {"exact_match": 0.0, "f1": pytest.approx(0.8)}
    with pytest.raises(ValueError, match="no prediction for 1 question"):
        squad_metrics({}, {"a": ["x"]})


def test_gold_answers_that_normalise_to_nothing_count_as_no_answer():
    # official v2.0: golds that normalise to "" are dropped; none left -> [""]
    assert squad_metrics({"q": ""}, {"q": ["the", "!"]})["exact_match"] == 1.0
    assert np.isclose(squad_metrics({"q": "a"}, {"q": ["the"]})["f1"], 1.0)  # "a" also normalises to ""
