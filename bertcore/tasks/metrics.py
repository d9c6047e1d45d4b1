"""Fine-tuning metrics as the field defines them, over a whole evaluation set, pure Python / numpy.

Every score is a fraction in [0, 1] (SQuAD's official script prints percentages: 0.885 here is its 88.5).

- classification: `accuracy`; `macro_f1` = the unweighted mean of per-label F1 over the labels present in the
  gold labels or the predictions (scikit-learn's `f1_score(average="macro")`: a label only ever predicted
  counts with F1 0, a label never seen at all does not count).
- regression: `pearson`; `spearman` = Pearson of the ranks, ties given their average rank (scipy's
  `spearmanr`). NaN when either side is constant (the correlation is undefined there, as in scipy).
- token classification: `entity_f1` (with `entity_precision`, `entity_recall`): micro-averaged over entities,
  an entity counts as found only when its type and its exact span agree (CoNLL / seqeval's default mode).
  Spans are read as seqeval's default (conlleval-compatible) does, which accepts BIO / IOB2, IOB1 and BIOES
  tags: an I-X after O or after a different type starts a new entity, as B-X would. `accuracy` is per word.
- SQuAD: `exact_match` and `f1` of the official evaluation script (v2.0, which equals v1.1 on answerable
  questions): answers are normalised (lower case, punctuation removed, the articles a/an/the removed,
  whitespace collapsed), each prediction scores its best over the gold answers; an unanswerable question's
  gold answer is "" and only an empty prediction matches it.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

# ---- classification and regression ----------------------------------------------------------------------


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references; give one per example")
    if len(references) == 0:
        raise ValueError("no examples to score; the evaluation set is empty")


def accuracy(predictions: Sequence, references: Sequence) -> float:
    _check_lengths(predictions, references)
    return sum(p == r for p, r in zip(predictions, references, strict=True)) / len(references)


def macro_f1(predictions: Sequence, references: Sequence) -> float:
    """Mean per-label F1 over the labels in references ∪ predictions (scikit-learn's macro average)."""
    _check_lengths(predictions, references)
    true_positives: collections.Counter = collections.Counter()
    predicted: collections.Counter = collections.Counter(predictions)
    gold: collections.Counter = collections.Counter(references)
    for p, r in zip(predictions, references, strict=True):
        if p == r:
            true_positives[r] += 1
    scores = [_f1(true_positives[label], predicted[label], gold[label]) for label in set(predicted) | set(gold)]
    return float(np.mean(scores))


def _f1(true_positives: int, num_predicted: int, num_gold: int) -> float:
    """F1 from counts; 0 where precision or recall is undefined (scikit-learn's zero_division=0)."""
    denominator = num_predicted + num_gold
    return 2.0 * true_positives / denominator if denominator else 0.0


def pearson(predictions: Sequence[float], references: Sequence[float]) -> float:
    _check_lengths(predictions, references)
    x = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(references, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else float("nan")


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span (scipy's rankdata 'average')."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    # run boundaries of equal values in sorted order
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks_sorted = np.repeat((starts + ends + 1) / 2.0, ends - starts)  # mean of ranks starts+1..ends
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = ranks_sorted
    return ranks


def spearman(predictions: Sequence[float], references: Sequence[float]) -> float:
    _check_lengths(predictions, references)
    return pearson(average_ranks(predictions), average_ranks(references))


def classification_metrics(predictions: Sequence, references: Sequence) -> dict[str, float]:
    return {"accuracy": accuracy(predictions, references), "macro_f1": macro_f1(predictions, references)}


def regression_metrics(predictions: Sequence[float], references: Sequence[float]) -> dict[str, float]:
    return {"pearson": pearson(predictions, references), "spearman": spearman(predictions, references)}


# ---- entities from tags (seqeval's default, conlleval-compatible, mode) -------------------------------------


def _split_tag(tag: str) -> tuple[str, str]:
    """("B", "PER") from "B-PER"; ("O", "_") from "O"; a bare "B" has type "_" as in seqeval."""
    return tag[0], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _ends(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        prev_tag in ("E", "S")
        or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
        or (prev_tag not in ("O", ".") and prev_type != type_)
    )


def _starts(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        tag in ("B", "S")
        or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
        or (tag not in ("O", ".") and prev_type != type_)
    )


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first index, last index) of every entity in one tag sequence, in order."""
    entities = []
    prev_tag, prev_type, begin = "O", "", 0
    for index, chunk in enumerate([*tags, "O"]):
        tag, type_ = _split_tag(chunk)
        if _ends(prev_tag, tag, prev_type, type_):
            entities.append((prev_type, begin, index - 1))
        if _starts(prev_tag, tag, prev_type, type_):
            begin = index
        prev_tag, prev_type = tag, type_
    return entities


def is_entity_tagging(tags: Sequence[str]) -> bool:
    """True when every tag is O or prefix-TYPE with a BIO/BIOES prefix, so entity scores mean something."""
    return all(tag == "O" or (len(tag) > 2 and tag[0] in "BIESLU" and tag[1] in "-_") for tag in tags)


def entity_scores(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision / recall / F1 over entities with exact type and span, per sentence."""
    _check_lengths(predictions, references)
    num_correct = num_predicted = num_gold = 0
    for index, (predicted_tags, gold_tags) in enumerate(zip(predictions, references, strict=True)):
        if len(predicted_tags) != len(gold_tags):
            raise ValueError(
                f"sentence {index} has {len(predicted_tags)} predicted tags but {len(gold_tags)} gold tags; "
                "give one predicted tag per word"
            )
        predicted = set(get_entities(predicted_tags))
        gold = set(get_entities(gold_tags))
        num_correct += len(predicted & gold)
        num_predicted += len(predicted)
        num_gold += len(gold)
    return {
        "entity_precision": num_correct / num_predicted if num_predicted else 0.0,
        "entity_recall": num_correct / num_gold if num_gold else 0.0,
        "entity_f1": _f1(num_correct, num_predicted, num_gold),
    }


def token_classification_metrics(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Per-word `accuracy`, and entity precision / recall / F1 when the tags are BIO-style."""
    _check_lengths(predictions, references)
    flat_predicted = [tag for tags in predictions for tag in tags]
    flat_gold = [tag for tags in references for tag in tags]
    metrics: dict[str, float] = {}
    if is_entity_tagging(flat_gold):
        metrics.update(entity_scores(predictions, references))
    metrics["accuracy"] = accuracy(flat_predicted, flat_gold)
    return metrics


# ---- SQuAD ------------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the official SQuAD normalisation)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact_match(prediction: str, gold_answers: Sequence[str]) -> float:
    return float(max(normalize_answer(prediction) == normalize_answer(gold) for gold in gold_answers))


def _token_f1(prediction: str, gold: str) -> float:
    predicted_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not predicted_tokens or not gold_tokens:
        return float(predicted_tokens == gold_tokens)  # v2.0: "" only matches ""
    common = collections.Counter(predicted_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(predicted_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, gold_answers: Sequence[str]) -> float:
    return max(_token_f1(prediction, gold) for gold in gold_answers)


def squad_gold_answers(answer_texts: Sequence[str]) -> list[str]:
    """The official v2.0 gold list: answers that normalise to nothing are dropped; none left means [""]."""
    return [text for text in answer_texts if normalize_answer(text)] or [""]


def squad_metrics(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """`exact_match` and `f1` over every question of `references` (question id -> gold answer texts; [] for an
    unanswerable question); with unanswerable questions present, also the split the v2.0 script reports:
    `has_answer_exact_match` / `has_answer_f1` and `no_answer_exact_match` (= its F1)."""
    if not references:
        raise ValueError("no questions to score; the evaluation set is empty")
    missing = [qid for qid in references if qid not in predictions]
    if missing:
        raise ValueError(f"no prediction for {len(missing)} question(s), e.g. id {missing[0]!r}; predict every id")
    exact, f1, answerable = [], [], []
    for qid, answer_texts in references.items():
        golds = squad_gold_answers(answer_texts)
        exact.append(squad_exact_match(predictions[qid], golds))
        f1.append(squad_f1(predictions[qid], golds))
        answerable.append(golds != [""])
    metrics = {"exact_match": float(np.mean(exact)), "f1": float(np.mean(f1))}
    if not all(answerable):
        has = np.asarray(answerable)
        exact_array, f1_array = np.asarray(exact), np.asarray(f1)
        if has.any():
            metrics["has_answer_exact_match"] = float(exact_array[has].mean())
            metrics["has_answer_f1"] = float(f1_array[has].mean())
        metrics["no_answer_exact_match"] = float(exact_array[~has].mean())
    return metrics
