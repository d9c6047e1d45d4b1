"""The head lab's plain side, headless: the objective it recommends, the scores it ranks, what it computes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertcore.analysis.importance import input_head_importance, normalize_importance
from bertcore.analysis.inspection import inspect_encoding
from bertcore.analysis.lens import logit_lens
from bertcore.analysis.roles import inspection_head_roles
from bertcore.data.masking import mask_exactly
from bertcore.files.resources import default_checkpoint_dir
from explorer.head_lab.analyses import (
    ROLE_BADGES,
    HeadScores,
    InputJob,
    analyse_input,
    nsp_history,
    recommend_objective,
)
from explorer.head_lab.corpus_run import CorpusSettings
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS

SENTENCE_A = "the king is dead long live the king"
SENTENCE_B = "his son shall wear the crown"


def test_the_shipped_models_overfit_nsp_head_gets_the_mlm_loss(tiny_model):
    folder = default_checkpoint_dir()
    history = nsp_history(folder)
    assert history[0][0] == 500 and history[-1][0] == 8000
    choice = recommend_objective(tiny_model, folder)
    assert choice.objective == "mlm"
    assert "overfit" in choice.reason and "ended at 70%" in choice.reason


def test_a_run_whose_nsp_held_gets_the_pretraining_loss(tiny_model, tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "step-000300").mkdir(parents=True)
    records = [{"kind": "step", "step": 100, "nsp_accuracy": 0.1}]  # a training step: not held-out
    records += [{"kind": "eval", "step": step, "nsp_accuracy": accuracy}
                for step, accuracy in ((100, 0.7), (200, 0.85), (300, 0.84), (400, 0.6))]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(record) for record in records) + "\n")
    checkpoint = run / "checkpoints" / "step-000300"
    assert nsp_history(checkpoint) == [(100, 0.7), (200, 0.85), (300, 0.84)]  # up to the checkpoint's step
    assert recommend_objective(tiny_model, checkpoint).objective == "mlm+nsp"
    (run / "final").mkdir()
    assert recommend_objective(tiny_model, run / "final").objective == "mlm"  # the whole run: it fell to 60%


def test_without_history_mlm_and_without_heads_none(tiny_model, tmp_path):
    assert recommend_objective(tiny_model, tmp_path).objective == "mlm"
    assert recommend_objective(tiny_model, None).objective == "mlm"
    tiny_model.has_pretraining_heads = False
    assert recommend_objective(tiny_model, default_checkpoint_dir()).objective is None


def test_scores_rank_rows_and_the_mask_of_the_least_important():
    importance = np.array([[3.0, 1.0], [0.5, 2.0], [4.0, 0.0]])
    scores = HeadScores(source="corpus", caption="test", grid_shape=(3, 2), importance=importance)
    normalized = normalize_importance(importance)
    np.testing.assert_allclose(scores.normalized, normalized)
    order = np.argsort(normalized, axis=None, kind="stable")
    assert scores.rank.ravel()[order[-1]] == 1 and scores.rank.ravel()[order[0]] == 6
    least = scores.least_important(2)
    np.testing.assert_array_equal(least, np.stack(np.unravel_index(order[:2], (3, 2)), axis=1))
    mask = scores.mask_without_least_important(2)
    assert mask.sum() == 4 and all(mask[layer, head] == 0 for layer, head in least)
    rows = scores.rows()
    assert [(row["layer"], row["head"]) for row in rows[:3]] == [(1, 1), (1, 2), (2, 1)]
    assert rows[0]["importance"] == 3.0 and rows[0]["role"] == "" and rows[0]["self"] is None
    with pytest.raises(ValueError, match="6 heads"):
        scores.least_important(7)
    without = HeadScores(source="input", caption="x", grid_shape=(3, 2), importance=None,
                         importance_note="nothing masked")
    with pytest.raises(ValueError, match="nothing masked"):
        without.least_important(1)
    assert without.annotations().note == "importance: nothing masked"


@pytest.mark.slow
def test_analyse_input_is_bertcores_importance_roles_and_lens(tiny_model, tokenizer):
    encoding = tokenizer.encode(SENTENCE_A, SENTENCE_B)
    masking = mask_exactly(encoding, tokenizer, [2, 11])
    head_mask = np.ones((TINY_LAYERS, TINY_HEADS), np.float32)
    head_mask[1, 0] = 0
    inspection = inspect_encoding(tiny_model, tokenizer, encoding, masking=masking, head_mask=head_mask)
    for objective, next_sentence in (("mlm", "none"), ("mlm+nsp", "predicted")):
        analysis = analyse_input(InputJob(1, tiny_model, tokenizer, inspection, objective))
        expected = input_head_importance(tiny_model, encoding, masking, next_sentence=next_sentence,
                                         head_mask=head_mask)
        np.testing.assert_allclose(analysis.scores.importance, expected, rtol=1e-6)
    roles = inspection_head_roles(inspection)
    np.testing.assert_array_equal(analysis.scores.roles.labels, roles.labels)
    np.testing.assert_array_equal(analysis.scores.badges,
                                  np.vectorize(ROLE_BADGES.get)(roles.labels).astype(str))
    np.testing.assert_allclose(analysis.lens.original_probability,
                               logit_lens(tiny_model, tokenizer, inspection).original_probability)
    annotations = analysis.scores.annotations()
    assert annotations.grid_shape == (TINY_LAYERS, TINY_HEADS) and annotations.note == ""
    np.testing.assert_array_equal(annotations.scores, normalize_importance(analysis.scores.importance))


def test_analyse_input_says_why_parts_are_missing(tiny_model, tokenizer):
    inspection = inspect_encoding(tiny_model, tokenizer, tokenizer.encode(SENTENCE_A))
    analysis = analyse_input(InputJob(1, tiny_model, tokenizer, inspection, "mlm"))
    assert analysis.scores.importance is None and "mask a token (Ctrl+M" in analysis.scores.importance_note
    assert analysis.lens is None and "Mask a token" in analysis.lens_note
    assert analysis.scores.roles is not None  # roles need no masking
    tiny_model.has_pretraining_heads = False
    analysis = analyse_input(InputJob(1, tiny_model, tokenizer, inspection, None))
    assert "no MLM or NSP head" in analysis.scores.importance_note and "no MLM head" in analysis.lens_note


def test_corpus_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="num_pairs"):
        CorpusSettings(num_pairs=1)
    with pytest.raises(ValueError, match="objective"):
        CorpusSettings(objective="mlm+sop")
    assert CorpusSettings(pruning=True).same_sample(CorpusSettings(importance=False))
    assert not CorpusSettings().same_sample(CorpusSettings(objective="mlm+nsp"))
