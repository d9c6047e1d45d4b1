"""The Explain tab's state, headless: a target checked against the model, the corrupted copy's token count, the
jobs and which of their records count (newest wins), the queue that runs them one at a time, and the one scale
the mixing view shows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bertcore.data.masking import mask_exactly
from explorer.explain.jobs import AttributionJob, JobQueue, JobRecord, MixingJob, job_steps
from explorer.explain.state import (
    ExplainChange,
    ExplainRequest,
    ExplainState,
    mixing_maps,
    mixing_share,
    model_input,
)


@pytest.fixture
def state(tiny_model, tokenizer):
    state = ExplainState()
    state.set_model(tiny_model, tokenizer)
    return state


def announcements(state):
    heard = []
    state.changed.connect(lambda _state, what: heard.append(what))
    return heard


def masked_request(tokenizer, text_a="the cat sat on the mat", text_b=None, position=2):
    encoding = tokenizer.encode(text_a, text_b)
    masking = mask_exactly(encoding, tokenizer, [position])
    return ExplainRequest(("mlm", position, encoding.input_ids[position]), encoding, masking, text_a, text_b)


def test_a_target_is_explained_on_the_input_the_model_saw(state, tokenizer):
    request = masked_request(tokenizer)
    heard = announcements(state)
    assert state.explain(request)
    assert state.encoding.input_ids[2] == tokenizer.mask_token_id and state.encoding.tokens[2] == "[MASK]"
    assert state.target == request.target and "position 2" in state.target_text
    assert ExplainChange.TARGET in heard and ExplainChange.CORRUPTED in heard
    assert state.corrupted_text == ("the cat sat on the mat", None)
    assert model_input(request.encoding, None) is request.encoding


def test_a_target_the_model_cannot_give_is_a_message_not_a_traceback(state, tokenizer):
    encoding = tokenizer.encode("the cat sat")
    assert not state.explain(ExplainRequest(("class", 0), encoding))
    assert "has no head for a 'class' target" in state.message and state.target is None
    assert not state.explain(ExplainRequest(("mlm", 99, 5), encoding))
    assert "position is 99" in state.message
    empty = ExplainState()
    assert not empty.explain(ExplainRequest(("nsp", 0), encoding)) and "No model is loaded" in empty.message


def test_the_corrupted_copy_needs_the_clean_token_count_and_keeps_the_clean_masking(state, tokenizer):
    assert state.explain(masked_request(tokenizer))
    assert state.corrupted is not None and "is the clean one" in state.corrupted_problem  # unedited
    state.set_corrupted("the dog sat on the mat", None)  # the masked word edited: the edit is the corruption
    assert state.corrupted.tokens[2] == "dog" and state.corrupted_over_masking == (2,)
    state.set_corrupted("the cat sat on the mat", None)  # as typed: masked as the clean input is
    assert "is the clean one" in state.corrupted_problem and state.patching_job() is None
    assert state.set_corrupted("the cat lay on the mat", None) is not None
    assert state.corrupted_problem == ""
    assert state.corrupted.input_ids[2] == tokenizer.mask_token_id  # the [MASK] the target asks about
    assert state.corrupted.input_ids[2] == state.encoding.input_ids[2]
    assert state.patching_job() is not None
    assert state.set_corrupted("the dog sat on the big mat", None) is None
    assert "9 tokens, 1 more than the clean input's 8" in state.corrupted_problem
    assert state.patching_job() is None and state.message == state.corrupted_problem
    state.set_corrupted("the cat sat on the rug", None)  # 'rug' is two pieces
    assert "9 tokens" in state.corrupted_problem and "as many pieces" in state.corrupted_problem


def test_records_of_a_superseded_job_are_dropped(state, tokenizer):
    assert state.explain(masked_request(tokenizer))
    first = state.attribution_job()
    second = state.attribution_job()
    assert isinstance(first, AttributionJob) and second.request_id > first.request_id
    stale = SimpleNamespace(scores=np.zeros(8, np.float32))
    assert not state.arrived(JobRecord("attribution", first.request_id, 0.5, "x", ("attribution", "m", stale)))
    assert state.attributions == {}
    heard = announcements(state)
    fresh = SimpleNamespace(scores=np.ones(8, np.float32))
    assert state.arrived(JobRecord("attribution", second.request_id, 0.5, "half", ("attribution", "m", fresh)))
    assert state.attributions == {"m": fresh} and ExplainChange.ATTRIBUTIONS in heard
    assert state.progress() == 0.5 and "attribution 50% (half)" in state.work_line()
    state.job_ended("attribution", first.request_id, "failed", "boom")  # a stale job's end says nothing
    assert state.message == "" and state.work
    state.job_ended("attribution", second.request_id, "failed", "boom")
    assert state.work == {} and state.message == "The attribution could not be computed: boom"


def test_a_new_model_makes_every_job_stale(state, tokenizer, tiny_model):
    assert state.explain(masked_request(tokenizer))
    job = state.mixing_job()
    assert isinstance(job, MixingJob)
    state.set_model(tiny_model, tokenizer)
    assert state.target is None and not state.is_current("mixing", job.request_id)


def test_cancel_supersedes_every_kind(state, tokenizer):
    assert state.explain(masked_request(tokenizer))
    job = state.attribution_job()
    state.arrived(JobRecord("attribution", job.request_id, 0.1, "going"))
    state.cancel_all()
    assert state.work == {} and "Cancelled" in state.message
    assert not state.arrived(JobRecord("attribution", job.request_id, 0.2, "late"))


def test_choices_are_checked(state):
    with pytest.raises(ValueError, match="choose one or more of integrated_gradients"):
        state.set_methods(["saliency"])
    with pytest.raises(ValueError, match="choose one of attention"):
        state.set_mixing_method("lrp")
    with pytest.raises(ValueError, match=r"outside the model's layers 0\.\.2"):
        state.set_layer(3)
    heard = announcements(state)
    assert state.layer == 2  # a new model shows its last layer: rollout through all of them
    state.set_methods(["gradient_norm", "gradient_norm"])
    state.set_layer(0)
    assert state.methods == ("gradient_norm",) and heard == [ExplainChange.METHODS, ExplainChange.LAYER]


def test_the_queue_runs_one_job_at_a_time_and_the_newest_of_a_kind_wins():
    queue = JobQueue()
    job = lambda kind, number: SimpleNamespace(kind=kind, number=number)  # noqa: E731
    first = job("attribution", 1)
    assert not queue.submit(first)
    assert queue.start_next() is first and queue.start_next() is None  # one at a time
    assert not queue.submit(job("mixing", 2))
    assert not queue.submit(job("patching", 3))
    newer = job("mixing", 4)
    assert not queue.submit(newer)  # replaces the mixing job waiting, stops nothing
    assert queue.submit(job("attribution", 5))  # the running attribution is stale: stop it
    queue.ended(first)
    assert queue.start_next().number == 5  # the kinds in order: attribution, mixing, patching
    queue.ended(queue.running)
    assert queue.start_next() is newer
    queue.ended(newer)
    assert queue.start_next().number == 3
    assert queue.cancel() and queue.pending == {}


def test_mixing_is_shown_as_shares_of_each_row_on_one_scale():
    per_head = np.array([[[1.0, 3.0], [0.0, 0.0]], [[1.0, 1.0], [2.0, 2.0]]])  # (H=2, T=2, T=2)
    shares = mixing_share(per_head)
    np.testing.assert_allclose(shares, [[2 / 6, 4 / 6], [0.5, 0.5]])
    np.testing.assert_allclose(mixing_share(np.zeros((2, 2))), 0.0)  # a row of zeros stays zero
    layers, tokens = 3, 4
    rng = np.random.default_rng(0)
    value_norm = SimpleNamespace(method="value_norm", per_layer=rng.random((layers, 2, tokens, tokens)),
                                 rollout=rng.random((layers, tokens, tokens)))
    attention = SimpleNamespace(method="attention", per_layer=rng.random((layers, tokens, tokens)),
                                rollout=rng.random((layers, tokens, tokens)))
    maps = mixing_maps(value_norm, attention, 1)
    assert [key for key, _, _ in maps] == ["value_norm/layer", "value_norm/rollout", "attention/layer",
                                           "attention/rollout"]
    assert maps[2][1] == "raw attention · layer 2 (mean of heads)"  # layers read 1..L
    for _, _, matrix in maps:
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-5)
    assert len(mixing_maps(attention, attention, 0)) == 2 and mixing_maps(None, None, 0) == []


def test_an_input_without_a_target_gets_its_context_mixing_only(state, tokenizer):
    encoding = tokenizer.encode("the cat sat")
    assert state.explain(ExplainRequest(None, encoding, None, "the cat sat"))
    assert state.target is None and state.target_text == "" and state.encoding is encoding
    assert state.attribution_job() is None and state.mixing_job() is not None
    assert state.patching_job() is None and "patching restores one output" in state.message


@pytest.mark.slow
def test_the_jobs_run_bertcores_explanations_to_the_end(state, tokenizer):
    """The real work, on the tiny model: mixing of both kinds, patching drawn layer by layer, attributions."""
    assert state.explain(masked_request(tokenizer))
    records = list(job_steps(state.mixing_job()))
    assert [record.item[1] for record in records if record.item] == ["value_norm", "attention"]
    for record in records:
        assert state.arrived(record)
    assert state.mixing.method == "value_norm" and state.attention.method == "attention"
    assert len(mixing_maps(state.mixing, state.attention, 2)) == 4

    state.set_corrupted("the cat lay on the mat", None)
    records = list(job_steps(state.patching_job()))
    items = [record.item for record in records if record.item]
    residual = [value for what, over, value in items if over == "residual"]
    assert len(residual) >= 3 and residual[-1].scores.shape == (3, 8)  # one partial result per layer, then all
    assert [record.fraction for record in records] == sorted(record.fraction for record in records)
    assert items[-1][1] == "heads" and items[-1][2].scores.shape == (3, 2)

    state.set_methods(["gradient_x_input", "gradient_norm"])
    for record in job_steps(state.attribution_job()):
        assert state.arrived(record)
    assert list(state.attributions) == list(state.faithfulness) == ["gradient_x_input", "gradient_norm"]
    assert all(attribution.scores.shape == (8,) for attribution in state.attributions.values())
    assert all(len(curves.deletion) == len(curves.fractions) for curves in state.faithfulness.values())


def test_the_exports_hold_what_the_tab_shows(state, tokenizer, tmp_path):
    from explorer.explain.exports import save_explanation_npz, write_attributions_csv

    with pytest.raises(ValueError, match="nothing to export yet"):
        save_explanation_npz(tmp_path / "none.npz", state)
    assert state.explain(masked_request(tokenizer))
    job = state.attribution_job()
    scores = np.arange(8, dtype=np.float32)
    state.arrived(JobRecord("attribution", job.request_id, 0.5, "", ("attribution", "gradient_norm",
                                                                      SimpleNamespace(scores=scores))))
    curves = SimpleNamespace(fractions=np.linspace(0, 1, 3), deletion=np.ones(3), insertion=np.zeros(3))
    state.arrived(JobRecord("attribution", job.request_id, 1.0, "", ("faithfulness", "gradient_norm", curves)))
    rows = write_attributions_csv(tmp_path / "a.csv", state.encoding, state.attributions,
                                  ["gradient_norm"]).read_text().splitlines()
    assert rows[0] == "position,token,gradient_norm" and rows[3] == "2,[MASK],2"
    arrays = np.load(save_explanation_npz(tmp_path / "e.npz", state))
    np.testing.assert_array_equal(arrays["scores/gradient_norm"], scores)
    np.testing.assert_array_equal(arrays["faithfulness/gradient_norm/deletion"], np.ones(3))
    assert list(arrays["tokens"])[2] == "[MASK]" and "position 2" in str(arrays["target_text"])
