"""The pruning curve (Michel et al. 2019, figure 3): steps, nested masks, orders, progress, export, metric."""

import csv

import numpy as np
import pytest
import torch

from bertcore.analysis.pruning import iter_pruning_curve, pretraining_metric, pruning_curve
from bertcore.models.bert import IGNORE_INDEX, BertForPreTraining
from tests.tiny_configs import two_layer_bert

IMPORTANCE = np.arange(16, dtype=np.float64)[::-1].reshape(4, 4) % 7 + np.arange(16).reshape(4, 4) * 0.01


class RemainingImportance:
    """A metric that is exactly the importance still switched on; counts its calls."""

    def __init__(self):
        self.masks = []

    def __call__(self, head_mask):
        assert head_mask.dtype == np.float32 and head_mask.shape == (4, 4)
        self.masks.append(head_mask)
        return float((IMPORTANCE * head_mask).sum())


def test_steps_of_ten_percent_with_nested_masks_least_important_first():
    evaluate = RemainingImportance()
    curve = pruning_curve(IMPORTANCE, evaluate, seed=3)
    assert curve.num_masked.tolist() == [0, 2, 3, 5, 6, 8, 10, 11, 13, 14, 16]  # round(k · 1.6)
    np.testing.assert_allclose(curve.fractions, curve.num_masked / 16)
    assert len(evaluate.masks) == 2 * 11 - 2  # no head and every head masked: measured once for both orders
    least_first = np.argsort(IMPORTANCE, axis=None, kind="stable")
    assert [4 * layer + head for layer, head in curve.importance_order] == least_first.tolist()
    assert sorted(4 * layer + head for layer, head in curve.random_order) == list(range(16))
    for order in ("importance", "random"):
        previous = np.ones((4, 4), np.float32)
        for step, count in enumerate(curve.num_masked):
            mask = curve.head_mask(step, order)
            assert (mask == 0).sum() == count and np.all(mask <= previous)  # nested: a masked head stays off
            previous = mask
    metric = curve.metric("metric")
    assert metric[0] == IMPORTANCE.sum() and metric[-1] == 0
    # Taking the least important heads first keeps the most importance switched on, at every step.
    assert np.all(metric >= curve.metric("metric", "random"))
    assert np.any(metric > curve.metric("metric", "random"))
    np.testing.assert_allclose(metric[2], IMPORTANCE.sum() - np.sort(IMPORTANCE, axis=None)[:3].sum())


def test_random_order_follows_its_seed_and_a_limit_stops_early():
    first, again = pruning_curve(IMPORTANCE, RemainingImportance(), seed=1), pruning_curve(
        IMPORTANCE, RemainingImportance(), seed=1)
    other = pruning_curve(IMPORTANCE, RemainingImportance(), seed=2)
    np.testing.assert_array_equal(first.random_order, again.random_order)
    assert not np.array_equal(first.random_order, other.random_order)
    limited = pruning_curve(IMPORTANCE, RemainingImportance(), step_fraction=0.25, max_fraction=0.6)
    assert limited.num_masked.tolist() == [0, 4, 8]
    tiny = pruning_curve(np.ones((1, 4)), RemainingImportanceOf(np.ones((1, 4))))  # 0.1·4 rounds: merged steps
    assert tiny.num_masked.tolist() == [0, 1, 2, 3, 4]


class RemainingImportanceOf:
    def __init__(self, importance):
        self.importance = importance

    def __call__(self, head_mask):
        return {"kept": float((self.importance * head_mask).sum()), "off": float((head_mask == 0).sum())}


def test_progress_grows_both_curves_and_can_be_cancelled():
    seen = list(iter_pruning_curve(IMPORTANCE, RemainingImportance()))
    assert [(p.done, p.total) for p in seen] == [(n, 20) for n in range(1, 21)]
    assert np.isnan(seen[0].result.importance_metrics[1:]).all()
    assert not np.isnan(seen[0].result.random_metrics[0]).any()  # step 0 fills both orders at once
    assert np.isnan(seen[1].result.random_metrics[1]).all() and not np.isnan(seen[1].result.importance_metrics[1]).any()
    final = seen[-1].result
    assert not np.isnan(final.importance_metrics).any() and not np.isnan(final.random_metrics).any()
    evaluate = RemainingImportance()
    progress = iter_pruning_curve(IMPORTANCE, evaluate)
    next(progress), next(progress)
    progress.close()
    assert len(evaluate.masks) == 2


def test_named_metrics_rows_and_csv(tmp_path):
    curve = pruning_curve(IMPORTANCE, RemainingImportanceOf(IMPORTANCE), max_fraction=0.2)
    assert curve.metric_names == ("kept", "off")
    np.testing.assert_array_equal(curve.metric("off", "random"), curve.num_masked)
    rows = curve.rows()
    assert list(rows[0]) == ["fraction_masked", "heads_masked", "importance_kept", "importance_off", "random_kept",
                             "random_off", "importance_heads_added", "random_heads_added"]
    assert rows[1]["importance_heads_added"] == " ".join(f"{pair[0]}:{pair[1]}" for pair in curve.importance_order[:2])
    assert rows[2]["heads_masked"] == 3 and len(rows[2]["random_heads_added"].split()) == 1
    path = curve.to_csv(tmp_path / "curve.csv")
    with path.open(newline="") as handle:
        read = list(csv.DictReader(handle))
    assert len(read) == 3 and float(read[1]["importance_kept"]) == rows[1]["importance_kept"]
    with pytest.raises(ValueError, match="no metric 'accuracy' in this curve; it has kept, off"):
        curve.metric("accuracy")
    with pytest.raises(ValueError, match="use 'importance' or 'random'"):
        curve.head_mask(0, "best")
    with pytest.raises(ValueError, match=r"steps 0\.\.2"):
        curve.head_mask(3)


def test_bad_inputs_say_what_to_fix():
    with pytest.raises(ValueError, match=r"finite \(layers, heads\) array"):
        pruning_curve(np.ones(16), RemainingImportance())
    with pytest.raises(ValueError, match=r"step_fraction is 0; it must be in \(0, 1\]"):
        pruning_curve(IMPORTANCE, RemainingImportance(), step_fraction=0)
    with pytest.raises(ValueError, match="must return a number or a"):
        pruning_curve(IMPORTANCE, lambda mask: "good")
    calls = iter(({"a": 1.0}, {"b": 1.0}))
    with pytest.raises(ValueError, match="must return the same names every time"):
        pruning_curve(IMPORTANCE, lambda mask: next(calls))


# ---- the pretraining metric ------------------------------------------------------------------------------------

CONFIG = two_layer_bert(41, intermediate_size=29, max_position_embeddings=16)


def labelled_batch(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, CONFIG.vocab_size, (4, 11), generator=generator)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, 3:6] = input_ids[:, 3:6]
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels,
            "next_sentence_label": torch.randint(0, 2, (4,), generator=generator)}


@pytest.mark.slow
def test_pretraining_metric_counts_masked_tokens_and_pairs():
    torch.manual_seed(0)
    model = BertForPreTraining(CONFIG)
    batches = [labelled_batch(1), labelled_batch(2)]
    evaluate = pretraining_metric(model, batches)
    head_mask = np.ones((2, 3), np.float32)
    head_mask[1, 0] = 0
    model.train()
    values = evaluate(head_mask)
    assert model.training
    model.eval()
    correct = masked = nsp_correct = 0
    with torch.no_grad():
        for batch in batches:
            output = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                           head_mask=torch.from_numpy(head_mask), output_hidden_states=True)
            labelled = batch["labels"] != IGNORE_INDEX
            correct += (output.prediction_logits[labelled].argmax(-1) == batch["labels"][labelled]).sum().item()
            masked += labelled.sum().item()
            nsp_correct += (output.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum().item()
    assert values["mlm_accuracy"] == pytest.approx(correct / masked)
    assert values["nsp_accuracy"] == pytest.approx(nsp_correct / 8)
    with torch.no_grad():
        losses = [model(**batch, head_mask=torch.from_numpy(head_mask)).loss.item() for batch in batches]
    assert values["loss"] == pytest.approx(np.mean(losses), rel=1e-5)  # equal-sized batches: mean of means
    with pytest.raises(ValueError, match=r"needs \(layers, heads\) = \(2, 3\)"):
        evaluate(np.ones((3, 2)))
    with pytest.raises(ValueError, match="lacks next_sentence_label"):
        pretraining_metric(model, [{key: value for key, value in batches[0].items() if key != "next_sentence_label"}])
    with pytest.raises(ValueError, match="at least one labelled batch"):
        pretraining_metric(model, [])
